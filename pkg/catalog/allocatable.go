package catalog

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// AMI families, as EC2NodeClass spells them.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
)

// Kubelet is the part of an EC2NodeClass (its amiFamily and kubelet block)
// that decides a node's capacity and allocatable resources. The zero value is
// AL2023 with Karpenter's defaults.
type Kubelet struct {
	// AMIFamily; empty means AL2023.
	AMIFamily string
	// MaxPods overrides the ENI-limited max pods.
	MaxPods *int32
	// PodsPerCore caps pods at PodsPerCore × vCPU (ignored on Bottlerocket).
	PodsPerCore *int32
	// KubeReserved and SystemReserved are the kubelet's reservations (cpu,
	// memory, ephemeral-storage) as Kubernetes quantities; a KubeReserved key
	// replaces Karpenter's computed value for that resource.
	KubeReserved   map[string]string
	SystemReserved map[string]string
	// EvictionHard signals memory.available and nodefs.available, as a
	// quantity or a percentage of capacity; they replace the 100Mi / 10 %
	// defaults.
	EvictionHard map[string]string
	// ReservedENIs is Karpenter's RESERVED_ENIS setting.
	ReservedENIs int
	// EphemeralStorageGiB is the root volume size; 0 means 20 GiB.
	EphemeralStorageGiB int64
}

// Key is equal for settings that give the same allocatable (pointers are
// followed, maps sorted), for caching the instance types derived from them.
func (k Kubelet) Key() string {
	b, err := json.Marshal(k)
	if err != nil {
		return fmt.Sprintf("%+v", k) // cannot happen: strings, numbers and string maps
	}
	return string(b)
}

func (k Kubelet) family() string {
	if k.AMIFamily == "" {
		return AMIFamilyAL2023
	}
	return k.AMIFamily
}

func (k Kubelet) windows() bool { return strings.HasPrefix(k.family(), "Windows") }

// Validate checks the settings so that Capacity and Allocatable cannot fail
// afterwards.
func (k Kubelet) Validate() error {
	switch k.family() {
	case AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyCustom,
		AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025:
	default:
		return fmt.Errorf("amiFamily %q is not one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025", k.AMIFamily)
	}
	if k.MaxPods != nil && *k.MaxPods < 0 {
		return fmt.Errorf("kubelet.maxPods %d must not be negative", *k.MaxPods)
	}
	if k.PodsPerCore != nil && *k.PodsPerCore < 0 {
		return fmt.Errorf("kubelet.podsPerCore %d must not be negative", *k.PodsPerCore)
	}
	if k.ReservedENIs < 0 || k.EphemeralStorageGiB < 0 {
		return fmt.Errorf("reserved ENIs (%d) and ephemeral storage (%d GiB) must not be negative", k.ReservedENIs, k.EphemeralStorageGiB)
	}
	for field, m := range map[string]map[string]string{"kubeReserved": k.KubeReserved, "systemReserved": k.SystemReserved} {
		for key, v := range m {
			if _, err := resource.ParseQuantity(v); err != nil {
				return fmt.Errorf("kubelet.%s[%s] = %q: %w", field, key, v, err)
			}
		}
	}
	for key, v := range k.EvictionHard {
		if _, err := evictionSignal(1<<30, v); err != nil {
			return fmt.Errorf("kubelet.evictionHard[%s] = %q: %w", key, v, err)
		}
	}
	return nil
}

// MaxPods is the pods a node of this type runs under k.
func (it *InstanceType) MaxPods(k Kubelet) int64 {
	var count int64
	switch {
	case k.MaxPods != nil:
		count = int64(*k.MaxPods)
	case !k.windows():
		count = it.eniLimitedPods(k)
	default:
		count = 110
	}
	if k.PodsPerCore != nil && *k.PodsPerCore > 0 && k.family() != AMIFamilyBottlerocket {
		count = min(count, int64(*k.PodsPerCore)*int64(it.VCPU))
	}
	return count
}

// eniLimitedPods is (ENIs − reserved) × (IPv4 per ENI − 1) + 2, or 110 when
// the catalogue lacks ENI data for the type.
func (it *InstanceType) eniLimitedPods(k Kubelet) int64 {
	if it.MaxENIs == 0 || it.IPv4PerENI == 0 {
		return 110
	}
	enis := int64(it.MaxENIs - k.ReservedENIs)
	return max(enis*int64(it.IPv4PerENI-1)+2, 0)
}

// Capacity is the node's capacity as Karpenter predicts it before launch.
func (it *InstanceType) Capacity(k Kubelet) corev1.ResourceList {
	memMiB := it.MemoryMiB
	if it.Arch == "arm64" {
		memMiB -= 64 // Graviton CMA reservation
	}
	memBytes := memMiB * mib
	memBytes -= int64(math.Ceil(float64(memBytes)*it.vmOverhead/mib)) * mib
	storage := k.EphemeralStorageGiB
	if storage == 0 {
		storage = 20
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(it.VCPU)*1000, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(it.MaxPods(k), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(storage*gib, resource.BinarySI),
	}
	if it.GPUCount > 0 {
		switch it.GPUManufacturer {
		case "nvidia":
			rl[ResourceNVIDIAGPU] = *resource.NewQuantity(int64(it.GPUCount), resource.DecimalSI)
		case "amd":
			rl[ResourceAMDGPU] = *resource.NewQuantity(int64(it.GPUCount), resource.DecimalSI)
		case "habana":
			rl[ResourceHabanaGaudi] = *resource.NewQuantity(int64(it.GPUCount), resource.DecimalSI)
		}
	}
	if it.AcceleratorCount > 0 && acceleratorManufacturer(it.AcceleratorName) == "aws" {
		rl[ResourceNeuron] = *resource.NewQuantity(int64(it.AcceleratorCount), resource.DecimalSI)
	}
	return rl
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

// Overhead is kube-reserved + system-reserved + the eviction threshold.
func (it *InstanceType) Overhead(k Kubelet) (corev1.ResourceList, error) {
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("instance type %s: %w", it.Name, err)
	}
	capacity := it.Capacity(k)
	out := corev1.ResourceList{}
	add := func(rl corev1.ResourceList) {
		for name, q := range rl {
			cur := out[name]
			cur.Add(q)
			out[name] = cur
		}
	}
	add(it.kubeReserved(k))
	add(parseList(k.SystemReserved))
	add(evictionThreshold(capacity, k))
	return out, nil
}

// Allocatable is Capacity − Overhead, floored at zero.
func (it *InstanceType) Allocatable(k Kubelet) (corev1.ResourceList, error) {
	overhead, err := it.Overhead(k)
	if err != nil {
		return nil, err
	}
	alloc := it.Capacity(k)
	for name, q := range overhead {
		a, ok := alloc[name]
		if !ok {
			continue
		}
		a.Sub(q)
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, a.Format)
		}
		alloc[name] = a
	}
	return alloc, nil
}

func (it *InstanceType) kubeReserved(k Kubelet) corev1.ResourceList {
	pods := it.MaxPods(k)
	switch k.family() {
	case AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyCustom:
		pods = it.eniLimitedPods(k) // UsesENILimitedMemoryOverhead
	}
	var cpuMilli int64
	cpu := int64(it.VCPU) * 1000
	for _, tier := range []struct {
		start, end int64
		pct        float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, 1 << 31, 0.0025}} {
		if cpu < tier.start {
			continue
		}
		r := float64(tier.end - tier.start)
		if cpu < tier.end {
			r = float64(cpu - tier.start)
		}
		cpuMilli += int64(r * tier.pct)
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*pods+255)*mib, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(gib, resource.BinarySI),
	}
	for name, q := range parseList(k.KubeReserved) {
		rl[name] = q
	}
	return rl
}

// parseList reads a validated quantity map.
func parseList(m map[string]string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for key, v := range m {
		if q, err := resource.ParseQuantity(v); err == nil {
			rl[corev1.ResourceName(key)] = q
		}
	}
	return rl
}

func evictionThreshold(capacity corev1.ResourceList, k Kubelet) corev1.ResourceList {
	storage := capacity[corev1.ResourceEphemeralStorage]
	rl := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(100*mib, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(float64(storage.Value())/100*10)), resource.BinarySI),
	}
	for signal, res := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
		if v, ok := k.EvictionHard[signal]; ok {
			c := capacity[res]
			if n, err := evictionSignal(c.Value(), v); err == nil {
				rl[res] = *resource.NewQuantity(n, resource.BinarySI)
			}
		}
	}
	return rl
}

// evictionSignal reads "10%" (of capacity; "100%" means 0, as Karpenter
// reads it) or a quantity.
func evictionSignal(capacity int64, v string) (int64, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		var pct float64
		if _, err := fmt.Sscanf(p, "%g", &pct); err != nil || pct < 0 || pct > 100 {
			return 0, fmt.Errorf("percentage %q must be between 0%% and 100%%", v)
		}
		if pct == 100 {
			return 0, nil
		}
		return int64(math.Ceil(float64(capacity) / 100 * pct)), nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}
