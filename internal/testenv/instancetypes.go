package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
