package demo

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// TestWaitWatcherMeasuresCreationToBinding: a pod's wait for a node is
// from its creation to its PodScheduled condition (not its start), the
// pods there before the load and the placeholders are not counted, a pod
// deleted unbound waited until it went, and one still unbound waits on.
func TestWaitWatcherMeasuresCreationToBinding(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pod := func(name string, created int, bound int, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID(name), Labels: labels,
			CreationTimestamp: metav1.NewTime(at(created))}}
		if bound >= 0 {
			p.Spec.NodeName = "n1"
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(bound))},
				// Started much later: not part of the wait.
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(bound + 60))},
			}
		}
		return p
	}
	w := newWaitWatcher(at(10))
	w.seen(pod("before-load", 0, 40, nil), at(40))
	w.seen(pod("placeholder", 10, 90, map[string]string{kube.LabelComponent: "placeholder"}), at(90))
	w.seen(pod("quick", 20, 21, nil), at(21))
	if d, who := w.result(at(21)); d != time.Second || who != "app/quick: created 09:00:20, bound to n1 at 09:00:21" {
		t.Errorf("after one binding: %s %q", d, who)
	}
	w.seen(pod("slow", 30, -1, nil), at(30))
	w.seen(pod("slow", 30, 33, nil), at(33))
	if d, _ := w.result(at(33)); d != 3*time.Second {
		t.Errorf("slow bound 3s after its creation: longest %s, want 3s", d)
	}
	w.seen(pod("evicted-unbound", 40, -1, nil), at(40))
	w.gone(pod("evicted-unbound", 40, -1, nil), at(44))
	if d, who := w.result(at(50)); d != 4*time.Second || who != "app/evicted-unbound: created 09:00:40, deleted unbound by 09:00:44" {
		t.Errorf("a pod deleted unbound 4s after its creation: %s %q", d, who)
	}
	w.observe([]*corev1.Pod{pod("stuck", 50, -1, nil)}, at(50))
	if d, who := w.result(at(60)); d != 10*time.Second || who != "app/stuck: created 09:00:50, still unbound at 09:01:00" {
		t.Errorf("a pod unbound for 10s: %s %q", d, who)
	}
	// A list without it: gone, having waited until that list.
	w.observe(nil, at(55))
	if d, who := w.result(at(90)); d != 5*time.Second || who != "app/stuck: created 09:00:50, deleted unbound by 09:00:55" {
		t.Errorf("a pod gone from the list 5s after its creation: %s %q", d, who)
	}
}
