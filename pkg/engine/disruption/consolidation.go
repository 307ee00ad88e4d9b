package disruption

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Karpenter's constants (pkg/controllers/disruption).
const (
	// MinInstanceTypesForSpotToSpot is how many cheaper spot types a
	// single-node spot-to-spot replacement needs.
	MinInstanceTypesForSpotToSpot = 15
	// BalancedK is the Balanced policy's k: a move is approved when its
	// share of the pool's savings is at least 1/k of its share of the pool's
	// disruption.
	BalancedK = 2
	// simMaxInstanceTypes is the scheduler's truncation in simulations
	// (Karpenter v1.7+: 600); launch truncation is the AWS provider's 60.
	simMaxInstanceTypes    = 600
	launchMaxInstanceTypes = 60
)

// simulation is one "schedule without these nodes".
type simulation struct {
	res engine.Result
	// pending marks pods that were pending before (their failures do not
	// block a command).
	pending map[engine.PodRef]bool
}

// simulate schedules the candidates' reschedulable pods, the pods of nodes
// already being deleted and the pending pods onto the remaining nodes and,
// if needed, new NodeClaims (Karpenter's SimulateScheduling).
func (st *state) simulate(cands []*nodeInfo, karpenterOnly bool) (*simulation, error) {
	// The candidates and the nodes being deleted, in the cluster's order.
	gone := slices.Clone(st.deleting)
	for _, c := range cands {
		if !c.deleting {
			gone = append(gone, c.idx)
		}
	}
	slices.Sort(gone)
	sim := &simulation{}
	var pods *engine.Pods
	if len(st.in.Pending) == 0 && len(gone) == 1 {
		// One node's pods: read once, simulated pass after pass.
		pods = st.nodes[gone[0]].reschedPods()
	} else {
		sim.pending = map[engine.PodRef]bool{}
		list := make([]inventory.Pod, 0, len(st.in.Pending)+16*len(cands))
		for _, p := range st.in.Pending {
			list = append(list, p)
			sim.pending[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = true
		}
		for _, i := range gone {
			for _, p := range st.nodes[i].resched {
				list = append(list, *p)
			}
		}
		pods = engine.NewPods(list)
	}
	res, err := st.cluster(karpenterOnly).Solve(pods, gone)
	if err != nil {
		return nil, fmt.Errorf("simulate scheduling without %s: %w", names(cands), err)
	}
	sim.res = res
	return sim, nil
}

// cluster is every node as the pass's simulations see it (engine.Cluster:
// prepared once, each simulation leaves its nodes out), for Karpenter's
// scheduler or the improved one. In Settle it takes over what the last
// such cluster read of the nodes no command changed since (derived no
// later) and whose simulation taint is as it was.
func (st *state) cluster(karpenterOnly bool) *engine.Cluster {
	if c := st.clusters[karpenterOnly]; c != nil {
		return c
	}
	in := engine.Input{NodePools: st.in.NodePools, DaemonSets: st.in.DaemonSets, Catalog: st.in.Catalog,
		Options: engine.Options{KarpenterOnly: karpenterOnly, MaxInstanceTypes: simMaxInstanceTypes, SkipLowerBounds: true}}
	in.ExistingNodes = make([]engine.ExistingNode, len(st.nodes))
	var last passCluster
	if st.cache != nil {
		last = st.cache.clusters[karpenterOnly]
	}
	now := passCluster{gen: st.gen, at: make(map[string]int, len(st.nodes)), tainted: make([]bool, len(st.nodes))}
	same := make([]int, len(st.nodes))
	for i, n := range st.nodes {
		en := n.in.ExistingNode
		en.Pods = n.simPods
		// Karpenter skips nodes still inside consolidateAfter when it
		// simulates consolidation; a taint no pod tolerates keeps pods off
		// them while their pods still count for topology.
		tainted := n.pool != nil && !n.never && st.now.Before(n.consolidatableAt)
		if tainted {
			en.Node.Taints = append(slices.Clip(en.Node.Taints), corev1.Taint{Key: simulationTaint, Effect: corev1.TaintEffectNoSchedule})
		}
		in.ExistingNodes[i] = en
		now.at[n.ref.Name], now.tainted[i] = i, tainted
		same[i] = -1
		if j, ok := last.at[n.ref.Name]; ok && n.derived <= last.gen && last.tainted[j] == tainted {
			same[i] = j
		}
	}
	now.c = engine.NewClusterFrom(last.c, in, same)
	if st.cache != nil {
		st.cache.clusters[karpenterOnly] = now
	}
	st.clusters[karpenterOnly] = now.c
	return now.c
}

func names(cs []*nodeInfo) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ref.Name
	}
	return strings.Join(out, ", ")
}

// consolidation is the outcome of computeConsolidation: a command, or why not.
type consolidation struct {
	cmd *Command
	why string
}

// computeConsolidation is Karpenter's computeConsolidation for a set of
// candidates: Delete when every pod fits on the remaining nodes, Replace
// when exactly one new node, cheaper at its worst launch price, takes the
// rest; nothing otherwise.
func (st *state) computeConsolidation(cands []*nodeInfo, method Method, karpenterOnly bool) (consolidation, error) {
	sim, err := st.simulate(cands, karpenterOnly)
	if err != nil {
		return consolidation{}, err
	}
	res := sim.res
	for _, u := range res.Unschedulable {
		if !sim.pending[u.Pod] {
			return consolidation{why: fmt.Sprintf("pod %s would not schedule elsewhere: %s", u.Pod, strings.TrimSpace(strings.TrimPrefix(u.String(), u.Pod.String()+":")))}, nil
		}
	}
	fromDeleting := map[engine.PodRef]bool{}
	for _, i := range st.deleting {
		for _, p := range st.nodes[i].resched {
			fromDeleting[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	for _, pl := range res.Placements {
		if n := st.byNm[pl.Node]; n != nil && (!n.initialized || n.in.InFlight) && !fromDeleting[pl.Pod] {
			return consolidation{why: fmt.Sprintf("pod %s would land on node %s, which is not initialized yet", pl.Pod, pl.Node)}, nil
		}
	}
	price := 0.0
	for _, c := range cands {
		price += c.ref.Price
	}
	cmd := &Command{Method: method, Reason: apiv1.DisruptionReasonUnderutilized, Price: price, Placements: res.Placements}
	for _, c := range cands {
		cmd.Nodes = append(cmd.Nodes, c.ref)
	}
	switch len(res.NodeClaims) {
	case 0:
		cmd.Action, cmd.Savings = ActionDelete, price
		cmd.Why = "all pods fit on the remaining nodes"
	case 1:
		nc, why := st.replacement(cands, res.NodeClaims[0], price, method)
		if nc == nil {
			return consolidation{why: why}, nil
		}
		cmd.Action, cmd.Replacement = ActionReplace, nc
		cmd.ReplacementPrice, cmd.Savings = nc.Price, price-nc.Price
		cmd.Why = fmt.Sprintf("pods fit on the remaining nodes plus one %s %s at $%.4f/h, below $%.4f/h", nc.CapacityType, nc.InstanceType, nc.Price, price)
	default:
		return consolidation{why: fmt.Sprintf("pods would need %d new nodes; Karpenter never replaces one node with several", len(res.NodeClaims))}, nil
	}
	if why := st.balancedRejects(cands, cmd.Savings); why != "" {
		return consolidation{why: why}, nil
	}
	return consolidation{cmd: cmd}, nil
}

// balancedRejects applies the Balanced policy's score to the pools of the
// candidates that use it: (savings/poolCost) / (disruption/poolDisruption)
// must be at least 1/BalancedK.
func (st *state) balancedRejects(cands []*nodeInfo, savings float64) string {
	pools := map[*poolInfo]bool{}
	disruption := 0.0
	for _, c := range cands {
		if c.pool.np.Spec.Disruption.ConsolidationPolicy == apiv1.ConsolidationPolicyBalanced {
			pools[c.pool] = true
		}
		disruption += c.disruptionCost
	}
	if len(pools) == 0 {
		return ""
	}
	poolCost, poolDisruption := 0.0, 0.0
	for p := range pools {
		poolCost += p.cost
		poolDisruption += p.disruption
	}
	if poolCost <= 0 || poolDisruption <= 0 || disruption <= 0 {
		return ""
	}
	score := (savings / poolCost) / (disruption / poolDisruption)
	if score+1e-12 < 1.0/BalancedK {
		return fmt.Sprintf("Balanced policy: savings share %.3f over disruption share %.3f scores %.2f, below 1/%d", savings/poolCost, disruption/poolDisruption, score, BalancedK)
	}
	return ""
}

// offeringReqs reads the zone and capacity-type sets of a claim.
type offeringReqs struct {
	zone, ct engine.Requirements
}

func (r offeringReqs) allows(o catalog.Offering) bool {
	return r.has(catalog.LabelZone, o.Zone) && r.has(catalog.LabelCapacityType, o.CapacityType)
}

func (r offeringReqs) has(key, v string) bool {
	rs := r.zone
	if key == catalog.LabelCapacityType {
		rs = r.ct
	}
	req, ok := rs[key]
	return !ok || req.Has(v)
}

// worstLaunchPrice is the most expensive allowed offering, with reserved
// before spot before on-demand (what a launch may cost at worst).
func worstLaunchPrice(t *engine.InstanceType, r offeringReqs) (float64, bool) {
	for _, ct := range []string{apiv1.CapacityTypeReserved, catalog.CapacityTypeSpot, catalog.CapacityTypeOnDemand} {
		worst, found := 0.0, false
		for _, o := range t.Offerings {
			if o.CapacityType == ct && r.allows(o) {
				worst, found = max(worst, o.Price), true
			}
		}
		if found {
			return worst, true
		}
	}
	return 0, false
}

func cheapestOffering(t *engine.InstanceType, r offeringReqs) (catalog.Offering, bool) {
	var best catalog.Offering
	found := false
	for _, o := range t.Offerings {
		if r.allows(o) && (!found || o.Price < best.Price) {
			best, found = o, true
		}
	}
	return best, found
}

// replacement filters the one new NodeClaim of a consolidation: types whose
// worst launch price is below the candidates' price (multi-node: below the
// cheapest candidate of the same type), spot-to-spot rules, pinning to spot.
func (st *state) replacement(cands []*nodeInfo, nc engine.NodeClaim, price float64, method Method) (*engine.NodeClaim, string) {
	p := st.byPNm[nc.NodePool]
	if p == nil {
		return nil, "replacement NodePool " + nc.NodePool + " is unknown"
	}
	r, hasCT, why := replacementOfferingReqs(nc)
	if why != "" {
		return nil, why
	}
	maxPrice := maxReplacementPrice(cands, nc, price, method)
	allSpot := true
	for _, c := range cands {
		allSpot = allSpot && c.ref.CapacityType == catalog.CapacityTypeSpot
	}
	spotToSpot := allSpot && r.has(catalog.LabelCapacityType, catalog.CapacityTypeSpot)
	if spotToSpot {
		if !st.opts.SpotToSpot {
			return nil, "all candidates are spot and the replacement would be spot: spot-to-spot consolidation is off (Karpenter feature gate SpotToSpotConsolidation)"
		}
		r.ct = engine.Requirements{}
		r.ct.Add(mustReq(catalog.LabelCapacityType, catalog.CapacityTypeSpot))
	}
	var kept []*engine.InstanceType
	for _, name := range nc.InstanceTypes {
		t := p.types[name]
		if t == nil {
			continue
		}
		if w, ok := worstLaunchPrice(t, r); ok && w < maxPrice {
			kept = append(kept, t)
		}
	}
	order := func() {
		sort.SliceStable(kept, func(i, j int) bool {
			a, _ := cheapestOffering(kept[i], r)
			b, _ := cheapestOffering(kept[j], r)
			return a.Price < b.Price
		})
	}
	order()
	if len(kept) == 0 {
		return nil, fmt.Sprintf("no instance type for the replacement has a worst launch price below $%.4f/h", maxPrice)
	}
	// The options left must still meet the pool's minValues, each time
	// they shrink (RemoveInstanceTypeOptionsByPriceAndMinValues, Truncate).
	mins := minValueReqs(p.np)
	need, why := minValuesNeed(kept, mins)
	if why != "" {
		return nil, "filtering the replacement's instance types by price: " + why
	}
	pinned := false
	if spotToSpot {
		if len(cands) == 1 {
			if len(kept) < MinInstanceTypesForSpotToSpot {
				return nil, fmt.Sprintf("spot-to-spot needs at least %d cheaper spot instance types, found %d", MinInstanceTypesForSpotToSpot, len(kept))
			}
			kept = kept[:max(MinInstanceTypesForSpotToSpot, need)]
		}
		pinned = true
	} else if r.has(catalog.LabelCapacityType, catalog.CapacityTypeSpot) && r.has(catalog.LabelCapacityType, catalog.CapacityTypeOnDemand) {
		// A failed spot launch must not fall back to a pricier on-demand node.
		r.ct = engine.Requirements{}
		r.ct.Add(mustReq(catalog.LabelCapacityType, catalog.CapacityTypeSpot))
		pinned = true
		var spot []*engine.InstanceType
		for _, t := range kept {
			if _, ok := cheapestOffering(t, r); ok {
				spot = append(spot, t)
			}
		}
		kept = spot
		order()
		if len(kept) == 0 {
			return nil, "no cheaper instance type has a spot offering to pin the replacement to"
		}
		if _, why := minValuesNeed(kept, mins); why != "" {
			return nil, "pinning the replacement to spot: " + why
		}
	}
	if len(kept) > launchMaxInstanceTypes {
		kept = kept[:launchMaxInstanceTypes]
		if _, why := minValuesNeed(kept, mins); why != "" {
			return nil, fmt.Sprintf("truncating the replacement to its %d cheapest instance types, as the launch does: %s", launchMaxInstanceTypes, why)
		}
	}
	out := launchedAs(nc, kept, r, pinned, hasCT)
	return &out, ""
}

// replacementOfferingReqs is the zone and capacity-type requirements of
// the replacement, and whether it has a capacity-type one.
func replacementOfferingReqs(nc engine.NodeClaim) (offeringReqs, bool, string) {
	var ctReq, zoneReq *corev1.NodeSelectorRequirement
	for i := range nc.Requirements {
		switch nc.Requirements[i].Key {
		case catalog.LabelCapacityType:
			ctReq = &nc.Requirements[i]
		case catalog.LabelZone:
			zoneReq = &nc.Requirements[i]
		}
	}
	r := offeringReqs{zone: engine.Requirements{}, ct: engine.Requirements{}}
	add := func(rs engine.Requirements, q *corev1.NodeSelectorRequirement) error {
		if q == nil {
			return nil
		}
		req, err := engine.NewRequirement(q.Key, q.Operator, q.Values...)
		if err == nil {
			rs.Add(req)
		}
		return err
	}
	if err := add(r.zone, zoneReq); err != nil {
		return r, false, "replacement zone requirement: " + err.Error()
	}
	if err := add(r.ct, ctReq); err != nil {
		return r, false, "replacement capacity-type requirement: " + err.Error()
	}
	return r, ctReq != nil, ""
}

// maxReplacementPrice is the price a replacement's worst launch must beat:
// the candidates', or with several candidates the cheapest candidate of a
// type the replacement may launch.
func maxReplacementPrice(cands []*nodeInfo, nc engine.NodeClaim, price float64, method Method) float64 {
	maxPrice := price
	if method == MethodMultiNode {
		// filterOutSameInstanceType: replacing several nodes with one of a
		// type being removed must beat the cheapest such node, or deleting
		// the others alone would do.
		cheapest := map[string]float64{}
		for _, c := range cands {
			if v, ok := cheapest[c.ref.InstanceType]; !ok || c.ref.Price < v {
				cheapest[c.ref.InstanceType] = c.ref.Price
			}
		}
		for _, name := range nc.InstanceTypes {
			if v, ok := cheapest[name]; ok {
				maxPrice = min(maxPrice, v)
			}
		}
	}
	return maxPrice
}

// launchedAs is the replacement NodeClaim with the types kept, cheapest
// first, its predicted launch, and spot pinned when pinned.
func launchedAs(nc engine.NodeClaim, kept []*engine.InstanceType, r offeringReqs, pinned, hasCT bool) engine.NodeClaim {
	out := nc
	best, _ := cheapestOffering(kept[0], r)
	out.InstanceType, out.Zone, out.CapacityType, out.Price = kept[0].Name, best.Zone, best.CapacityType, best.Price
	out.InstanceTypes = make([]string, len(kept))
	for i, t := range kept {
		out.InstanceTypes[i] = t.Name
	}
	out.Allocatable = kept[0].Capacity.DeepCopy()
	for name, q := range kept[0].Overhead {
		if v, ok := out.Allocatable[name]; ok {
			v.Sub(q)
			out.Allocatable[name] = v
		}
	}
	out.Requirements = nil
	for _, q := range nc.Requirements {
		q = *q.DeepCopy()
		switch q.Key {
		case catalog.LabelInstanceType:
			q.Operator, q.Values = corev1.NodeSelectorOpIn, out.InstanceTypes
		case catalog.LabelCapacityType:
			if pinned {
				q.Operator, q.Values = corev1.NodeSelectorOpIn, []string{catalog.CapacityTypeSpot}
			}
		}
		out.Requirements = append(out.Requirements, q)
	}
	if pinned && !hasCT {
		out.Requirements = append(out.Requirements, corev1.NodeSelectorRequirement{Key: catalog.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{catalog.CapacityTypeSpot}})
		sort.SliceStable(out.Requirements, func(i, j int) bool { return out.Requirements[i].Key < out.Requirements[j].Key })
	}
	return out
}

// minValueReqs are a NodePool's requirements that set minValues.
func minValueReqs(np *engine.NodePool) []apiv1.NodeSelectorRequirementWithMinValues {
	var out []apiv1.NodeSelectorRequirementWithMinValues
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues != nil && *r.MinValues > 0 {
			out = append(out, r)
		}
	}
	return out
}

// minValuesNeed is Karpenter's InstanceTypes.SatisfiesMinValues: walking
// the types in order, how many it takes until every requirement has
// minValues distinct values among them, or why they never do.
func minValuesNeed(types []*engine.InstanceType, mins []apiv1.NodeSelectorRequirementWithMinValues) (int, string) {
	if len(mins) == 0 {
		return 0, ""
	}
	seen := make([]map[string]bool, len(mins))
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	met := func() bool {
		for i, r := range mins {
			if len(seen[i]) < *r.MinValues {
				return false
			}
		}
		return true
	}
	for n, t := range types {
		for i, r := range mins {
			if v, ok := t.Labels[r.Key]; ok {
				seen[i][v] = true
			}
			for _, v := range t.MultiLabels[r.Key] {
				seen[i][v] = true
			}
		}
		if met() {
			return n + 1, ""
		}
	}
	for i, r := range mins {
		if len(seen[i]) < *r.MinValues {
			return 0, fmt.Sprintf("its %d options span %d distinct values of %s, below the NodePool's minValues %d", len(types), len(seen[i]), r.Key, *r.MinValues)
		}
	}
	return len(types), ""
}

func mustReq(key string, values ...string) engine.Requirement {
	r, _ := engine.NewRequirement(key, corev1.NodeSelectorOpIn, values...) // In never fails
	return r
}

// better reports whether a saves more than b (nil is worst).
func better(a, b *Command) bool {
	if a == nil {
		return false
	}
	if b == nil {
		return true
	}
	return a.Savings > b.Savings+1e-9
}
