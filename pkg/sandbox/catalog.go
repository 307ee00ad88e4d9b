package sandbox

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// ResourceGPU is the extended resource NVIDIA's device plugin advertises.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// InstanceType is one EC2 instance type of the sandbox's cloud.
type InstanceType struct {
	Name            string  `json:"name"`
	Family          string  `json:"family"`
	Category        string  `json:"category"`
	Generation      int     `json:"generation"`
	Size            string  `json:"size"`
	VCPU            int     `json:"vcpu"`
	MemoryMiB       int64   `json:"memoryMiB"`
	Arch            string  `json:"arch"`
	GPUCount        int     `json:"gpuCount"`
	GPUName         string  `json:"gpuName"`
	GPUManufacturer string  `json:"gpuManufacturer"`
	MaxPods         int     `json:"maxPodsENI"`
	OnDemandPrice   float64 `json:"onDemandUSDPerHour"`
}

// Catalog is the set of instance types the sandbox can launch, with prices.
type Catalog struct {
	types  []InstanceType
	byName map[string]InstanceType
}

// DefaultCatalog is every instance type of pkg/catalog's embedded
// catalogue (1,377 types with provenance in that package), so any
// snapshot's node groups can be replayed.
func DefaultCatalog() (*Catalog, error) {
	infos := catalog.Embedded()
	types := make([]InstanceType, 0, len(infos))
	for _, i := range infos {
		types = append(types, InstanceType{Name: i.Name, Family: i.Family, Category: i.Category, Generation: i.Generation, Size: i.Size,
			VCPU: i.VCPU, MemoryMiB: i.MemoryMiB, Arch: i.Arch, GPUCount: i.GPUCount, GPUName: i.GPUName, GPUManufacturer: i.GPUManufacturer,
			MaxPods: i.MaxPodsENI, OnDemandPrice: i.OnDemandPrice})
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("pkg/catalog has no embedded instance types")
	}
	return NewCatalog(types), nil
}

// NewCatalog indexes types; later duplicates win.
func NewCatalog(types []InstanceType) *Catalog {
	c := &Catalog{byName: make(map[string]InstanceType, len(types))}
	for _, t := range types {
		c.byName[t.Name] = t
	}
	for _, t := range c.byName {
		c.types = append(c.types, t)
	}
	sort.Slice(c.types, func(i, j int) bool { return c.types[i].Name < c.types[j].Name })
	return c
}

// Types returns every type, sorted by name.
func (c *Catalog) Types() []InstanceType { return c.types }

// Get returns the named type.
func (c *Catalog) Get(name string) (InstanceType, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// Price is the USD/hour of a type in a zone for a capacity type, from
// pkg/catalog (us-east-1 list prices, spot at its default ratio), so the
// sandbox bills exactly what the planner predicts. Types pkg/catalog does
// not price fall back to this catalogue's on-demand figure.
func (c *Catalog) Price(instanceType, zone, capacityType string) float64 {
	t, ok := c.byName[instanceType]
	if !ok {
		return 0
	}
	if p, ok := catalog.Default().Price(instanceType, capacityType, zone); ok {
		return p
	}
	return t.OnDemandPrice
}

// Capacity is what the instance reports to the kubelet: pkg/catalog's
// figure (Karpenter's VM-overhead estimate, ENI-limited pods) when it knows
// the type, else the raw figures.
func (t InstanceType) Capacity() corev1.ResourceList {
	if it, ok := catalog.Default().Get(t.Name); ok {
		return it.Capacity(catalog.Kubelet{})
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(t.MemoryMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(t.MaxPods), resource.DecimalSI),
	}
	if t.GPUCount > 0 && t.GPUManufacturer == "nvidia" {
		rl[ResourceGPU] = *resource.NewQuantity(int64(t.GPUCount), resource.DecimalSI)
	}
	return rl
}

// Allocatable is pkg/catalog's Karpenter allocatable math when it knows
// the type; otherwise it applies the EKS AMI's reservations: CPU 6 % of the first
// core, 1 % of the second, 0.5 % of the next two and 0.25 % above; memory
// 11 MiB per pod + 255 MiB kube-reserved, a 100 MiB eviction threshold and
// Karpenter's default 7.5 % VM overhead.
func (t InstanceType) Allocatable() corev1.ResourceList {
	if it, ok := catalog.Default().Get(t.Name); ok {
		if a, err := it.Allocatable(catalog.Kubelet{}); err == nil {
			return a
		}
	}
	rl := t.Capacity()
	cpu := int64(t.VCPU) * 1000
	reserved := 0.0
	for core := 1; core <= t.VCPU; core++ {
		switch {
		case core == 1:
			reserved += 60
		case core == 2:
			reserved += 10
		case core <= 4:
			reserved += 5
		default:
			reserved += 2.5
		}
	}
	rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu-int64(math.Ceil(reserved)), resource.DecimalSI)
	memMiB := int64(float64(t.MemoryMiB)*(1-0.075)) - int64(11*t.MaxPods+255) - 100
	rl[corev1.ResourceMemory] = *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI)
	return rl
}
