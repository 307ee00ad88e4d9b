package engine

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// The improvement pass. After the greedy pass, pods that declare no
// topology terms or host ports and that no pod affinity counts ("movable"
// pods) are taken off every claim; claims keep the rest and shrink to the
// cheapest type that holds it. The movable pods are then packed again,
// priced with the LP's dual prices of CPU and memory (what a milli-CPU and
// a byte cost in the cheapest fractional fleet):
//
//  1. every remaining claim may be topped up, on its current type or on a
//     bigger one, whichever holds the most value per dollar;
//  2. the rest go to new claims, each opened on the type (one candidate per
//     size and CPU:memory band) whose best first-fit fill has the most value
//     per dollar, so a claim's type matches the mix it carries.
//
// Moved pods keep their place in the order (Seq) and the zone of every
// zone-keyed group that counts them, so every zone count is the same at
// every moment; they do not land where a placed pod's required
// anti-affinity forbids them, nor next to a pod whose hostname spread counts
// them. So each constraint judged at placement time still holds. The pass
// is kept only when the fleet gets cheaper.

// movable reports whether a pod can be re-packed: it declares no topology
// terms or host ports and no pod affinity counts it.
func movable(pd *podData) bool {
	if len(pd.owned) > 0 || len(pd.ports) > 0 {
		return false
	}
	for _, g := range pd.selectedBy {
		if g.kind == kindAffinity {
			return false
		}
	}
	return true
}

// sizeGroup is loose pods of one class with identical requests.
type sizeGroup struct {
	req  vec
	val  float64
	pods []*podData
	cls  *looseClass
}

// looseClass is loose pods that may go to the same claims.
type looseClass struct {
	rep        *podData
	reqs       Requirements // the pod's requirements and its zone pins
	pins       Requirements
	antiHost   []*topologyGroup // hostname anti-affinity groups that count the pods
	spreadHost []*topologyGroup // hostname spread groups that count the pods
	sizes      []*sizeGroup     // by value, largest first
	left       int
	pool       *pool
	nodeReqs   Requirements // pool ∩ reqs
	types      []*itype     // pool types compatible with nodeReqs, by price
}

// poolDuals are a pool's dual prices (per slot) and the types' efficiency.
type poolDuals struct {
	y   vec64
	eff map[*itype]float64
}

type vec64 [nres]float64

func (y *vec64) value(v vec) float64 {
	s := 0.0
	for i := range v {
		if i != rPods && i != rEph {
			s += y[i] * float64(v[i])
		}
	}
	return max(s, 1e-12)
}

type claimState struct {
	n    *node
	copy node
}

type groupState struct {
	g                  *topologyGroup
	counts, owners     map[string]int32
	hc, ho             []int32
	total, nOwners     int32
	hcClaims, hoClaims int32
}

type repackSnapshot struct {
	claims  []*node
	states  []claimState
	groups  []groupState
	poolSeq []int
	seq     int
	nextID  int
}

func (s *scheduler) snapshotState() repackSnapshot {
	snap := repackSnapshot{claims: slices.Clone(s.claims), seq: s.seq, nextID: s.nextID}
	for _, n := range s.claims {
		snap.states = append(snap.states, claimState{n: n, copy: *n})
	}
	for _, g := range s.groups {
		snap.groups = append(snap.groups, groupState{g: g, counts: cloneCounts(g.counts), owners: cloneCounts(g.owners),
			hc: slices.Clone(g.hc), ho: slices.Clone(g.ho), total: g.total, nOwners: g.nOwners, hcClaims: g.hcClaims, hoClaims: g.hoClaims})
	}
	for _, p := range s.pools {
		snap.poolSeq = append(snap.poolSeq, p.seq)
	}
	return snap
}

func cloneCounts(m map[string]int32) map[string]int32 {
	out := make(map[string]int32, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *scheduler) restore(snap repackSnapshot) {
	s.claims = snap.claims
	for _, st := range snap.states {
		*st.n = st.copy
	}
	for _, gs := range snap.groups {
		gs.g.counts, gs.g.owners, gs.g.hc, gs.g.ho, gs.g.total, gs.g.nOwners = gs.counts, gs.owners, gs.hc, gs.ho, gs.total, gs.nOwners
		gs.g.hcClaims, gs.g.hoClaims = gs.hcClaims, gs.hoClaims
	}
	for i, p := range s.pools {
		p.seq = snap.poolSeq[i]
	}
	s.seq, s.nextID = snap.seq, snap.nextID
}

// improve runs the re-pack and keeps it only when the fleet gets cheaper
// without more nodes, or at least 5 % cheaper. When the first re-pack needs
// more nodes, a second one grows existing claims before opening new ones.
func (s *scheduler) improve() {
	before, nodes := s.totalCost(), s.liveClaims()
	snap := s.snapshotState()
	for _, absorb := range []bool{false, true} {
		ok := s.repack(absorb)
		cost, n := s.totalCost(), s.liveClaims()
		if ok && cost < before-1e-9 && (n <= nodes || cost <= 0.95*before) {
			return
		}
		s.restore(snap)
		if !ok || n <= nodes {
			return
		}
	}
}

func (s *scheduler) liveClaims() int {
	n := 0
	for _, c := range s.claims {
		if !c.dead && len(c.pods) > 0 {
			n++
		}
	}
	return n
}

// repack re-packs the movable pods; false when some pod found no place (the
// caller restores the greedy result). absorb grows existing claims whenever
// that holds more pods, before any new claim is opened.
func (s *scheduler) repack(absorb bool) bool {
	var loose []*podData
	var live []*node
	for _, n := range s.claims {
		if n.dead || len(n.pods) == 0 {
			continue
		}
		var pods []*podData
		var seqs []int
		removed := false
		for i, pd := range n.pods {
			if movable(pd) {
				loose = append(loose, pd)
				pd.pins, pd.seq = s.pinsOf(pd, n), n.seqs[i]
				s.record(pd, n, -1)
				n.used = n.used.sub(pd.req)
				removed = true
				continue
			}
			pods = append(pods, pd)
			seqs = append(seqs, n.seqs[i])
		}
		if !removed {
			live = append(live, n)
			continue
		}
		n.pods, n.seqs = pods, seqs
		if len(pods) == 0 {
			n.dead = true
			continue
		}
		s.shrink(n)
		live = append(live, n)
	}
	if len(loose) == 0 {
		return true
	}
	classes, ok := s.classify(loose)
	if !ok {
		return false
	}
	duals := s.duals(live, classes)
	budget := s.limitBudgets(live)
	sort.SliceStable(live, func(i, j int) bool { return live[i].used[rCPU] > live[j].used[rCPU] })
	for _, current := range []bool{true, false} {
		for _, n := range live {
			s.topUp(n, classes, duals[n.pool], budget, current, absorb)
		}
	}
	for _, c := range classes {
		for c.left > 0 {
			if !s.openBin(c, duals[c.pool], budget) {
				return false
			}
		}
	}
	return s.minValuesHold()
}

// pinsOf is the zone (or other non-hostname domain) of every group that
// counts the pod, which a move must keep.
func (s *scheduler) pinsOf(pd *podData, n *node) Requirements {
	var pins Requirements
	for _, g := range pd.selectedBy {
		if g.key == catalog.LabelHostname {
			continue
		}
		if d := n.domain(g.key); d != "" {
			if pins == nil {
				pins = Requirements{}
			}
			pins[g.key] = mustIn(g.key, d)
		}
	}
	return pins
}

// shrink recomputes a claim's types after pods left it: every pool type
// compatible with its requirements that holds what is left.
func (s *scheduler) shrink(n *node) {
	// n.types is a subsequence of the pool's types (every filter keeps their
	// order), so one walk finds which were options already.
	old, j := n.types, 0
	types := make([]*itype, 0, len(n.pool.types))
	for _, t := range n.pool.types {
		wasOption := j < len(old) && old[j] == t
		if wasOption {
			j++
		}
		if n.used.fits(t.alloc) && (wasOption || typeCompatible(t, n.reqs)) {
			types = append(types, t)
		}
	}
	n.types = types
	s.refreshMax(n)
	n.cur = s.cheapestIndex(n)
}

// classify groups loose pods into classes and picks each class's pool (the
// first by weight that takes its largest pod).
func (s *scheduler) classify(loose []*podData) ([]*looseClass, bool) {
	byKey := map[string]*looseClass{}
	var classes []*looseClass
	for _, pd := range loose {
		var anti, spread []*topologyGroup
		for _, g := range pd.selectedBy {
			if g.key == catalog.LabelHostname && g.kind == kindAnti {
				anti = append(anti, g)
			}
			if g.key == catalog.LabelHostname && g.kind == kindSpread {
				spread = append(spread, g)
			}
		}
		key := pd.reqKey + "|" + tolKey(pd.pod.Tolerations) + "|" + strconv.FormatBool(pd.tolerateNS) + "|" + describeReqs(pd.pins) + "|" + fmt.Sprint(anti, spread)
		c, ok := byKey[key]
		if !ok {
			reqs := pd.reqs.Clone()
			for _, r := range pd.pins {
				reqs.Add(r)
			}
			c = &looseClass{rep: pd, reqs: reqs, pins: pd.pins, antiHost: anti, spreadHost: spread}
			byKey[key] = c
			classes = append(classes, c)
		}
		c.left++
		var sg *sizeGroup
		for _, x := range c.sizes {
			if x.req == pd.req {
				sg = x
				break
			}
		}
		if sg == nil {
			sg = &sizeGroup{req: pd.req, cls: c}
			c.sizes = append(c.sizes, sg)
		}
		sg.pods = append(sg.pods, pd)
	}
	for _, c := range classes {
		var largest vec
		for _, sg := range c.sizes {
			for i := range largest {
				largest[i] = max(largest[i], sg.req[i])
			}
		}
		for _, p := range s.pools {
			if _, ok := tolerates(c.rep.pod.Tolerations, p.taints, !c.rep.tolerateNS); !ok {
				continue
			}
			if !p.reqs.compatible(c.reqs, s.wellKnown) {
				continue
			}
			nodeReqs := p.reqs.Clone()
			for _, r := range c.reqs {
				nodeReqs.Add(r)
			}
			var types []*itype
			fitsOne := false
			for _, t := range p.types {
				if typeCompatible(t, nodeReqs) {
					types = append(types, t)
					fitsOne = fitsOne || largest.fits(t.alloc)
				}
			}
			if fitsOne {
				c.pool, c.nodeReqs, c.types = p, nodeReqs, types
				break
			}
		}
		if c.pool == nil {
			return nil, false
		}
		// Pods of a size group are interchangeable; keep them in queue order.
		for _, sg := range c.sizes {
			slices.Reverse(sg.pods) // popped from the end
		}
	}
	return classes, true
}

// duals prices CPU and memory per pool from the LP over everything the pool
// holds, values every size group, and rates every type's efficiency.
func (s *scheduler) duals(live []*node, classes []*looseClass) map[*pool]*poolDuals {
	demand := map[*pool]vec{}
	for _, n := range live {
		demand[n.pool] = demand[n.pool].add(n.used)
	}
	for _, c := range classes {
		for _, sg := range c.sizes {
			for r := range sg.req {
				d := demand[c.pool]
				d[r] += int64(len(sg.pods)) * sg.req[r]
				demand[c.pool] = d
			}
		}
	}
	out := map[*pool]*poolDuals{}
	for p, d := range demand {
		pd := &poolDuals{eff: make(map[*itype]float64, len(p.types))}
		y1, y2, _ := lpDual(p.types, float64(max(d[rCPU], 1)), float64(max(d[rMem], 1)))
		if y1 == 0 && y2 == 0 {
			y1 = math.SmallestNonzeroFloat64
		}
		pd.y[rCPU], pd.y[rMem] = y1, y2
		for r := rExt; r < nres; r++ {
			if d[r] == 0 {
				continue
			}
			rate := math.MaxFloat64
			for _, t := range p.types {
				if t.alloc[r] > 0 {
					rate = min(rate, t.offerings[0].Price/float64(t.alloc[r]))
				}
			}
			if rate < math.MaxFloat64 {
				pd.y[r] = rate
			}
		}
		for _, t := range p.types {
			pd.eff[t] = pd.y.value(t.alloc) / t.offerings[0].Price
		}
		out[p] = pd
	}
	for _, c := range classes {
		y := out[c.pool].y
		for _, sg := range c.sizes {
			sg.val = y.value(sg.req)
		}
		sort.SliceStable(c.sizes, func(i, j int) bool { return c.sizes[i].val > c.sizes[j].val })
	}
	return out
}

// budget is what a limited pool may still launch, by the chosen types'
// capacity.
type budget struct {
	left  vec
	nodes int64
}

func (s *scheduler) limitBudgets(live []*node) map[*pool]*budget {
	out := map[*pool]*budget{}
	for _, p := range s.pools {
		if p.limited {
			out[p] = &budget{left: p.limit, nodes: p.nodeLimitMax}
		}
	}
	for _, n := range live {
		if b := out[n.pool]; b != nil {
			b.charge(n.pool, n.types[n.cur].capacity, 1)
		}
	}
	return out
}

func (b *budget) charge(p *pool, capacity vec, nodes int64) {
	for i := range capacity {
		if p.limitMask[i] == 1 {
			b.left[i] -= capacity[i]
		}
	}
	if p.hasNodeLimit {
		b.nodes -= nodes
	}
}

func (b *budget) allows(p *pool, capacity vec, nodes int64) bool {
	if b == nil {
		return true
	}
	for i := range capacity {
		if p.limitMask[i] == 1 && capacity[i] > b.left[i] {
			return false
		}
	}
	return !p.hasNodeLimit || nodes <= b.nodes
}

// band groups types by size (CPU doublings) and CPU:memory ratio, so the
// candidates for a claim span small to large and compute- to memory-heavy.
func band(t *itype) int {
	cpu := uint64(max(t.alloc[rCPU]/500, 1))
	ratio := uint64(max(t.alloc[rMem]/max(t.alloc[rCPU], 1)>>19, 1)) // ~MiB per milli-CPU ×2
	return bits.Len64(cpu)*16 + bits.Len64(ratio)
}

// candidates keeps, per band, the most efficient type that ok accepts.
func candidates(types []*itype, eff map[*itype]float64, ok func(*itype) bool) []*itype {
	// A few dozen bands at most: a slice searched linearly beats a map.
	type banded struct {
		band int
		t    *itype
		eff  float64
	}
	var bestArr [64]banded
	best := bestArr[:0]
	for _, t := range types {
		b := t.band
		i := slices.IndexFunc(best, func(x banded) bool { return x.band == b })
		if i >= 0 {
			if e := eff[t]; e > best[i].eff && ok(t) {
				best[i].t, best[i].eff = t, e
			}
			continue
		}
		if ok(t) {
			best = append(best, banded{band: b, t: t, eff: eff[t]})
		}
	}
	out := make([]*itype, len(best))
	for i, x := range best {
		out[i] = x.t
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// fill simulates packing the size groups into free room; take, when set,
// receives how many of each group fit. It is a balanced fill: it keeps
// taking from the group whose CPU:memory mix best matches the room left
// (in chunks of half what fits), so neither resource runs out while the
// other idles, then tops up with anything that still fits.
func fill(free vec, groups []*sizeGroup, take []int) float64 {
	var taken [64]int
	var tk []int
	if len(groups) <= len(taken) {
		tk = taken[:len(groups)]
	} else {
		tk = make([]int, len(groups))
	}
	capCPU, capMem := float64(max(free[rCPU], 1)), float64(max(free[rMem], 1))
	v := 0.0
	for {
		best, bestScore, bestFit := -1, -math.MaxFloat64, int64(0)
		fc, fm := float64(free[rCPU])/capCPU, float64(free[rMem])/capMem
		fn := math.Hypot(fc, fm)
		for i, sg := range groups {
			k := int64(len(sg.pods) - tk[i])
			if k <= 0 {
				continue
			}
			for r := range sg.req {
				if sg.req[r] > 0 {
					k = min(k, free[r]/sg.req[r])
				}
			}
			if k <= 0 {
				continue
			}
			rc, rm := float64(sg.req[rCPU])/capCPU, float64(sg.req[rMem])/capMem
			score := (rc*fc + rm*fm) / (math.Hypot(rc, rm)*fn + 1e-18)
			if score > bestScore+1e-12 {
				best, bestScore, bestFit = i, score, k
			}
		}
		if best < 0 {
			break
		}
		k := max(bestFit/2, 1)
		sg := groups[best]
		for r := range free {
			free[r] -= k * sg.req[r]
		}
		tk[best] += int(k)
		v += float64(k) * sg.val
	}
	if take != nil {
		copy(take, tk)
	}
	return v
}

// compatibleWith reports whether the class's pods may join the claim, and
// the zone pins the claim must take for them.
func (s *scheduler) compatibleWith(c *looseClass, n *node) (Requirements, bool) {
	if _, ok := tolerates(c.rep.pod.Tolerations, n.taints, !c.rep.tolerateNS); !ok {
		return nil, false
	}
	for _, g := range c.antiHost {
		if g.howner(n.id) > 0 {
			return nil, false
		}
	}
	if len(c.spreadHost) > 0 {
		for _, pd := range n.pods {
			for _, g := range pd.owned {
				if g.kind == kindSpread && slices.Contains(c.spreadHost, g) {
					return nil, false
				}
			}
		}
	}
	var narrow Requirements
	for k, r := range c.reqs {
		tr, ok := n.reqs[k]
		if !ok || tr.Operator() != corev1.NodeSelectorOpIn {
			if op := r.Operator(); ok || (op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist) {
				return nil, false
			}
			continue
		}
		all := true
		for _, v := range tr.values {
			if !r.Has(v) {
				all = false
				break
			}
		}
		if all {
			continue
		}
		// A pinned domain the claim allows but has not chosen: choose it.
		pin, isPin := c.pins[k]
		if !isPin || !tr.Has(pin.values[0]) || s.claimCountsOn(n, k) {
			return nil, false
		}
		if narrow == nil {
			narrow = Requirements{}
		}
		narrow[k] = pin
	}
	return narrow, true
}

// claimCountsOn reports whether some group keyed on key counts or is owned
// by a pod of the claim (then its domain is not free to choose).
func (s *scheduler) claimCountsOn(n *node, key string) bool {
	for _, pd := range n.pods {
		for _, g := range pd.selectedBy {
			if g.key == key {
				return true
			}
		}
		for _, g := range pd.owned {
			if g.key == key {
				return true
			}
		}
	}
	return false
}

// topUp fills a remaining claim with loose pods: the room its current type
// has (current), or on a bigger type when that holds more value per dollar.
func (s *scheduler) topUp(n *node, classes []*looseClass, d *poolDuals, budgets map[*pool]*budget, current, absorb bool) {
	if d == nil {
		return
	}
	opts := s.topUpOptions(n, classes)
	if len(opts) == 0 {
		return
	}
	b := budgets[n.pool]
	best := s.bestTopUp(n, opts, d, b, current, absorb)
	if best.t == nil {
		return
	}
	curCap := n.types[n.cur].capacity
	if b != nil {
		b.charge(n.pool, best.t.capacity.sub(curCap), 0)
	}
	if len(best.o.narrow) > 0 {
		keys := diffKeys(n.reqs, best.reqs)
		n.reqs = best.reqs
		kept := n.types[:0:0]
		for _, t := range n.types {
			if typeCompatibleKeys(t, n.reqs, keys) {
				kept = append(kept, t)
			}
		}
		n.types = kept
	}
	take := make([]int, len(best.o.groups))
	fill(best.t.alloc.sub(n.used), best.o.groups, take)
	s.place(n, best.o.groups, take)
}

// topUpOption is the loose pods that may join a claim under the same pins.
type topUpOption struct {
	narrow Requirements
	groups []*sizeGroup
}

// topUpOptions groups the classes that may join the claim by the pins they
// need.
func (s *scheduler) topUpOptions(n *node, classes []*looseClass) []*topUpOption {
	var opts []*topUpOption
	for _, c := range classes {
		if c.left == 0 {
			continue
		}
		narrow, ok := s.compatibleWith(c, n)
		if !ok {
			continue
		}
		key := describeReqs(narrow)
		var o *topUpOption
		for _, x := range opts {
			if describeReqs(x.narrow) == key {
				o = x
			}
		}
		if o == nil {
			o = &topUpOption{narrow: narrow}
			opts = append(opts, o)
		}
		o.groups = append(o.groups, c.sizes...)
	}
	return opts
}

// topUpChoice is the type and option a top-up settles on (t nil: none
// beats the claim as it is).
type topUpChoice struct {
	score float64
	t     *itype
	o     *topUpOption
	reqs  Requirements
}

// bestTopUp scores each option on the claim's current type (current) or on
// each candidate type: value per dollar, or with absorb the marginal value
// per marginal dollar.
func (s *scheduler) bestTopUp(n *node, opts []*topUpOption, d *poolDuals, b *budget, current, absorb bool) topUpChoice {
	preVal := d.y.value(n.used)
	curCap := n.types[n.cur].capacity
	var best topUpChoice
	curPrice := s.price(n)
	best.score = preVal / max(curPrice, 1e-12)
	if absorb {
		best.score = 0
	}
	for _, o := range opts {
		reqs := n.reqs
		if len(o.narrow) > 0 {
			reqs = n.reqs.Clone()
			for _, r := range o.narrow {
				reqs.Add(r)
			}
		}
		f := offerFilterOf(reqs)
		var cands []*itype
		if current {
			if _, ok := n.types[n.cur].cheapestF(&f); ok {
				cands = []*itype{n.types[n.cur]}
			}
		} else {
			cands = candidates(n.types, d.eff, func(t *itype) bool {
				_, ok := t.cheapestF(&f)
				return ok
			})
		}
		for _, t := range cands {
			off, _ := t.cheapestF(&f)
			if b != nil && !b.allows(n.pool, t.capacity.sub(curCap), 0) {
				continue
			}
			v := fill(t.alloc.sub(n.used), o.groups, nil)
			if v == 0 {
				continue
			}
			score := (preVal + v) / off.Price
			if absorb {
				score = v / max(off.Price-curPrice, 1e-12) // marginal value per dollar
			}
			if score > best.score*(1+1e-9) {
				best.score, best.t, best.o, best.reqs = score, t, o, reqs
			}
		}
	}
	return best
}

// place moves the counted pods of each size group onto the claim.
func (s *scheduler) place(n *node, groups []*sizeGroup, take []int) {
	for i, sg := range groups {
		for k := 0; k < take[i]; k++ {
			pd := sg.pods[len(sg.pods)-1]
			sg.pods = sg.pods[:len(sg.pods)-1]
			n.pods = append(n.pods, pd)
			n.seqs = append(n.seqs, pd.seq)
			n.used = n.used.add(pd.req)
			s.record(pd, n, 1)
			sg.cls.left--
		}
	}
	kept := n.types[:0:0]
	for _, t := range n.types {
		if n.used.fits(t.alloc) {
			kept = append(kept, t)
		}
	}
	n.types = kept
	s.refreshMax(n)
	n.cur = s.cheapestIndex(n)
}

// openBin opens a new claim for the class on the type whose fill has the
// most value per dollar.
func (s *scheduler) openBin(c *looseClass, d *poolDuals, budgets map[*pool]*budget) bool {
	p := c.pool
	b := budgets[p]
	f := offerFilterOf(c.nodeReqs)
	cands := candidates(c.types, d.eff, func(t *itype) bool {
		_, ok := t.cheapestF(&f)
		return ok && b.allows(p, t.capacity, 1)
	})
	var bestT *itype
	bestScore := 0.0
	for _, t := range cands {
		off, _ := t.cheapestF(&f)
		v := fill(t.alloc, c.sizes, nil)
		if v == 0 {
			continue
		}
		if score := v / off.Price; score > bestScore*(1+1e-9) {
			bestT, bestScore = t, score
		}
	}
	if bestT == nil {
		return false
	}
	p.seq++
	n := &node{id: s.nextID, name: p.name + "-" + strconv.Itoa(p.seq), pool: p, taints: p.taints, ports: map[inventory.HostPort]bool{}, bucket: -1, room: -1,
		reqs: c.nodeReqs.Clone(), types: slices.Clone(c.types)}
	s.nextID++
	take := make([]int, len(c.sizes))
	fill(bestT.alloc, c.sizes, take)
	s.place(n, c.sizes, take)
	if b != nil {
		b.charge(p, n.types[n.cur].capacity, 1)
	}
	s.claims = append(s.claims, n)
	return true
}
