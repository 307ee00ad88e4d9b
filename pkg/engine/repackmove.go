package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// The tightening pass, after the re-pack. A claim rounds up to a whole
// type; what it carries above the next cheaper type is often a pod or two
// that fit in room other claims already pay for. Each claim in turn (one
// sweep) looks for the cheapest type it could drop to by handing some of
// its pods to other claims' current types, and does it when every such pod
// finds room: the fleet only gets cheaper, and no other claim changes type.
//
// A pod may move when the re-pack could move it, and also when it declares
// a zone spread (or any spread keyed on a domain its claim has chosen): it
// moves only to claims in the same domains (its pins), so every count
// stays the same. It keeps its place in the order (Seq), and it does not
// land where a pod's required hostname anti-affinity or hostname spread
// would see it (compatibleWith, as in the re-pack), nor on a claim whose
// requirements it would narrow.

// pricedType is a type and its price under a claim's requirements.
type pricedType struct {
	t     *itype
	price float64
}

type tightener struct {
	s       *scheduler
	live    []*node
	buf     []pricedType           // cheaperTypes' result, reused
	classes map[string]*looseClass // compatibility of a pod with claims
	byPod   map[*podData]*looseClass
	pins    map[string]map[string]Requirements // pinsOf's cache
	planned map[*node]vec                      // room a plan has taken
	parts   map[string]*buckets
	zones   []string    // keys of parts, sorted
	pos     []bucketPos // by node id; part nil when not indexed
	misses  map[missKey]bool
}

// tighten runs the pass over the live claims (not those of pools with
// minValues, whose types a move could narrow below it).
func (s *scheduler) tighten() {
	t := tightener{s: s, classes: map[string]*looseClass{}, byPod: map[*podData]*looseClass{},
		pins: map[string]map[string]Requirements{}, planned: map[*node]vec{}, parts: map[string]*buckets{}, misses: map[missKey]bool{}}
	for _, n := range s.claims {
		if !n.dead && len(n.pods) > 0 && !n.existing && len(n.pool.minValues) == 0 {
			t.live = append(t.live, n)
		}
	}
	if len(t.live) < 2 {
		return
	}
	t.pos = make([]bucketPos, s.nextID)
	for _, n := range t.live {
		t.index(n)
	}
	for _, a := range t.live {
		if !a.dead {
			t.donate(a)
		}
	}
}

// maxTries bounds the cheaper types a claim tries (cheapest first). Three
// left the Karpenter mix at 1.094 of the bound at 5,000 pods, eight reach
// 1.085 (1.091 at 20,000) for about the same time; 32 gain nothing more at
// 5,000 and cost twice the time.
const maxTries = 8

// donate drops claim a to the cheapest type it can, trying at most
// maxTries types (and, when every pod may move, none at all).
func (t *tightener) donate(a *node) {
	var mv []int
	var total vec
	for i, pd := range a.pods {
		if movable(pd, a, true) {
			mv = append(mv, i)
			total = total.add(pd.req)
		}
	}
	if len(mv) == 0 {
		return
	}
	if len(mv) == len(a.pods) {
		if t.plan(a, mv, a.used) {
			return
		}
	}
	tries := 0
	for _, c := range t.cheaperTypes(a, t.s.price(a)) {
		if tries == maxTries {
			return
		}
		var need vec
		for r := range need {
			need[r] = max(a.used[r]-c.t.alloc[r], 0)
		}
		if !need.fits(total) || !typeCompatible(c.t, a.reqs) {
			continue
		}
		tries++
		if t.plan(a, mv, need) {
			return
		}
	}
}

// maxPicks bounds the pods one plan moves: more rarely all find room, and
// picking them from a large claim's hundreds of pods is what costs.
const maxPicks = 16

// plan picks, among a's movable pods (indices mv), pods that together
// request at least need, and a claim with room for each; when every pod
// finds one it moves them and shrinks a.
func (t *tightener) plan(a *node, mv []int, need vec) bool {
	chosen := make([]bool, len(mv))
	var picks []int
	dims := t.s.dims() // no pod requests a slot past them: need is 0 there
	for {
		left := false
		for r := range need[:dims] {
			if need[r] > 0 {
				left = true
			}
		}
		if !left {
			break
		}
		// The pod covering most of what is left (by share of each resource
		// still needed); the smaller pod on ties.
		best, bestScore := -1, 0.0
		for j, i := range mv {
			if chosen[j] {
				continue
			}
			req, score := a.pods[i].req, 0.0
			for r := range need[:dims] {
				if need[r] > 0 {
					score += float64(min(req[r], need[r])) / float64(need[r])
				}
			}
			score -= 1e-6 * (float64(req[rCPU])/1000 + float64(req[rMem])/float64(1<<30))
			if score > bestScore {
				best, bestScore = j, score
			}
		}
		if best < 0 || len(picks) == maxPicks {
			return false
		}
		chosen[best] = true
		picks = append(picks, mv[best])
		for r := range need {
			need[r] -= a.pods[mv[best]].req[r]
		}
	}
	clear(t.planned)
	dest := make([]*node, len(picks))
	for k, i := range picks {
		b := t.receiver(a, a.pods[i])
		if b == nil {
			return false
		}
		dest[k] = b
		t.planned[b] = t.planned[b].add(a.pods[i].req)
	}
	t.move(a, picks, dest)
	return true
}

// receiver is the claim other than a, of its pool (same taints, and the
// same nodes for a spread's node policies), whose current type has room for
// pd and that pd may join without narrowing it: in the first bucket of free
// CPU that has one, the one left with the least room (best fit). A pod
// pinned to a zone looks only at claims in that zone.
func (t *tightener) receiver(a *node, pd *podData) *node {
	c := t.classOf(pd, a)
	miss := missKey{c, pd.req}
	if t.misses[miss] {
		return nil
	}
	parts := t.zones
	if r, ok := c.pins[catalog.LabelZone]; ok {
		parts = []string{r.values[0]}
	}
	for k := bucketOf(pd.req[rCPU]); k < nBuckets; k++ {
		var best *node
		bestLeft := math.MaxFloat64
		for _, z := range parts {
			part := t.parts[z]
			if part == nil {
				continue
			}
			for _, b := range part[k] {
				if b == a || b.pool != a.pool {
					continue
				}
				alloc := b.types[b.cur].alloc
				free := alloc.sub(b.used).sub(t.planned[b])
				if !pd.req.fits(free) {
					continue
				}
				left := float64(free[rCPU]-pd.req[rCPU])/float64(max(alloc[rCPU], 1)) + float64(free[rMem]-pd.req[rMem])/float64(max(alloc[rMem], 1))
				if left >= bestLeft {
					continue
				}
				if narrow, ok := t.s.compatibleWith(c, b); !ok || len(narrow) > 0 {
					continue
				}
				best, bestLeft = b, left
			}
		}
		if best != nil {
			return best
		}
	}
	t.misses[miss] = true
	return nil
}

// The claims by zone ("" when not chosen) and free CPU on their current
// type, in steps of 50 milli-CPU (the last bucket holds everything above),
// so a pod's search starts where the room is just enough and looks at
// most claims never.
const (
	bucketStep = 50
	nBuckets   = 128
)

type buckets [nBuckets][]*node

func bucketOf(cpu int64) int { return int(min(max(cpu, 0)/bucketStep, nBuckets-1)) }

// index puts n in the bucket of its zone and free CPU (out of its old one).
func (t *tightener) index(n *node) {
	if p := t.pos[n.id]; p.part != nil {
		b := p.part[p.bucket]
		last := b[len(b)-1]
		b[p.i] = last
		t.pos[last.id] = p
		p.part[p.bucket] = b[:len(b)-1]
		t.pos[n.id] = bucketPos{}
	}
	if n.dead {
		return
	}
	z := n.domain(catalog.LabelZone)
	part := t.parts[z]
	if part == nil {
		part = &buckets{}
		t.parts[z] = part
		t.zones = append(t.zones, z)
		sort.Strings(t.zones)
	}
	k := bucketOf(n.types[n.cur].alloc[rCPU] - n.used[rCPU])
	t.pos[n.id] = bucketPos{part, k, len(part[k])}
	part[k] = append(part[k], n)
}

type bucketPos struct {
	part      *buckets
	bucket, i int
}

// missKey is a class and a request that found no receiver: room only
// shrinks as the sweep goes on (bar a claim that drops to a smaller type),
// so it would find none again.
type missKey struct {
	c   *looseClass
	req vec
}

// classOf is the pod's requirements, pins and the hostname groups that
// count it, as compatibleWith reads them; shared by pods alike.
func (t *tightener) classOf(pd *podData, a *node) *looseClass {
	if c, ok := t.byPod[pd]; ok {
		return c // a move keeps the pins
	}
	pins := t.s.pinsOf(pd, a, t.pins)
	anti, spread := hostnameCounters(pd)
	pinsKey := describeReqs(pins)
	key := pd.reqKey + "|" + tolKey(pd.pod.Tolerations) + "|" + strconv.FormatBool(pd.tolerateNS) + "|" + pinsKey + "|" + fmt.Sprint(anti, spread)
	if c, ok := t.classes[key]; ok {
		t.byPod[pd] = c
		return c
	}
	reqs := pd.reqs.Clone()
	for _, r := range pins {
		reqs.Add(r)
	}
	c := &looseClass{rep: pd, reqs: reqs, reqList: reqList(reqs), pins: pins, pinsKey: pinsKey, antiHost: anti, spreadHost: spread}
	t.classes[key], t.byPod[pd] = c, c
	return c
}

// hostnameCounters are the hostname anti-affinity and spread groups that
// count the pod.
func hostnameCounters(pd *podData) (anti, spread []*topologyGroup) {
	for _, g := range pd.selectedBy {
		if g.key == catalog.LabelHostname && g.kind == kindAnti {
			anti = append(anti, g)
		}
		if g.key == catalog.LabelHostname && g.kind == kindSpread {
			spread = append(spread, g)
		}
	}
	return anti, spread
}

// move takes a's pods at picks to dest and shrinks a (or drops it).
func (t *tightener) move(a *node, picks []int, dest []*node) {
	s := t.s
	gone := make(map[int]bool, len(picks))
	for k, i := range picks {
		pd, b := a.pods[i], dest[k]
		gone[i] = true
		s.record(pd, a, -1)
		a.used = a.used.sub(pd.req)
		b.pods = append(b.pods, pd)
		b.seqs = append(b.seqs, a.seqs[i])
		b.used = b.used.add(pd.req)
		s.record(pd, b, 1)
		s.refit(b)
		t.index(b)
	}
	pods, seqs := make([]*podData, 0, len(a.pods)-len(picks)), make([]int, 0, len(a.pods)-len(picks))
	for i, pd := range a.pods {
		if !gone[i] {
			pods, seqs = append(pods, pd), append(seqs, a.seqs[i])
		}
	}
	a.pods, a.seqs = pods, seqs
	if len(pods) == 0 {
		a.dead = true
	} else {
		s.shrink(a)
	}
	t.index(a)
}

// cheaperTypes is every type of a's pool offered under its requirements
// for less than price, cheapest first (compatibility with the rest of its
// requirements is left to the caller, which tries only a few). The pool's
// types are sorted by their cheapest offering, which no filter lowers, so
// only a prefix can qualify.
func (t *tightener) cheaperTypes(a *node, price float64) []pricedType {
	f := offerFilterOf(a.reqs)
	out := t.buf[:0]
	for _, it := range a.pool.types {
		if it.offerings[0].Price >= price-1e-9 {
			break
		}
		if o, ok := it.cheapestF(&f); ok && o.Price < price-1e-9 {
			out = append(out, pricedType{it, o.Price})
		}
	}
	slices.SortStableFunc(out, func(a, b pricedType) int { return cmp.Compare(a.price, b.price) })
	t.buf = out
	return out
}
