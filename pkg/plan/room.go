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
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
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
// of what is still lacking goes first (newest among equals, as preemption
// picks), so a pod that frees nothing pod lacks is never chosen; then, as
// preemption reprieves its victims, each chosen pod that is not needed after
// all is kept, the most important (highest priority, oldest) first. Each pod
// evicted for the controller moves again in its wave, so fewer is cheaper.
// DaemonSet, finished and terminating pods are never chosen. ok is false
// when even all of them would not make room.
func Evictees(node *corev1.Node, pods []corev1.Pod, pod *corev1.Pod, movable func(*corev1.Pod) bool) (_ []corev1.Pod, ok bool) {
	want := requests(pod)
	alloc := node.Status.Allocatable
	used := corev1.ResourceList{}
	var cands []corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		kube.AddResources(used, requests(p), 1)
		if !kube.IsDaemonSetPod(p) && p.DeletionTimestamp == nil && movable(p) {
			cands = append(cands, *p)
		}
	}
	// Most important first: preemption's order, read backwards to choose.
	slices.SortStableFunc(cands, func(a, b corev1.Pod) int {
		if c := cmp.Compare(ptr.Deref(b.Spec.Priority, 0), ptr.Deref(a.Spec.Priority, 0)); c != 0 {
			return c
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	chosen := make([]bool, len(cands))
	for !fits(want, used, alloc) {
		best, bestCover := -1, 0.0
		for i := len(cands) - 1; i >= 0; i-- {
			if chosen[i] {
				continue
			}
			if best >= 0 && ptr.Deref(cands[i].Spec.Priority, 0) != ptr.Deref(cands[best].Spec.Priority, 0) {
				break
			}
			if c := cover(requests(&cands[i]), want, used, alloc); c > bestCover {
				best, bestCover = i, c
			}
		}
		if best < 0 {
			return nil, false
		}
		chosen[best] = true
		kube.AddResources(used, requests(&cands[best]), -1)
	}
	var out []corev1.Pod
	for i := range cands {
		if !chosen[i] {
			continue
		}
		kube.AddResources(used, requests(&cands[i]), 1)
		if fits(want, used, alloc) {
			continue // reprieved
		}
		kube.AddResources(used, requests(&cands[i]), -1)
		out = append(out, cands[i])
	}
	slices.Reverse(out)
	return out, true
}

// cover is how much of what want still lacks beside used in alloc freeing
// r would give: for each resource short, the share of the shortfall r
// frees, summed.
func cover(r, want, used, alloc corev1.ResourceList) float64 {
	total := 0.0
	for name, q := range want {
		short := used[name].DeepCopy()
		short.Add(q)
		short.Sub(alloc[name])
		if short.Sign() <= 0 {
			continue
		}
		freed := r[name]
		total += min(freed.AsApproximateFloat64(), short.AsApproximateFloat64()) / short.AsApproximateFloat64()
	}
	return total
}

// requests are a pod's requests as the scheduler counts them, and the one
// pod it takes of a node's pods.
func requests(p *corev1.Pod) corev1.ResourceList {
	r := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	r[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return r
}

// fits reports whether want fits beside used in alloc, for every resource
// want names.
func fits(want, used, alloc corev1.ResourceList) bool {
	for name, q := range want {
		free := alloc[name].DeepCopy()
		free.Sub(used[name])
		if free.Cmp(q) < 0 {
			return false
		}
	}
	return true
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
			Spec: corev1.NodeSpec{Taints: n.Taints}, Status: corev1.NodeStatus{Allocatable: alloc}}
	}
	used := map[string]corev1.ResourceList{}
	onNode := map[string][]corev1.Pod{}
	for _, p := range pl.inv.Pods {
		if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed || nodes[p.NodeName] == nil {
			continue
		}
		pod := corePod(p)
		onNode[p.NodeName] = append(onNode[p.NodeName], pod)
		if used[p.NodeName] == nil {
			used[p.NodeName] = corev1.ResourceList{}
		}
		kube.AddResources(used[p.NodeName], requests(&pod), 1)
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
			kube.AddResources(used[n], requests(&evict[i]), -1)
			to := scheduledOn(&evict[i], nodes, kept, used)
			out = append(out, RoomEviction{Pod: key, From: n, To: to})
			pl.podsByNode[n] = slices.DeleteFunc(pl.podsByNode[n], func(p inventory.Pod) bool { return p.Namespace+"/"+p.Name == key })
			if to == "" {
				continue
			}
			kube.AddResources(used[to], requests(&evict[i]), 1)
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
// scores); "" when none does.
func scheduledOn(p *corev1.Pod, nodes map[string]*corev1.Node, kept map[string]bool, used map[string]corev1.ResourceList) string {
	want := requests(p)
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	best, bestScore := "", -1.0
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		n := nodes[name]
		if kept[name] || n.Spec.Unschedulable || !fits(want, used[name], n.Status.Allocatable) {
			continue
		}
		if ok, _ := affinity.Match(n); !ok {
			continue
		}
		if _, bad := untolerated(n.Spec.Taints, p.Spec.Tolerations); bad {
			continue
		}
		usable := roomOf(n.Status.Allocatable)
		score := leastAllocated(usable.sub(roomOf(used[name])).sub(roomOf(want)), usable)
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
