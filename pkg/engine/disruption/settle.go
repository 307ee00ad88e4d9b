package disruption

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// SettleOptions tune Settle.
type SettleOptions struct {
	// PassInterval is the time between a command and the next pass
	// (default 25s: Karpenter's 10s polling period plus its 15s command
	// validation delay).
	PassInterval time.Duration
	// Horizon bounds how far Settle waits for nodes to pass consolidateAfter
	// when no method acts (default 24h after Input.Now).
	Horizon time.Duration
	// MaxPasses bounds the passes (default 10 per node plus 100).
	MaxPasses int
	// BeforePass, if set, is told each pass (from 1) and the nodes it
	// starts from; an error it returns (a cancelled plan's) stops Settle
	// with that error.
	BeforePass func(pass, nodes int) error
}

// Pass is one pass of Settle that acted.
type Pass struct {
	Now      time.Time `json:"now"`
	Method   Method    `json:"method"`
	Commands []Command `json:"commands"`
	Savings  float64   `json:"savings"`
}

// TypeCount is how many nodes of one instance type and capacity type a
// fleet runs.
type TypeCount struct {
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Nodes        int     `json:"nodes"`
	PricePerHour float64 `json:"pricePerHour"`
}

// Fleet summarises a cluster's nodes.
type Fleet struct {
	Nodes        int         `json:"nodes"`
	PricePerHour float64     `json:"pricePerHour"`
	Types        []TypeCount `json:"types"`
}

// Settlement is the steady state after consolidation.
type Settlement struct {
	Before Fleet  `json:"before"`
	After  Fleet  `json:"after"`
	Passes []Pass `json:"passes"`
	// Savings is Before − After in $/h.
	Savings float64 `json:"savings"`
	// Final is the settled cluster (nodes with their pods, pending pods,
	// the time of the last pass), ready for another Decide or Settle.
	Final Input `json:"-"`
}

// Settle repeats disruption passes, applying each command to the cluster
// (candidates removed, pods moved where the simulation put them, the
// replacement added as an initialized node), until no method acts and no
// node is waiting out consolidateAfter within the horizon. Time advances by
// PassInterval after each command, and to the next node's consolidateAfter
// when nothing acts. It is the fleet Karpenter settles into, with the
// commands it takes on the way.
func Settle(in Input, so SettleOptions) (Settlement, error) {
	if so.PassInterval <= 0 {
		so.PassInterval = 25 * time.Second
	}
	if so.Horizon <= 0 {
		so.Horizon = 24 * time.Hour
	}
	if so.MaxPasses <= 0 {
		so.MaxPasses = 10*len(in.Nodes) + 100
	}
	cur := in
	cur.Nodes = cloneNodes(in.Nodes)
	cur.Pending = append([]inventory.Pod(nil), in.Pending...)
	cur.Options.ExplainAll = false
	var out Settlement
	var err error
	cache := newNodeCache()
	if out.Before, err = fleet(&cur, cache); err != nil {
		return Settlement{}, err
	}
	end := in.Now.Add(so.Horizon)
	seq := 0
	for pass := 0; pass < so.MaxPasses; pass++ {
		if so.BeforePass != nil {
			if err := so.BeforePass(pass+1, len(cur.Nodes)); err != nil {
				return Settlement{}, err
			}
		}
		d, err := decide(cur, cache)
		if err != nil {
			return Settlement{}, fmt.Errorf("settle: pass at %s: %w", cur.Now.UTC().Format(time.RFC3339), err)
		}
		if len(d.Commands) == 0 {
			next, ok, err := nextConsolidatable(&cur, cache)
			if err != nil {
				return Settlement{}, err
			}
			if !ok || next.After(end) {
				break
			}
			cur.Now = next
			continue
		}
		out.Passes = append(out.Passes, Pass{Now: cur.Now, Method: d.Method, Commands: d.Commands, Savings: d.Savings})
		for _, c := range d.Commands {
			seq++
			changed, err := apply(&cur, c, seq)
			if err != nil {
				return Settlement{}, fmt.Errorf("settle: apply %s command at %s: %w", c.Method, cur.Now.UTC().Format(time.RFC3339), err)
			}
			cache.forget(changed...)
		}
		cur.Now = cur.Now.Add(so.PassInterval)
	}
	if out.After, err = fleet(&cur, cache); err != nil {
		return Settlement{}, err
	}
	out.Savings = out.Before.PricePerHour - out.After.PricePerHour
	out.Final = cur
	return out, nil
}

func cloneNodes(ns []Node) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		out[i] = n
		out[i].Pods = append([]inventory.Pod(nil), n.Pods...)
	}
	return out
}

// fleet prices every node that is not an in-flight claim.
func fleet(in *Input, cache *nodeCache) (Fleet, error) {
	st, err := newState(in, cache)
	if err != nil {
		return Fleet{}, err
	}
	var f Fleet
	byType := map[[2]string]*TypeCount{}
	for _, n := range st.nodes {
		if n.in.InFlight {
			continue
		}
		f.Nodes++
		f.PricePerHour += n.ref.Price
		k := [2]string{n.ref.InstanceType, n.ref.CapacityType}
		tc, ok := byType[k]
		if !ok {
			tc = &TypeCount{InstanceType: k[0], CapacityType: k[1]}
			byType[k] = tc
		}
		tc.Nodes++
		tc.PricePerHour += n.ref.Price
	}
	for _, tc := range byType {
		f.Types = append(f.Types, *tc)
	}
	sort.Slice(f.Types, func(i, j int) bool {
		a, b := f.Types[i], f.Types[j]
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		return a.CapacityType < b.CapacityType
	})
	return f, nil
}

// nextConsolidatable is the earliest time after Now at which a managed
// node passes consolidateAfter.
func nextConsolidatable(in *Input, cache *nodeCache) (time.Time, bool, error) {
	st, err := newState(in, cache)
	if err != nil {
		return time.Time{}, false, err
	}
	var next time.Time
	for _, n := range st.nodes {
		if n.pool == nil || n.never || len(n.blockers) > 0 || len(n.podBlockers) > 0 || !n.consolidatableAt.After(in.Now) {
			continue
		}
		if next.IsZero() || n.consolidatableAt.Before(next) {
			next = n.consolidatableAt
		}
	}
	return next, !next.IsZero(), nil
}

// apply performs a command on the cluster and returns the nodes it
// removed, added or gave pods.
func apply(in *Input, c Command, seq int) ([]string, error) {
	gone := map[string]bool{}
	var changed []string
	for _, n := range c.Nodes {
		gone[n.Name] = true
		changed = append(changed, n.Name)
	}
	moving := map[engine.PodRef]inventory.Pod{}
	kept := in.Nodes[:0]
	for _, n := range in.Nodes {
		if !gone[n.Node.Name] {
			kept = append(kept, n)
			continue
		}
		for _, p := range n.Pods {
			if reschedulable(&p) {
				moving[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = p
			}
		}
	}
	in.Nodes = kept
	pending := map[engine.PodRef]int{}
	for i, p := range in.Pending {
		pending[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = i
	}
	placedPending := map[int]bool{}
	take := func(ref engine.PodRef) (inventory.Pod, error) {
		if p, ok := moving[ref]; ok {
			delete(moving, ref)
			return p, nil
		}
		if i, ok := pending[ref]; ok && !placedPending[i] {
			placedPending[i] = true
			return in.Pending[i], nil
		}
		return inventory.Pod{}, fmt.Errorf("pod %s is placed but is neither on a removed node nor pending", ref)
	}
	idx := map[string]int{}
	for i, n := range in.Nodes {
		idx[n.Node.Name] = i
	}
	for _, pl := range c.Placements {
		i, ok := idx[pl.Node]
		if !ok {
			return nil, fmt.Errorf("pod %s is placed on unknown node %s", pl.Pod, pl.Node)
		}
		p, err := take(pl.Pod)
		if err != nil {
			return nil, err
		}
		p.NodeName = pl.Node
		in.Nodes[i].Pods = append(in.Nodes[i].Pods, p)
		changed = append(changed, pl.Node)
		in.Nodes[i].LastPodEventTime = in.Now
	}
	if r := c.Replacement; r != nil {
		n, err := addReplacement(in, r, seq, take)
		if err != nil {
			return nil, err
		}
		changed = append(changed, n.Node.Name)
	}
	if len(moving) > 0 {
		var refs []string
		for ref := range moving {
			refs = append(refs, ref.String())
		}
		sort.Strings(refs)
		return nil, fmt.Errorf("pods of removed nodes are not placed by the command: %v", refs)
	}
	var still []inventory.Pod
	for i, p := range in.Pending {
		if !placedPending[i] {
			still = append(still, p)
		}
	}
	in.Pending = still
	return changed, nil
}

// addReplacement adds the replacement node with the pods the command puts
// on it.
func addReplacement(in *Input, r *engine.NodeClaim, seq int, take func(engine.PodRef) (inventory.Pod, error)) (Node, error) {
	n, err := replacementNode(in, r, seq)
	if err != nil {
		return Node{}, err
	}
	podSum := corev1.ResourceList{}
	for _, ref := range r.Pods {
		p, err := take(ref)
		if err != nil {
			return Node{}, err
		}
		p.NodeName = n.Node.Name
		n.Pods = append(n.Pods, p)
		addList(podSum, p.Requests)
		addList(podSum, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)})
	}
	// Allocatable left for pods: the type's allocatable minus the
	// DaemonSet overhead the scheduler charged (requests − pods).
	alloc := n.Node.Allocatable
	for name, q := range r.Requests {
		ds := q.DeepCopy()
		if ps, ok := podSum[name]; ok {
			ds.Sub(ps)
		}
		if a, ok := alloc[name]; ok && ds.Sign() > 0 {
			a.Sub(ds)
			alloc[name] = a
		}
	}
	in.Nodes = append(in.Nodes, n)
	return n, nil
}

func addList(dst, src corev1.ResourceList) {
	for name, q := range src {
		v := dst[name]
		v.Add(q)
		dst[name] = v
	}
}

// replacementNode turns a command's replacement NodeClaim into an
// initialized node: labels from the NodePool template, the instance type
// and the claim's single-valued requirements.
func replacementNode(in *Input, r *engine.NodeClaim, seq int) (Node, error) {
	var np *engine.NodePool
	for i := range in.NodePools {
		if in.NodePools[i].Name == r.NodePool {
			np = &in.NodePools[i]
		}
	}
	if np == nil {
		return Node{}, fmt.Errorf("replacement NodePool %s is not in the input", r.NodePool)
	}
	name := fmt.Sprintf("%s-replacement-%d", r.NodePool, seq)
	lbl := map[string]string{}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		lbl[k] = v
	}
	for _, q := range r.Requirements {
		if q.Operator == corev1.NodeSelectorOpIn && len(q.Values) == 1 {
			lbl[q.Key] = q.Values[0]
		}
	}
	if np.InstanceTypes != nil {
		for _, t := range np.InstanceTypes {
			if t.Name == r.InstanceType {
				for k, v := range t.Labels {
					lbl[k] = v
				}
			}
		}
	} else if in.Catalog != nil {
		if t, ok := in.Catalog.Get(r.InstanceType); ok {
			for k, v := range t.Labels {
				lbl[k] = v
			}
		}
	}
	lbl[catalog.LabelNodePool] = r.NodePool
	lbl[catalog.LabelInstanceType] = r.InstanceType
	lbl[catalog.LabelZone] = r.Zone
	lbl[catalog.LabelCapacityType] = r.CapacityType
	lbl[catalog.LabelHostname] = name
	lbl[apiv1.NodeInitializedLabelKey] = "true"
	lbl[apiv1.NodeRegisteredLabelKey] = "true"
	n := Node{ExistingNode: engine.ExistingNode{Node: inventory.Node{
		Name: name, InstanceType: r.InstanceType, Zone: r.Zone, CapacityType: r.CapacityType, NodePool: r.NodePool,
		Labels: lbl, Taints: append([]corev1.Taint(nil), np.Spec.Template.Spec.Taints...),
		Allocatable: r.Allocatable.DeepCopy(), Ready: true, CreatedAt: metav1.NewTime(in.Now),
	}}, Price: r.Price, LastPodEventTime: in.Now}
	return n, nil
}

// FromInventory builds a disruption input from an inventory: every node
// with the pods bound to it, unbound pods as pending, DaemonSets and PDBs.
func FromInventory(inv *inventory.Inventory, pools []engine.NodePool, cat *catalog.Catalog, now time.Time) Input {
	in := Input{NodePools: pools, DaemonSets: inv.DaemonSets, PDBs: inv.PDBs, Catalog: cat, Now: now}
	byNode := map[string][]inventory.Pod{}
	for _, p := range inv.Pods {
		switch {
		case p.NodeName != "":
			byNode[p.NodeName] = append(byNode[p.NodeName], p)
		case p.Phase == "" || p.Phase == corev1.PodPending:
			in.Pending = append(in.Pending, p)
		}
	}
	for _, n := range inv.Nodes {
		in.Nodes = append(in.Nodes, Node{ExistingNode: engine.ExistingNode{Node: n, Pods: byNode[n.Name]}})
	}
	return in
}
