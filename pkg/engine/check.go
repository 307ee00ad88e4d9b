package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Check re-verifies a Result against its Input with code of its own (it
// shares nothing with the scheduler but the input types): every pending pod
// is placed once or reported; every NodeClaim's type is allowed by its
// NodePool and offered where it says; pods fit, tolerate the taints, match
// their node selectors, required node affinity and their volumes' topology,
// do not share host ports, keep existing nodes within their volume attach
// limits; and, replaying placements in order, every DoNotSchedule spread and
// required pod (anti-)affinity holds, judged as Karpenter judges them.
// It returns every violation found.
func Check(in Input, res Result) []error {
	c := &checker{in: in, nodes: map[string]*cnode{}}
	c.run(res)
	return c.errs
}

type cnode struct {
	name   string
	labels map[string]string
	taints []corev1.Taint
	alloc  corev1.ResourceList
	used   corev1.ResourceList
	ports  map[inventory.HostPort]bool
	// limits are an existing node's CSINode attach limits per driver, and
	// attached the claims bound there, per driver.
	limits   map[string]int32
	attached map[string]map[string]bool
}

type checker struct {
	in     Input
	nodes  map[string]*cnode
	placed []cplaced // in order
	errs   []error
	zones  map[string]bool
	// zoneTaints are the taints of every node or NodePool that provides a
	// zone (nodeTaintsPolicy Honor keeps only zones some tolerated source has).
	zoneTaints map[string][][]corev1.Taint
	// typesByPool are the instance types of pools with minValues, by name.
	typesByPool map[string]map[string]*InstanceType
	// counted are countBy's answers so far, brought up to date from the
	// placed pods since; anti are the required anti-affinity terms of placed
	// pods, in order. Both keep Check linear in the pods for a few distinct
	// selectors (BenchmarkKarpenterMix100000) instead of rescanning.
	counted map[termKey]*counted
	anti    []*antiTerm
	antiBy  map[termKey]*antiTerm
}

type cplaced struct {
	pod  *inventory.Pod
	node *cnode
}

func (c *checker) fail(format string, a ...any) { c.errs = append(c.errs, fmt.Errorf(format, a...)) }

func (c *checker) run(res Result) {
	c.addExisting()
	pools := c.addPools()
	c.addClaims(res, pools)
	pending := map[PodRef]*inventory.Pod{}
	for i := range c.in.Pods {
		p := &c.in.Pods[i]
		pending[PodRef{p.Namespace, p.Name}] = p
	}
	seen := c.replay(c.events(res), pending)
	c.accounted(res, pending, seen)
	c.checkAllocatable()
}

// addExisting binds the existing nodes' pods and notes their zones.
func (c *checker) addExisting() {
	c.zones = map[string]bool{}
	c.zoneTaints = map[string][][]corev1.Taint{}
	for i := range c.in.ExistingNodes {
		en := &c.in.ExistingNodes[i]
		l := map[string]string{catalog.LabelHostname: en.Node.Name}
		for k, v := range en.Node.Labels {
			l[k] = v
		}
		n := &cnode{name: en.Node.Name, labels: l, taints: en.Node.Taints, alloc: en.Node.Allocatable, used: corev1.ResourceList{}, ports: map[inventory.HostPort]bool{},
			limits: en.Node.VolumeLimits, attached: map[string]map[string]bool{}}
		c.nodes[n.name] = n
		if z, ok := l[catalog.LabelZone]; ok {
			c.zones[z] = true
			c.zoneTaints[z] = append(c.zoneTaints[z], en.Node.Taints)
		}
		for j := range en.Pods {
			c.bind(&en.Pods[j], n)
		}
	}
}

// addPools indexes the NodePools and notes the zones their types are
// offered in.
func (c *checker) addPools() map[string]*NodePool {
	pools := map[string]*NodePool{}
	for i := range c.in.NodePools {
		np := &c.in.NodePools[i]
		pools[np.Name] = np
		for _, t := range c.poolTypes(np) {
			for _, o := range t.Offerings {
				if !poolAllowsZone(np, o.Zone) {
					continue
				}
				c.zones[o.Zone] = true
				c.zoneTaints[o.Zone] = append(c.zoneTaints[o.Zone], np.Spec.Template.Spec.Taints)
			}
		}
	}
	return pools
}

// addClaims builds a node for each claim on its NodePool.
func (c *checker) addClaims(res Result, pools map[string]*NodePool) {
	for _, nc := range res.NodeClaims {
		np, ok := pools[nc.NodePool]
		if !ok {
			c.fail("nodeclaim %s: unknown NodePool %q", nc.Name, nc.NodePool)
			continue
		}
		n := c.claimNode(nc, np)
		if n != nil {
			c.nodes[n.name] = n
		}
		c.checkMinValues(nc, np)
	}
}

// placementEvent is a placement in the order the scheduler made it.
type placementEvent struct {
	seq  int
	pod  PodRef
	node string
}

// events lists the placements on existing nodes and claims by Seq.
func (c *checker) events(res Result) []placementEvent {
	var events []placementEvent
	for _, pl := range res.Placements {
		events = append(events, placementEvent{pl.Seq, pl.Pod, pl.Node})
	}
	for _, nc := range res.NodeClaims {
		if len(nc.Seq) != len(nc.Pods) {
			c.fail("nodeclaim %s: %d pods but %d sequence numbers", nc.Name, len(nc.Pods), len(nc.Seq))
			continue
		}
		for i, p := range nc.Pods {
			events = append(events, placementEvent{nc.Seq[i], p, nc.Name})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].seq < events[j].seq })
	return events
}

// replay verifies and binds each placement in order; it returns the pods
// placed.
func (c *checker) replay(events []placementEvent, pending map[PodRef]*inventory.Pod) map[PodRef]bool {
	seen := map[PodRef]bool{}
	for _, e := range events {
		p, ok := pending[e.pod]
		if !ok {
			c.fail("%s is placed but is not a pending pod", e.pod)
			continue
		}
		if seen[e.pod] {
			c.fail("%s is placed twice", e.pod)
			continue
		}
		seen[e.pod] = true
		n, ok := c.nodes[e.node]
		if !ok {
			c.fail("%s is placed on unknown node %s", e.pod, e.node)
			continue
		}
		c.verify(p, n)
		c.bind(p, n)
	}
	return seen
}

// accounted checks that every pending pod is placed or reported
// unschedulable with a reason, and not both.
func (c *checker) accounted(res Result, pending map[PodRef]*inventory.Pod, seen map[PodRef]bool) {
	for _, u := range res.Unschedulable {
		if seen[u.Pod] {
			c.fail("%s is both placed and unschedulable", u.Pod)
		}
		seen[u.Pod] = true
		if len(u.Reasons) == 0 {
			c.fail("%s is unschedulable without a reason", u.Pod)
		}
	}
	// In order: the problems are reported as found.
	for _, ref := range slices.SortedFunc(maps.Keys(pending), func(a, b PodRef) int { return cmp.Compare(a.String(), b.String()) }) {
		if !seen[ref] {
			c.fail("%s is neither placed nor reported unschedulable", ref)
		}
	}
}

// checkAllocatable checks that no node holds more than it can.
func (c *checker) checkAllocatable() {
	for _, key := range slices.Sorted(maps.Keys(c.nodes)) {
		n := c.nodes[key]
		for _, name := range slices.Sorted(maps.Keys(n.used)) {
			q, a := n.used[name], n.alloc[name]
			if q.Cmp(a) > 0 {
				c.fail("node %s: %s requested %s exceeds allocatable %s", n.name, name, q.String(), a.String())
			}
		}
	}
}

func (c *checker) poolTypes(np *NodePool) []InstanceType {
	if np.InstanceTypes != nil {
		return np.InstanceTypes
	}
	if c.in.Catalog == nil {
		return nil
	}
	ts, err := InstanceTypesFromCatalog(c.in.Catalog, np.Kubelet)
	if err != nil {
		return nil
	}
	return ts
}

// claimNode builds the node a NodeClaim becomes and checks its type.
func (c *checker) claimNode(nc NodeClaim, np *NodePool) *cnode {
	var t *InstanceType
	types := c.poolTypes(np)
	for i := range types {
		if types[i].Name == nc.InstanceType {
			t = &types[i]
		}
	}
	if t == nil {
		c.fail("nodeclaim %s: instance type %q is not available to NodePool %s", nc.Name, nc.InstanceType, np.Name)
		return nil
	}
	offered := false
	for _, o := range t.Offerings {
		if o.Zone == nc.Zone && o.CapacityType == nc.CapacityType && o.Price == nc.Price {
			offered = true
		}
	}
	if !offered {
		c.fail("nodeclaim %s: %s has no %s offering in %s at %v", nc.Name, t.Name, nc.CapacityType, nc.Zone, nc.Price)
	}
	l := map[string]string{}
	for k, v := range t.Labels {
		l[k] = v
	}
	for k, vs := range t.MultiLabels {
		if len(vs) > 0 {
			l[k] = vs[0]
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		l[k] = v
	}
	l[catalog.LabelZone] = nc.Zone
	l[catalog.LabelCapacityType] = nc.CapacityType
	l[catalog.LabelNodePool] = np.Name
	l[catalog.LabelHostname] = nc.Name
	for i, r := range np.Spec.Template.Spec.Requirements {
		vals := []string{l[r.Key]}
		if vs, ok := t.MultiLabels[r.Key]; ok {
			vals = vs
		}
		_, has := l[r.Key]
		okAny := false
		for _, v := range vals {
			if exprMatches(corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}, v, has) {
				okAny = true
			}
		}
		if !okAny {
			c.fail("nodeclaim %s: %s violates NodePool %s requirement[%d] %s %s %v", nc.Name, t.Name, np.Name, i, r.Key, r.Operator, r.Values)
		}
	}
	alloc := corev1.ResourceList{}
	for name, q := range t.Capacity {
		q = q.DeepCopy()
		if o, ok := t.Overhead[name]; ok {
			q.Sub(o)
		}
		alloc[name] = q
	}
	n := &cnode{name: nc.Name, labels: l, taints: np.Spec.Template.Spec.Taints, alloc: alloc, used: corev1.ResourceList{}, ports: map[inventory.HostPort]bool{}}
	// DaemonSet pods that would run there.
	for i := range c.in.DaemonSets {
		ds := &c.in.DaemonSets[i]
		if !tolerated(ds.Tolerations, n.taints) || !matchesNode(ds.NodeSelector, ds.Affinity, n.labels) {
			continue
		}
		c.bind(&inventory.Pod{Namespace: ds.Namespace, Name: ds.Name, Requests: ds.Requests}, n)
	}
	return n
}

func (c *checker) bind(p *inventory.Pod, n *cnode) {
	for name, q := range p.Requests {
		u := n.used[name]
		u.Add(q)
		n.used[name] = u
	}
	u := n.used[corev1.ResourcePods]
	u.Add(*resourceOne())
	n.used[corev1.ResourcePods] = u
	for _, hp := range p.HostPorts {
		n.ports[hp] = true
	}
	for _, v := range p.Volumes {
		if v.Driver != "" && v.ClaimName != "" && n.attached != nil {
			if n.attached[v.Driver] == nil {
				n.attached[v.Driver] = map[string]bool{}
			}
			n.attached[v.Driver][p.Namespace+"/"+v.ClaimName] = true
		}
	}
	c.placed = append(c.placed, cplaced{p, n})
	c.placeAnti(cplaced{p, n})
}

func (c *checker) verify(p *inventory.Pod, n *cnode) {
	ref := p.Namespace + "/" + p.Name
	if !tolerated(p.Tolerations, n.taints) {
		c.fail("%s on %s: does not tolerate the node's taints %v", ref, n.name, n.taints)
	}
	if !matchesNode(p.NodeSelector, p.Affinity, n.labels) {
		c.fail("%s on %s: node selector / required node affinity does not match labels", ref, n.name)
	}
	for _, hp := range p.HostPorts {
		if n.ports[hp] {
			c.fail("%s on %s: host port %d/%s already in use", ref, n.name, hp.Port, hp.Protocol)
		}
	}
	c.verifyVolumes(p, n)
	for _, tsc := range p.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel := selectorWith(tsc.LabelSelector, p, tsc.MatchLabelKeys)
		dom, ok := n.labels[tsc.TopologyKey]
		if !ok {
			c.fail("%s on %s: node has no %s label for its topology spread", ref, n.name, tsc.TopologyKey)
			continue
		}
		counts := c.countBy(tsc.TopologyKey, map[string]bool{p.Namespace: true}, sel)
		self := int32(0)
		if sel.Matches(labels.Set(p.Labels)) {
			self = 1
		}
		minC := int32(0)
		if tsc.TopologyKey != catalog.LabelHostname {
			minC = c.globalMin(tsc, p, counts)
		}
		if counts[dom]+self-minC > max(tsc.MaxSkew, 1) {
			c.fail("%s on %s: topology spread on %s violated: %d in %s, global minimum %d, maxSkew %d", ref, n.name, tsc.TopologyKey, counts[dom]+self, dom, minC, tsc.MaxSkew)
		}
	}
	if a := p.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				sel := selectorWith(t.LabelSelector, p, t.MatchLabelKeys)
				counts := c.countBy(t.TopologyKey, nsOf(p, t), sel)
				total := int32(0)
				for _, v := range counts {
					total += v
				}
				if counts[n.labels[t.TopologyKey]] == 0 && (total > 0 || !sel.Matches(labels.Set(p.Labels))) {
					c.fail("%s on %s: required pod affinity on %s has no matching pod there", ref, n.name, t.TopologyKey)
				}
			}
		}
		if a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				sel := selectorWith(t.LabelSelector, p, t.MatchLabelKeys)
				counts := c.countBy(t.TopologyKey, nsOf(p, t), sel)
				if d, ok := n.labels[t.TopologyKey]; ok && counts[d] > 0 {
					c.fail("%s on %s: required pod anti-affinity on %s: %d matching pods in %s", ref, n.name, t.TopologyKey, counts[d], d)
				}
			}
		}
	}
	// Symmetry: placed pods' anti-affinity keeps this pod out.
	for _, t := range c.anti {
		if !(t.ns[p.Namespace] || t.ns["*"]) || !t.sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if d, ok := n.labels[t.key]; ok {
			if q, found := t.first[d]; found {
				c.fail("%s on %s: %s/%s there is anti-affine to it on %s", ref, n.name, q.pod.Namespace, q.pod.Name, t.key)
			}
		}
	}
}

// verifyVolumes: every claim's volume topology matches the node (each
// volume on its own, one of its terms, as kube-scheduler's volume binding
// judges a node), and the node's attach limit per CSI driver holds the
// claims already there and the pod's.
func (c *checker) verifyVolumes(p *inventory.Pod, n *cnode) {
	ref := p.Namespace + "/" + p.Name
	for _, v := range p.Volumes {
		if len(v.Topology) > 0 && !matchesNode(nil, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: v.Topology}}}, n.labels) {
			c.fail("%s on %s: volume %s (claim %s) cannot be reached there: its topology %v does not match the node's labels", ref, n.name, v.Name, v.ClaimName, v.Topology)
		}
	}
	for _, driver := range slices.Sorted(maps.Keys(n.limits)) {
		limit := n.limits[driver]
		claims := map[string]bool{}
		for id := range n.attached[driver] {
			claims[id] = true
		}
		for _, v := range p.Volumes {
			if v.Driver == driver && v.ClaimName != "" {
				claims[p.Namespace+"/"+v.ClaimName] = true
			}
		}
		if int32(len(claims)) > limit && len(claims) > len(n.attached[driver]) {
			c.fail("%s on %s: %d volumes of %s would be attached, over the node's limit of %d", ref, n.name, len(claims), driver, limit)
		}
	}
}
