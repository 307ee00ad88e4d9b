package engine

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

func (s *scheduler) price(n *node) float64 {
	if o, ok := n.types[n.cur].cheapest(n.reqs); ok {
		return o.Price
	}
	return 0
}

// finalize renders the claims.
func (s *scheduler) finalize() {
	// Every type of the pool priced under a claim's zone and capacity-type
	// requirements, cheapest first, once per pool and such requirements;
	// a claim keeps those it still has (marked by type index). Sorting
	// each claim's few hundred types was a tenth of a 20,000-pod solve.
	type opt struct {
		t     *itype
		o     catalog.Offering
		price float64
	}
	sorted := map[string][]opt{}
	var opts []opt // scratch, reused across claims
	var mark []int
	for ci, n := range s.claims {
		if n.dead || len(n.pods) == 0 {
			continue
		}
		s.keyBuf = appendOfferKey(s.keyBuf[:0], n.pool, n.reqs)
		all, ok := sorted[string(s.keyBuf)]
		if !ok {
			f := offerFilterOf(n.reqs)
			for _, t := range n.pool.types {
				if o, ok := t.cheapestF(&f); ok {
					all = append(all, opt{t, o, o.Price})
				}
			}
			sort.Slice(all, func(i, j int) bool {
				if all[i].price != all[j].price {
					return all[i].price < all[j].price
				}
				return all[i].t.name < all[j].t.name
			})
			sorted[string(s.keyBuf)] = all
		}
		if len(mark) < len(n.pool.types) {
			mark = make([]int, len(n.pool.types))
			for i := range mark {
				mark[i] = -1
			}
		}
		// n.types ascends by index (a subsequence of the pool's types): when
		// it is a whole run, as after commit dropped the smallest, a range
		// test replaces the marks.
		lo, hi := 0, -1
		if len(n.types) > 0 {
			lo, hi = n.types[0].idx, n.types[len(n.types)-1].idx
		}
		run := hi-lo+1 == len(n.types)
		if !run {
			for _, t := range n.types {
				mark[t.idx] = ci
			}
		}
		// Without minValues only the first MaxInstanceTypes are launched
		// (launchOptions): stop there instead of copying every option.
		limit := len(all)
		if len(n.pool.minValues) == 0 && s.opts.MaxInstanceTypes > 0 {
			limit = s.opts.MaxInstanceTypes
		}
		opts = opts[:0]
		for _, o := range all {
			if run && lo <= o.t.idx && o.t.idx <= hi || !run && mark[o.t.idx] == ci {
				if opts = append(opts, o); len(opts) == limit {
					break
				}
			}
		}
		if len(opts) == 0 {
			continue
		}
		opts = launchOptions(opts, s.opts.MaxInstanceTypes, n.pool.minValues, func(o opt, key string) []string { return typeValues(o.t, key) })
		best := opts[0]
		nc := NodeClaim{Name: n.name, NodePool: n.pool.name, InstanceType: best.t.name, Zone: best.o.Zone,
			CapacityType: best.o.CapacityType, Price: best.o.Price,
			Requests: s.ri.list(n.used.add(n.pool.ds)), Allocatable: s.ri.list(best.t.alloc.add(n.pool.ds))}
		nc.InstanceTypes = make([]string, 0, len(opts))
		for _, o := range opts {
			nc.InstanceTypes = append(nc.InstanceTypes, o.t.name)
		}
		nc.Requirements = make([]corev1.NodeSelectorRequirement, 0, len(n.reqs)+1)
		for _, k := range n.reqs.sortedKeys() {
			if k == catalog.LabelHostname || k == catalog.LabelInstanceType {
				continue
			}
			nc.Requirements = append(nc.Requirements, n.reqs[k].nodeSelector())
		}
		nc.Requirements = append(nc.Requirements, corev1.NodeSelectorRequirement{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: nc.InstanceTypes})
		slices.SortStableFunc(nc.Requirements, func(a, b corev1.NodeSelectorRequirement) int { return strings.Compare(a.Key, b.Key) })
		nc.Pods = make([]PodRef, len(n.pods))
		for i, pd := range n.pods {
			nc.Pods[i] = pd.ref
		}
		nc.Seq = n.seqs
		s.result.NodeClaims = append(s.result.NodeClaims, nc)
		s.result.Cost += best.o.Price
	}
}
