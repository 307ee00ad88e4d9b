package engine

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unsafe"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// node is an existing node or a NodeClaim being filled (Karpenter's
// ExistingNode and NodeClaim share this shape here).
type node struct {
	id       int // dense index for hostname-keyed counts
	name     string
	existing bool
	pool     *pool
	labels   map[string]string // existing nodes
	reqs     Requirements      // claims
	taints   []corev1.Taint
	free     vec // existing: allocatable − used
	used     vec // claims: pod requests
	types    []*itype
	maxAlloc vec
	minAlloc vec // component-wise minimum over types: used ≤ minAlloc means every type fits
	pods     []*podData
	seqs     []int
	ports    map[inventory.HostPort]bool
	vols     *attachedVolumes // existing nodes with CSINode limits
	bucket   int              // index in the fewest-pods bucket, -1 when not bucketed
	part     int              // part (claimindex.go) of the fewest-pods bucket
	room     int              // bucket in the room index, -1 when not indexed
	roomPos  int
	roomPart int // part of the room index
	cur      int // claims: index into types of the cheapest fitting type
	// ownTypes: types is the claim's own array, which commit filters in
	// place; a new claim shares fitFor's kept list until then.
	ownTypes bool
	dead     bool
}

// compatKey and compatEntry cache the types of a pool compatible with a
// pod's requirements.
type compatKey struct {
	pool int
	reqs string
}

type compatEntry struct {
	types   []*itype
	biggest vec
}

// domain is the node's value for a topology key, "" when undetermined.
func (n *node) domain(key string) string {
	if key == catalog.LabelHostname {
		return n.name
	}
	if n.existing {
		return n.labels[key]
	}
	if r, ok := n.reqs[key]; ok && r.Operator() == corev1.NodeSelectorOpIn && len(r.values) == 1 {
		return r.values[0]
	}
	return ""
}

// pickClaim chooses an in-flight claim. Karpenter takes the first that fits
// in order of fewest pods; unless KarpenterOnly, a claim whose current
// cheapest type already has room for the pod (no extra cost) wins first,
// best fit, found through the room index instead of a scan of every claim.
// Both look only at the parts (claimindex.go) the pod's topology allows,
// and at only the few claims a hostname term leaves when there are few.
func (s *scheduler) pickClaim(pd *podData) (*node, Requirements) {
	if s.hostnameRejectsEveryClaim(pd) {
		return nil, nil
	}
	mask := s.partsFor(pd)
	dims := s.dims()
	if few, ok := s.fewClaims(pd); ok {
		return s.pickAmong(pd, mask, few)
	}
	if !s.opts.KarpenterOnly {
		var best *node
		var bestReqs Requirements
		bestScore := math.MaxFloat64
		found := -1
		for b := s.nextRoom(mask, roomBucket(pd.req[rCPU])); b >= 0; b = s.nextRoom(mask, b+1) {
			if found >= 0 && b > found+1 {
				break
			}
			for m := mask; m != 0; m &= m - 1 {
				r := &s.rooms[bits.TrailingZeros64(m)]
				bucket := r.buckets[b]
				for lo := 0; lo < len(bucket); lo += roomBlock {
					bound := &r.blockMem[b][lo/roomBlock]
					if pd.req[rMem] > *bound && roomBlocks {
						continue // no claim of the block has the memory
					}
					exact := int64(math.MinInt64)
					for i := lo; i < min(lo+roomBlock, len(bucket)); i++ {
						e := &bucket[i]
						exact = max(exact, e.free[rMem])
						if !pd.req.fitsIn(&e.free, dims) {
							continue
						}
						// Ties go to the first in the order of the scan.
						score := fitScore(pd, e)
						if score >= bestScore {
							continue
						}
						if narrowed, ok := s.canAdd(pd, e.n); ok {
							best, bestReqs, bestScore = e.n, narrowed, score
							if found < 0 {
								found = b
							}
						}
					}
					*bound = exact
				}
			}
		}
		if best != nil {
			return best, bestReqs
		}
	}
	// Fewest pods first; among claims with as many pods, part by part.
	for c := 0; c < s.maxCount; c++ {
		for m := mask; m != 0; m &= m - 1 {
			byCount := s.byCount[bits.TrailingZeros64(m)]
			if c >= len(byCount) {
				continue
			}
			bucket := byCount[c]
			for i := range bucket {
				if !pd.req.fitsIn(&bucket[i].head, dims) {
					continue
				}
				if narrowed, ok := s.canAdd(pd, bucket[i].n); ok {
					return bucket[i].n, narrowed
				}
			}
		}
	}
	return nil, nil
}

// fitScore is the room a claim's current type would have left, as
// fractions of its allocatable CPU and memory: best fit takes the least.
func fitScore(pd *podData, e *roomEntry) float64 {
	return float64(e.free[rCPU]-pd.req[rCPU])/float64(max(e.allocCPU, 1)) + float64(e.free[rMem]-pd.req[rMem])/float64(max(e.allocMem, 1))
}

// countEntry is a claim in its fewest-pods bucket with the room its largest
// type leaves (maxAlloc − used), so the scan reads one array and touches a
// claim only when the pod fits.
type countEntry struct {
	n    *node
	head vec
}

func (n *node) domainIn(key string, reqs Requirements) string {
	if r, ok := reqs[key]; ok && r.Operator() == corev1.NodeSelectorOpIn && len(r.values) == 1 {
		return r.values[0]
	}
	return ""
}

// compatible returns the pool's types compatible with the pod's
// requirements (cached per distinct requirement set).
func (s *scheduler) compatible(pd *podData, p *pool, reqs Requirements) *compatEntry {
	if len(pd.reqs) == 0 {
		return &compatEntry{types: p.types, biggest: p.maxAlloc}
	}
	k := compatKey{pool: p.idx, reqs: pd.reqKey}
	if e, ok := s.compat[k]; ok {
		return e
	}
	e := &compatEntry{}
	for _, t := range p.types {
		if typeCompatible(t, reqs) {
			e.types = append(e.types, t)
			for i := range e.biggest {
				e.biggest[i] = max(e.biggest[i], t.alloc[i])
			}
		}
	}
	s.compat[k] = e
	return e
}

// fitKey names what decides which of a pool's types a new claim may take:
// the pod's requirements (its compatible types), the narrowed keys' check
// (keysCompat's slice, nil for none) and the pod's requests.
type fitKey struct {
	pool   int
	reqKey string
	compat *bool
	req    vec
}

// fitEntry is the types of the pool that fit, in order, and their bounds.
type fitEntry struct {
	fit                 []*itype // read-only: claims share it (ownTypes)
	maxA, minA, largest vec      // allocatable bounds; largest capacity
}

// fitCache is off only in tests, which compare with the walk.
var fitCache = true

// fitFor is the types of ce a new claim for the pod may take: those that
// hold the pod, pass compat and are within the pool's limits. Pods of one
// shape open most claims, so the walk over a pool's types is kept per
// fitKey. Limits only shrink during a solve, so a kept list is still exact
// while its largest capacity is within them; else it is walked again.
func (s *scheduler) fitFor(pd *podData, p *pool, ce *compatEntry, compat []bool) *fitEntry {
	key := fitKey{pool: p.idx, reqKey: pd.reqKey, compat: unsafe.SliceData(compat), req: pd.req}
	if e, ok := s.fits[key]; ok && fitCache && s.withinLimitsCap(p, &e.largest) {
		return e
	}
	fit := s.fitBuf[:0]
	dims := s.dims()
	b := newAllocBounds(dims)
	var largest vec
	for _, t := range ce.types {
		if pd.req.fitsIn(&t.alloc, dims) && (compat == nil || compat[t.idx]) && s.withinLimits(p, t) {
			fit = append(fit, t)
			b.add(&t.alloc)
			for e := range largest[:dims] {
				largest[e] = max(largest[e], t.capacity[e])
			}
		}
	}
	s.fitBuf = fit[:0]
	e := &fitEntry{fit: slices.Clone(fit), largest: largest}
	e.maxA, e.minA = b.result()
	if s.fits == nil {
		s.fits = map[fitKey]*fitEntry{}
	}
	s.fits[key] = e
	return e
}

// newClaim opens a claim on the pool for the pod, or, when explain, says
// why it cannot. A failure changes nothing, so add asks again with explain
// only when every pool fails: most pods fit a later pool and their reasons
// would be thrown away.
func (s *scheduler) newClaim(pd *podData, p *pool, explain bool) (*node, string) {
	if t, ok := tolerates(pd.pod.Tolerations, p.taints, !pd.tolerateNS); !ok {
		if !explain {
			return nil, ""
		}
		return nil, "does not tolerate taint " + taintString(t)
	}
	if p.hasNodeLimit {
		left := p.nodeLimitMax
		if u := s.uses[p.pos]; u != nil {
			left = u.nodeLimit
		}
		if left <= 0 {
			return nil, "NodePool node limit reached"
		}
	}
	if !explain {
		if !p.reqs.compatible(pd.reqs, s.wellKnown) {
			return nil, ""
		}
	} else if err := p.reqs.Compatible(pd.reqs, s.wellKnown); err != nil {
		return nil, "incompatible requirements: " + err.Error()
	}
	reqs := p.reqs
	if len(pd.reqs) > 0 {
		reqs = p.reqs.Clone()
		for _, r := range pd.reqs {
			reqs.Add(r)
		}
	}
	ce := s.compatible(pd, p, reqs)
	if len(ce.types) == 0 {
		if !explain {
			return nil, ""
		}
		return nil, "no instance type satisfies " + describeReqs(pd.reqs)
	}
	name := p.name + "-" + strconv.Itoa(s.claimsNamed(p)+1)
	probe := node{id: s.nextID, name: name, reqs: reqs, pool: p}
	if !hostnameOK(pd, &probe) {
		return nil, s.topologyReason(pd, explain)
	}
	narrowed, ok := s.topology(pd, &probe, reqs)
	if !ok {
		return nil, s.topologyReason(pd, explain)
	}
	var keys []string
	if !sameMap(narrowed, reqs) {
		keys = diffKeys(reqs, narrowed)
	}
	var compat []bool
	if len(keys) > 0 {
		f := offerFilterOf(narrowed)
		compat = s.keysCompat(p, narrowed, keys, &f)
	}
	fe := s.fitFor(pd, p, ce, compat)
	fit, maxA, minA, largest := fe.fit, fe.maxA, fe.minA, fe.largest
	if len(fit) == 0 {
		if !explain {
			return nil, ""
		}
		if !pd.req.fits(ce.biggest) {
			return nil, "needs " + s.ri.describe(pd.req, ce.biggest)
		}
		if p.limited {
			return nil, "NodePool limits leave no room for an instance type that fits"
		}
		return nil, "no instance type that fits is offered in the zone the topology requires"
	}
	if r, got, short := minValuesShort(p, fit); short {
		if !explain {
			return nil, ""
		}
		return nil, minValuesReason(r, got)
	}
	u := s.use(p)
	u.seq++
	s.nextID++
	if sameMap(narrowed, p.reqs) {
		narrowed = p.reqs.Clone() // claims narrow their own copy
	}
	n := &node{id: probe.id, name: name, pool: p, taints: p.taints, bucket: -1, room: -1, // ports: commit makes them
		reqs: narrowed, types: fit, maxAlloc: maxA, minAlloc: minA, // shared until commit filters it
		pods: make([]*podData, 0, 4), seqs: make([]int, 0, 4)}
	// Karpenter pessimistically charges the largest option against limits.
	if p.limited {
		for e := range largest {
			if p.limitMask[e] == 1 {
				u.remaining[e] -= largest[e]
			}
		}
		if p.hasNodeLimit {
			u.nodeLimit--
		}
	}
	s.claims = append(s.claims, n)
	for _, g := range s.zeroGroups {
		g.addZero(n)
	}
	return n, ""
}

// refreshMax sets the claim's maxAlloc and minAlloc over its types.
func (s *scheduler) refreshMax(n *node) {
	b := newAllocBounds(s.dims())
	for _, t := range n.types {
		b.add(&t.alloc)
	}
	n.maxAlloc, n.minAlloc = b.result()
}

// commitShortcuts (dropOutgrown, and commit knowing that a narrowing drops
// no type) is off only in tests, which compare with the walk.
var commitShortcuts = true

// dropOutgrown is commit's filter when the types that no longer hold the
// claim's pods are the first ones, as when types are priced by size: it
// drops them without walking the rest, and reports false (nothing changed)
// when it cannot tell. A claim's types are a subsequence of the pool's in
// order, so used within the pool's suffix minimum at the first type kept
// means every later type holds it. maxAlloc stays exact: when a dropped
// type set it in a slot no kept type reaches, commit walks instead (a slot
// every type has at zero, as ephemeral storage often, is reached by all).
// minAlloc becomes the suffix minimum, a lower bound, which only asks for a
// filter sooner.
func (s *scheduler) dropOutgrown(n *node) bool {
	if !commitShortcuts {
		return false
	}
	dims := s.dims()
	i := 0
	for i < len(n.types) && !n.used.fitsIn(&n.types[i].alloc, dims) {
		i++
	}
	if i == len(n.types) || !n.used.fitsIn(&n.pool.sufMin[n.types[i].idx], dims) {
		return false
	}
	kept := n.types[i:]
	for _, t := range n.types[:i] {
		for e := range dims {
			if t.alloc[e] == n.maxAlloc[e] && !s.attains(kept, e, t.alloc[e]) {
				return false
			}
		}
	}
	n.types = kept
	n.minAlloc = n.pool.sufMin[n.types[0].idx]
	return true
}

// attains reports whether one of types has allocatable v in slot e; the
// most expensive, looked at first, usually has.
func (s *scheduler) attains(types []*itype, e int, v int64) bool {
	for i := len(types) - 1; i >= 0; i-- {
		if types[i].alloc[e] == v {
			return true
		}
	}
	return false
}

// cheapestIndex is the index of the claim's cheapest type that fits and is
// offered where its requirements allow.
func (s *scheduler) cheapestIndex(n *node) int {
	f := offerFilterOf(n.reqs)
	dims := s.dims()
	best, bestPrice := 0, math.MaxFloat64
	for i, t := range n.types {
		if t.offerings[0].Price >= bestPrice {
			// Offerings are sorted and so are the types (a subsequence of
			// the pool's, by cheapest offering): no later type beats the best.
			break
		}
		if !n.used.fitsIn(&t.alloc, dims) {
			continue
		}
		if o, ok := t.cheapestF(&f); ok && o.Price < bestPrice {
			best, bestPrice = i, o.Price
		}
	}
	return best
}

// moveBucket moves a claim from its fewest-pods bucket (from pods, in the
// part it was put in) to bucket to, in the part it belongs in now (part,
// partOfClaim's).
func (s *scheduler) moveBucket(n *node, from, to, part int) {
	if n.bucket >= 0 && from < len(s.byCount[n.part]) {
		b := s.byCount[n.part][from]
		last := b[len(b)-1]
		b[n.bucket] = last
		last.n.bucket = n.bucket
		s.byCount[n.part][from] = b[:len(b)-1]
	}
	n.bucket = -1
	if to < 0 {
		return
	}
	n.part = part
	for len(s.byCount[n.part]) <= to {
		s.byCount[n.part] = append(s.byCount[n.part], nil)
	}
	s.maxCount = max(s.maxCount, to+1)
	n.bucket = len(s.byCount[n.part][to])
	s.byCount[n.part][to] = append(s.byCount[n.part][to], countEntry{n: n, head: n.maxAlloc.sub(n.used)})
}

// canAddClaim is canAdd's part for a claim: room on some type, compatible
// requirements, topology and minValues; it returns the narrowed requirements.
func (s *scheduler) canAddClaim(pd *podData, n *node) (Requirements, bool) {
	total := n.used.add(pd.req)
	if !total.fits(n.maxAlloc) {
		return nil, false
	}
	reqs := n.reqs
	if len(pd.reqs) > 0 {
		if !n.reqs.compatible(pd.reqs, s.wellKnown) {
			return nil, false
		}
		reqs = n.reqs.Clone()
		for _, r := range pd.reqs {
			reqs.Add(r)
		}
	}
	reqs, ok := s.topology(pd, n, reqs)
	if !ok {
		return nil, false
	}
	var keys []string
	if !sameMap(reqs, n.reqs) {
		keys = diffKeys(n.reqs, reqs)
	}
	if len(n.pool.minValues) > 0 {
		// The options left after the pod must still meet minValues.
		kept := make([]*itype, 0, len(n.types))
		for _, t := range n.types {
			if total.fits(t.alloc) && (len(keys) == 0 || typeCompatibleKeys(t, reqs, keys)) {
				kept = append(kept, t)
			}
		}
		if _, _, short := minValuesShort(n.pool, kept); short || len(kept) == 0 {
			return nil, false
		}
		return reqs, true
	}
	if len(keys) == 0 && total.fits(n.types[n.cur].alloc) {
		return reqs, true
	}
	for _, t := range n.types {
		if total.fits(t.alloc) && (len(keys) == 0 || typeCompatibleKeys(t, reqs, keys)) {
			return reqs, true
		}
	}
	return nil, false
}
