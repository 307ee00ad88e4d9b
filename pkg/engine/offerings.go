package engine

import (
	"reflect"
	"sort"
	"strconv"
	"unsafe"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// itype is an instance type prepared for one NodePool.
type itype struct {
	name      string
	reqs      Requirements
	alloc     vec // capacity − overhead − DaemonSet overhead of the pool
	capacity  vec
	offerings []catalog.Offering // sorted by price
	band      int                // size and CPU:memory band (repack.go)
	idx       int                // index in its pool's types
}

// cheapest returns the cheapest offering allowed by reqs.
func (t *itype) cheapest(reqs Requirements) (catalog.Offering, bool) {
	f := offerFilterOf(reqs)
	return t.cheapestF(&f)
}

// offerFilter is the zone and capacity-type part of a set of requirements,
// looked up once for many types.
type offerFilter struct {
	zr, cr     Requirement
	hasZ, hasC bool
}

func offerFilterOf(reqs Requirements) offerFilter {
	var f offerFilter
	f.zr, f.hasZ = reqs[catalog.LabelZone]
	f.cr, f.hasC = reqs[catalog.LabelCapacityType]
	return f
}

// cheapestF returns the cheapest offering the filter allows.
func (t *itype) cheapestF(f *offerFilter) (catalog.Offering, bool) {
	if !f.hasZ && !f.hasC {
		return t.offerings[0], true
	}
	for _, o := range t.offerings {
		if (!f.hasZ || f.zr.Has(o.Zone)) && (!f.hasC || f.cr.Has(o.CapacityType)) {
			return o, true
		}
	}
	return catalog.Offering{}, false
}

// prepareType builds the pool's view of a type; nil when the pool's
// requirements exclude it or it has no allowed offering.
func (s *scheduler) prepareType(t *InstanceType, p *pool, ds vec) (*itype, error) {
	key := typeSourceOf(t)
	prep := s.typePreps[key]
	if prep == nil {
		// Built once per type: pools whose types share the catalogue's maps
		// and slices share it (read-only), which matters with hundreds of
		// NodePools.
		reqs := Requirements{}
		for k, v := range t.Labels {
			reqs.Add(mustIn(k, v))
		}
		for k, vs := range t.MultiLabels {
			reqs.Add(mustIn(k, vs...))
		}
		for _, k := range t.UndefinedLabels {
			reqs.Add(Requirement{Key: k})
		}
		var zones, caps []string
		for _, o := range t.Offerings {
			zones = append(zones, o.Zone)
			caps = append(caps, o.CapacityType)
		}
		reqs.Add(mustIn(catalog.LabelZone, zones...))
		reqs.Add(mustIn(catalog.LabelCapacityType, caps...))
		capacity, err := s.ri.vec(t.Capacity)
		if err != nil {
			return nil, err
		}
		overhead, err := s.ri.vec(t.Overhead)
		if err != nil {
			return nil, err
		}
		prep = &typePrep{reqs: reqs, capacity: capacity, overhead: overhead}
		s.typePreps[key] = prep
	}
	reqs, capacity, overhead := prep.reqs, prep.capacity, prep.overhead
	if !reqs.intersect(p.reqs) {
		return nil, nil
	}
	it := &itype{name: t.Name, reqs: reqs, capacity: capacity, alloc: capacity.sub(overhead).sub(ds)}
	for _, o := range t.Offerings {
		if r, ok := p.reqs[catalog.LabelZone]; ok && !r.Has(o.Zone) {
			continue
		}
		if r, ok := p.reqs[catalog.LabelCapacityType]; ok && !r.Has(o.CapacityType) {
			continue
		}
		it.offerings = append(it.offerings, o)
	}
	if len(it.offerings) == 0 {
		return nil, nil
	}
	sort.SliceStable(it.offerings, func(a, b int) bool { return it.offerings[a].Price < it.offerings[b].Price })
	it.band = band(it)
	return it, nil
}

// typeSource identifies what prepareType derives from a type: the maps
// and slices themselves, which copies of an InstanceType share.
type typeSource struct {
	name                                string
	labels, multi, undefined, offerings unsafe.Pointer
	capacity, overhead                  unsafe.Pointer
	nUndefined, nOfferings              int
}

func typeSourceOf(t *InstanceType) typeSource {
	return typeSource{name: t.Name,
		labels: reflect.ValueOf(t.Labels).UnsafePointer(), multi: reflect.ValueOf(t.MultiLabels).UnsafePointer(),
		undefined: unsafe.Pointer(unsafe.SliceData(t.UndefinedLabels)), offerings: unsafe.Pointer(unsafe.SliceData(t.Offerings)),
		capacity: reflect.ValueOf(t.Capacity).UnsafePointer(), overhead: reflect.ValueOf(t.Overhead).UnsafePointer(),
		nUndefined: len(t.UndefinedLabels), nOfferings: len(t.Offerings)}
}

// typePrep is what prepareType derives from a type before the pool.
type typePrep struct {
	reqs               Requirements
	capacity, overhead vec
}

// typeCompatibleKeys re-checks a type that was compatible before only on
// the keys that changed.
func typeCompatibleKeys(t *itype, reqs Requirements, keys []string) bool {
	return typeCompatibleKeysF(t, reqs, keys, nil)
}

// typeCompatibleKeysF is typeCompatibleKeys with the offer filter of reqs
// looked up once by the caller (nil: look it up).
func typeCompatibleKeysF(t *itype, reqs Requirements, keys []string, f *offerFilter) bool {
	offer := false
	for _, k := range keys {
		if k == catalog.LabelZone || k == catalog.LabelCapacityType {
			offer = true
		}
		tr, ok := t.reqs[k]
		if !ok {
			continue
		}
		if !intersectOne(tr, reqs[k]) {
			return false
		}
	}
	if offer {
		if f == nil {
			_, ok := t.cheapest(reqs)
			return ok
		}
		_, ok := t.cheapestF(f)
		return ok
	}
	return true
}

// appendOfferKey appends the pool and the requirements its offerings are
// filtered by (zone and capacity type), for cache keys.
func appendOfferKey(b []byte, p *pool, reqs Requirements) []byte {
	b = strconv.AppendInt(b, int64(p.idx), 10)
	for _, k := range []string{catalog.LabelZone, catalog.LabelCapacityType} {
		if r, ok := reqs[k]; ok {
			b = appendReqKey(b, k, r)
		} else {
			b = append(b, 3)
		}
	}
	return b
}

// keysCompat is, by type index, typeCompatibleKeysF over the pool's types
// for reqs and keys, cached per pool and per requirements on those keys
// (and on zone and capacity type, which the offerings read): claims narrow
// to the same few domains, and checking each of a claim's types every time
// cost a fifth of the greedy pass. When every type passes it is the pool's
// allCompat, so that commit can tell that the narrowing drops no type.
func (s *scheduler) keysCompat(p *pool, reqs Requirements, keys []string, f *offerFilter) []bool {
	b := append(s.keyBuf[:0], "keys|"...)
	b = strconv.AppendInt(b, int64(p.idx), 10)
	for _, k := range keys {
		if r, ok := reqs[k]; ok {
			b = appendReqKey(b, k, r)
		} else {
			b = appendStr(append(b, 3), k)
		}
	}
	b = appendOfferKey(append(b, 4), p, reqs)
	s.keyBuf = b
	if c, ok := s.keysCache[string(b)]; ok {
		return c
	}
	c := make([]bool, len(p.types))
	all := true
	for i, t := range p.types {
		c[i] = typeCompatibleKeysF(t, reqs, keys, f)
		all = all && c[i]
	}
	if all {
		c = p.allCompat
	}
	s.keysCache[string(b)] = c
	return c
}

func typeCompatible(t *itype, reqs Requirements) bool {
	if !t.reqs.intersect(reqs) {
		return false
	}
	_, ok := t.cheapest(reqs)
	return ok
}

// reqsCompat is, by type index, typeCompatible over the pool's types for
// reqs, cached per pool and requirements: the re-pack's shrink asks it for
// every claim, and claims share a few requirement sets.
func (s *scheduler) reqsCompat(p *pool, reqs Requirements) []bool {
	b := append(s.keyBuf[:0], "reqs|"...)
	b = strconv.AppendInt(b, int64(p.idx), 10)
	b = appendReqsKey(b, reqs)
	s.keyBuf = b
	if c, ok := s.keysCache[string(b)]; ok {
		return c
	}
	c := make([]bool, len(p.types))
	for i, t := range p.types {
		c[i] = typeCompatible(t, reqs)
	}
	s.keysCache[string(b)] = c
	return c
}

// offeredUnder is, by type index, whether the pool's type has an offering
// the filter allows, cached per pool and per the filter's zone and
// capacity-type requirements: the re-pack asks it of every type of every
// claim it tops up.
func (s *scheduler) offeredUnder(p *pool, f *offerFilter) []bool {
	b := append(s.keyBuf[:0], "offer|"...)
	b = strconv.AppendInt(b, int64(p.idx), 10)
	if f.hasZ {
		b = appendReqKey(b, catalog.LabelZone, f.zr)
	}
	if f.hasC {
		b = appendReqKey(b, catalog.LabelCapacityType, f.cr)
	}
	s.keyBuf = b
	if c, ok := s.keysCache[string(b)]; ok {
		return c
	}
	c := make([]bool, len(p.types))
	for i, t := range p.types {
		_, c[i] = t.cheapestF(f)
	}
	s.keysCache[string(b)] = c
	return c
}

// appendReqsKey appends an exact form of the requirements (every field the
// set algebra reads, strings length-prefixed), for cache keys.
func appendReqsKey(b []byte, rs Requirements) []byte {
	for _, k := range rs.sortedKeys() {
		b = appendReqKey(b, k, rs[k])
	}
	return b
}

// appendReqKey is appendReqsKey for one requirement, under key k.
func appendReqKey(b []byte, k string, r Requirement) []byte {
	b = append(b, 0)
	b = appendStr(b, k)
	if r.complement {
		b = append(b, 1, '!')
	}
	for _, v := range r.values {
		b = append(b, 1)
		b = appendStr(b, v)
	}
	if r.gt != nil {
		b = append(b, 2, '>')
		b = strconv.AppendInt(b, *r.gt, 10)
	}
	if r.lt != nil {
		b = append(b, 2, '<')
		b = strconv.AppendInt(b, *r.lt, 10)
	}
	return b
}
