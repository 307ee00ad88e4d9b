package disruption

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Well-known keys the disruption controller reads.
const (
	// PodDeletionCostAnnotation is controller.kubernetes.io/pod-deletion-cost.
	PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"
	// MirrorPodAnnotation marks static (mirror) pods, which never move.
	MirrorPodAnnotation = "kubernetes.io/config.mirror"
	// simulationTaint keeps pods off nodes a consolidation simulation must
	// not fill (inside consolidateAfter), while their pods still count for
	// topology.
	simulationTaint = "karpenter-migrate.io/consolidation-simulation"
)

type poolInfo struct {
	name  string
	np    *engine.NodePool
	types map[string]*engine.InstanceType
	// cost and disruption are the pool's totals (Balanced policy).
	cost, disruption float64
}

type nodeInfo struct {
	idx         int
	in          *Node
	pool        *poolInfo
	ref         NodeRef
	initialized bool
	deleting    bool
	// resched are the pods that must move when the node goes; pods is
	// them read for simulations (reschedPods).
	resched []*inventory.Pod
	pods    *engine.Pods
	// simPods are the pods simulations see on the node (compactPods), and
	// selectors those of its pods' topology terms.
	simPods   []inventory.Pod
	selectors *topologySelectors
	// derived is the generation of Settle's cache (the newState) that
	// derived the node and its simPods: they are unchanged since.
	derived int
	// blockers are reasons no method may disrupt the node (node- or
	// pod-level); podBlockers is the pod-level subset (drift ignores them
	// when the pool sets terminationGracePeriod).
	blockers    []string
	podBlockers []string
	// consolidatableAt is when consolidateAfter has passed (zero: Never).
	consolidatableAt time.Time
	never            bool
	disruptionCost   float64
	savingsRatio     float64
	expl             *Candidacy
	// drift is the drift method's verdict, once judged.
	drift *driftVerdict
}

type state struct {
	in    *Input
	now   time.Time
	opts  Options
	pools []*poolInfo
	byPNm map[string]*poolInfo
	nodes []*nodeInfo
	byNm  map[string]*nodeInfo
	// deleting are the indices of the nodes already being deleted.
	deleting []int
	// pdbs are the PDBs by namespace (a PDB selects pods of its own).
	pdbs map[string][]pdbInfo
	// clusters are the nodes as simulations see them, by KarpenterOnly.
	clusters map[bool]*engine.Cluster
	cache    *nodeCache
	gen      int
}

type pdbInfo struct {
	pdb *inventory.PDB
	sel labels.Selector
}

// newState reads the cluster. A cache (Settle's) gives back what an
// earlier pass derived from nodes unchanged since; nil derives everything.
func newState(in *Input, cache *nodeCache) (*state, error) {
	st := &state{in: in, now: in.Now, opts: in.Options, byPNm: map[string]*poolInfo{}, byNm: map[string]*nodeInfo{},
		pdbs: map[string][]pdbInfo{}, clusters: map[bool]*engine.Cluster{}, cache: cache}
	if cache != nil {
		cache.gen++
		st.gen = cache.gen
	}
	if st.opts.MaxCandidates <= 0 {
		st.opts.MaxCandidates = 100
	}
	catTypes := map[string][]engine.InstanceType{}
	for i := range in.NodePools {
		np := &in.NodePools[i]
		if np.Name == "" {
			return nil, fmt.Errorf("nodePools[%d]: name is required", i)
		}
		if _, dup := st.byPNm[np.Name]; dup {
			return nil, fmt.Errorf("nodePools[%d]: duplicate NodePool %q", i, np.Name)
		}
		types := np.InstanceTypes
		if types == nil && in.Catalog != nil {
			key := fmt.Sprintf("%+v", np.Kubelet)
			if cached, ok := catTypes[key]; ok {
				types = cached
			} else {
				var err error
				if types, err = engine.InstanceTypesFromCatalog(in.Catalog, np.Kubelet); err != nil {
					return nil, fmt.Errorf("nodePool %s: EC2NodeClass kubelet: %w", np.Name, err)
				}
				catTypes[key] = types
			}
		}
		p := &poolInfo{name: np.Name, np: np, types: map[string]*engine.InstanceType{}}
		for j := range types {
			p.types[types[j].Name] = &types[j]
		}
		st.pools = append(st.pools, p)
		st.byPNm[p.name] = p
	}
	if cache != nil && cache.pdbs != nil {
		st.pdbs = cache.pdbs
	}
	for i := range in.PDBs {
		if cache != nil && cache.pdbs != nil {
			break
		}
		pdb := &in.PDBs[i]
		sel := labels.Nothing()
		if pdb.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(pdb.Selector)
			if err != nil {
				return nil, fmt.Errorf("pdb %s/%s: spec.selector: %w", pdb.Namespace, pdb.Name, err)
			}
			sel = s
		}
		st.pdbs[pdb.Namespace] = append(st.pdbs[pdb.Namespace], pdbInfo{pdb: pdb, sel: sel})
	}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if n.Node.Name == "" {
			return nil, fmt.Errorf("nodes[%d]: name is required", i)
		}
		if _, dup := st.byNm[n.Node.Name]; dup {
			return nil, fmt.Errorf("nodes[%d]: duplicate node %q", i, n.Node.Name)
		}
		ni := cache.node(i, n, st)
		if ni == nil {
			ni = st.newNode(i, n)
		}
		st.nodes = append(st.nodes, ni)
		st.byNm[n.Node.Name] = ni
		if ni.deleting {
			st.deleting = append(st.deleting, i)
		}
	}
	if cache != nil {
		cache.pdbs = st.pdbs
	}
	st.compactPods(cache)
	cache.keep(st.nodes)
	for _, ni := range st.nodes {
		if ni.pool != nil && !ni.in.InFlight {
			ni.pool.cost += ni.ref.Price
			ni.pool.disruption += ni.disruptionCost
		}
	}
	return st, nil
}

// nodeCache keeps, from one of Settle's passes to the next, what newNode
// and compactPods derived from each node, so that a pass costs what
// changed rather than what the cluster holds. Settle forgets the nodes a
// command changes; everything else newNode reads (NodePools, PDBs,
// catalogue) is the same in every pass.
type nodeCache struct {
	nodes map[string]*nodeInfo
	// folding is compactPods' selectors the simPods were folded against.
	folding string
	// pdbs are the PDBs with their selectors parsed, the same every pass.
	pdbs map[string][]pdbInfo
	// clusters are the last simulated clusters, by KarpenterOnly.
	clusters map[bool]passCluster
	// gen counts the states read with the cache (nodeInfo.derived).
	gen int
}

// passCluster is an engine.Cluster a pass simulated on, the cache's
// generation then, each node's place in it, and whether the node carried
// the simulation taint.
type passCluster struct {
	c       *engine.Cluster
	gen     int
	at      map[string]int
	tainted []bool
}

func newNodeCache() *nodeCache {
	return &nodeCache{nodes: map[string]*nodeInfo{}, clusters: map[bool]passCluster{}}
}

// node returns the cached view of n for this pass (its own Candidacy),
// or nil.
func (c *nodeCache) node(i int, n *Node, st *state) *nodeInfo {
	if c == nil {
		return nil
	}
	old, ok := c.nodes[n.Node.Name]
	if !ok {
		return nil
	}
	ni := *old
	ni.idx, ni.in, ni.pool, ni.expl = i, n, st.byPNm[ni.ref.NodePool], &Candidacy{}
	return &ni
}

func (c *nodeCache) keep(nodes []*nodeInfo) {
	if c == nil {
		return
	}
	for _, ni := range nodes {
		c.nodes[ni.ref.Name] = ni
	}
}

// forget drops nodes a command removed or changed.
func (c *nodeCache) forget(names ...string) {
	for _, n := range names {
		delete(c.nodes, n)
	}
}

func label(n *inventory.Node, key, field string) string {
	if v, ok := n.Labels[key]; ok {
		return v
	}
	return field
}

func (st *state) newNode(i int, n *Node) *nodeInfo {
	nd := &n.Node
	ni := &nodeInfo{idx: i, in: n, ref: NodeRef{Name: nd.Name,
		NodePool:     label(nd, catalog.LabelNodePool, nd.NodePool),
		InstanceType: label(nd, catalog.LabelInstanceType, nd.InstanceType),
		Zone:         label(nd, catalog.LabelZone, nd.Zone),
		CapacityType: label(nd, catalog.LabelCapacityType, nd.CapacityType),
	}}
	ni.expl, ni.derived = &Candidacy{}, st.gen
	ni.pool = st.byPNm[ni.ref.NodePool]
	switch v, ok := nd.Labels[apiv1.NodeInitializedLabelKey]; {
	case ok:
		ni.initialized = v == "true"
	default:
		ni.initialized = nd.Ready && !n.InFlight
	}
	ni.deleting = n.Deleting
	for _, t := range nd.Taints {
		if t.Key == apiv1.DisruptedTaintKey {
			ni.deleting = true
		}
	}
	ni.ref.Price = n.Price
	if ni.ref.Price == 0 {
		ni.ref.Price = st.price(ni)
	}
	for j := range n.Pods {
		p := &n.Pods[j]
		if reschedulable(p) {
			ni.resched = append(ni.resched, p)
		}
	}
	// Settle's cache keeps them with the node.
	ni.reschedPods()
	// Reschedule cost and the savings ratio (Karpenter v1.14 ordering).
	cost := 1.0
	for _, p := range ni.resched {
		cost += max(0, EvictionCost(p))
	}
	ni.disruptionCost = cost
	ni.savingsRatio = ni.ref.Price / cost
	ni.nodeBlockers(n)
	st.podBlockers(ni, n)
	ni.setConsolidatableAt(n)
	return ni
}

// nodeBlockers lists what keeps the node itself from being disrupted.
func (ni *nodeInfo) nodeBlockers(n *Node) {
	nd := &n.Node
	block := func(format string, a ...any) { ni.blockers = append(ni.blockers, fmt.Sprintf(format, a...)) }
	switch {
	case ni.ref.NodePool == "":
		block("not managed by Karpenter (no %s label)", catalog.LabelNodePool)
	case ni.pool == nil:
		block("NodePool %s is not in the input", ni.ref.NodePool)
	}
	if n.InFlight {
		block("in-flight NodeClaim, not a node yet")
	} else if !ni.initialized {
		block("not initialized")
	}
	if ni.deleting {
		block("already being disrupted or deleted")
	}
	if n.Nominated {
		block("nominated for pending pods")
	}
	if nd.Annotations[apiv1.DoNotDisruptAnnotationKey] == "true" {
		block("node is annotated %s=true", apiv1.DoNotDisruptAnnotationKey)
	}
	if ni.pool != nil {
		if ni.ref.Price == 0 {
			block("no price for %s %s in %s (not offered by NodePool %s or the catalogue)", ni.ref.CapacityType, ni.ref.InstanceType, ni.ref.Zone, ni.pool.name)
		}
		for _, k := range []struct{ key, v string }{{catalog.LabelInstanceType, ni.ref.InstanceType}, {catalog.LabelCapacityType, ni.ref.CapacityType}, {catalog.LabelZone, ni.ref.Zone}} {
			if k.v == "" {
				block("missing label %s", k.key)
			}
		}
	}
}

// podBlockers lists the node's pods that may not be evicted: do-not-disrupt
// and PDBs (ValidatePodsDisruptable).
func (st *state) podBlockers(ni *nodeInfo, n *Node) {
	for j := range n.Pods {
		p := &n.Pods[j]
		if !evictable(p) {
			continue
		}
		if v, ok := p.Annotations[apiv1.DoNotDisruptAnnotationKey]; ok && doNotDisruptActive(v) {
			ni.podBlockers = append(ni.podBlockers, fmt.Sprintf("pod %s/%s is annotated %s=%s", p.Namespace, p.Name, apiv1.DoNotDisruptAnnotationKey, v))
		}
		var matched []*inventory.PDB
		for _, pi := range st.pdbs[p.Namespace] {
			if pi.sel.Matches(labels.Set(p.Labels)) {
				matched = append(matched, pi.pdb)
			}
		}
		switch {
		case len(matched) > 1:
			names := make([]string, len(matched))
			for k, m := range matched {
				names[k] = m.Name
			}
			ni.podBlockers = append(ni.podBlockers, fmt.Sprintf("pod %s/%s is covered by more than one PDB (%s), which the eviction API refuses", p.Namespace, p.Name, strings.Join(names, ", ")))
		case len(matched) == 1 && matched[0].DisruptionsAllowed <= 0:
			ni.podBlockers = append(ni.podBlockers, fmt.Sprintf("pod %s/%s has PDB %s allowing %d disruptions", p.Namespace, p.Name, matched[0].Name, matched[0].DisruptionsAllowed))
		}
	}
}

// setConsolidatableAt is when consolidateAfter has passed since the last
// pod event (or creation); never when the pool says Never.
func (ni *nodeInfo) setConsolidatableAt(n *Node) {
	if ni.pool != nil {
		d := ni.pool.np.Spec.Disruption
		if d.ConsolidateAfter.IsNever() {
			ni.never = true
		} else {
			since := n.LastPodEventTime
			if since.IsZero() {
				since = n.Node.CreatedAt.Time
			}
			ni.consolidatableAt = since.Add(*d.ConsolidateAfter.Duration)
		}
	}
}

// reschedPods are the node's reschedulable pods as simulations read them.
func (ni *nodeInfo) reschedPods() *engine.Pods {
	if ni.pods == nil {
		list := make([]inventory.Pod, len(ni.resched))
		for i, p := range ni.resched {
			list[i] = *p
		}
		ni.pods = engine.NewPods(list)
	}
	return ni.pods
}

// price looks the node's offering up in its pool's types, then the catalogue.
func (st *state) price(ni *nodeInfo) float64 {
	if ni.pool != nil {
		if t, ok := ni.pool.types[ni.ref.InstanceType]; ok {
			for _, o := range t.Offerings {
				if o.Zone == ni.ref.Zone && o.CapacityType == ni.ref.CapacityType {
					return o.Price
				}
			}
		}
	}
	if st.in.Catalog != nil {
		if p, ok := st.in.Catalog.Price(ni.ref.InstanceType, ni.ref.CapacityType, ni.ref.Zone); ok {
			return p
		}
	}
	return 0
}

// reschedulable is Karpenter's IsReschedulable: active, not a DaemonSet or
// mirror pod.
func reschedulable(p *inventory.Pod) bool {
	if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		return false
	}
	return p.OwnerKind != inventory.OwnerDaemonSet && p.Annotations[MirrorPodAnnotation] == ""
}

// evictable is the set of pods a drain evicts (and whose PDBs and
// do-not-disrupt annotations therefore matter): active pods that are not
// mirror pods. DaemonSet pods are evicted last but still evicted.
func evictable(p *inventory.Pod) bool {
	if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		return false
	}
	return p.Annotations[MirrorPodAnnotation] == ""
}

// doNotDisruptActive: "true", or a duration (Karpenter v1.12+) — the pod's
// age is not in the inventory, so a duration counts as still active.
func doNotDisruptActive(v string) bool {
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	return err == nil && d > 0
}

// EvictionCost is Karpenter's per-pod eviction cost: 1 + pod deletion
// cost/2^27 + priority/2^25, clamped to [-10, 10].
func EvictionCost(p *inventory.Pod) float64 {
	cost := 1.0
	if s, ok := p.Annotations[PodDeletionCostAnnotation]; ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			cost += f / math.Pow(2, 27)
		}
	}
	if p.Priority != nil {
		cost += float64(*p.Priority) / math.Pow(2, 25)
	}
	return max(-10, min(10, cost))
}

// sortCandidates orders by savings ratio, highest first, then by name.
func sortCandidates(cs []*nodeInfo) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].savingsRatio != cs[j].savingsRatio {
			return cs[i].savingsRatio > cs[j].savingsRatio
		}
		return cs[i].ref.Name < cs[j].ref.Name
	})
}
