package sandbox

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

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
// sandbox bills exactly what the planner predicts; 0 for a type it does
// not know.
func (c *Catalog) Price(instanceType, zone, capacityType string) float64 {
	if _, ok := c.byName[instanceType]; !ok {
		return 0
	}
	p, _ := catalog.Default().Price(instanceType, capacityType, zone)
	return p
}

// Capacity is what the instance reports to the kubelet: pkg/catalog's
// figure (Karpenter's VM-overhead estimate, ENI-limited pods); empty for a
// type pkg/catalog does not know (every sandbox type comes from it).
func (t InstanceType) Capacity() corev1.ResourceList {
	it, ok := catalog.Default().Get(t.Name)
	if !ok {
		return corev1.ResourceList{}
	}
	return it.Capacity(catalog.Kubelet{})
}

// Allocatable is pkg/catalog's Karpenter allocatable math for the type
// with default kubelet settings.
func (t InstanceType) Allocatable() corev1.ResourceList {
	it, ok := catalog.Default().Get(t.Name)
	if !ok {
		return corev1.ResourceList{}
	}
	a, err := it.Allocatable(catalog.Kubelet{})
	if err != nil {
		return it.Capacity(catalog.Kubelet{})
	}
	return a
}
