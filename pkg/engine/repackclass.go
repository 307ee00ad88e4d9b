package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

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
	reqs       Requirements  // the pod's requirements and its zone pins
	reqList    []Requirement // reqs as a list, which compatibleWith walks for every claim
	pins       Requirements
	pinsKey    string           // describeReqs(pins)
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
	y      vec64
	eff    []float64  // by type index (itype.idx)
	byBand [][]*itype // for candidates
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

// reqList is the requirements as a list (in no particular order).
func reqList(reqs Requirements) []Requirement {
	out := make([]Requirement, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r)
	}
	return out
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
		pinsKey := describeReqs(pd.pins)
		key := pd.reqKey + "|" + tolKey(pd.pod.Tolerations) + "|" + strconv.FormatBool(pd.tolerateNS) + "|" + pinsKey + "|" + fmt.Sprint(anti, spread)
		c, ok := byKey[key]
		if !ok {
			reqs := pd.reqs.Clone()
			for _, r := range pd.pins {
				reqs.Add(r)
			}
			c = &looseClass{rep: pd, reqs: reqs, reqList: reqList(reqs), pins: pd.pins, pinsKey: pinsKey, antiHost: anti, spreadHost: spread}
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
		pd := &poolDuals{eff: make([]float64, len(p.types))}
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
			pd.eff[t.idx] = pd.y.value(t.alloc) / t.offerings[0].Price
		}
		pd.byBand = byBand(p.types, pd.eff)
		out[p] = pd
	}
	for _, c := range classes {
		y := out[c.pool].y
		for _, sg := range c.sizes {
			sg.val = y.value(sg.req)
		}
		slices.SortStableFunc(c.sizes, func(a, b *sizeGroup) int { return cmp.Compare(b.val, a.val) })
	}
	return out
}
