package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// nres is the number of resource slots: cpu, memory, pods, ephemeral-storage
// and up to nres-4 extended resources (GPUs, neuron, ...), interned per Solve.
const nres = 8

const (
	rCPU = iota
	rMem
	rPods
	rEph
	rExt
)

// vec is a resource vector: milli-CPU, bytes, pods, bytes, then counts.
type vec [nres]int64

func (a vec) add(b vec) vec {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

func (a vec) sub(b vec) vec {
	for i := range a {
		a[i] -= b[i]
	}
	return a
}

// fits reports a ≤ b in every slot.
func (a vec) fits(b vec) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// fitsIn is fits over the first dims slots. Slots past the resource
// index's names are never set, so with dims = s.dims() it is fits.
func (a *vec) fitsIn(b *vec, dims int) bool {
	if dims <= rExt { // the four built-in slots only: the common case, unrolled
		return a[rCPU] <= b[rCPU] && a[rMem] <= b[rMem] && a[rPods] <= b[rPods] && a[rEph] <= b[rEph]
	}
	for i := range a[:dims] {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// allocBounds gathers the component-wise maximum and minimum of types'
// allocatable (a claim's maxAlloc and minAlloc) over the first dims slots;
// the rest are zero for every type.
type allocBounds struct {
	max, min vec
	dims, n  int
}

func newAllocBounds(dims int) allocBounds {
	b := allocBounds{dims: dims}
	for e := range b.min {
		b.min[e] = math.MaxInt64
	}
	return b
}

func (b *allocBounds) add(a *vec) {
	if b.dims <= rExt { // as fitsIn; two halves, each small enough to inline
		b.addCPUMem(a)
		b.addPodsEph(a)
		return
	}
	b.n++
	for e := range b.max[:b.dims] {
		b.max[e] = max(b.max[e], a[e])
		b.min[e] = min(b.min[e], a[e])
	}
}

// addCPUMem and addPodsEph are add for the four built-in slots; hot loops
// call them directly so that they inline (add does not).
func (b *allocBounds) addCPUMem(a *vec) {
	b.n++
	b.max[rCPU], b.min[rCPU] = max(b.max[rCPU], a[rCPU]), min(b.min[rCPU], a[rCPU])
	b.max[rMem], b.min[rMem] = max(b.max[rMem], a[rMem]), min(b.min[rMem], a[rMem])
}

func (b *allocBounds) addPodsEph(a *vec) {
	b.max[rPods], b.min[rPods] = max(b.max[rPods], a[rPods]), min(b.min[rPods], a[rPods])
	b.max[rEph], b.min[rEph] = max(b.max[rEph], a[rEph]), min(b.min[rEph], a[rEph])
}

// result is the maximum (zero for no type) and minimum (MaxInt64 for no
// type), as a walk over every slot gives.
func (b *allocBounds) result() (maxA, minA vec) {
	if b.n > 0 {
		for e := b.dims; e < nres; e++ {
			b.min[e] = 0
		}
	}
	return b.max, b.min
}

// dims is how many resource slots are in use: every vec is zero past them.
func (s *scheduler) dims() int { return len(s.ri.names) }

// resourceIndex interns resource names into vec slots.
type resourceIndex struct {
	names []corev1.ResourceName
	idx   map[corev1.ResourceName]int
}

func newResourceIndex() *resourceIndex {
	ri := &resourceIndex{idx: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		ri.idx[n] = len(ri.names)
		ri.names = append(ri.names, n)
	}
	return ri
}

func (ri *resourceIndex) clone() *resourceIndex {
	return &resourceIndex{names: slices.Clone(ri.names), idx: maps.Clone(ri.idx)}
}

// slot returns the slot of a resource, adding it when there is room.
func (ri *resourceIndex) slot(n corev1.ResourceName) (int, error) {
	if i, ok := ri.idx[n]; ok {
		return i, nil
	}
	if len(ri.names) == nres {
		return 0, fmt.Errorf("more than %d distinct extended resources (at %s)", nres-rExt, n)
	}
	ri.idx[n] = len(ri.names)
	ri.names = append(ri.names, n)
	return ri.idx[n], nil
}

// vec converts a resource list; quantities of resources that are not slotted
// yet are slotted (or fail when there is no room).
func (ri *resourceIndex) vec(rl corev1.ResourceList) (vec, error) {
	var v vec
	// Most lists name CPU and memory only, always slotted first: looking
	// them up is cheaper than ranging over the map.
	found := 0
	if q, ok := rl[corev1.ResourceCPU]; ok {
		v[rCPU] = qval(rCPU, q)
		found++
	}
	if q, ok := rl[corev1.ResourceMemory]; ok {
		v[rMem] = qval(rMem, q)
		found++
	}
	if found == len(rl) {
		return v, nil
	}
	for n, q := range rl {
		i, err := ri.slot(n)
		if err != nil {
			return v, err
		}
		v[i] = qval(i, q)
	}
	return v, nil
}

func qval(slot int, q resource.Quantity) int64 {
	if slot == rCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// list converts back, dropping zeros.
func (ri *resourceIndex) list(v vec) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i, n := range ri.names {
		if v[i] == 0 {
			continue
		}
		if i == rCPU {
			rl[n] = *resource.NewMilliQuantity(v[i], resource.DecimalSI)
		} else if i == rMem || i == rEph {
			rl[n] = *resource.NewQuantity(v[i], resource.BinarySI)
		} else {
			rl[n] = *resource.NewQuantity(v[i], resource.DecimalSI)
		}
	}
	return rl
}

// describe renders the slots of v that exceed limit, for reasons.
func (ri *resourceIndex) describe(need, have vec) string {
	var parts []string
	for i, n := range ri.names {
		if need[i] > have[i] {
			parts = append(parts, fmt.Sprintf("%s %s (largest allowed type has %s)", n, ri.format(i, need[i]), ri.format(i, have[i])))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (ri *resourceIndex) format(i int, v int64) string {
	switch i {
	case rCPU:
		if v%1000 == 0 {
			return fmt.Sprintf("%d", v/1000)
		}
		return fmt.Sprintf("%dm", v)
	case rMem, rEph:
		return fmt.Sprintf("%dMi", v>>20)
	default:
		return fmt.Sprintf("%d", v)
	}
}

func resourceOne() *resource.Quantity { return resource.NewQuantity(1, resource.DecimalSI) }
