package engine

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// lowerBound prices the pods that went to new NodeClaims at the LP
// relaxation over CPU and memory of the instance types they may use, plus
// single-resource bounds for the other resources, summed over groups of
// pods that can share no type. See the package doc.
//
// The second value is the topology-aware bound: pods that a required
// hostname anti-affinity keeps one per node (a term the pod owns and is
// selected by) force as many nodes as the largest such group has pods in a
// component, and each of those nodes is a type that holds one of them; the
// LP then also has the row Σ x_t ≥ k over those types (boundWithNodes).
//
// It reads only the pods' requests, requirements, tolerations and terms
// and the pools' types, which nothing changes after the queue, so it may
// run beside improve and finalize.
func (s *scheduler) lowerBound(onClaims []*podData) (float64, float64) {
	total, topo := 0.0, 0.0
	for _, c := range lbComponents(s.lbClasses(onClaims)) {
		b, t := componentBound(c)
		total += b
		topo += t
	}
	return total, topo
}

// podsOnClaims is the pods, in queue order, that the queue put on new
// claims. The re-pack moves pods only from claim to claim, so it is also
// the set after improve.
func (s *scheduler) podsOnClaims(all []*podData) []*podData {
	on := map[*podData]bool{}
	for _, n := range s.claims {
		if n.dead {
			continue
		}
		for _, pd := range n.pods {
			on[pd] = true
		}
	}
	var out []*podData
	for _, pd := range all {
		if on[pd] {
			out = append(out, pd)
		}
	}
	return out
}

// lbClasses classes the pods by the types they may use.
func (s *scheduler) lbClasses(pods []*podData) []*lbClass {
	var classes []*lbClass
	byKey := map[string]*lbClass{}
	for _, pd := range pods {
		key := pd.reqKey + "|" + tolKey(pd.pod.Tolerations) + "|" + extKey(pd.req)
		c, ok := byKey[key]
		if !ok {
			c = &lbClass{rep: pd, types: map[*itype]bool{}, minReq: pd.req}
			byKey[key] = c
			classes = append(classes, c)
		}
		c.demand = c.demand.add(pd.req)
		for i := range c.minReq {
			c.minReq[i] = min(c.minReq[i], pd.req[i])
		}
		if g := onePerNode(pd); g != nil {
			c.addAlone(g, 1, pd.req)
		}
	}
	// The types a class may use: compatible with its requirements and taints
	// and big enough for its smallest pod (every pod is at least that).
	for _, c := range classes {
		pd := c.rep
		for _, p := range s.pools {
			if _, ok := tolerates(pd.pod.Tolerations, p.taints, true); !ok {
				continue
			}
			if !p.reqs.compatible(pd.reqs, s.wellKnown) {
				continue
			}
			for _, t := range p.types {
				if c.minReq.fits(t.alloc) && t.reqs.intersect(pd.reqs) {
					c.types[t] = true
				}
			}
		}
	}
	return classes
}

// lbComponents unions the classes that share a type name: no placement
// can trade capacity between components.
func lbComponents(classes []*lbClass) map[int]*lbClass {
	parent := make([]int, len(classes))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[string]int{}
	for i, c := range classes {
		for t := range c.types {
			if j, ok := owner[t.name]; ok {
				parent[find(i)] = find(j)
			} else {
				owner[t.name] = i
			}
		}
	}
	comps := map[int]*lbClass{}
	for i, c := range classes {
		r := find(i)
		cc, ok := comps[r]
		if !ok {
			cc = &lbClass{types: map[*itype]bool{}}
			comps[r] = cc
		}
		cc.demand = cc.demand.add(c.demand)
		for t := range c.types {
			cc.types[t] = true
		}
		for g, k := range c.alone {
			cc.addAlone(g, k, c.aloneMin)
		}
	}
	return comps
}

// componentBound is the component's LP bound, and the larger of it and the
// bound with the nodes its one-per-node pods force.
func componentBound(c *lbClass) (float64, float64) {
	// One type per LP row: NodePools sharing the catalogue repeat each
	// type (hundreds of times with hundreds of pools), which changes
	// nothing in the bound but its cost.
	type row struct {
		alloc vec
		price float64
	}
	var ts []*itype
	rows := map[row]bool{}
	for t := range c.types {
		r := row{t.alloc, t.offerings[0].Price}
		if !rows[r] {
			rows[r] = true
			ts = append(ts, t)
		}
	}
	b := bound(ts, c.demand)
	k := 0
	for _, n := range c.alone {
		k = max(k, n)
	}
	return b, max(b, boundWithNodes(ts, c.demand, k, c.aloneMin))
}

// lbClass is a class of pods (or a component of classes) in lowerBound.
type lbClass struct {
	rep    *podData
	types  map[*itype]bool
	demand vec
	minReq vec
	alone  map[*topologyGroup]int // pods kept one per node, per group
	// aloneMin is the component-wise minimum request of those pods.
	aloneMin vec
}

// addAlone counts k pods that g keeps one per node, the smallest asking minReq.
func (c *lbClass) addAlone(g *topologyGroup, k int, minReq vec) {
	if c.alone == nil {
		c.alone, c.aloneMin = map[*topologyGroup]int{}, minReq
	}
	c.alone[g] += k
	for i := range c.aloneMin {
		c.aloneMin[i] = min(c.aloneMin[i], minReq[i])
	}
}

// onePerNode is the required hostname anti-affinity term that keeps the
// pod apart from every other pod declaring it (the pod owns the term and
// matches its selector), or nil.
func onePerNode(pd *podData) *topologyGroup {
	for _, g := range pd.owned {
		if g.kind == kindAnti && g.key == catalog.LabelHostname && !slices.Contains(pd.softAnti, g) && pd.isSelectedBy(g) {
			return g
		}
	}
	return nil
}

// boundWithNodes is the LP relaxation of bound with one more row: at least
// k nodes (x_t summed over the types that hold minReq) — the nodes that
// topology forces, each holding a pod at least minReq. Its dual is
// max y1·C + y2·M + z·k subject to y1 a_t + y2 b_t + z e_t ≤ p_t; for a fixed
// z it is lpDual on prices lowered by z where e_t = 1, and the optimum is
// concave in z, so a ternary search over z finds it. 0 without such nodes.
func boundWithNodes(ts []*itype, d vec, k int, minReq vec) float64 {
	if k == 0 || d[rCPU] <= 0 || d[rMem] <= 0 {
		return 0
	}
	zMax := math.MaxFloat64
	for _, t := range ts {
		if minReq.fits(t.alloc) {
			zMax = min(zMax, t.offerings[0].Price)
		}
	}
	if zMax == math.MaxFloat64 {
		return 0
	}
	// Prices in flat slices: the search solves about 50 LPs. Every z in
	// [0, zMax] gives a feasible dual (prices stay ≥ 0), so a coarser search
	// can only give a lower bound, never an invalid one; 24 and 32
	// iterations leave it within a cent at 5,000 pods, at a third of the
	// cost of 40 and 60.
	prices, lowered := make([]float64, len(ts)), make([]float64, len(ts))
	holds := make([]bool, len(ts))
	for i, t := range ts {
		prices[i] = t.offerings[0].Price
		holds[i] = minReq.fits(t.alloc)
	}
	at := func(z float64) float64 {
		for i := range ts {
			lowered[i] = prices[i]
			if holds[i] {
				lowered[i] -= z
			}
		}
		_, _, v := lpDualPriced(ts, lowered, float64(d[rCPU]), float64(d[rMem]), 32)
		return v + z*float64(k)
	}
	// The search stops short of an end point; the optimum is often zMax
	// itself (every forced node the cheapest type that holds one).
	return max(at(argmax(at, 0, zMax, 24)), at(zMax))
}

// argmax is where the concave f peaks in [lo, hi], by ternary search.
func argmax(f func(float64) float64, lo, hi float64, iterations int) float64 {
	for i := 0; i < iterations; i++ {
		m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
		if f(m1) < f(m2) {
			lo = m1
		} else {
			hi = m2
		}
	}
	return (lo + hi) / 2
}

// extKey names the extended resources a request asks for.
func extKey(v vec) string {
	var b []byte
	for i := rExt; i < nres; i++ {
		if v[i] > 0 {
			b = append(b, byte('0'+i))
		}
	}
	return string(b)
}

func tolKey(tols []corev1.Toleration) string {
	s := ""
	for _, t := range tols {
		s += t.Key + "=" + t.Value + ":" + string(t.Effect) + string(t.Operator) + ";"
	}
	return s
}

// bound is max(LP over cpu+memory, single-resource bounds).
func bound(ts []*itype, d vec) float64 {
	if len(ts) == 0 {
		return 0
	}
	price := func(t *itype) float64 { return t.offerings[0].Price }
	best := 0.0
	for r := range d {
		if d[r] <= 0 {
			continue
		}
		rate := math.MaxFloat64
		for _, t := range ts {
			if t.alloc[r] > 0 {
				rate = min(rate, price(t)/float64(t.alloc[r]))
			}
		}
		if rate < math.MaxFloat64 {
			best = max(best, rate*float64(d[r]))
		}
	}
	if d[rCPU] > 0 && d[rMem] > 0 {
		_, _, v := lpDual(ts, float64(d[rCPU]), float64(d[rMem]))
		best = max(best, v)
	}
	return best
}

// lpDual solves the dual of the LP relaxation min Σ x_t p_t subject to
// Σ x_t a_t ≥ C (CPU) and Σ x_t b_t ≥ M (memory): maximise y1 C + y2 M with
// y1 a_t + y2 b_t ≤ p_t. Once y2 is chosen optimally for y1 the objective is
// concave in y1, so a ternary search finds it. y1 and y2 are the prices of a
// milli-CPU and a byte that the cheapest fleet implies; v is the LP optimum.
func lpDual(ts []*itype, C, M float64) (y1, y2, v float64) {
	prices := make([]float64, len(ts))
	for i, t := range ts {
		prices[i] = t.offerings[0].Price
	}
	return lpDualPriced(ts, prices, C, M, 100)
}

// lpDualPriced is lpDual with ts[i] priced prices[i], searched that many
// iterations.
func lpDualPriced(ts []*itype, prices []float64, C, M float64, iterations int) (y1, y2, v float64) {
	hi := math.MaxFloat64
	for i, t := range ts {
		if t.alloc[rCPU] > 0 {
			hi = min(hi, prices[i]/float64(t.alloc[rCPU]))
		}
	}
	if hi == math.MaxFloat64 {
		return 0, 0, 0
	}
	y2of := func(y1 float64) float64 {
		y2 := math.MaxFloat64
		for i, t := range ts {
			if t.alloc[rMem] <= 0 {
				continue
			}
			y2 = min(y2, (prices[i]-y1*float64(t.alloc[rCPU]))/float64(t.alloc[rMem]))
		}
		return y2
	}
	f := func(y1 float64) float64 {
		y2 := y2of(y1)
		if y2 < 0 || y2 == math.MaxFloat64 {
			return -1
		}
		return y1*C + y2*M
	}
	y1 = argmax(f, 0, hi, iterations)
	y2 = max(y2of(y1), 0)
	if y2 == math.MaxFloat64 {
		y2 = 0
	}
	return y1, y2, max(f(y1), 0)
}
