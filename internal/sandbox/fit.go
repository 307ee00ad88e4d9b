package sandbox

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// Fitter decides whether a pod may run on a node that already carries
// `used` requests. It is the scheduler's filter; the sandbox's simple
// implementation can be swapped for pkg/engine's placement rules.
type Fitter interface {
	Fit(pod *corev1.Pod, node *corev1.Node, used corev1.ResourceList, volumes []*corev1.NodeSelector) error
}

// SimpleFitter checks what kube-scheduler's default filters check for the
// pods the sandbox runs: readiness, cordon, taints and tolerations,
// nodeSelector and required node affinity, volume zones and resources.
type SimpleFitter struct{}

// Fit returns nil when the pod fits, or an error saying why not.
func (SimpleFitter) Fit(pod *corev1.Pod, node *corev1.Node, used corev1.ResourceList, volumes []*corev1.NodeSelector) error {
	if !nodeReady(node) {
		return fmt.Errorf("node %s is not Ready", node.Name)
	}
	if node.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return fmt.Errorf("node %s is cordoned", node.Name)
	}
	if err := labelsAndTaintsFit(pod, node, volumes); err != nil {
		return err
	}
	return resourcesFit(PodRequests(pod), used, node.Status.Allocatable)
}

// podFit is the scheduler's filter for one pod, worked out once for all
// the nodes: admits says whether a node's state other than its pods lets
// the pod on (Ready, cordon, taints, node affinity, volume zones), room
// whether the requests on it leave room for the pod — another Fitter's
// Fit; nil for SimpleFitter, whose check of the requests is the pass's
// roomTable's. Pods of one key get the same answers from admits on every
// node (the scheduler asks it once per key and pass); "" shares nothing.
type podFit struct {
	key    string
	admits func(node *corev1.Node) bool
	room   func(node *corev1.Node, used corev1.ResourceList) bool
}

// fitter returns the scheduler's filter for pod: SimpleFitter's worked
// out once for the pod (its node affinity and volume selectors; its
// requests are the roomTable's), or another Fitter's Fit, as room.
func (s *Sandbox) fitter(pod *corev1.Pod, volumes []*corev1.NodeSelector) podFit {
	if _, ok := s.opts.Fitter.(SimpleFitter); !ok {
		return podFit{
			admits: func(*corev1.Node) bool { return true },
			room: func(node *corev1.Node, used corev1.ResourceList) bool {
				return s.opts.Fitter.Fit(pod, node, used, volumes) == nil
			},
		}
	}
	none := podFit{admits: func(*corev1.Node) bool { return false }}
	cordonOK := tolerates(pod.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var vols []*nodeaffinity.NodeSelector
	for _, vs := range volumes {
		sel, err := nodeaffinity.NewNodeSelector(vs)
		if err != nil {
			return none
		}
		vols = append(vols, sel)
	}
	// The key is everything admits reads of the pod.
	key, err := json.Marshal(struct {
		Tolerations  []corev1.Toleration
		NodeSelector map[string]string
		Affinity     *corev1.NodeSelector
		Volumes      []*corev1.NodeSelector
	}{pod.Spec.Tolerations, pod.Spec.NodeSelector, requiredNodeAffinity(pod), volumes})
	if err != nil {
		key = nil
	}
	return podFit{
		key: string(key),
		admits: func(node *corev1.Node) bool {
			if !nodeReady(node) || (node.Spec.Unschedulable && !cordonOK) {
				return false
			}
			if _, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, false); bad {
				return false
			}
			if ok, err := affinity.Match(node); err != nil || !ok {
				return false
			}
			for _, sel := range vols {
				if !sel.Match(node) {
					return false
				}
			}
			return true
		},
	}
}

// roomTable is the scheduler's account, for one pass, of each node's
// allocatable and the requests of the pods on it, resource by resource in
// the order of names (CPU, memory, then every other resource a pending
// pod requests): its filter and its score read them for each pod and
// node, and looking them up in maps was most of a thousand-node pass.
type roomTable struct {
	names       []corev1.ResourceName
	alloc, used [][]resource.Quantity // by node, by name
	has         [][]bool              // the node's allocatable has the name
}

// newRoomTable accounts for nodes (a pass's order: the table's node i is
// nodes[i]) carrying used, for the pending pods' resources.
func newRoomTable(pending []*corev1.Pod, nodes []*corev1.Node, used map[string]corev1.ResourceList) *roomTable {
	others := map[corev1.ResourceName]bool{}
	for _, p := range pending {
		for name := range PodRequests(p) {
			others[name] = true
		}
	}
	delete(others, corev1.ResourceCPU)
	delete(others, corev1.ResourceMemory)
	t := &roomTable{names: append([]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, slices.Sorted(maps.Keys(others))...)}
	for i, n := range nodes {
		t.alloc = append(t.alloc, make([]resource.Quantity, len(t.names)))
		t.used = append(t.used, make([]resource.Quantity, len(t.names)))
		t.has = append(t.has, make([]bool, len(t.names)))
		for k, name := range t.names {
			t.alloc[i][k], t.has[i][k] = n.Status.Allocatable[name]
		}
		t.update(i, used[n.Name])
	}
	return t
}

// update takes node i's requests again, after a pod was bound to it or
// preempted from it.
func (t *roomTable) update(i int, used corev1.ResourceList) {
	for k, name := range t.names {
		t.used[i][k] = used[name]
	}
}

// want is a pod's requests in the order of names (the pod's requests
// are the pending pods', so none is left out).
func (t *roomTable) want(req corev1.ResourceList) []resource.Quantity {
	out := make([]resource.Quantity, len(t.names))
	for k, name := range t.names {
		out[k] = req[name]
	}
	return out
}

// fits is SimpleFitter's check of the requests: each resource the pod
// requests, added to node i's requests, is within its allocatable.
func (t *roomTable) fits(i int, want []resource.Quantity) bool {
	for k := range want {
		if want[k].IsZero() {
			continue
		}
		total := want[k].DeepCopy()
		total.Add(t.used[i][k])
		if !t.has[i][k] || total.Cmp(t.alloc[i][k]) > 0 {
			return false
		}
	}
	return true
}

// score is the mean of node i's CPU and memory utilisation after placing
// the pod.
func (t *roomTable) score(i int, want []resource.Quantity) float64 {
	frac := func(k int) float64 {
		a := t.alloc[i][k]
		if a.IsZero() {
			return 0
		}
		return float64(t.used[i][k].MilliValue()+want[k].MilliValue()) / float64(a.MilliValue())
	}
	return (frac(0) + frac(1)) / 2
}

// requiredNodeAffinity is the pod's required node affinity, if any.
func requiredNodeAffinity(pod *corev1.Pod) *corev1.NodeSelector {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

func noScheduleOrExecute(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// labelsAndTaintsFit is the part of Fit that does not depend on the node's
// state, shared with the Karpenter stand-in's offering filter.
func labelsAndTaintsFit(pod *corev1.Pod, node *corev1.Node, volumes []*corev1.NodeSelector) error {
	if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, false); bad {
		return fmt.Errorf("node %s has taint %s=%s:%s the pod does not tolerate", node.Name, taint.Key, taint.Value, taint.Effect)
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return fmt.Errorf("node %s does not match the pod's nodeSelector/affinity", node.Name)
	}
	for _, vs := range volumes {
		sel, err := nodeaffinity.NewNodeSelector(vs)
		if err != nil || !sel.Match(node) {
			return fmt.Errorf("node %s is outside the zone of one of the pod's volumes", node.Name)
		}
	}
	return nil
}

// daemonPodMayStay is the DaemonSet controller's test for a pod already on
// a node: the node still matches its nodeSelector and affinity and has no
// NoExecute taint it does not tolerate. An untolerated NoSchedule taint
// (karpenter.sh/disrupted, a reservation) only stops new pods, as in
// Kubernetes' daemon controller (NodeShouldRunDaemonPod).
func daemonPodMayStay(pod *corev1.Pod, node *corev1.Node) bool {
	if _, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false); bad {
		return false
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), tols, &taint, false)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodRequests is the scheduler's effective request: the larger of the sum
// of containers and the largest init container, plus overhead, and one pod.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		kube.AddResources(out, c.Resources.Requests, 1)
	}
	for _, c := range p.Spec.InitContainers {
		for k, v := range c.Resources.Requests {
			if cur, ok := out[k]; !ok || v.Cmp(cur) > 0 {
				out[k] = v.DeepCopy()
			}
		}
	}
	kube.AddResources(out, p.Spec.Overhead, 1)
	out[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return out
}

// resourcesFit checks want+used <= allocatable for every requested resource,
// naming the first one short, in name order.
func resourcesFit(want, used, allocatable corev1.ResourceList) error {
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, string(k))
	}
	sort.Strings(names)
	for _, k := range names {
		name := corev1.ResourceName(k)
		q := want[name]
		if q.IsZero() {
			continue
		}
		total := q.DeepCopy()
		total.Add(used[name])
		alloc, ok := allocatable[name]
		if !ok || total.Cmp(alloc) > 0 {
			return fmt.Errorf("insufficient %s (want %s more, %s of %s used)", name, q.String(), ptr(used[name]).String(), alloc.String())
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
