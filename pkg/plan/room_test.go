package plan

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestEvictees: the fewest pods for the controller to fit, lowest priority
// first (as kube-scheduler's preemption), then the pod covering most of
// what is lacking, the last by name among equals whatever their age, then
// reprieved if not needed; never
// a DaemonSet's, a finished, a terminating or an unmovable pod; none when
// it fits; the pod-count limit counts; and not ok when even every movable
// pod would not do.
func TestEvictees(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	pod := func(name, cpu string, prio int32, age int) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
			Spec: corev1.PodSpec{Priority: ptr.To(prio), Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	node := func(cpu, pods string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse(pods)}}}
	}
	controller := pod("karpenter", "1", 2000000000, 0)
	daemon := pod("agent", "500m", 0, 9)
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
	done := pod("job", "1", -5, 9)
	done.Status.Phase = corev1.PodSucceeded
	leaving := pod("leaving", "200m", -5, 9)
	leaving.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	critical := pod("coredns", "300m", 0, 9)
	movable := func(p *corev1.Pod) bool { return p.Name != "coredns" }

	for _, tc := range []struct {
		name string
		node *corev1.Node
		pods []corev1.Pod
		want []string
		ok   bool
	}{
		{"fits", node("4", "110"), []corev1.Pod{pod("a", "1", 0, 1), daemon}, nil, true},
		{"lowest priority first", node("2", "110"), []corev1.Pod{pod("high", "500m", 100, 1), pod("low", "500m", 0, 1), daemon}, []string{"low"}, true},
		// By name, not age: the plan reads a snapshot without creation
		// times and must name the pod the step evicts (the newest, as
		// preemption picks, made the demo's waves 5-6 take 15s for 10s
		// predicted: the step took a web pod where the plan took another).
		{"the last by name among equals, whatever their age", node("2", "110"), []corev1.Pod{pod("old", "400m", 0, 1), pod("new", "400m", 0, 5), pod("mid", "400m", 0, 3)}, []string{"old"}, true},
		{"as many as needed", node("2", "110"), []corev1.Pod{pod("a", "600m", 0, 1), pod("b", "600m", 0, 2), pod("c", "600m", 0, 3)}, []string{"c", "b"}, true},
		{"never a DaemonSet's, finished, terminating or staying pod", node("2.5", "110"),
			[]corev1.Pod{daemon, done, leaving, critical, pod("w", "600m", 0, 1)}, []string{"w"}, true},
		{"the pod count", node("8", "2"), []corev1.Pod{pod("a", "100m", 0, 1), pod("b", "100m", 5, 2)}, []string{"a"}, true},
		{"not ok when even all would not do", node("1", "110"), []corev1.Pod{critical, pod("w", "600m", 0, 1)}, nil, false},
		// The demo's kept node: newest first would take the three newest
		// pods (two of which free nothing the controller lacks); one large
		// pod frees it all.
		{"fewest, not newest", node("1.5", "110"), []corev1.Pod{pod("large", "800m", 0, 1), pod("small", "200m", 0, 2),
			pod("empty-a", "0", 0, 3), pod("empty-b", "0", 0, 4)}, []string{"large"}, true},
		{"the largest share of what is lacking first", node("1.8", "110"), []corev1.Pod{pod("a", "300m", 0, 1), pod("b", "500m", 0, 2),
			pod("c", "100m", 0, 3), pod("d", "200m", 0, 4), pod("e", "400m", 0, 5)}, []string{"e", "b"}, true},
		{"lower priority first even when larger ones exist", node("2", "110"), []corev1.Pod{pod("big", "1", 10, 1), pod("s1", "400m", 0, 2),
			pod("s2", "400m", 0, 3)}, []string{"s2", "s1"}, true},
		{"a lower-priority pod is reprieved when a higher one had to go anyway", node("1.5", "110"), []corev1.Pod{pod("big", "1", 10, 1),
			pod("s", "100m", 0, 2)}, []string{"big"}, true},
	} {
		var got []string
		out, ok := Evictees(tc.node, tc.pods, &controller, movable)
		for _, p := range out {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, tc.want) || ok != tc.ok {
			t.Errorf("%s: evict %v (ok %t), want %v (ok %t)", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
