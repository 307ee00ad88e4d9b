package engine

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Cluster is the existing nodes of many scheduling simulations that differ
// only in the pods to place and the nodes left out: consolidation asks
// "where would these pods go without this node?" once per candidate, pass
// after pass (Karpenter's SimulateScheduling over its cluster state).
// Cluster.Solve returns exactly what Solve returns for the same input, at a
// cost that follows the nodes that could take one of the pods rather than
// the size of the cluster:
//
//   - When no pod to place declares a topology spread constraint or pod
//     (anti-)affinity and no such term of a bound pod selects one of them
//     (by its label selector alone), an existing node that can take none of
//     the pods (a NoSchedule or NoExecute taint none of them tolerates, or
//     less room left than any of them requests) is left out of the input.
//     Solve would only try it and move on: its room never changes, and no
//     topology group that reads existing nodes owns or selects the pods.
//   - A simulation whose pods equal an earlier one's but for their names
//     (same requests, selectors, affinity, tolerations and host ports, in
//     the order Solve places them) on the same remaining nodes has the same
//     result with the pods renamed; it is answered from memory.
//
// Nodes are never left out when that could change an error or a message:
// one schedulable node stays when all would go (Solve's reasons say
// whether existing nodes were tried), a node with a pod whose required node
// affinity does not parse stays (Solve reports it), and nothing is left out when the input names
// more resources than the scheduler has slots for. A Cluster is not safe
// for concurrent use.
type Cluster struct {
	in Input
	// ri slots every resource of the pools' types, the DaemonSets and the
	// nodes (overflow: more than the scheduler has slots for).
	ri       *resourceIndex
	overflow bool
	// free is each node's room in ri's slots; byRoom orders the nodes by
	// CPU left, most first. Nodes with a pod whose required node affinity
	// does not parse must be parsed by Solve (its error must not go
	// unseen): parsed lists them, and plain is false for them.
	free   []vec
	byRoom []int
	plain  []bool
	parsed []int
	// base: the node and its pods name no resource beyond the four every
	// slot layout starts with (CPU, memory, pods, ephemeral storage), so
	// its room is the same in any Cluster's slots and NewClusterFrom may
	// take it over. topo: one of its pods declares topology.
	base, topo []bool
	// topology: a bound pod declares topology spread or pod (anti-)affinity.
	// terms select at least every pod those terms' groups select (nil
	// when one does not parse: every pod counts as selected).
	topology bool
	terms    []labels.Selector
	// takers are the nodes that may take a pod, by set of shapes.
	takers map[string]takers
	// uid names each node's content in the lineage, whose answers the
	// Clusters made one from another with the same pools share.
	uid []uint64
	lin *lineage
	// pre are the pools every Solve starts from (nil when they failed).
	pre *preparedPools
	// nodes are the plain nodes as Solve builds them, minus their pods
	// (nil until first needed), for Solves that leave nodes out: no pod
	// declares topology there, so Solve reads a plain node's pods only
	// for its room and host ports. They are used only when the nodes slot
	// no resource the pools did not (sameSlots): Solve then slots exactly
	// as it would building them itself; or for a base node, whose slots
	// are the same in every layout.
	nodes     []*node
	sameSlots bool
}

type memoized struct {
	res  Result
	refs []PodRef // the pods in the order Solve placed them
}

// lineage is what Clusters made one from another (NewClusterFrom) with the
// same NodePools, DaemonSets, Catalog and Options share: a node taken over
// unchanged keeps its uid, so an answer is keyed by the uids of the nodes
// Solve saw, and holds for a later Cluster that gives it the same nodes.
type lineage struct {
	nextUID, nextList uint64
	// memo holds the answers by the list of nodes that may take the pods
	// (a list no longer current is dropped), then by the rest of the key.
	memo map[uint64]map[string]memoized
	// lists are, by set of pod shapes, the last nodes (by uid) found to
	// take one of them, and the number naming that list.
	lists map[string]takerList
	// contents number the pods' contents (Pods.content).
	contents map[string]uint64
}

type takerList struct {
	uids []uint64
	id   uint64
}

func newLineage() *lineage {
	return &lineage{memo: map[uint64]map[string]memoized{}, lists: map[string]takerList{}, contents: map[string]uint64{}}
}

// NewCluster prepares in.ExistingNodes for many Solves with in's NodePools,
// DaemonSets, Catalog and Options; in.Pods is ignored.
func NewCluster(in Input) *Cluster { return NewClusterFrom(nil, in, nil) }

// NewClusterFrom is NewCluster(in) for nodes most of which an earlier
// Cluster read (a plan's next wave, consolidation's next pass): where
// same[i] ≥ 0, in.ExistingNodes[i] is prev's node same[i] unchanged (the
// same name, labels, taints, allocatable, schedulability and pods), and
// what prev read of it is taken over when the node names no resource
// beyond CPU, memory, pods and ephemeral storage (its room then reads the
// same whatever the pools); every other node is read afresh. in's pools,
// DaemonSets and Options may differ from prev's; where they are the same
// (the same slices, catalogue and options), the new Cluster also takes
// over prev's prepared pools and answers: a simulation that gives Solve
// the same nodes and pods as one prev answered is answered from memory.
// A nil prev or same reads every node.
func NewClusterFrom(prev *Cluster, in Input, same []int) *Cluster {
	in.Pods = nil
	c := &Cluster{in: in, takers: map[string]takers{}}
	share := prev != nil && same != nil && prev.pre != nil && sameSetting(prev.in, in)
	if share {
		c.lin, c.pre, c.ri = prev.lin, prev.pre, prev.pre.ri.clone()
	} else {
		c.lin = newLineage()
		// Slot the resources the scheduler would: the pools' types and
		// DaemonSets first, then the nodes and their pods.
		s := newScheduler(in.Options)
		c.ri = s.ri
		if err := s.buildPools(in); err != nil {
			// Solve reports it; leave nothing out.
			c.overflow = true
		} else {
			c.pre = s.prepared()
		}
	}
	n := len(in.ExistingNodes)
	c.free, c.plain, c.base, c.topo = make([]vec, n), make([]bool, n), make([]bool, n), make([]bool, n)
	c.uid = make([]uint64, n)
	c.byRoom = make([]int, 0, n)
	for i := range in.ExistingNodes {
		if share && same[i] >= 0 {
			c.uid[i] = prev.uid[same[i]]
		} else {
			c.uid[i] = c.lin.nextUID
			c.lin.nextUID++
		}
		if prev != nil && same != nil && same[i] >= 0 && prev.base[same[i]] {
			j := same[i]
			c.free[i], c.plain[i], c.base[i], c.topo[i] = prev.free[j], prev.plain[j], true, prev.topo[j]
			if prev.nodes != nil && prev.nodes[j] != nil {
				if c.nodes == nil {
					c.nodes = make([]*node, n)
				}
				c.nodes[i] = prev.nodes[j]
			}
		} else {
			c.read(i)
		}
		c.topology = c.topology || c.topo[i]
		c.byRoom = append(c.byRoom, i)
		if !c.plain[i] {
			c.parsed = append(c.parsed, i)
		}
	}
	slices.SortStableFunc(c.byRoom, func(a, b int) int { return cmp.Compare(c.free[b][rCPU], c.free[a][rCPU]) })
	if c.topology {
		c.terms = boundTerms(in.ExistingNodes, c.topo)
	}
	c.sameSlots = c.pre != nil && len(c.ri.names) == len(c.pre.ri.names)
	return c
}

// sameSetting: a and b schedule with the same pools, DaemonSets, catalogue
// and options (the same slices: the engine's inputs do not change).
func sameSetting(a, b Input) bool {
	return sameSlice(a.NodePools, b.NodePools) && sameSlice(a.DaemonSets, b.DaemonSets) && a.Catalog == b.Catalog && a.Options == b.Options
}

func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Nodes is the number of existing nodes the Cluster holds.
func (c *Cluster) Nodes() int { return len(c.in.ExistingNodes) }

// read reads node i: its room in the Cluster's slots, whether Solve must
// parse it, whether it is base and whether a pod declares topology.
func (c *Cluster) read(i int) {
	en := &c.in.ExistingNodes[i]
	free, err := c.ri.vec(en.Node.Allocatable)
	c.overflow = c.overflow || err != nil
	c.plain[i], c.base[i] = true, baseOnly(en.Node.Allocatable)
	for j := range en.Pods {
		p := &en.Pods[j]
		c.topo[i] = c.topo[i] || hasTopology(p)
		c.plain[i] = c.plain[i] && nodeAffinityParses(p)
		c.base[i] = c.base[i] && baseOnly(p.Requests)
		req, err := c.podVec(p)
		c.overflow = c.overflow || err != nil
		free = free.sub(req)
	}
	c.free[i] = free
}

// baseOnly: the list names only resources every slot layout starts with.
func baseOnly(rl corev1.ResourceList) bool {
	for name := range rl {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
		default:
			return false
		}
	}
	return true
}

// built is node i as buildExisting builds it, minus its pods; nil when
// Solve must build it (the node is not plain or not schedulable). A node
// is built in the Cluster's slots, which are Solve's (sameSlots) or, for
// a base node, agree with them on every slot it fills.
func (c *Cluster) built(i int) *node {
	if c.pre == nil || !c.sameSlots && !c.base[i] || !c.plain[i] || c.in.ExistingNodes[i].Node.Unschedulable {
		return nil
	}
	if c.nodes == nil {
		c.nodes = make([]*node, len(c.in.ExistingNodes))
	}
	if n := c.nodes[i]; n != nil {
		return n
	}
	en := &c.in.ExistingNodes[i]
	n := &node{name: en.Node.Name, existing: true, labels: existingLabels(en), taints: en.Node.Taints, free: c.free[i], ports: map[inventory.HostPort]bool{}, bucket: -1, room: -1,
		vols: newAttached(en.Node.VolumeLimits)}
	for j := range en.Pods {
		for _, hp := range en.Pods[j].HostPorts {
			n.ports[hp] = true
		}
		n.vols.add(&en.Pods[j])
	}
	c.nodes[i] = n
	return n
}

// podVec is the pod's requests as Solve counts them (one pod slot included).
func (c *Cluster) podVec(p *inventory.Pod) (vec, error) {
	v, err := c.ri.vec(p.Requests)
	v[rPods]++
	return v, err
}

// nodeAffinityParses: Solve reads the pod's required node affinity without
// an error (the preferred terms that do not parse it skips).
func nodeAffinityParses(p *inventory.Pod) bool {
	if _, err := volumeRequirements(p); err != nil {
		return false
	}
	if p.Affinity == nil || p.Affinity.NodeAffinity == nil || p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if _, err := FromNodeSelectorTerm(term.MatchExpressions); err != nil {
			return false
		}
	}
	return true
}

func hasTopology(p *inventory.Pod) bool {
	a := p.Affinity
	return len(p.TopologySpreadConstraints) > 0 || a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

// boundTerms are selectors of the topology terms (spread constraints, pod
// affinity and anti-affinity, required or preferred) of the pods bound to
// the nodes marked topo, each once, that select at least every pod the
// scheduler's group for the term selects: the term's label selector
// without its namespaces and matchLabelKeys (which only narrow it), every
// pod for a term with no selector but matchLabelKeys. Nil when a selector
// does not parse (Solve reports it).
// PodAffinityTerms are a's pod affinity and anti-affinity terms, required
// and preferred: every term whose selector picks the pods a pod's
// placement depends on.
func PodAffinityTerms(a *corev1.Affinity) []corev1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	return terms
}

func boundTerms(nodes []ExistingNode, topo []bool) []labels.Selector {
	var out []labels.Selector
	seen := map[string]bool{}
	add := func(ls *metav1.LabelSelector, keys bool) bool {
		sel := labels.Nothing()
		switch {
		case ls != nil:
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(ls); err != nil {
				return false
			}
		case keys:
			sel = labels.Everything()
		}
		if k := sel.String(); !seen[k] {
			seen[k] = true
			out = append(out, sel)
		}
		return true
	}
	for i := range nodes {
		if !topo[i] {
			continue
		}
		for j := range nodes[i].Pods {
			p := &nodes[i].Pods[j]
			for _, c := range p.TopologySpreadConstraints {
				if !add(c.LabelSelector, len(c.MatchLabelKeys) > 0) {
					return nil
				}
			}
			for _, t := range PodAffinityTerms(p.Affinity) {
				if !add(t.LabelSelector, len(t.MatchLabelKeys) > 0) {
					return nil
				}
			}
		}
	}
	return out
}

// selected reports whether a topology term of a bound pod may select one
// of the pods (always, when a term did not parse).
func (c *Cluster) selected(pods *Pods) bool {
	if c.terms == nil {
		return true
	}
	for i := range pods.list {
		set := labels.Set(pods.list[i].Labels)
		for _, sel := range c.terms {
			if sel.Matches(set) {
				return true
			}
		}
	}
	return false
}

// Pods are pods to place, read once for any number of Cluster.Solves: a
// consolidation candidate's pods are simulated pass after pass. Like every
// input of the engine, the pods must not change afterwards. Like a Cluster,
// Pods are not safe for concurrent use (a Solve numbers their content).
type Pods struct {
	list []inventory.Pod
	// refs are the pods in the order Solve places them, and content what
	// Solve reads of them in that order without topology, but their names.
	refs    []PodRef
	content string
	// topology: a pod declares topology spread or pod (anti-)affinity.
	topology bool
	// shapes are the distinct requests (by resource name, as Solve counts
	// them) and tolerations, which decide whether a node can take a pod;
	// shapesKey names them.
	shapes    []namedShape
	shapesKey string
	// lin and contentID: content's number in the lineage that last read it.
	lin       *lineage
	contentID uint64
}

type namedShape struct {
	req  []namedQty // by name
	tols []corev1.Toleration
}

type namedQty struct {
	name corev1.ResourceName
	v    int64
}

// NewPods reads pods for Cluster.Solve.
func NewPods(pods []inventory.Pod) *Pods {
	ps := &Pods{list: pods}
	type entry struct {
		p        *inventory.Pod
		cpu, mem int64
	}
	es := make([]entry, len(pods))
	seen := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		ps.topology = ps.topology || hasTopology(p)
		es[i] = entry{p: p}
		sh := namedShape{tols: p.Tolerations}
		for _, name := range slices.Sorted(maps.Keys(p.Requests)) {
			v := qval(slotKind(name), p.Requests[name])
			sh.req = append(sh.req, namedQty{name, v})
			switch name {
			case corev1.ResourceCPU:
				es[i].cpu = v
			case corev1.ResourceMemory:
				es[i].mem = v
			}
		}
		if k := fmt.Sprintln(sh.req, tolKey(sh.tols)); !seen[k] {
			seen[k] = true
			ps.shapes = append(ps.shapes, sh)
			ps.shapesKey += k
		}
	}
	// Solve's order: CPU, then memory, largest first; then namespace and name.
	slices.SortStableFunc(es, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.mem, a.mem), cmp.Compare(a.p.Namespace, b.p.Namespace), cmp.Compare(a.p.Name, b.p.Name))
	})
	ps.refs = make([]PodRef, len(es))
	var content []byte
	for i, e := range es {
		ps.refs[i] = refOf(e.p)
		content = appendContent(append(content, '\n'), e.p)
	}
	ps.content = string(content)
	return ps
}

// slotKind is the slot qval converts a resource's quantity for: CPU in
// milli-units, everything else in units.
func slotKind(name corev1.ResourceName) int {
	if name == corev1.ResourceCPU {
		return rCPU
	}
	return rExt
}

// Solve is Solve with the Cluster's input, pods as the pods to place and
// every existing node but those at the indices in without.
func (c *Cluster) Solve(pods *Pods, without []int) (Result, error) {
	in := c.in
	in.Pods, in.ExistingNodes = pods.list, nil
	may, list, prune := c.mayTake(pods)
	if !prune {
		skip := make(map[int]bool, len(without))
		for _, i := range without {
			skip[i] = true
		}
		for i := range c.in.ExistingNodes {
			if !skip[i] {
				in.ExistingNodes = append(in.ExistingNodes, c.in.ExistingNodes[i])
			}
		}
		return solve(in, c.pre, nil)
	}
	// The nodes that may take a pod, but those left out: usually all of
	// them, as a candidate seldom has room for its own pods.
	var gone []int
	for _, i := range without {
		if _, ok := slices.BinarySearch(may, i); ok {
			gone = append(gone, i)
		}
	}
	slices.Sort(gone)
	gone = slices.Compact(gone)
	fallback := -1
	if len(gone) == len(may) {
		// Solve's reasons say whether existing nodes were tried: keep one.
		for i := range c.in.ExistingNodes {
			if !slices.Contains(without, i) && !c.in.ExistingNodes[i].Node.Unschedulable {
				fallback = i
				break
			}
		}
	}
	// The nodes Solve sees (those that may take a pod, but those gone, and
	// the fallback) and the pods, by number.
	key := make([]byte, 0, 4*len(gone)+32)
	key = binary.AppendUvarint(key, uint64(len(gone)))
	for _, i := range gone {
		key = binary.AppendUvarint(key, c.uid[i])
	}
	if fallback >= 0 {
		key = binary.AppendUvarint(key, c.uid[fallback]+1)
	} else {
		key = binary.AppendUvarint(key, 0)
	}
	key = binary.AppendUvarint(key, c.contentOf(pods))
	if m, ok := c.lin.memo[list][string(key)]; ok {
		return m.res.renamed(m.refs, pods.refs), nil
	}
	in.ExistingNodes = make([]ExistingNode, 0, len(may)-len(gone)+1)
	built := make([]*node, 0, cap(in.ExistingNodes))
	for _, i := range may {
		if _, out := slices.BinarySearch(gone, i); !out {
			in.ExistingNodes = append(in.ExistingNodes, c.in.ExistingNodes[i])
			built = append(built, c.built(i))
		}
	}
	if fallback >= 0 {
		in.ExistingNodes = append(in.ExistingNodes, c.in.ExistingNodes[fallback])
		built = append(built, c.built(fallback))
	}
	res, err := solve(in, c.pre, built)
	if err == nil {
		if c.lin.memo[list] == nil {
			c.lin.memo[list] = map[string]memoized{}
		}
		c.lin.memo[list][string(key)] = memoized{res: res, refs: pods.refs}
	}
	return res, err
}

// contentOf numbers what Solve reads of the pods but their names.
func (c *Cluster) contentOf(pods *Pods) uint64 {
	if pods.lin == c.lin {
		return pods.contentID
	}
	id, ok := c.lin.contents[pods.content]
	if !ok {
		id = uint64(len(c.lin.contents))
		c.lin.contents[pods.content] = id
	}
	pods.lin, pods.contentID = c.lin, id
	return id
}

// podShape is what decides whether a node can take a pod at all.
type podShape struct {
	req  vec
	tols []corev1.Toleration
}

// mayTake returns, in order, the schedulable nodes that could take one of
// the pods (it tolerates the node's NoSchedule and NoExecute taints —
// PreferNoSchedule ones are relaxed at worst — and fits in the room left)
// and every node Solve must parse, with the number naming that list of
// nodes in the lineage; false when nodes that take none of them may not
// be left out. It is worked out once per set of shapes.
func (c *Cluster) mayTake(pods *Pods) ([]int, uint64, bool) {
	if c.overflow || pods.topology || c.topology && c.selected(pods) {
		return nil, 0, false
	}
	if got, ok := c.takers[pods.shapesKey]; ok {
		return got.nodes, got.list, got.prune
	}
	shapes, prune := c.slotted(pods.shapes)
	var out []int
	if prune {
		least := int64(math.MaxInt64)
		for _, sh := range shapes {
			least = min(least, sh.req[rCPU])
		}
		// byRoom is by CPU left, most first: only a prefix has room for
		// the smallest pod.
		n := sort.Search(len(c.byRoom), func(j int) bool { return c.free[c.byRoom[j]][rCPU] < least })
		for _, i := range c.byRoom[:n] {
			if c.in.ExistingNodes[i].Node.Unschedulable || !c.plain[i] {
				continue
			}
			taints := c.in.ExistingNodes[i].Node.Taints
			for _, sh := range shapes {
				if !sh.req.fits(c.free[i]) {
					continue
				}
				if _, ok := tolerates(sh.tols, taints, false); ok {
					out = append(out, i)
					break
				}
			}
		}
		for _, i := range c.parsed {
			if !c.in.ExistingNodes[i].Node.Unschedulable {
				out = append(out, i)
			}
		}
		slices.Sort(out)
	}
	// The list keeps its number while the nodes on it are the same.
	uids := make([]uint64, len(out))
	for k, i := range out {
		uids[k] = c.uid[i]
	}
	last, ok := c.lin.lists[pods.shapesKey]
	if !ok || !slices.Equal(last.uids, uids) {
		if ok {
			delete(c.lin.memo, last.id)
		}
		last = takerList{uids: uids, id: c.lin.nextList}
		c.lin.nextList++
		c.lin.lists[pods.shapesKey] = last
	}
	c.takers[pods.shapesKey] = takers{nodes: out, list: last.id, prune: prune}
	return out, last.id, prune
}

// takers are the nodes that may take a pod of some shapes.
type takers struct {
	nodes []int
	list  uint64
	prune bool
}

// slotted converts shapes to the Cluster's slots, leaving out those asking
// for a resource no node has (they fit on none); false when Solve would
// slot more resources than it has room for.
func (c *Cluster) slotted(named []namedShape) ([]podShape, bool) {
	extra := map[corev1.ResourceName]bool{}
	var out []podShape
	for _, sh := range named {
		var v vec
		nowhere := false
		for _, q := range sh.req {
			slot, ok := c.ri.idx[q.name]
			if !ok {
				// Solve slots it: count it against the slots left.
				extra[q.name] = true
				nowhere = nowhere || q.v != 0
				continue
			}
			v[slot] = q.v
		}
		v[rPods]++
		if !nowhere {
			out = append(out, podShape{req: v, tols: sh.tols})
		}
	}
	return out, len(c.ri.names)+len(extra) <= nres
}

// appendContent writes what the scheduler reads of a pod without topology,
// but its name and namespace.
func appendContent(b []byte, p *inventory.Pod) []byte {
	for _, name := range slices.Sorted(maps.Keys(p.Requests)) {
		b = strconv.AppendInt(append(append(b, name...), '='), qval(slotKind(name), p.Requests[name]), 10)
		b = append(b, ';')
	}
	b = append(b, '|')
	for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
		b = append(append(append(append(b, k...), '='), p.NodeSelector[k]...), ';')
	}
	b = append(b, '|')
	for _, t := range p.Tolerations {
		b = append(append(append(append(append(append(append(b, t.Key...), '\x00'), t.Operator...), '\x00'), t.Value...), '\x00'), t.Effect...)
		b = append(b, ';')
	}
	b = append(b, '|')
	for _, hp := range p.HostPorts {
		b = append(append(append(strconv.AppendInt(b, int64(hp.Port), 10), hp.Protocol...), hp.HostIP...), ';')
	}
	if p.Affinity != nil {
		a, _ := json.Marshal(p.Affinity) // API types always marshal
		b = append(append(b, '|'), a...)
	}
	if p.VolumesConstrain() {
		v, _ := json.Marshal(p.Volumes)
		b = append(append(b, '|'), v...)
	}
	return b
}

// renamed is r for pods renamed from[i] → to[i].
func (r Result) renamed(from, to []PodRef) Result {
	name := make(map[PodRef]PodRef, len(from))
	for i := range from {
		name[from[i]] = to[i]
	}
	out := r
	out.Placements = make([]Placement, len(r.Placements))
	for i, pl := range r.Placements {
		pl.Pod = name[pl.Pod]
		out.Placements[i] = pl
	}
	out.NodeClaims = make([]NodeClaim, len(r.NodeClaims))
	for i, nc := range r.NodeClaims {
		pods := make([]PodRef, len(nc.Pods))
		for j, p := range nc.Pods {
			pods[j] = name[p]
		}
		nc.Pods = pods
		out.NodeClaims[i] = nc
	}
	out.Unschedulable = make([]Unschedulable, len(r.Unschedulable))
	for i, u := range r.Unschedulable {
		u.Pod = name[u.Pod]
		out.Unschedulable[i] = u
	}
	slices.SortFunc(out.Unschedulable, func(a, b Unschedulable) int { return strings.Compare(a.Pod.String(), b.Pod.String()) })
	if r.Unschedulable == nil {
		out.Unschedulable = nil
	}
	if r.Placements == nil {
		out.Placements = nil
	}
	if r.NodeClaims == nil {
		out.NodeClaims = nil
	}
	return out
}
