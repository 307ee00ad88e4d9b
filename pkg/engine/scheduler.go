package engine

import (
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"sort"
	"strings"

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
	bucket   int // index in the fewest-pods bucket, -1 when not bucketed
	room     int // bucket in the room index, -1 when not indexed
	roomPos  int
	cur      int // claims: index into types of the cheapest fitting type
	dead     bool
}

type scheduler struct {
	opts                Options
	ri                  *resourceIndex
	wellKnown           map[string]bool
	pools               []*pool
	existing            []*node
	claims              []*node
	byCount             [][]countEntry
	groups              []*topologyGroup
	groupsByID          map[string]*topologyGroup
	universe            map[string][]domainSource
	univ                map[string][]string
	anyPreferNoSchedule bool
	seq                 int
	nextID              int
	compat              map[compatKey]*compatEntry
	domCache            map[domKey][]string
	rooms               roomIndex
	typePreps           map[typeSource]*typePrep
	result              Result
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

func wellKnownSet() map[string]bool {
	m := map[string]bool{catalog.LabelZone: true, catalog.LabelCapacityType: true, catalog.LabelNodePool: true,
		"node.kubernetes.io/windows-build": true, catalog.LabelHostname: true}
	for _, k := range catalog.WellKnownLabels() {
		m[k] = true
	}
	return m
}

func newScheduler(opts Options) *scheduler {
	s := &scheduler{opts: opts, ri: newResourceIndex(), wellKnown: wellKnownSet(), groupsByID: map[string]*topologyGroup{}, universe: map[string][]domainSource{},
		compat: map[compatKey]*compatEntry{}, domCache: map[domKey][]string{}, typePreps: map[typeSource]*typePrep{}}
	if s.opts.MaxInstanceTypes == 0 {
		s.opts.MaxInstanceTypes = 60
	}
	return s
}

// Solve predicts what Karpenter launches for the pending pods, improves on
// its price without breaking a constraint, and explains every pod it cannot
// place. It is pure and deterministic.
func Solve(in Input) (Result, error) { return solve(in, nil) }

// solve is Solve with the pools prepared once for in's NodePools,
// DaemonSets and Catalog (nil: prepare them).
func solve(in Input, pre *preparedPools) (Result, error) {
	s := newScheduler(in.Options)
	if pre != nil {
		s.usePrepared(pre)
	} else if err := s.buildPools(in); err != nil {
		return Result{}, err
	}
	if err := s.buildExisting(in); err != nil {
		return Result{}, err
	}
	s.univ = map[string][]string{}
	for key, srcs := range s.universe {
		var ds []string
		for _, src := range srcs {
			ds = append(ds, src.domain)
		}
		s.univ[key] = sortedUnique(ds)
	}
	pods := make([]*podData, 0, len(in.Pods))
	var invalid []*podData
	for i := range in.Pods {
		pd := s.newPodData(&in.Pods[i], i)
		if pd.invalid == nil {
			if err := s.buildTopology(pd); err != nil {
				pd.invalid = err
			}
		}
		if pd.invalid != nil {
			invalid = append(invalid, pd)
			continue
		}
		pods = append(pods, pd)
	}
	// Count the pods already bound to existing nodes.
	for _, n := range s.existing {
		for _, pd := range n.pods {
			s.computeSelected(pd)
			s.record(pd, n, 1)
		}
	}
	for _, pd := range pods {
		s.computeSelected(pd)
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.req[rCPU] != b.req[rCPU] {
			return a.req[rCPU] > b.req[rCPU]
		}
		if a.req[rMem] != b.req[rMem] {
			return a.req[rMem] > b.req[rMem]
		}
		if a.ref.Namespace != b.ref.Namespace {
			return a.ref.Namespace < b.ref.Namespace
		}
		return a.ref.Name < b.ref.Name
	})

	failures := map[*podData]map[string]string{}
	queue := pods
	for len(queue) > 0 {
		var next []*podData
		for _, pd := range queue {
			if reasons := s.trySchedule(pd); reasons != nil {
				failures[pd] = reasons
				next = append(next, pd)
			} else {
				delete(failures, pd)
			}
		}
		if len(next) == len(queue) {
			queue = next
			break
		}
		queue = next
	}
	for _, pd := range invalid {
		s.result.Unschedulable = append(s.result.Unschedulable, Unschedulable{Pod: pd.ref, Reasons: map[string]string{"": "invalid pod: " + pd.invalid.Error()}})
	}
	for _, pd := range queue {
		s.result.Unschedulable = append(s.result.Unschedulable, Unschedulable{Pod: pd.ref, Reasons: failures[pd]})
	}
	sort.Slice(s.result.Unschedulable, func(i, j int) bool {
		return s.result.Unschedulable[i].Pod.String() < s.result.Unschedulable[j].Pod.String()
	})
	s.result.KarpenterCost = s.totalCost()
	if !s.opts.KarpenterOnly {
		s.improve()
	}
	s.finalize()
	s.result.LowerBound, s.result.TopologyLowerBound = s.lowerBound(pods)
	return s.result, nil
}

func (s *scheduler) buildExisting(in Input) error {
	for i := range in.ExistingNodes {
		en := &in.ExistingNodes[i]
		if en.Node.Unschedulable {
			continue
		}
		alloc, err := s.ri.vec(en.Node.Allocatable)
		if err != nil {
			return fmt.Errorf("existing node %s: %w", en.Node.Name, err)
		}
		lbl := map[string]string{}
		for k, v := range en.Node.Labels {
			lbl[k] = v
		}
		if _, ok := lbl[catalog.LabelHostname]; !ok {
			lbl[catalog.LabelHostname] = en.Node.Name
		}
		n := &node{id: s.nextID, name: en.Node.Name, existing: true, labels: lbl, taints: en.Node.Taints, free: alloc, ports: map[inventory.HostPort]bool{}, bucket: -1, room: -1}
		s.nextID++
		for j := range en.Pods {
			p := &en.Pods[j]
			pd := s.newPodData(p, -1)
			if pd.invalid != nil {
				return fmt.Errorf("existing node %s: pod %s: %w", n.name, pd.ref, pd.invalid)
			}
			if err := s.buildTopology(pd); err != nil {
				return fmt.Errorf("existing node %s: pod %s: %w", n.name, pd.ref, err)
			}
			n.free = n.free.sub(pd.req)
			for _, hp := range p.HostPorts {
				n.ports[hp] = true
			}
			n.pods = append(n.pods, pd)
		}
		for k, v := range lbl {
			if k != catalog.LabelHostname {
				s.universe[k] = append(s.universe[k], domainSource{domain: v, taints: n.taints})
			}
		}
		s.existing = append(s.existing, n)
	}
	return nil
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

// trySchedule is Karpenter's add-then-relax loop; nil on success, else the
// reasons per NodePool.
func (s *scheduler) trySchedule(pd *podData) map[string]string {
	for {
		reasons := s.add(pd)
		if reasons == nil {
			return nil
		}
		if !pd.relax(s) {
			return reasons
		}
	}
}

// add places the pod on an existing node, an in-flight claim, or a new
// claim, in that order.
func (s *scheduler) add(pd *podData) map[string]string {
	for _, n := range s.existing {
		if narrowed, ok := s.canAdd(pd, n); ok {
			s.commit(pd, n, narrowed)
			return nil
		}
	}
	if n, narrowed := s.pickClaim(pd); n != nil {
		s.commit(pd, n, narrowed)
		return nil
	}
	reasons := map[string]string{}
	if len(s.existing) > 0 || len(s.claims) > 0 {
		reasons[""] = "does not fit on any existing or in-flight node"
	}
	for _, p := range s.pools {
		n, why := s.newClaim(pd, p)
		if n != nil {
			s.commit(pd, n, nil)
			return nil
		}
		reasons[p.name] = why
	}
	if len(s.pools) == 0 {
		reasons[""] = "no NodePools and no existing node fits"
	}
	return reasons
}

// pickClaim chooses an in-flight claim. Karpenter takes the first that fits
// in order of fewest pods; unless KarpenterOnly, a claim whose current
// cheapest type already has room for the pod (no extra cost) wins first,
// best fit, found through the room index instead of a scan of every claim.
func (s *scheduler) pickClaim(pd *podData) (*node, Requirements) {
	if s.hostnameRejectsEveryClaim(pd) {
		return nil, nil
	}
	if !s.opts.KarpenterOnly {
		var best *node
		var bestReqs Requirements
		bestScore := math.MaxFloat64
		found := -1
		for b := s.rooms.next(roomBucket(pd.req[rCPU])); b >= 0; b = s.rooms.next(b + 1) {
			if found >= 0 && b > found+1 {
				break
			}
			for i := range s.rooms.buckets[b] {
				e := &s.rooms.buckets[b][i]
				if !pd.req.fits(e.free) {
					continue
				}
				score := float64(e.free[rCPU]-pd.req[rCPU])/float64(max(e.allocCPU, 1)) + float64(e.free[rMem]-pd.req[rMem])/float64(max(e.allocMem, 1))
				n := e.n
				if score >= bestScore || (score == bestScore && best != nil && n.id > best.id) {
					continue
				}
				if narrowed, ok := s.canAdd(pd, n); ok {
					best, bestReqs, bestScore = n, narrowed, score
					if found < 0 {
						found = b
					}
				}
			}
		}
		if best != nil {
			return best, bestReqs
		}
	}
	for _, bucket := range s.byCount {
		for i := range bucket {
			if !pd.req.fits(bucket[i].head) {
				continue
			}
			if narrowed, ok := s.canAdd(pd, bucket[i].n); ok {
				return bucket[i].n, narrowed
			}
		}
	}
	return nil, nil
}

// countEntry is a claim in its fewest-pods bucket with the room its largest
// type leaves (maxAlloc − used), so the scan reads one array and touches a
// claim only when the pod fits.
type countEntry struct {
	n    *node
	head vec
}

// roomIndex buckets live claims by the CPU left on their current cheapest
// type, so best fit looks only at claims with room. Each entry carries what
// is left on that type and its allocatable, so the scan reads one array.
type roomIndex struct {
	buckets [roomBuckets][]roomEntry
	bits    [roomBuckets / 64]uint64
}

type roomEntry struct {
	n                  *node
	free               vec   // the current type's allocatable − used
	allocCPU, allocMem int64 // the current type's allocatable
}

const (
	roomBuckets = 1024
	roomStep    = 100 // milli-CPU per bucket
)

func roomBucket(freeCPU int64) int {
	return int(min(max(freeCPU/roomStep, 0), roomBuckets-1))
}

func (r *roomIndex) put(n *node) {
	alloc := n.types[n.cur].alloc
	free := alloc.sub(n.used)
	b := roomBucket(free[rCPU])
	n.room, n.roomPos = b, len(r.buckets[b])
	r.buckets[b] = append(r.buckets[b], roomEntry{n: n, free: free, allocCPU: alloc[rCPU], allocMem: alloc[rMem]})
	r.bits[b/64] |= 1 << (b % 64)
}

func (r *roomIndex) remove(n *node) {
	if n.room < 0 {
		return
	}
	b := r.buckets[n.room]
	last := b[len(b)-1]
	b[n.roomPos] = last
	last.n.roomPos = n.roomPos
	r.buckets[n.room] = b[:len(b)-1]
	if len(b) == 1 {
		r.bits[n.room/64] &^= 1 << (n.room % 64)
	}
	n.room = -1
}

// next is the first non-empty bucket ≥ b, or -1.
func (r *roomIndex) next(b int) int {
	for w := b / 64; w < len(r.bits); w++ {
		word := r.bits[w]
		if w == b/64 {
			word &^= (1 << (b % 64)) - 1
		}
		if word != 0 {
			return w*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

// canAdd checks taints, host ports, resources, requirements and topology;
// for claims it returns the narrowed requirements.
func (s *scheduler) canAdd(pd *podData, n *node) (Requirements, bool) {
	if len(n.taints) > 0 {
		if _, ok := tolerates(pd.pod.Tolerations, n.taints, !pd.tolerateNS); !ok {
			return nil, false
		}
	}
	for _, hp := range pd.ports {
		if n.ports[hp] {
			return nil, false
		}
	}
	if !hostnameOK(pd, n) {
		return nil, false
	}
	if n.existing {
		if !pd.req.fits(n.free) {
			return nil, false
		}
		for k, r := range pd.reqs {
			v, ok := n.labels[k]
			if ok && !r.Has(v) {
				return nil, false
			}
			if !ok {
				if op := r.Operator(); op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist {
					return nil, false
				}
			}
		}
		_, ok := s.topology(pd, n, nil)
		return nil, ok
	}
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

// diffKeys lists the keys whose requirement differs between two sets.
func diffKeys(old, cur Requirements) []string {
	var keys []string
	for k, r := range cur {
		if o, ok := old[k]; !ok || !reqEqual(o, r) {
			keys = append(keys, k)
		}
	}
	return keys
}

func reqEqual(a, b Requirement) bool {
	if a.complement != b.complement || len(a.values) != len(b.values) || (a.gt == nil) != (b.gt == nil) || (a.lt == nil) != (b.lt == nil) {
		return false
	}
	if (a.gt != nil && *a.gt != *b.gt) || (a.lt != nil && *a.lt != *b.lt) {
		return false
	}
	for i := range a.values {
		if a.values[i] != b.values[i] {
			return false
		}
	}
	return true
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

// newClaim opens a claim on the pool for the pod, or says why it cannot.
func (s *scheduler) newClaim(pd *podData, p *pool) (*node, string) {
	if t, ok := tolerates(pd.pod.Tolerations, p.taints, !pd.tolerateNS); !ok {
		return nil, "does not tolerate taint " + taintString(t)
	}
	if p.hasNodeLimit && p.nodeLimit <= 0 {
		return nil, "NodePool node limit reached"
	}
	if err := p.reqs.Compatible(pd.reqs, s.wellKnown); err != nil {
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
		return nil, "no instance type satisfies " + describeReqs(pd.reqs)
	}
	name := fmt.Sprintf("%s-%d", p.name, p.seq+1)
	probe := node{id: s.nextID, name: name, reqs: reqs, pool: p}
	if !hostnameOK(pd, &probe) {
		return nil, s.topologyReason(pd)
	}
	narrowed, ok := s.topology(pd, &probe, reqs)
	if !ok {
		return nil, s.topologyReason(pd)
	}
	var keys []string
	if !sameMap(narrowed, reqs) {
		keys = diffKeys(reqs, narrowed)
	}
	fit := make([]*itype, 0, len(ce.types))
	for _, t := range ce.types {
		if pd.req.fits(t.alloc) && (len(keys) == 0 || typeCompatibleKeys(t, narrowed, keys)) && s.withinLimits(p, t) {
			fit = append(fit, t)
		}
	}
	if len(fit) == 0 {
		if !pd.req.fits(ce.biggest) {
			return nil, "needs " + s.ri.describe(pd.req, ce.biggest)
		}
		if p.limited {
			return nil, "NodePool limits leave no room for an instance type that fits"
		}
		return nil, "no instance type that fits is offered in the zone the topology requires"
	}
	if r, got, short := minValuesShort(p, fit); short {
		return nil, minValuesReason(r, got)
	}
	p.seq++
	s.nextID++
	if sameMap(narrowed, p.reqs) {
		narrowed = p.reqs.Clone() // claims narrow their own copy
	}
	n := &node{id: probe.id, name: name, pool: p, taints: p.taints, ports: map[inventory.HostPort]bool{}, bucket: -1, room: -1,
		reqs: narrowed, types: fit}
	s.refreshMax(n)
	// Karpenter pessimistically charges the largest option against limits.
	if p.limited {
		var largest vec
		for _, t := range fit {
			for e := range largest {
				largest[e] = max(largest[e], t.capacity[e])
			}
		}
		for e := range largest {
			if p.limitMask[e] == 1 {
				p.remaining[e] -= largest[e]
			}
		}
		if p.hasNodeLimit {
			p.nodeLimit--
		}
	}
	s.claims = append(s.claims, n)
	return n, ""
}

func describeReqs(rs Requirements) string {
	if len(rs) == 0 {
		return "the NodePool's requirements"
	}
	var parts []string
	for _, k := range rs.sortedKeys() {
		parts = append(parts, rs[k].String())
	}
	return strings.Join(parts, ", ")
}

func (s *scheduler) refreshMax(n *node) {
	n.maxAlloc = vec{}
	for e := range n.minAlloc {
		n.minAlloc[e] = math.MaxInt64
	}
	for _, t := range n.types {
		for e := range n.maxAlloc {
			n.maxAlloc[e] = max(n.maxAlloc[e], t.alloc[e])
			n.minAlloc[e] = min(n.minAlloc[e], t.alloc[e])
		}
	}
}

// commit places the pod.
func (s *scheduler) commit(pd *podData, n *node, narrowed Requirements) {
	s.seq++
	if n.existing {
		n.free = n.free.sub(pd.req)
		s.result.Placements = append(s.result.Placements, Placement{Pod: pd.ref, Node: n.name, Seq: s.seq})
	} else {
		changed := narrowed != nil && !sameMap(narrowed, n.reqs)
		var keys []string
		if changed {
			keys = diffKeys(n.reqs, narrowed)
			changed = len(keys) > 0
			n.reqs = narrowed
		}
		n.used = n.used.add(pd.req)
		if changed || !n.used.fits(n.minAlloc) {
			// The claim owns its types slice (newClaim allocates it): filter in place.
			kept := n.types[:0]
			f := offerFilterOf(n.reqs)
			for _, t := range n.types {
				if n.used.fits(t.alloc) && (!changed || typeCompatibleKeysF(t, n.reqs, keys, &f)) {
					kept = append(kept, t)
				}
			}
			clear(n.types[len(kept):])
			n.types = kept
			s.refreshMax(n)
			n.cur = s.cheapestIndex(n)
		} else if !n.used.fits(n.types[n.cur].alloc) {
			n.cur = s.cheapestIndex(n)
		}
		s.moveBucket(n, len(n.pods), len(n.pods)+1)
		if !s.opts.KarpenterOnly {
			s.rooms.remove(n)
			s.rooms.put(n)
		}
	}
	for _, hp := range pd.ports {
		n.ports[hp] = true
	}
	n.pods = append(n.pods, pd)
	n.seqs = append(n.seqs, s.seq)
	s.record(pd, n, 1)
}

func sameMap(a, b Requirements) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// cheapestIndex is the index of the claim's cheapest type that fits and is
// offered where its requirements allow.
func (s *scheduler) cheapestIndex(n *node) int {
	f := offerFilterOf(n.reqs)
	best, bestPrice := 0, math.MaxFloat64
	for i, t := range n.types {
		if t.offerings[0].Price >= bestPrice || !n.used.fits(t.alloc) {
			continue // offerings are sorted: the type cannot beat the best
		}
		if o, ok := t.cheapestF(&f); ok && o.Price < bestPrice {
			best, bestPrice = i, o.Price
		}
	}
	return best
}

func (s *scheduler) moveBucket(n *node, from, to int) {
	if n.bucket >= 0 && from < len(s.byCount) {
		b := s.byCount[from]
		last := b[len(b)-1]
		b[n.bucket] = last
		last.n.bucket = n.bucket
		s.byCount[from] = b[:len(b)-1]
	}
	n.bucket = -1
	if to < 0 {
		return
	}
	for len(s.byCount) <= to {
		s.byCount = append(s.byCount, nil)
	}
	n.bucket = len(s.byCount[to])
	s.byCount[to] = append(s.byCount[to], countEntry{n: n, head: n.maxAlloc.sub(n.used)})
}

func (s *scheduler) totalCost() float64 {
	var c float64
	for _, n := range s.claims {
		if n.dead || len(n.pods) == 0 {
			continue
		}
		if o, ok := n.types[n.cur].cheapest(n.reqs); ok {
			c += o.Price
		}
	}
	return c
}
