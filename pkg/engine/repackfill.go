package engine

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

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

// candidates keeps, per band, the most efficient type that ok accepts (the
// first in types on ties), sorted by name. types is a claim's or a class's
// list, a subsequence of the pool's: each band's types by efficiency
// (d.byBand) are looked at until one is in the list and accepted, so the
// list is read once, to mark its types, rather than scored type by type.
// The slice is the scheduler's scratch, valid until the next call.
func (s *scheduler) candidates(types []*itype, d *poolDuals, ok func(*itype) bool) []*itype {
	sc := &s.repackScratch
	if len(sc.mark) < len(d.eff) {
		sc.mark = make([]uint32, len(d.eff))
	}
	sc.stamp++
	if sc.stamp == 0 { // wrapped: old marks could match
		clear(sc.mark)
		sc.stamp = 1
	}
	prev := -1
	for _, t := range types {
		if t.idx <= prev {
			return s.candidatesWalk(types, d.eff, ok) // not in the pool's order
		}
		prev = t.idx
		sc.mark[t.idx] = sc.stamp
	}
	out := sc.cands[:0]
	for _, list := range d.byBand {
		for _, t := range list {
			if sc.mark[t.idx] == sc.stamp && ok(t) {
				out = append(out, t)
				break
			}
		}
	}
	sc.cands = out
	sortByName(out)
	return out
}

// candidatesWalk is candidates for any list: it scores the types one by one.
func (s *scheduler) candidatesWalk(types []*itype, eff []float64, ok func(*itype) bool) []*itype {
	// Bands are small integers: a table by band finds a type's entry
	// without searching the few dozen kept so far.
	sc := &s.repackScratch
	if sc.bandSlot == nil {
		sc.bandSlot = make([]int32, maxBand+1)
	}
	best := sc.best[:0]
	for _, t := range types {
		i := sc.bandSlot[t.band] - 1
		if i >= 0 {
			if e := eff[t.idx]; e > best[i].eff && ok(t) {
				best[i].t, best[i].eff = t, e
			}
			continue
		}
		if ok(t) {
			best = append(best, bandBest{band: t.band, t: t, eff: eff[t.idx]})
			sc.bandSlot[t.band] = int32(len(best))
		}
	}
	out := sc.cands[:0]
	for _, x := range best {
		out = append(out, x.t)
		sc.bandSlot[x.band] = 0
	}
	sc.best, sc.cands = best, out
	sortByName(out)
	return out
}

func sortByName(types []*itype) {
	slices.SortFunc(types, func(a, b *itype) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return a.idx - b.idx
	})
}

// byBand is the pool's types grouped by band, each group by efficiency
// (most first; pool order on ties), for candidates.
func byBand(types []*itype, eff []float64) [][]*itype {
	slot := map[int]int{}
	var out [][]*itype
	for _, t := range types {
		i, ok := slot[t.band]
		if !ok {
			i = len(out)
			slot[t.band] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], t)
	}
	for _, list := range out {
		slices.SortStableFunc(list, func(a, b *itype) int { return cmp.Compare(eff[b.idx], eff[a.idx]) })
	}
	return out
}

// maxBand bounds band: bits.Len64 is at most 64.
const maxBand = 64*16 + 64

// bandBest is the most efficient type of a band found so far.
type bandBest struct {
	band int
	t    *itype
	eff  float64
}

// repackScratch is buffers the re-pack reuses from one claim to the next.
type repackScratch struct {
	bandSlot []int32  // by band: 1 + index in best, 0 for none
	mark     []uint32 // by type index: stamp when in candidates' list
	stamp    uint32
	best     []bandBest
	cands    []*itype
	take     []int
	types    []*itype
	shares   []share // fill's, by group
	active   []int32 // fill's groups still in play
}

// fill simulates packing the size groups into free room; take (as long as
// groups, zeroed by fill) receives how many of each group fit. It is a
// balanced fill: it keeps taking from the group whose CPU:memory mix best
// matches the room left (in chunks of half what fits), so neither resource
// runs out while the other idles, then tops up with anything that still
// fits.
func (s *scheduler) fill(free vec, groups []*sizeGroup, take []int) float64 {
	tk := take[:len(groups)]
	clear(tk)
	capCPU, capMem := float64(max(free[rCPU], 1)), float64(max(free[rMem], 1))
	dims := s.dims()
	// The groups in play, in order: the room only shrinks and taken pods
	// stay taken, so a group that has none left or no longer fits is out
	// for good (dropping it changes no round's choice). Each one's share of
	// the room and its norm are computed once per call rather than once per
	// round (the same values, so the same scores).
	sc := &s.repackScratch
	sc.shares = slices.Grow(sc.shares[:0], len(groups))[:len(groups)]
	act := sc.active[:0]
	for i, sg := range groups {
		if len(sg.pods) == 0 || !holdsOne(&free, &sg.req, dims) {
			continue
		}
		act = append(act, int32(i))
		rc, rm := float64(sg.req[rCPU])/capCPU, float64(sg.req[rMem])/capMem
		sc.shares[i] = share{rc: rc, rm: rm, norm: math.Sqrt(rc*rc + rm*rm)}
	}
	sc.active = act
	v := 0.0
	for {
		best, bestScore, bestFit := -1, -math.MaxFloat64, int64(0)
		fc, fm := float64(free[rCPU])/capCPU, float64(free[rMem])/capMem
		fn := math.Sqrt(fc*fc + fm*fm)
		w := 0
		for _, i := range act {
			sg := groups[i]
			left := int64(len(sg.pods) - tk[i])
			if left <= 0 || !holdsOne(&free, &sg.req, dims) {
				continue
			}
			act[w] = i
			w++
			// The score first: how many fit (divisions) matters only for a
			// group that would win.
			sh := &sc.shares[i]
			score := (sh.rc*fc + sh.rm*fm) / (sh.norm*fn + 1e-18)
			if score <= bestScore+1e-12 {
				continue
			}
			k := left
			for r := range sg.req[:dims] {
				if sg.req[r] > 0 {
					k = min(k, free[r]/sg.req[r])
				}
			}
			best, bestScore, bestFit = int(i), score, k
		}
		act = act[:w]
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
	return v
}

// holdsOne reports whether free/req ≥ 1 in every slot the request uses
// (fill's "at least one fits").
func holdsOne(free, req *vec, dims int) bool {
	for r := range req[:dims] {
		if req[r] > 0 && free[r] < req[r] {
			return false
		}
	}
	return true
}

// share is a size group's request as fractions of the room fill started
// with, and their norm.
type share struct{ rc, rm, norm float64 }

// takeBuf is the scheduler's scratch for fill's counts, n long.
func (s *scheduler) takeBuf(n int) []int {
	if cap(s.repackScratch.take) < n {
		s.repackScratch.take = make([]int, n)
	}
	return s.repackScratch.take[:n]
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
	// The pin keys the claim must take; usually all of the class's pins,
	// which are then shared rather than copied (nobody writes to them).
	var keyBuf [4]string
	narrowKeys := keyBuf[:0]
	for _, r := range c.reqList {
		k := r.Key
		tr, ok := n.reqs[k]
		if !ok || tr.Operator() != corev1.NodeSelectorOpIn {
			if _, isPin := c.pins[k]; isPin && !ok && !s.claimCountsOn(n, k) {
				// A claim with no requirement on the key at all (a
				// hostname-only claim, say): choose the pin too.
				narrowKeys = append(narrowKeys, k)
				continue
			}
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
		narrowKeys = append(narrowKeys, k)
	}
	switch len(narrowKeys) {
	case 0:
		return nil, true
	case len(c.pins):
		return c.pins, true
	}
	narrow := make(Requirements, len(narrowKeys))
	for _, k := range narrowKeys {
		narrow[k] = c.pins[k]
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
func (s *scheduler) topUp(n *node, classes []*looseClass, d *poolDuals, budgets map[*pool]*budget, current, absorb bool, bufs *[][]*sizeGroup) {
	if d == nil {
		return
	}
	opts := s.topUpOptions(n, classes, make([]*topUpOption, 0, 4), bufs)
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
		reqs := n.reqs.Clone()
		for _, r := range best.o.narrow {
			reqs.Add(r)
		}
		keys := diffKeys(n.reqs, reqs)
		n.reqs = reqs
		f := offerFilterOf(n.reqs)
		compat := s.keysCompat(n.pool, n.reqs, keys, &f)
		// A new array (a snapshot may hold the old one), allocated once.
		k := 0
		for _, t := range n.types {
			if compat[t.idx] {
				k++
			}
		}
		kept := make([]*itype, 0, k)
		for _, t := range n.types {
			if compat[t.idx] {
				kept = append(kept, t)
			}
		}
		n.types = kept
		s.refreshMax(n)
		n.cur = s.cheapestIndex(n)
	}
	take := s.takeBuf(len(best.o.groups))
	s.fill(best.t.alloc.sub(n.used), best.o.groups, take)
	s.place(n, best.o.groups, take)
}

// topUpOption is the loose pods that may join a claim under the same pins.
type topUpOption struct {
	narrow Requirements
	key    string // describeReqs(narrow), "" when empty
	groups []*sizeGroup
}

// topUpOptions groups the classes that may join the claim by the pins they
// need, appended to opts (the caller's buffer, which stays on its stack).
func (s *scheduler) topUpOptions(n *node, classes []*looseClass, opts []*topUpOption, bufs *[][]*sizeGroup) []*topUpOption {
	for _, c := range classes {
		if c.left == 0 {
			continue
		}
		narrow, ok := s.compatibleWith(c, n)
		if !ok {
			continue
		}
		key := ""
		if len(narrow) > 0 {
			if sameMap(narrow, c.pins) {
				key = c.pinsKey
			} else {
				key = describeReqs(narrow)
			}
		}
		var o *topUpOption
		for _, x := range opts {
			if x.key == key {
				o = x
			}
		}
		if o == nil {
			// The group lists of earlier calls are reused: a top-up is done
			// with its options before the next claim's.
			var groups []*sizeGroup
			if i := len(opts); i < len(*bufs) {
				groups = (*bufs)[i][:0]
			}
			o = &topUpOption{narrow: narrow, key: key, groups: groups}
			opts = append(opts, o)
		}
		o.groups = append(o.groups, c.sizes...)
	}
	for i, o := range opts {
		if i < len(*bufs) {
			(*bufs)[i] = o.groups
		} else {
			*bufs = append(*bufs, o.groups)
		}
	}
	return opts
}

// topUpChoice is the type and option a top-up settles on (t nil: none
// beats the claim as it is).
type topUpChoice struct {
	score float64
	t     *itype
	o     *topUpOption
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
		// What the option's pods are worth bounds every fill's value: a
		// type whose score could not beat the best even with all of them
		// is not filled, and when even the claim's current price (no
		// candidate is cheaper) could not, no candidate is looked for.
		rem := 0.0
		for _, sg := range o.groups {
			rem += float64(len(sg.pods)) * sg.val
		}
		if !noTopUpBound && !current && !absorb && curPrice > 0 && cannotBeat(topUpScore(preVal, rem, curPrice, curPrice, false), best.score) {
			continue
		}
		f := offerFilterOf(n.reqs)
		if len(o.narrow) > 0 {
			f.narrow(o.narrow) // the claim's requirements are copied only for the winner
		}
		var cands []*itype
		if current {
			if _, ok := n.types[n.cur].cheapestF(&f); ok {
				cands = []*itype{n.types[n.cur]}
			}
		} else {
			offered := s.offeredUnder(n.pool, &f)
			cands = s.candidates(n.types, d, func(t *itype) bool { return offered[t.idx] })
		}
		for _, t := range cands {
			off, _ := t.cheapestF(&f)
			if b != nil && !b.allows(n.pool, t.capacity.sub(curCap), 0) {
				continue
			}
			if !noTopUpBound && cannotBeat(topUpScore(preVal, rem, off.Price, curPrice, absorb), best.score) {
				continue
			}
			v := s.fill(t.alloc.sub(n.used), o.groups, s.takeBuf(len(o.groups)))
			if v == 0 {
				continue
			}
			if score := topUpScore(preVal, v, off.Price, curPrice, absorb); score > best.score*(1+1e-9) {
				best.score, best.t, best.o = score, t, o
			}
		}
	}
	return best
}

// narrow makes f the filter of its requirements with narrow added
// (Requirements.Add), without building those requirements.
func (f *offerFilter) narrow(narrow Requirements) {
	if r, ok := narrow[catalog.LabelZone]; ok {
		if f.hasZ {
			f.zr = f.zr.Intersect(r)
		} else {
			f.zr, f.hasZ = r, true
		}
	}
	if r, ok := narrow[catalog.LabelCapacityType]; ok {
		if f.hasC {
			f.cr = f.cr.Intersect(r)
		} else {
			f.cr, f.hasC = r, true
		}
	}
}

// topUpScore is a top-up's value per dollar (preVal the claim's value, v
// what the fill adds, on a type offered at price), or with absorb the
// marginal value per marginal dollar.
func topUpScore(preVal, v, price, curPrice float64, absorb bool) float64 {
	if absorb {
		return v / max(price-curPrice, 1e-12)
	}
	return (preVal + v) / price
}

// cannotBeat reports whether a score bound leaves no score that beats best
// (by bestTopUp's margin); the bound's own margin covers the rounding of
// fill's sum.
func cannotBeat(bound, best float64) bool { return bound*(1+1e-12) <= best*(1+1e-9) }

// noTopUpBound is set only by tests, which compare bestTopUp's choices with
// every candidate filled.
var noTopUpBound = false

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
	s.refit(n)
}

// refit keeps the claim's types that still hold its pods after some joined
// it, and its cheapest.
func (s *scheduler) refit(n *node) {
	if n.used.fits(n.minAlloc) {
		// Every type still holds the claim.
		if !n.used.fits(n.types[n.cur].alloc) {
			n.cur = s.cheapestIndex(n)
		}
		return
	}
	n.types = s.fitting(n.types, n.used, nil, n, true)
	n.cur = s.cheapestIndex(n)
}

// fitting is the types that keep accepts (when set; it sees every type, in
// order) and that hold used, and sets n's maxAlloc and minAlloc over them in
// the same walk. It never writes to types, which the snapshot (restore) may
// still hold: when every type stays and the claim owns types it returns
// types itself, else a new slice.
func (s *scheduler) fitting(types []*itype, used vec, keep func(*itype) bool, n *node, own bool) []*itype {
	dims := s.dims()
	b := newAllocBounds(dims)
	kept := types
	dropped := false
	for i, t := range types {
		if (keep != nil && !keep(t)) || !used.fitsIn(&t.alloc, dims) {
			if !dropped {
				dropped = true
				kept = append(s.repackScratch.types[:0], types[:i]...)
			}
			continue
		}
		if dropped {
			kept = append(kept, t)
		}
		if dims <= rExt {
			b.addCPUMem(&t.alloc)
			b.addPodsEph(&t.alloc)
		} else {
			b.add(&t.alloc)
		}
	}
	n.maxAlloc, n.minAlloc = b.result()
	if !dropped {
		if !own {
			return slices.Clone(types)
		}
		return types
	}
	s.repackScratch.types = kept[:0]
	return slices.Clone(kept)
}

// openBin opens a new claim for the class on the type whose fill has the
// most value per dollar.
func (s *scheduler) openBin(c *looseClass, d *poolDuals, budgets map[*pool]*budget) bool {
	p := c.pool
	b := budgets[p]
	f := offerFilterOf(c.nodeReqs)
	offered := s.offeredUnder(p, &f)
	cands := s.candidates(c.types, d, func(t *itype) bool {
		return offered[t.idx] && b.allows(p, t.capacity, 1)
	})
	var bestT *itype
	bestScore := 0.0
	for _, t := range cands {
		off, _ := t.cheapestF(&f)
		v := s.fill(t.alloc, c.sizes, s.takeBuf(len(c.sizes)))
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
	u := s.use(p)
	u.seq++
	n := &node{id: s.nextID, name: p.name + "-" + strconv.Itoa(u.seq), pool: p, taints: p.taints, ports: map[inventory.HostPort]bool{}, bucket: -1, room: -1,
		reqs: c.nodeReqs.Clone(), types: slices.Clone(c.types)}
	s.nextID++
	take := s.takeBuf(len(c.sizes))
	s.fill(bestT.alloc, c.sizes, take)
	s.place(n, c.sizes, take)
	if b != nil {
		b.charge(p, n.types[n.cur].capacity, 1)
	}
	s.claims = append(s.claims, n)
	return true
}
