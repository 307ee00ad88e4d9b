package testenv

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// KwokInstanceType is one entry of the file Karpenter's kwok provider reads
// from INSTANCE_TYPES_FILE_PATH (the shape of the sigs.k8s.io/karpenter
// module's kwok/examples/aws_instance_types.json). Offerings must carry the
// zone and capacity-type requirements: without them nodes lack those labels
// and are never consolidated.
type KwokInstanceType struct {
	Name             string            `json:"name"`
	Offerings        []KwokOffering    `json:"offerings"`
	Architecture     string            `json:"architecture"`
	OperatingSystems []string          `json:"operatingSystems"`
	Resources        map[string]string `json:"resources"`
}

// KwokOffering is one zone × capacity type of a KwokInstanceType.
type KwokOffering struct {
	Price        float64           `json:"Price"`
	Available    bool              `json:"Available"`
	Requirements []KwokRequirement `json:"Requirements"`
}

// KwokRequirement is a label requirement of an offering.
type KwokRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// SimpleKwokType is an amd64 Linux type offered on demand at onDemand $/h
// and as spot at 0.4 × that, in every zone.
func SimpleKwokType(name, cpu, memory, pods string, onDemand float64, zones []string) KwokInstanceType {
	t := KwokInstanceType{
		Name:             name,
		Architecture:     "amd64",
		OperatingSystems: []string{"linux"},
		Resources:        map[string]string{"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "20Gi"},
	}
	for _, zone := range zones {
		for _, o := range []struct {
			capacityType string
			price        float64
		}{{"on-demand", onDemand}, {"spot", onDemand * 0.4}} {
			t.Offerings = append(t.Offerings, KwokOffering{Price: o.price, Available: true, Requirements: []KwokRequirement{
				{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{o.capacityType}},
				{Key: corev1.LabelTopologyZone, Operator: "In", Values: []string{zone}},
			}})
		}
	}
	return t
}

// WriteInstanceTypes writes types, sorted by name, to path for
// Options.InstanceTypesFile.
func WriteInstanceTypes(path string, types []KwokInstanceType) error {
	types = slices.Clone(types)
	slices.SortFunc(types, func(a, b KwokInstanceType) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(types, "", " ")
	if err != nil {
		return fmt.Errorf("encode kwok instance types: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write kwok instance types: %w", err)
	}
	return nil
}

// kwokOverhead is what Karpenter's kwok provider reserves on every type
// (kube-reserved 100m CPU and 10Mi); its allocatable is resources − this.
var kwokOverhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}

// KwokTypes converts a catalogue to the kwok provider's
// INSTANCE_TYPES_FILE_PATH format so that Karpenter sees what pkg/engine
// sees: resources are the AWS allocatable (Karpenter's AWS formulas, AL2023
// defaults) plus the kwok provider's fixed overhead, every offering has the
// catalogue's zone, capacity type and price, and the instance's well-known
// karpenter.k8s.aws/* labels ride on every offering's requirements. With
// zones, only the offerings in those zones are kept.
func KwokTypes(cat *catalog.Catalog, zones ...string) ([]KwokInstanceType, error) {
	var out []KwokInstanceType
	for _, it := range cat.Types() {
		alloc, err := it.Allocatable(catalog.Kubelet{})
		if err != nil {
			return nil, fmt.Errorf("instance type %s: %w", it.Name, err)
		}
		res := map[string]string{}
		for name, q := range alloc {
			if o, ok := kwokOverhead[name]; ok {
				q.Add(o)
			}
			res[string(name)] = q.String()
		}
		var labels []KwokRequirement
		for _, k := range slices.Sorted(maps.Keys(it.Labels)) {
			switch k {
			case catalog.LabelInstanceType, catalog.LabelArch, catalog.LabelOS:
				continue // the provider sets these from name, architecture and operatingSystems
			}
			labels = append(labels, KwokRequirement{Key: k, Operator: "In", Values: []string{it.Labels[k]}})
		}
		kt := KwokInstanceType{Name: it.Name, Architecture: it.Arch, OperatingSystems: []string{"linux"}, Resources: res}
		for _, o := range it.Offerings {
			if len(zones) > 0 && !slices.Contains(zones, o.Zone) {
				continue
			}
			reqs := append([]KwokRequirement{
				{Key: catalog.LabelCapacityType, Operator: "In", Values: []string{o.CapacityType}},
				{Key: catalog.LabelZone, Operator: "In", Values: []string{o.Zone}},
			}, labels...)
			kt.Offerings = append(kt.Offerings, KwokOffering{Price: o.Price, Available: true, Requirements: reqs})
		}
		if len(kt.Offerings) > 0 {
			out = append(out, kt)
		}
	}
	return out, nil
}
