package readiness

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// fitResources are the requests compared with an instance type's room: the
// ones the catalogue models. Ephemeral storage is left out: it depends on
// the EC2NodeClass's block devices, which the catalogue does not see.
var fitResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory,
	catalog.ResourceNVIDIAGPU, catalog.ResourceAMDGPU, catalog.ResourceHabanaGaudi, catalog.ResourceNeuron,
}

// FromNodePools derives the facts the pool-dependent checks need from the
// NodePools (and their EC2NodeClasses) the migration will create — what
// generate produces — and the instance-type catalogue:
//
//   - NodeTaints: every taint of the pools' node templates;
//   - Zones: the zones some pool may launch in (its zone requirement over
//     the zones of the inventory's subnets and node groups);
//   - Rooms and MaxAllocatable: the room for pods on each type a pool
//     allows, after kubelet reservations (from the EC2NodeClass) and the
//     requests of the DaemonSets that would run there;
//   - Pools: the labels and taints each pool puts on its nodes.
//
// It is pure. With no pools it returns the zero Options (Evaluate's
// current-cluster defaults).
func FromNodePools(inv *inventory.Inventory, pools []*karpv1.NodePool, classes []*karpv1.EC2NodeClass, cat *catalog.Catalog) Options {
	var o Options
	if len(pools) == 0 {
		return o
	}
	if cat == nil {
		cat = catalog.Default()
	}
	classByName := map[string]*karpv1.EC2NodeClass{}
	for _, nc := range classes {
		classByName[nc.Name] = nc
	}
	candidates := inventoryZones(inv)
	zones := map[string]bool{}
	for _, np := range pools {
		tmpl := &np.Spec.Template
		for _, t := range tmpl.Spec.Taints {
			if !slices.ContainsFunc(o.NodeTaints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
				o.NodeTaints = append(o.NodeTaints, t)
			}
		}
		zoneReqs := requirementsFor(tmpl.Spec.Requirements, func(k string) bool { return k == corev1.LabelTopologyZone })
		for _, r := range zoneReqs {
			if r.Operator == corev1.NodeSelectorOpIn {
				candidates = append(candidates, r.Values...)
			}
		}
		// A pool with no zone requirement launches wherever its
		// EC2NodeClass's subnets are: any zone, as far as this goes (nil).
		var poolZones []string
		for _, z := range candidates {
			if matches(zoneReqs, map[string]string{corev1.LabelTopologyZone: z}) {
				zones[z] = true
				if len(zoneReqs) > 0 && !slices.Contains(poolZones, z) {
					poolZones = append(poolZones, z)
				}
			}
		}
		if len(zoneReqs) > 0 && poolZones == nil {
			poolZones = []string{}
		}
		sort.Strings(poolZones)
		o.Pools = append(o.Pools, PoolNodes{NodePool: np.Name, Labels: tmpl.ObjectMeta.Labels, Taints: tmpl.Spec.Taints, Zones: poolZones})
		var nc *karpv1.EC2NodeClass
		if ref := tmpl.Spec.NodeClassRef; ref != nil {
			nc = classByName[ref.Name]
		}
		o.Rooms = append(o.Rooms, poolRooms(inv, np, nc, cat)...)
	}
	for z := range zones {
		o.Zones = append(o.Zones, z)
	}
	sort.Strings(o.Zones)
	sort.Slice(o.NodeTaints, func(i, j int) bool {
		a, b := o.NodeTaints[i], o.NodeTaints[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Value != b.Value {
			return a.Value < b.Value
		}
		return a.Effect < b.Effect
	})
	if len(o.Rooms) > 0 {
		o.MaxAllocatable = corev1.ResourceList{}
		for _, room := range o.Rooms {
			for r, q := range room.Allocatable {
				if cur, ok := o.MaxAllocatable[r]; !ok || q.Cmp(cur) > 0 {
					o.MaxAllocatable[r] = q
				}
			}
		}
	}
	return o
}

// inventoryZones are the zones the cluster's subnets and node groups use.
func inventoryZones(inv *inventory.Inventory) []string {
	var zs []string
	for _, s := range inv.Subnets {
		zs = append(zs, s.Zone)
	}
	for _, ng := range inv.NodeGroups {
		zs = append(zs, ng.Zones...)
	}
	slices.Sort(zs)
	return slices.Compact(zs)
}

// Room is an instance type a NodePool allows and what its nodes leave for
// pods.
type Room struct {
	NodePool     string
	InstanceType string
	// Taints are the NodePool's; a pod must tolerate them to use the room.
	Taints []corev1.Taint
	// Allocatable is the type's allocatable minus the requests of the
	// DaemonSets that run on the pool's nodes.
	Allocatable corev1.ResourceList
}

// poolRooms is, for each catalogue type the pool allows, its allocatable
// minus the requests of the DaemonSets that would run on its nodes.
func poolRooms(inv *inventory.Inventory, np *karpv1.NodePool, nc *karpv1.EC2NodeClass, cat *catalog.Catalog) []Room {
	tmpl := &np.Spec.Template
	// Zone, region and capacity type vary per offering, and keys outside
	// the well-known ones become node labels: only type labels filter types.
	wellKnown := map[string]bool{}
	for _, k := range catalog.WellKnownLabels() {
		wellKnown[k] = k != corev1.LabelTopologyRegion
	}
	typeReqs := requirementsFor(tmpl.Spec.Requirements, func(k string) bool { return wellKnown[k] })
	allowed := matcher(typeReqs)
	kubelet := engine.NodePoolFromV1(np, nc).Kubelet
	var out []Room
	for _, it := range cat.Types() {
		if len(it.Offerings) == 0 || !allowed(it.Labels) {
			continue
		}
		alloc, err := it.Allocatable(kubelet)
		if err != nil {
			continue // an invalid kubelet block: generate reports it
		}
		room := corev1.ResourceList{}
		for _, r := range fitResources {
			if q, ok := alloc[r]; ok {
				room[r] = q.DeepCopy()
			}
		}
		nodeLabels := map[string]string{}
		for k, v := range it.Labels {
			nodeLabels[k] = v
		}
		for k, v := range tmpl.ObjectMeta.Labels {
			nodeLabels[k] = v
		}
		for _, ds := range inv.DaemonSets {
			if !daemonSetRuns(ds, tmpl.Spec.Taints, nodeLabels) {
				continue
			}
			for r, q := range ds.Requests {
				if cur, ok := room[r]; ok {
					cur.Sub(q)
					room[r] = cur
				}
			}
		}
		out = append(out, Room{NodePool: np.Name, InstanceType: it.Name, Taints: tmpl.Spec.Taints, Allocatable: room})
	}
	return out
}

// daemonSetRuns reports whether a DaemonSet's pods would land on a node
// with these taints and labels: it tolerates every NoSchedule/NoExecute
// taint, and its nodeSelector and required node affinity match.
func daemonSetRuns(ds inventory.DaemonSet, taints []corev1.Taint, labels map[string]string) bool {
	if !tolerates(ds.Tolerations, taints) {
		return false
	}
	node := &corev1.Node{}
	node.Labels = labels
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: ds.NodeSelector, Affinity: ds.Affinity}}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

// tolerates reports whether tolerations allow scheduling onto a node with
// taints (PreferNoSchedule taints never prevent it).
func tolerates(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return false
		}
	}
	return true
}

// requirementsFor keeps the NodePool requirements on the keys keep accepts,
// as node selector requirements.
func requirementsFor(reqs []karpv1.NodeSelectorRequirementWithMinValues, keep func(string) bool) []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	for _, r := range reqs {
		if keep(r.Key) {
			out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
		}
	}
	return out
}

// matches evaluates requirements (all must hold) against labels with the
// scheduler's own node selector semantics (In, NotIn, Exists, DoesNotExist,
// Gt, Lt).
func matches(reqs []corev1.NodeSelectorRequirement, labels map[string]string) bool {
	return matcher(reqs)(labels)
}

// matcher is matches with the requirements parsed once, for a pool's
// requirements tried on every catalogue type.
func matcher(reqs []corev1.NodeSelectorRequirement) func(labels map[string]string) bool {
	if len(reqs) == 0 {
		return func(map[string]string) bool { return true }
	}
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}})
	if err != nil {
		return func(map[string]string) bool { return false } // an invalid requirement allows nothing, as the API server would reject it
	}
	return func(labels map[string]string) bool {
		node := &corev1.Node{}
		node.Labels = labels
		return sel.Match(node)
	}
}

// fitsSomeRoom reports whether the pod's requests fit a room whose taints
// it tolerates. A pod that tolerates no pool's taints is judged on size
// alone against every room: this check is about size, and such a pod has
// another problem than its requests.
func fitsSomeRoom(p *inventory.Pod, rooms []Room) bool {
	tolerated := slices.ContainsFunc(rooms, func(r Room) bool { return tolerates(p.Tolerations, r.Taints) })
	for _, room := range rooms {
		if tolerated && !tolerates(p.Tolerations, room.Taints) {
			continue
		}
		fits := true
		for _, r := range fitResources {
			q, ok := p.Requests[r]
			if !ok || q.IsZero() {
				continue
			}
			have := room.Allocatable[r] // zero when the type has none
			if q.Cmp(have) > 0 {
				fits = false
				break
			}
		}
		if fits {
			return true
		}
	}
	return false
}
