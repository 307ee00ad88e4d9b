package plan

import (
	"cmp"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// RoomEviction is a pod the Karpenter step evicts from a kept node to make
// room for the controller before it installs the chart, and the legacy
// node the plan expects its replacement on (kube-scheduler's
// LeastAllocated; "" when none takes it): it moves again in that node's
// wave, or stays there when that node's group is not in the rollout.
type RoomEviction struct {
	Pod  string `json:"pod"`
	From string `json:"from"`
	To   string `json:"to,omitempty"`
}

// Evictees are the fewest pods to evict from node for pod to fit there
// (none when it fits). Priority comes first, as in kube-scheduler's
// preemption: a pod is chosen only while no movable pod of lower priority
// would free anything pod lacks. Within a priority, the pod that covers most
// of what is still lacking goes first (among equals the last by namespace
// and name: not the newest, as preemption picks, since a snapshot has no
// creation times and the plan must name the pods the step evicts — they
// move again in the waves of the nodes they land on, and the waves are
// timed with them), so a pod that frees nothing pod lacks is never chosen;
// then, as preemption reprieves its victims, each chosen pod that is not
// needed after all is kept, the most important (highest priority, first by
// name) first. Each pod evicted for the controller moves again in its
// wave, so fewer is cheaper.
// DaemonSet, finished and terminating pods are never chosen. ok is false
// when even all of them would not make room.
func Evictees(node *corev1.Node, pods []corev1.Pod, pod *corev1.Pod, movable func(*corev1.Pod) bool) (_ []corev1.Pod, ok bool) {
	want, alloc := requests(pod), amountsOf(node.Status.Allocatable)
	used := amounts{}
	var cands []corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		used.add(requests(p), 1)
		if ref := metav1.GetControllerOf(p); (ref == nil || ref.Kind != "DaemonSet") && p.DeletionTimestamp == nil && movable(p) {
			cands = append(cands, *p)
		}
	}
	// Most important first: preemption's order, read backwards to choose.
	slices.SortStableFunc(cands, func(a, b corev1.Pod) int {
		if c := cmp.Compare(ptr.Deref(b.Spec.Priority, 0), ptr.Deref(a.Spec.Priority, 0)); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	chosen := make([]bool, len(cands))
	for !want.fits(used, alloc) {
		best, bestCover := -1, 0.0
		for i := len(cands) - 1; i >= 0; i-- {
			if chosen[i] {
				continue
			}
			if best >= 0 && ptr.Deref(cands[i].Spec.Priority, 0) != ptr.Deref(cands[best].Spec.Priority, 0) {
				break
			}
			if c := want.cover(requests(&cands[i]), used, alloc); c > bestCover {
				best, bestCover = i, c
			}
		}
		if best < 0 {
			return nil, false
		}
		chosen[best] = true
		used.add(requests(&cands[best]), -1)
	}
	var out []corev1.Pod
	for i := range cands {
		if !chosen[i] {
			continue
		}
		used.add(requests(&cands[i]), 1)
		if want.fits(used, alloc) {
			continue // reprieved
		}
		used.add(requests(&cands[i]), -1)
		out = append(out, cands[i])
	}
	slices.Reverse(out)
	return out, true
}

// amounts are resource quantities in thousandths (CPU in millicores,
// memory in millibytes, pods in thousandths of a pod).
type amounts map[corev1.ResourceName]int64

func amountsOf(rl corev1.ResourceList) amounts {
	out := make(amounts, len(rl))
	for name, q := range rl {
		out[name] = q.MilliValue()
	}
	return out
}

// add adds sign × o.
func (a amounts) add(o amounts, sign int64) {
	for name, v := range o {
		a[name] += sign * v
	}
}

// requests are a pod's requests as the scheduler counts them, and the one
// pod it takes of a node's pods.
func requests(p *corev1.Pod) amounts {
	r := amountsOf(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
	r[corev1.ResourcePods] = 1000
	return r
}

// fits reports whether want fits beside used in alloc, for every resource
// want names.
func (want amounts) fits(used, alloc amounts) bool {
	for name, v := range want {
		if alloc[name]-used[name] < v {
			return false
		}
	}
	return true
}

// cover is how much of what want still lacks beside used in alloc freeing
// r would give: for each resource short, the share of the shortfall r
// frees, summed.
func (want amounts) cover(r, used, alloc amounts) float64 {
	total := 0.0
	for name, v := range want {
		if short := used[name] + v - alloc[name]; short > 0 {
			total += float64(min(r[name], short)) / float64(short)
		}
	}
	return total
}

// controllerRoom predicts what the Karpenter step's room for the controller
// does to the snapshot (migrations' roomForController): the pods Evictees
// picks on each kept node, among those a wave would move, and where
// kube-scheduler puts their replacements — the non-kept node that fits
// with the most room left (LeastAllocated, CPU and memory averaged; the
// first by name among equals). It moves them there in podsByNode, so the
// waves move them again where they land, and returns them in eviction
// order. Nothing when the plan installs no release or keeps no nodes.
func (pl *planner) controllerRoom(kept map[string]bool) ([]RoomEviction, error) {
	if pl.p.Karpenter == nil || len(kept) == 0 {
		return nil, nil
	}
	dep, _, err := generate.ControllerObjects(pl.p.Karpenter.Values, pl.p.Karpenter.Namespace, "")
	if err != nil {
		return nil, err
	}
	controller := &corev1.Pod{Spec: dep.Spec.Template.Spec}
	nodes := map[string]*corev1.Node{}
	for _, n := range pl.inv.Nodes {
		alloc := n.Allocatable.DeepCopy()
		if _, ok := alloc[corev1.ResourcePods]; !ok {
			// A snapshot without it (an older one) does not limit by it.
			alloc[corev1.ResourcePods] = *resource.NewQuantity(math.MaxInt32, resource.DecimalSI)
		}
		nodes[n.Name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
			Spec: corev1.NodeSpec{Taints: n.Taints, Unschedulable: n.Unschedulable || !n.Ready}, Status: corev1.NodeStatus{Allocatable: alloc}}
	}
	names := slices.Sorted(maps.Keys(nodes))
	used := map[string]amounts{}
	onNode := map[string][]corev1.Pod{}
	for _, p := range pl.inv.Pods {
		if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed || nodes[p.NodeName] == nil {
			continue
		}
		pod := corePod(p)
		onNode[p.NodeName] = append(onNode[p.NodeName], pod)
		if used[p.NodeName] == nil {
			used[p.NodeName] = amounts{}
		}
		used[p.NodeName].add(requests(&pod), 1)
	}
	byName := map[string]inventory.Pod{}
	moves := map[string]bool{} // the pods a wave moves
	for n := range kept {
		for _, p := range pl.podsByNode[n] {
			byName[p.Namespace+"/"+p.Name] = p
			if (inventory.DisruptionBlocked(p.Annotations) == "" || pl.p.Budget.ForceEvict) && !pl.cp.stays(p) {
				moves[p.Namespace+"/"+p.Name] = true
			}
		}
	}
	var out []RoomEviction
	for _, n := range slices.Sorted(maps.Keys(kept)) {
		if nodes[n] == nil {
			continue
		}
		evict, ok := Evictees(nodes[n], onNode[n], controller, func(p *corev1.Pod) bool { return moves[p.Namespace+"/"+p.Name] })
		if !ok {
			continue // the step pauses there; the waves are as the snapshot has them
		}
		for i := range evict {
			key := evict[i].Namespace + "/" + evict[i].Name
			used[n].add(requests(&evict[i]), -1)
			to := scheduledOn(&evict[i], names, nodes, kept, used)
			out = append(out, RoomEviction{Pod: key, From: n, To: to})
			pl.podsByNode[n] = slices.DeleteFunc(pl.podsByNode[n], func(p inventory.Pod) bool { return p.Namespace+"/"+p.Name == key })
			if to == "" {
				continue
			}
			if used[to] == nil {
				used[to] = amounts{}
			}
			used[to].add(requests(&evict[i]), 1)
			moved := byName[key]
			moved.NodeName = to
			pl.podsByNode[to] = append(pl.podsByNode[to], moved)
		}
	}
	return out, nil
}

// scheduledOn is the node kube-scheduler's default scoring puts p on,
// of those not kept that admit it (required node affinity, NoSchedule and
// NoExecute taints; not pod anti-affinity) and fit it: the least allocated
// after placement, CPU and memory averaged, a PreferNoSchedule taint it
// does not tolerate last, the first by name among equals (as the sandbox
// scores); "" when none does. names are the nodes' names, sorted.
func scheduledOn(p *corev1.Pod, names []string, nodes map[string]*corev1.Node, kept map[string]bool, used map[string]amounts) string {
	want := requests(p)
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	best, bestScore := "", -1.0
	for _, name := range names {
		n := nodes[name]
		alloc := amountsOf(n.Status.Allocatable)
		if kept[name] || n.Spec.Unschedulable || !want.fits(used[name], alloc) {
			continue
		}
		if !admits(affinity, p.Spec.Tolerations, n, n.Spec.Taints) {
			continue
		}
		cpu, mem := corev1.ResourceCPU, corev1.ResourceMemory
		score := leastAllocated(room{alloc[cpu] - used[name][cpu] - want[cpu], alloc[mem] - used[name][mem] - want[mem]}, room{alloc[cpu], alloc[mem]})
		// TaintToleration's score (weight 3) outweighs the resources'.
		for i := range n.Spec.Taints {
			if t := &n.Spec.Taints[i]; t.Effect == corev1.TaintEffectPreferNoSchedule && !Tolerates(p.Spec.Tolerations, t) {
				score -= 3
			}
		}
		if score > bestScore {
			best, bestScore = name, score
		}
	}
	return best
}

// corePod is an inventory pod as the scheduler and Evictees read it.
func corePod(p inventory.Pod) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations},
		Spec: corev1.PodSpec{NodeName: p.NodeName, NodeSelector: p.NodeSelector, Affinity: p.Affinity, Tolerations: p.Tolerations, Priority: p.Priority,
			Containers: []corev1.Container{{Name: "pod", Resources: corev1.ResourceRequirements{Requests: p.Requests}}}},
		Status: corev1.PodStatus{Phase: p.Phase},
	}
	if p.OwnerKind != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{Kind: p.OwnerKind, Name: p.OwnerName, Controller: ptr.To(true)}}
	}
	return pod
}
