// Package catalog is the EC2 instance-type catalogue: the facts about every
// type (embedded in the binary), its offerings per zone and capacity type with
// prices, the well-known labels NodePool requirements filter on, and the
// allocatable resources Karpenter's AWS provider would compute for a node.
//
// # API
//
//	cat := catalog.Default()                 // us-east-1a/b/c, on-demand + spot, list prices
//	cat, err := catalog.New(catalog.Options{ // or: your region, zones, prices
//		Region: "eu-west-1", Zones: []string{"eu-west-1a", "eu-west-1b"},
//		Pricing: catalog.Pricing{DiscountPercent: 12, SpotRatio: 0.35},
//	})
//	it, ok := cat.Get("m5.xlarge")           // *InstanceType: Info + Labels + Offerings
//	price, ok := cat.Price("m5.xlarge", catalog.CapacityTypeOnDemand, "")  // $/h, cheapest zone
//	alloc, err := it.Allocatable(catalog.Kubelet{MaxPods: ptr(58)})         // corev1.ResourceList
//	alts := cat.Similar("m5.xlarge", catalog.SimilarOptions{})               // for --flexibility similar
//
// Callers: discover prices node groups with Price; generate widens instance
// types with Similar; the engine builds its scheduling view of each type from
// Labels, Offerings and Allocatable.
//
// # Prices
//
// On-demand prices are Karpenter's us-east-1 fallback snapshot (see
// data/README.md), less Pricing.DiscountPercent, unless Pricing.OnDemand
// names a negotiated price for the type. Spot prices come from
// Pricing.SpotPrices (a live or snapshot price per type and zone) and
// otherwise are estimated as list on-demand × Pricing.SpotRatio (default
// DefaultSpotRatio). Discounts do not apply to spot: Savings Plans and EDPs do
// not cover it. A type without any price has no offerings, as in Karpenter,
// which cannot launch what it cannot price. Other regions reuse the us-east-1
// prices unless a live Snapshot or a price file says otherwise.
//
// # Allocatable
//
// Allocatable follows karpenter-provider-aws pkg/providers/instancetype/types.go:
// memory capacity = EC2 MiB (− 64 MiB on arm64) − ceil(7.5 %) VM overhead;
// kube-reserved memory 11 × pods + 255 MiB (ENI-limited pods on AL2, AL2023
// and Custom), kube-reserved CPU 6 % of the first core, 1 % of the second,
// 0.5 % of cores 3–4 and 0.25 % of the rest; eviction threshold 100 Mi memory
// and 10 % of ephemeral storage unless evictionHard says otherwise; max pods
// from maxPods, else the ENI formula, else 110, capped by podsPerCore.
//
// # Live refresh
//
// Source is the narrow interface a live implementation (EC2
// DescribeInstanceTypes, DescribeInstanceTypeOfferings,
// DescribeSpotPriceHistory, pricing GetProducts) satisfies; Refresh reads it
// through a disk Cache and yields a Snapshot that Options.Live layers over the
// embedded data. MemorySource is an in-memory Source for tests and the sandbox.
package catalog

//go:generate go run ./internal/gen -in data/aws-instance-types.json -out zz_generated_instancetypes.go

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// DefaultRegion is the region of the embedded prices.
const DefaultRegion = "us-east-1"

// DefaultSpotRatio estimates a spot price as this fraction of the list
// on-demand price when no live price is known: a 60 % saving, the
// conservative end of what the Spot Instance Advisor shows for common
// general-purpose types, so a plan does not over-promise.
const DefaultSpotRatio = 0.4

// DefaultVMMemoryOverheadPercent is Karpenter's --vm-memory-overhead-percent.
const DefaultVMMemoryOverheadPercent = 0.075

// Info is what the catalogue knows about one instance type, independent of
// region, prices and kubelet settings. Field meanings are in data/README.md.
type Info struct {
	Name             string  `json:"name"`
	Family           string  `json:"family"`
	Category         string  `json:"category"`
	Generation       int     `json:"generation"`
	Size             string  `json:"size"`
	VCPU             int     `json:"vcpu"`
	MemoryMiB        int64   `json:"memoryMiB"`
	Arch             string  `json:"arch"`
	GPUCount         int     `json:"gpuCount,omitempty"`
	GPUName          string  `json:"gpuName,omitempty"`
	GPUMemoryMiB     int64   `json:"gpuMemoryMiB,omitempty"`
	GPUManufacturer  string  `json:"gpuManufacturer,omitempty"`
	AcceleratorName  string  `json:"acceleratorName,omitempty"`
	AcceleratorCount int     `json:"acceleratorCount,omitempty"`
	MaxENIs          int     `json:"maxENIs,omitempty"`
	IPv4PerENI       int     `json:"ipv4PerENI,omitempty"`
	MaxPodsENI       int     `json:"maxPodsENI,omitempty"`
	Hypervisor       string  `json:"hypervisor,omitempty"`
	BareMetal        bool    `json:"bareMetal,omitempty"`
	OnDemandPrice    float64 `json:"onDemandUSDPerHour,omitempty"`
}

// Offering is one way to launch a type: a zone and a capacity type, at a
// price in USD per hour.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

// InstanceType is one type of the catalogue with its labels and offerings.
// It is immutable once the Catalog is built.
type InstanceType struct {
	Info
	// Labels are the type's well-known labels (WellKnownLabels), without zone
	// and capacity type, which vary per offering.
	Labels map[string]string
	// Offerings are sorted by price, then zone, then capacity type.
	Offerings []Offering

	vmOverhead float64
}

// Options configure a Catalog. The zero value is Default().
type Options struct {
	// Region is the region the catalogue describes (label
	// topology.kubernetes.io/region); default DefaultRegion.
	Region string
	// Zones offered; default <region>a, <region>b, <region>c.
	Zones []string
	// CapacityTypes offered; default on-demand and spot.
	CapacityTypes []string
	// Pricing adjusts list prices.
	Pricing Pricing
	// VMMemoryOverheadPercent is Karpenter's --vm-memory-overhead-percent;
	// 0 means DefaultVMMemoryOverheadPercent.
	VMMemoryOverheadPercent float64
	// Live, when set, is a refreshed snapshot layered over the embedded data:
	// its types replace or add to the embedded ones, its offerings restrict
	// which zones each type is offered in, and its prices replace list prices.
	Live *Snapshot
	// Types, when set, replaces the embedded catalogue entirely (tests, the
	// sandbox, synthetic catalogues).
	Types []Info
}

// Catalog is an immutable set of instance types for one region.
type Catalog struct {
	region string
	zones  []string
	types  []*InstanceType
	byName map[string]*InstanceType
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
)

// Default returns the embedded catalogue with default options: us-east-1,
// zones a–c, on-demand and spot, list prices, spot at DefaultSpotRatio. It is
// built once and shared; it is immutable.
func Default() *Catalog {
	defaultOnce.Do(func() {
		c, err := New(Options{})
		if err != nil {
			// The embedded data is validated by tests; reaching this is a build defect.
			panic(fmt.Sprintf("catalog: embedded catalogue is invalid: %v", err))
		}
		defaultCat = c
	})
	return defaultCat
}

// Embedded returns a copy of the embedded instance-type facts, sorted by name.
func Embedded() []Info { return slices.Clone(embeddedTypes) }

// New builds a catalogue.
func New(opts Options) (*Catalog, error) {
	region := opts.Region
	if region == "" {
		region = DefaultRegion
	}
	zones := opts.Zones
	if len(zones) == 0 {
		zones = []string{region + "a", region + "b", region + "c"}
	}
	capTypes := opts.CapacityTypes
	if len(capTypes) == 0 {
		capTypes = []string{CapacityTypeOnDemand, CapacityTypeSpot}
	}
	for _, ct := range capTypes {
		if ct != CapacityTypeOnDemand && ct != CapacityTypeSpot {
			return nil, fmt.Errorf("catalog: capacity type %q is not %q or %q", ct, CapacityTypeOnDemand, CapacityTypeSpot)
		}
	}
	if err := opts.Pricing.validate(); err != nil {
		return nil, err
	}
	overhead := opts.VMMemoryOverheadPercent
	if overhead == 0 {
		overhead = DefaultVMMemoryOverheadPercent
	}
	if overhead < 0 || overhead >= 1 {
		return nil, fmt.Errorf("catalog: VM memory overhead %v must be in [0, 1)", overhead)
	}

	infos := opts.Types
	if infos == nil {
		infos = embeddedTypes
	}
	merged := make(map[string]Info, len(infos))
	for i, in := range infos {
		if in.Name == "" || in.VCPU <= 0 || in.MemoryMiB <= 0 {
			return nil, fmt.Errorf("catalog: type %d (%q): name, vcpu and memory are required", i, in.Name)
		}
		merged[in.Name] = in
	}
	spot := opts.Pricing.spotIndex()
	var zoneOffered map[string]map[string]bool
	if live := opts.Live; live != nil {
		for _, in := range live.Types {
			if base, ok := merged[in.Name]; ok && in.OnDemandPrice == 0 {
				in.OnDemandPrice = base.OnDemandPrice
			}
			merged[in.Name] = in
		}
		for name, p := range live.OnDemandPrices {
			if in, ok := merged[name]; ok && p > 0 {
				in.OnDemandPrice = p
				merged[name] = in
			}
		}
		for _, sp := range live.SpotPrices {
			if _, ok := spot[spotKey{sp.InstanceType, sp.Zone}]; !ok {
				spot[spotKey{sp.InstanceType, sp.Zone}] = sp.Price
			}
		}
		if len(live.Offerings) > 0 {
			zoneOffered = map[string]map[string]bool{}
			for _, o := range live.Offerings {
				if zoneOffered[o.InstanceType] == nil {
					zoneOffered[o.InstanceType] = map[string]bool{}
				}
				zoneOffered[o.InstanceType][o.Zone] = true
			}
		}
	}

	c := &Catalog{region: region, zones: slices.Clone(zones), byName: make(map[string]*InstanceType, len(merged))}
	for _, in := range merged {
		it := &InstanceType{Info: in, Labels: labelsFor(in, region), vmOverhead: overhead}
		od, hasOD := opts.Pricing.onDemand(in)
		for _, z := range zones {
			if zoneOffered != nil && !zoneOffered[in.Name][z] {
				continue
			}
			for _, ct := range capTypes {
				switch ct {
				case CapacityTypeOnDemand:
					if hasOD {
						it.Offerings = append(it.Offerings, Offering{Zone: z, CapacityType: ct, Price: od})
					}
				case CapacityTypeSpot:
					if p, ok := opts.Pricing.spot(in, z, spot); ok {
						it.Offerings = append(it.Offerings, Offering{Zone: z, CapacityType: ct, Price: p})
					}
				}
			}
		}
		sort.Slice(it.Offerings, func(i, j int) bool {
			a, b := it.Offerings[i], it.Offerings[j]
			if a.Price != b.Price {
				return a.Price < b.Price
			}
			if a.Zone != b.Zone {
				return a.Zone < b.Zone
			}
			return a.CapacityType < b.CapacityType
		})
		c.types = append(c.types, it)
		c.byName[in.Name] = it
	}
	sort.Slice(c.types, func(i, j int) bool { return c.types[i].Name < c.types[j].Name })
	return c, nil
}

func labelsFor(in Info, region string) map[string]string {
	l := map[string]string{
		LabelInstanceType:           in.Name,
		LabelArch:                   in.Arch,
		LabelOS:                     "linux",
		LabelRegion:                 region,
		LabelInstanceCategory:       in.Category,
		LabelInstanceFamily:         in.Family,
		LabelInstanceGeneration:     strconv.Itoa(in.Generation),
		LabelInstanceSize:           in.Size,
		LabelInstanceCPU:            strconv.Itoa(in.VCPU),
		LabelInstanceMemory:         strconv.FormatInt(in.MemoryMiB, 10),
		LabelInstanceHypervisor:     in.Hypervisor,
		LabelInstanceCapabilityFlex: strconv.FormatBool(strings.Contains(in.Family, "-flex")),
	}
	if in.GPUCount > 0 {
		l[LabelInstanceGPUCount] = strconv.Itoa(in.GPUCount)
		if in.GPUName != "" {
			l[LabelInstanceGPUName] = in.GPUName
		}
		if in.GPUManufacturer != "" {
			l[LabelInstanceGPUManufacturer] = in.GPUManufacturer
		}
		if in.GPUMemoryMiB > 0 {
			l[LabelInstanceGPUMemory] = strconv.FormatInt(in.GPUMemoryMiB, 10)
		}
	}
	if in.AcceleratorCount > 0 {
		l[LabelInstanceAcceleratorName] = in.AcceleratorName
		l[LabelInstanceAcceleratorCount] = strconv.Itoa(in.AcceleratorCount)
		l[LabelInstanceAcceleratorManufacturer] = acceleratorManufacturer(in.AcceleratorName)
	}
	return l
}

func acceleratorManufacturer(name string) string {
	switch {
	case strings.HasPrefix(name, "inferentia"), strings.HasPrefix(name, "trainium"):
		return "aws"
	case strings.HasPrefix(name, "qualcomm"):
		return "qualcomm"
	default:
		return name
	}
}

// Region is the catalogue's region.
func (c *Catalog) Region() string { return c.region }

// Zones are the zones the catalogue offers, in the order given.
func (c *Catalog) Zones() []string { return slices.Clone(c.zones) }

// Types returns every instance type sorted by name. The slice is a copy; the
// types themselves are shared and must not be modified.
func (c *Catalog) Types() []*InstanceType { return slices.Clone(c.types) }

// Len is the number of instance types.
func (c *Catalog) Len() int { return len(c.types) }

// Get looks up an instance type by name.
func (c *Catalog) Get(name string) (*InstanceType, bool) {
	it, ok := c.byName[name]
	return it, ok
}

// Price returns the price in USD per hour of a type for a capacity type in a
// zone; an empty zone means the cheapest zone, an empty capacity type the
// cheapest offering. ok is false when the type has no such offering.
func (c *Catalog) Price(name, capacityType, zone string) (price float64, ok bool) {
	it, found := c.byName[name]
	if !found {
		return 0, false
	}
	o, ok := it.Cheapest(capacityType, zone)
	return o.Price, ok
}

// Cheapest returns the cheapest offering matching the capacity type and zone
// (empty matches any).
func (it *InstanceType) Cheapest(capacityType, zone string) (Offering, bool) {
	for _, o := range it.Offerings { // sorted by price
		if (capacityType == "" || o.CapacityType == capacityType) && (zone == "" || o.Zone == zone) {
			return o, true
		}
	}
	return Offering{}, false
}

// SimilarOptions tune Similar.
type SimilarOptions struct {
	// MemoryTolerance is the accepted relative memory difference; default 0.
	// 0.5 accepts half to one and a half times the memory.
	MemoryTolerance float64
	// CPUTolerance is the accepted relative vCPU difference; default 0.
	CPUTolerance float64
	// AllowOlderGenerations keeps types of an older generation than the given one.
	AllowOlderGenerations bool
}

// Similar returns the types that could stand in for name: the same
// architecture, GPUs and accelerators, bare metal only if name is, vCPU and
// memory within the tolerances, not older (unless allowed), with an offering;
// name itself first, then by cheapest price, then by name.
func (c *Catalog) Similar(name string, opts SimilarOptions) []*InstanceType {
	base, ok := c.byName[name]
	if !ok {
		return nil
	}
	within := func(a, b, tol float64) bool { return math.Abs(a-b) <= tol*b+1e-9 }
	var out []*InstanceType
	for _, it := range c.types {
		if it.Name == name {
			continue
		}
		switch {
		case it.Arch != base.Arch, it.GPUCount != base.GPUCount, it.GPUManufacturer != base.GPUManufacturer,
			it.AcceleratorCount != base.AcceleratorCount, it.AcceleratorName != base.AcceleratorName,
			it.BareMetal && !base.BareMetal, len(it.Offerings) == 0,
			!opts.AllowOlderGenerations && it.Generation < base.Generation,
			!within(float64(it.VCPU), float64(base.VCPU), opts.CPUTolerance),
			!within(float64(it.MemoryMiB), float64(base.MemoryMiB), opts.MemoryTolerance):
			continue
		}
		out = append(out, it)
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := out[i].Offerings[0].Price, out[j].Offerings[0].Price
		if pi != pj {
			return pi < pj
		}
		return out[i].Name < out[j].Name
	})
	return append([]*InstanceType{base}, out...)
}
