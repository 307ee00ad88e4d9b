package engine

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// movable reports whether a pod can be moved between claims by the
// improvement pass without changing any other pod's constraints: it declares
// no topology terms or host ports, and no hostname-keyed pod affinity counts
// it. Zone-keyed groups that count it require the same zone at the target.
func movable(pd *podData) bool {
	if len(pd.owned) > 0 || len(pd.ports) > 0 {
		return false
	}
	for _, g := range pd.selectedBy {
		if g.key == catalog.LabelHostname && g.kind == kindAffinity {
			return false
		}
	}
	return true
}

// canMove checks a movable pod against a target claim without narrowing it.
func (s *scheduler) canMove(pd *podData, from, to *node) bool {
	t := to.types[to.cur]
	if !to.used.add(pd.req).fits(t.alloc) {
		return false
	}
	if _, ok := tolerates(pd.pod.Tolerations, to.taints, !pd.tolerateNS); !ok {
		return false
	}
	for k, r := range pd.reqs {
		tr, ok := to.reqs[k]
		if !ok || tr.Operator() != corev1.NodeSelectorOpIn {
			if op := r.Operator(); ok || (op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist) {
				return false
			}
			continue
		}
		for _, v := range tr.values {
			if !r.Has(v) {
				return false
			}
		}
	}
	for _, g := range pd.selectedBy {
		if g.key == catalog.LabelHostname {
			if g.kind == kindAnti && g.howner(to.id) > 0 {
				return false
			}
			continue
		}
		d := to.domain(g.key)
		if d == "" || d != from.domain(g.key) {
			return false
		}
	}
	return true
}

// improve re-packs: it moves movable pods off each claim into room other
// claims already pay for, and keeps the moves only when the claim gets
// cheaper (or empty, merging it away).
func (s *scheduler) improve() {
	live := make([]*node, 0, len(s.claims))
	for _, n := range s.claims {
		if !n.dead && len(n.pods) > 0 {
			live = append(live, n)
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return live[i].used[rCPU] < live[j].used[rCPU] })
	type move struct {
		pd       *podData
		from, to *node
	}
	for _, src := range live {
		if src.dead {
			continue
		}
		before := s.price(src)
		var moves []move
		order := make([]int, len(src.pods))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return src.pods[order[a]].req[rCPU] > src.pods[order[b]].req[rCPU] })
		for _, i := range order {
			pd := src.pods[i]
			if !movable(pd) {
				continue
			}
			var best *node
			bestScore := math.MaxFloat64
			for _, dst := range live {
				if dst == src || dst.dead || len(dst.pods) == 0 {
					continue
				}
				t := dst.types[dst.cur]
				total := dst.used.add(pd.req)
				if !total.fits(t.alloc) {
					continue
				}
				score := float64(t.alloc[rCPU]-total[rCPU])/float64(max(t.alloc[rCPU], 1)) + float64(t.alloc[rMem]-total[rMem])/float64(max(t.alloc[rMem], 1))
				if score < bestScore && s.canMove(pd, src, dst) {
					best, bestScore = dst, score
				}
			}
			if best == nil {
				continue
			}
			best.used = best.used.add(pd.req)
			moves = append(moves, move{pd, src, best})
		}
		if len(moves) == 0 {
			continue
		}
		remaining := src.used
		for _, m := range moves {
			remaining = remaining.sub(m.pd.req)
		}
		after := 0.0
		var newTypes []*itype
		if len(moves) < len(src.pods) {
			for _, t := range src.pool.types {
				if remaining.fits(t.alloc) && typeCompatible(t, src.reqs) {
					newTypes = append(newTypes, t)
				}
			}
			if len(newTypes) == 0 {
				after = math.MaxFloat64
			} else {
				after = math.MaxFloat64
				for _, t := range newTypes {
					if o, ok := t.cheapest(src.reqs); ok && o.Price < after {
						after = o.Price
					}
				}
			}
		}
		if after >= before-1e-12 {
			for _, m := range moves { // revert
				m.to.used = m.to.used.sub(m.pd.req)
			}
			continue
		}
		for _, m := range moves {
			s.record(m.pd, src, -1)
			i := indexOf(src.pods, m.pd)
			src.pods = append(src.pods[:i], src.pods[i+1:]...)
			src.seqs = append(src.seqs[:i], src.seqs[i+1:]...)
			s.seq++
			m.to.pods = append(m.to.pods, m.pd)
			m.to.seqs = append(m.to.seqs, s.seq)
			s.record(m.pd, m.to, 1)
		}
		src.used = remaining
		if len(src.pods) == 0 {
			src.dead = true
			continue
		}
		src.types = newTypes
		s.refreshMax(src)
		src.cur = s.cheapestIndex(src)
	}
}

func indexOf(pods []*podData, pd *podData) int {
	for i, p := range pods {
		if p == pd {
			return i
		}
	}
	return -1
}

func (s *scheduler) price(n *node) float64 {
	if o, ok := n.types[n.cur].cheapest(n.reqs); ok {
		return o.Price
	}
	return 0
}

// finalize renders the claims.
func (s *scheduler) finalize() {
	for _, n := range s.claims {
		if n.dead || len(n.pods) == 0 {
			continue
		}
		type opt struct {
			t *itype
			o catalog.Offering
		}
		var opts []opt
		for _, t := range n.types {
			if o, ok := t.cheapest(n.reqs); ok {
				opts = append(opts, opt{t, o})
			}
		}
		sort.SliceStable(opts, func(i, j int) bool {
			if opts[i].o.Price != opts[j].o.Price {
				return opts[i].o.Price < opts[j].o.Price
			}
			return opts[i].t.name < opts[j].t.name
		})
		if len(opts) == 0 {
			continue
		}
		best := opts[0]
		nc := NodeClaim{Name: n.name, NodePool: n.pool.name, InstanceType: best.t.name, Zone: best.o.Zone,
			CapacityType: best.o.CapacityType, Price: best.o.Price,
			Requests: s.ri.list(n.used.add(n.pool.ds)), Allocatable: s.ri.list(best.t.alloc.add(n.pool.ds))}
		for i, o := range opts {
			if i == s.opts.MaxInstanceTypes {
				break
			}
			nc.InstanceTypes = append(nc.InstanceTypes, o.t.name)
		}
		for _, k := range n.reqs.sortedKeys() {
			if k == catalog.LabelHostname || k == catalog.LabelInstanceType {
				continue
			}
			nc.Requirements = append(nc.Requirements, n.reqs[k].nodeSelector())
		}
		nc.Requirements = append(nc.Requirements, corev1.NodeSelectorRequirement{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: nc.InstanceTypes})
		sort.SliceStable(nc.Requirements, func(i, j int) bool { return nc.Requirements[i].Key < nc.Requirements[j].Key })
		for i, pd := range n.pods {
			nc.Pods = append(nc.Pods, pd.ref)
			nc.Seq = append(nc.Seq, n.seqs[i])
		}
		s.result.NodeClaims = append(s.result.NodeClaims, nc)
		s.result.Cost += best.o.Price
	}
}

// lowerBound prices the pods that went to new NodeClaims (or could not be
// placed) at the LP relaxation over CPU and memory of the instance types
// they may use, plus single-resource bounds for the other resources, summed
// over groups of pods that can share no type. See the package doc.
func (s *scheduler) lowerBound(all []*podData) float64 {
	onClaims := map[*podData]bool{}
	for _, n := range s.claims {
		if n.dead {
			continue
		}
		for _, pd := range n.pods {
			onClaims[pd] = true
		}
	}
	// Classes of pods by the types they may use.
	type class struct {
		types  map[*itype]bool
		demand vec
	}
	var classes []*class
	byKey := map[string]*class{}
	for _, pd := range all {
		if !onClaims[pd] {
			continue
		}
		key := describeReqs(pd.reqs) + "|" + tolKey(pd.pod.Tolerations)
		c, ok := byKey[key]
		if !ok {
			c = &class{types: map[*itype]bool{}}
			for _, p := range s.pools {
				if _, ok := tolerates(pd.pod.Tolerations, p.taints, true); !ok {
					continue
				}
				if p.reqs.Compatible(pd.reqs, s.wellKnown) != nil {
					continue
				}
				for _, t := range p.types {
					if t.reqs.Intersects(pd.reqs) == nil {
						c.types[t] = true
					}
				}
			}
			byKey[key] = c
			classes = append(classes, c)
		}
		c.demand = c.demand.add(pd.req)
	}
	// Union classes that share a type name.
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
	comps := map[int]*class{}
	for i, c := range classes {
		r := find(i)
		cc, ok := comps[r]
		if !ok {
			cc = &class{types: map[*itype]bool{}}
			comps[r] = cc
		}
		cc.demand = cc.demand.add(c.demand)
		for t := range c.types {
			cc.types[t] = true
		}
	}
	total := 0.0
	for _, c := range comps {
		var ts []*itype
		for t := range c.types {
			ts = append(ts, t)
		}
		total += bound(ts, c.demand)
	}
	return total
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
	// Dual of min Σ x_t p_t s.t. Σ x_t a_t ≥ C, Σ x_t b_t ≥ M: maximise
	// y1 C + y2 M with y1 a_t + y2 b_t ≤ p_t; concave in y1 once y2 is
	// chosen optimally, so a ternary search finds it.
	C, M := float64(d[rCPU]), float64(d[rMem])
	if C > 0 && M > 0 {
		hi := math.MaxFloat64
		for _, t := range ts {
			if t.alloc[rCPU] > 0 {
				hi = min(hi, price(t)/float64(t.alloc[rCPU]))
			}
		}
		f := func(y1 float64) float64 {
			y2 := math.MaxFloat64
			for _, t := range ts {
				if t.alloc[rMem] <= 0 {
					continue
				}
				y2 = min(y2, (price(t)-y1*float64(t.alloc[rCPU]))/float64(t.alloc[rMem]))
			}
			if y2 < 0 || y2 == math.MaxFloat64 {
				return -1
			}
			return y1*C + y2*M
		}
		lo := 0.0
		for i := 0; i < 100; i++ {
			m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
			if f(m1) < f(m2) {
				lo = m1
			} else {
				hi = m2
			}
		}
		best = max(best, f((lo+hi)/2))
	}
	return best
}
