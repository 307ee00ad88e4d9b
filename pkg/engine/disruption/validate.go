package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Validate re-checks commands against their input with code of its own (it
// shares nothing with Decide but the input types and engine.Check): every
// removed node is an initialized Karpenter node past consolidateAfter whose
// policy allows the reason, with no do-not-disrupt and no pod a PDB
// protects; the commands of a pass stay within each NodePool's budget for
// their reason; every reschedulable pod of a removed node is placed exactly
// once, and the placements and the replacement pass engine.Check; a Replace
// has one replacement whose every instance-type option launches, at worst,
// below the removed nodes' price, pinned to spot when it allowed both, and
// spot-to-spot only when enabled with at least 15 options for one node,
// and whose options still span the NodePool's minValues.
// It returns every violation found.
func Validate(in Input, cmds []Command) []error {
	v := &validator{in: in, nodes: map[string]*Node{}, pools: map[string]*engine.NodePool{}}
	for i := range in.Nodes {
		v.nodes[in.Nodes[i].Node.Name] = &in.Nodes[i]
	}
	for i := range in.NodePools {
		v.pools[in.NodePools[i].Name] = &in.NodePools[i]
	}
	used := map[string]map[apiv1.DisruptionReason]int{}
	for ci, c := range cmds {
		v.prefix = fmt.Sprintf("command %d (%s %s)", ci+1, c.Method, c.Action)
		v.command(c)
		for _, nr := range c.Nodes {
			if n := v.nodes[nr.Name]; n != nil {
				p := n.Node.Labels[catalog.LabelNodePool]
				if used[p] == nil {
					used[p] = map[apiv1.DisruptionReason]int{}
				}
				used[p][c.Reason]++
			}
		}
	}
	v.prefix = "budgets"
	for pool, byReason := range used {
		for reason, n := range byReason {
			if allowed, ok := v.allowed(pool, reason); ok && n > allowed {
				v.fail("NodePool %s: %d nodes disrupted for %s but the budget allows %d", pool, n, reason, allowed)
			}
		}
	}
	return v.errs
}

type validator struct {
	in     Input
	nodes  map[string]*Node
	pools  map[string]*engine.NodePool
	prefix string
	errs   []error
}

func (v *validator) fail(format string, a ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s", v.prefix, fmt.Sprintf(format, a...)))
}

func moves(p *inventory.Pod) bool {
	return p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed &&
		p.OwnerKind != inventory.OwnerDaemonSet && p.Annotations[MirrorPodAnnotation] == ""
}

func (v *validator) command(c Command) {
	if len(c.Nodes) == 0 {
		v.fail("removes no node")
		return
	}
	removed := map[string]bool{}
	var moving []inventory.Pod
	price := 0.0
	allSpot := true
	for _, nr := range c.Nodes {
		n := v.nodes[nr.Name]
		if n == nil {
			v.fail("node %s is not in the input", nr.Name)
			continue
		}
		if removed[nr.Name] {
			v.fail("node %s is removed twice", nr.Name)
		}
		removed[nr.Name] = true
		price += nr.Price
		allSpot = allSpot && n.Node.Labels[catalog.LabelCapacityType] == catalog.CapacityTypeSpot
		v.candidate(n, c.Reason)
		for i := range n.Pods {
			if moves(&n.Pods[i]) {
				moving = append(moving, n.Pods[i])
			}
		}
	}
	if math.Abs(price-c.Price) > 1e-9 {
		v.fail("price %.6f is not the sum of its nodes' prices %.6f", c.Price, price)
	}
	switch c.Action {
	case ActionDelete:
		if c.Replacement != nil {
			v.fail("a Delete has a replacement")
		}
		if math.Abs(c.Savings-price) > 1e-9 {
			v.fail("a Delete saves %.6f, not the nodes' price %.6f", c.Savings, price)
		}
	case ActionReplace:
		if c.Replacement == nil {
			v.fail("a Replace has no replacement")
			return
		}
		v.replacement(c, price, allSpot)
	default:
		v.fail("unknown action %q", c.Action)
	}
	if c.Reason == apiv1.DisruptionReasonEmpty && len(moving) > 0 {
		v.fail("an Empty command removes nodes running %d reschedulable pods", len(moving))
	}
	v.placements(c, removed, moving)
}

// candidate re-derives the candidate rules for one node.
func (v *validator) candidate(n *Node, reason apiv1.DisruptionReason) {
	nd := &n.Node
	pool := v.pools[nd.Labels[catalog.LabelNodePool]]
	if pool == nil {
		v.fail("node %s is not in a known NodePool (label %s=%q)", nd.Name, catalog.LabelNodePool, nd.Labels[catalog.LabelNodePool])
		return
	}
	if n.InFlight {
		v.fail("node %s is an in-flight NodeClaim", nd.Name)
	}
	init, ok := nd.Labels[apiv1.NodeInitializedLabelKey]
	if (ok && init != "true") || (!ok && !nd.Ready) {
		v.fail("node %s is not initialized", nd.Name)
	}
	if n.Deleting || n.Nominated {
		v.fail("node %s is deleting or nominated", nd.Name)
	}
	for _, t := range nd.Taints {
		if t.Key == apiv1.DisruptedTaintKey {
			v.fail("node %s already carries %s", nd.Name, apiv1.DisruptedTaintKey)
		}
	}
	if nd.Annotations[apiv1.DoNotDisruptAnnotationKey] == "true" {
		v.fail("node %s is annotated do-not-disrupt", nd.Name)
	}
	d := pool.Spec.Disruption
	if d.ConsolidateAfter.Duration == nil {
		v.fail("node %s: NodePool %s has consolidateAfter Never", nd.Name, pool.Name)
	} else {
		since := n.LastPodEventTime
		if since.IsZero() {
			since = nd.CreatedAt.Time
		}
		if v.in.Now.Sub(since) < *d.ConsolidateAfter.Duration {
			v.fail("node %s: consolidateAfter %s has not passed since %s", nd.Name, d.ConsolidateAfter.Duration, since)
		}
	}
	if reason == apiv1.DisruptionReasonUnderutilized && d.ConsolidationPolicy == apiv1.ConsolidationPolicyWhenEmpty {
		v.fail("node %s: NodePool %s only consolidates empty nodes", nd.Name, pool.Name)
	}
	for i := range n.Pods {
		p := &n.Pods[i]
		if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed || p.Annotations[MirrorPodAnnotation] != "" {
			continue
		}
		if val, ok := p.Annotations[apiv1.DoNotDisruptAnnotationKey]; ok {
			if d, err := strconv.ParseBool(val); (err == nil && d) || isPositiveDuration(val) {
				v.fail("node %s: pod %s/%s is do-not-disrupt", nd.Name, p.Namespace, p.Name)
			}
		}
		covering := 0
		for j := range v.in.PDBs {
			pdb := &v.in.PDBs[j]
			if pdb.Namespace != p.Namespace || pdb.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Selector)
			if err != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			covering++
			if pdb.DisruptionsAllowed < 1 {
				v.fail("node %s: pod %s/%s is protected by PDB %s (0 disruptions allowed)", nd.Name, p.Namespace, p.Name, pdb.Name)
			}
		}
		if covering > 1 {
			v.fail("node %s: pod %s/%s is covered by %d PDBs", nd.Name, p.Namespace, p.Name, covering)
		}
	}
}

func isPositiveDuration(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}

// allowed recomputes a pool's budget for a reason (ok false: unlimited).
func (v *validator) allowed(pool string, reason apiv1.DisruptionReason) (int, bool) {
	np := v.pools[pool]
	if np == nil {
		return 0, true
	}
	total, busy := 0, 0
	for i := range v.in.Nodes {
		n := &v.in.Nodes[i]
		if n.Node.Labels[catalog.LabelNodePool] != pool || n.InFlight {
			continue
		}
		if init, ok := n.Node.Labels[apiv1.NodeInitializedLabelKey]; (ok && init != "true") || (!ok && !n.Node.Ready) {
			continue
		}
		total++
		deleting := n.Deleting
		for _, t := range n.Node.Taints {
			deleting = deleting || t.Key == apiv1.DisruptedTaintKey
		}
		if deleting || !n.Node.Ready {
			busy++
		}
	}
	bs := np.Spec.Disruption.Budgets
	if bs == nil {
		bs = []apiv1.Budget{{Nodes: "10%"}}
	}
	limit, limited := math.MaxInt, false
	for _, b := range bs {
		applies := len(b.Reasons) == 0
		for _, r := range b.Reasons {
			applies = applies || r == reason
		}
		if !applies {
			continue
		}
		if b.Schedule != nil {
			if b.Duration == nil {
				continue
			}
			sched, err := cron.ParseStandard("TZ=UTC " + *b.Schedule)
			if err != nil {
				continue
			}
			// Active when a hit falls within [now−duration, now].
			if sched.Next(v.in.Now.Add(-b.Duration.Duration)).After(v.in.Now) {
				continue
			}
		}
		var n int
		if pct, ok := strings.CutSuffix(b.Nodes, "%"); ok {
			p, _ := strconv.Atoi(pct)
			n = (p*total + 99) / 100
		} else {
			n, _ = strconv.Atoi(b.Nodes)
		}
		limit, limited = min(limit, n), true
	}
	if !limited {
		return 0, false
	}
	return max(0, limit-busy), true
}

// replacement checks the one new node of a Replace.
func (v *validator) replacement(c Command, price float64, allSpot bool) {
	r := c.Replacement
	pool := v.pools[r.NodePool]
	if pool == nil {
		v.fail("replacement NodePool %s is unknown", r.NodePool)
		return
	}
	types := pool.InstanceTypes
	if types == nil && v.in.Catalog != nil {
		var err error
		if types, err = engine.InstanceTypesFromCatalog(v.in.Catalog, pool.Kubelet); err != nil {
			v.fail("instance types of %s: %v", pool.Name, err)
			return
		}
	}
	byName := map[string]*engine.InstanceType{}
	for i := range types {
		byName[types[i].Name] = &types[i]
	}
	allowed := func(key, val string) bool { return reqsAllow(r.Requirements, key, val) }
	spot, od := allowed(catalog.LabelCapacityType, catalog.CapacityTypeSpot), allowed(catalog.LabelCapacityType, catalog.CapacityTypeOnDemand)
	if spot && od {
		v.fail("replacement allows spot and on-demand; it must be pinned to spot")
	}
	if allSpot && spot {
		if !v.in.Options.SpotToSpot {
			v.fail("spot-to-spot replacement while SpotToSpotConsolidation is off")
		}
		if len(c.Nodes) == 1 && len(r.InstanceTypes) < MinInstanceTypesForSpotToSpot {
			v.fail("single-node spot-to-spot with %d instance types, fewer than %d", len(r.InstanceTypes), MinInstanceTypesForSpotToSpot)
		}
	}
	if len(r.InstanceTypes) == 0 {
		v.fail("replacement has no instance-type options")
	}
	for _, name := range r.InstanceTypes {
		t := byName[name]
		if t == nil {
			v.fail("replacement option %s is not an instance type of NodePool %s", name, pool.Name)
			continue
		}
		worst, found := worstAllowedPrice(t, allowed)
		if !found {
			v.fail("replacement option %s has no offering its requirements allow", name)
		} else if worst >= price {
			v.fail("replacement option %s may launch at $%.6f/h, not below the removed nodes' $%.6f/h", name, worst, price)
		}
	}
	v.replacementMinValues(r, pool, byName)
	if r.Price >= price {
		v.fail("replacement price $%.6f/h is not below $%.6f/h", r.Price, price)
	}
	if math.Abs(c.Savings-(price-r.Price)) > 1e-9 {
		v.fail("savings %.6f is not price − replacement price %.6f", c.Savings, price-r.Price)
	}
}

// reqsAllow reports whether the requirements allow the value for the key
// (a key they do not name is allowed).
func reqsAllow(reqs []corev1.NodeSelectorRequirement, key, val string) bool {
	for _, q := range reqs {
		if q.Key != key {
			continue
		}
		has := false
		for _, x := range q.Values {
			has = has || x == val
		}
		switch q.Operator {
		case corev1.NodeSelectorOpIn:
			return has
		case corev1.NodeSelectorOpNotIn:
			return !has
		case corev1.NodeSelectorOpDoesNotExist:
			return false
		}
	}
	return true
}

// worstAllowedPrice is the highest price among the offerings allowed of
// the first capacity type (reserved, spot, on-demand) that has one: what a
// launch may cost.
func worstAllowedPrice(t *engine.InstanceType, allowed func(key, val string) bool) (float64, bool) {
	worst, found := -1.0, false
	for _, ct := range []string{apiv1.CapacityTypeReserved, catalog.CapacityTypeSpot, catalog.CapacityTypeOnDemand} {
		for _, o := range t.Offerings {
			if o.CapacityType == ct && allowed(catalog.LabelCapacityType, ct) && allowed(catalog.LabelZone, o.Zone) && o.Price > worst {
				worst, found = o.Price, true
			}
		}
		if found {
			break
		}
	}
	return worst, found
}

// replacementMinValues checks that the replacement's options still meet
// each minValues of its NodePool.
func (v *validator) replacementMinValues(r *engine.NodeClaim, pool *engine.NodePool, byName map[string]*engine.InstanceType) {
	for i, req := range pool.Spec.Template.Spec.Requirements {
		if req.MinValues == nil {
			continue
		}
		distinct := map[string]bool{}
		for _, name := range r.InstanceTypes {
			t := byName[name]
			if t == nil {
				continue
			}
			if val, ok := t.Labels[req.Key]; ok {
				distinct[val] = true
			}
			for _, val := range t.MultiLabels[req.Key] {
				distinct[val] = true
			}
		}
		if len(distinct) < *req.MinValues {
			v.fail("replacement's %d instance-type options span %d distinct values of %s, but NodePool %s requirements[%d] asks minValues %d",
				len(r.InstanceTypes), len(distinct), req.Key, pool.Name, i, *req.MinValues)
		}
	}
}

// placements checks that every moving pod lands once and that the result
// is a valid schedule by engine.Check. Only the nodes the command places
// pods on must end within their allocatable: another node's load is the
// cluster's, which the command does not change.
func (v *validator) placements(c Command, removed map[string]bool, moving []inventory.Pod) {
	seen := map[engine.PodRef]int{}
	target := map[string]bool{}
	for _, pl := range c.Placements {
		seen[pl.Pod]++
		target[pl.Node] = true
		if removed[pl.Node] {
			v.fail("pod %s is placed on removed node %s", pl.Pod, pl.Node)
		}
	}
	if c.Replacement != nil {
		for _, ref := range c.Replacement.Pods {
			seen[ref]++
		}
	}
	for _, p := range moving {
		ref := engine.PodRef{Namespace: p.Namespace, Name: p.Name}
		if seen[ref] != 1 {
			v.fail("pod %s of a removed node is placed %d times", ref, seen[ref])
		}
	}
	if len(moving) == 0 && len(c.Placements) == 0 && c.Replacement == nil {
		return // nothing moves (emptiness)
	}
	in := engine.Input{NodePools: v.in.NodePools, DaemonSets: v.in.DaemonSets, Catalog: v.in.Catalog}
	in.Pods = append(in.Pods, moving...)
	in.Pods = append(in.Pods, v.in.Pending...)
	res := engine.Result{Placements: c.Placements}
	if c.Replacement != nil {
		res.NodeClaims = []engine.NodeClaim{*c.Replacement}
	}
	for _, p := range v.in.Pending {
		ref := engine.PodRef{Namespace: p.Namespace, Name: p.Name}
		if seen[ref] == 0 {
			res.Unschedulable = append(res.Unschedulable, engine.Unschedulable{Pod: ref, Reasons: map[string]string{"": "still pending"}})
		}
	}
	for i := range v.in.Nodes {
		n := &v.in.Nodes[i]
		deleting := n.Deleting
		for _, t := range n.Node.Taints {
			deleting = deleting || t.Key == apiv1.DisruptedTaintKey
		}
		if removed[n.Node.Name] {
			continue
		}
		if deleting {
			// Their pods are rescheduled by the same simulation.
			for j := range n.Pods {
				if moves(&n.Pods[j]) {
					in.Pods = append(in.Pods, n.Pods[j])
				}
			}
			continue
		}
		en := n.ExistingNode
		if !target[n.Node.Name] {
			// A node may already hold more than its allocatable; the
			// command neither causes nor cures that. Karpenter only places
			// pods in the room left (resources.Fits: none on such a node),
			// which Check judges on the nodes the command places pods on.
			en.Node.Allocatable = atLeastBound(en)
		}
		in.ExistingNodes = append(in.ExistingNodes, en)
	}
	for _, err := range engine.Check(in, res) {
		v.fail("schedule: %v", err)
	}
}

// atLeastBound is the node's allocatable raised, resource by resource, to
// what its bound pods request (each pod counting one "pods").
func atLeastBound(en engine.ExistingNode) corev1.ResourceList {
	bound := corev1.ResourceList{}
	for i := range en.Pods {
		for name, q := range en.Pods[i].Requests {
			v := bound[name]
			v.Add(q)
			bound[name] = v
		}
	}
	pods := bound[corev1.ResourcePods]
	pods.Add(*resource.NewQuantity(int64(len(en.Pods)), resource.DecimalSI))
	bound[corev1.ResourcePods] = pods
	out := en.Node.Allocatable.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range bound {
		if a, ok := out[name]; !ok || q.Cmp(a) > 0 {
			out[name] = q
		}
	}
	return out
}
