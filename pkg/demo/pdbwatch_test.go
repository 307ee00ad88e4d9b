package demo

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPDBWatcherCountsASatisfiedBudgetGoingShort: a budget whose status the
// disruption controller has not computed yet (expecting no pods) is not a
// satisfied one, so its pods still starting are no violation; a budget
// seen satisfied that goes short is one, named with what the demo was
// doing and the pod that was not healthy.
func TestPDBWatcherCountsASatisfiedBudgetGoingShort(t *testing.T) {
	ctx := context.Background()
	pod := func(name string, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{"app": "web"}},
			Spec:   corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	cs := fake.NewClientset(pdb, pod("web-1", false), pod("web-2", false))
	w := &pdbWatcher{}
	step := func(what string, status policyv1.PodDisruptionBudgetStatus, ready ...bool) {
		t.Helper()
		for i, r := range ready {
			if _, err := cs.CoreV1().Pods("app").Update(ctx, pod([]string{"web-1", "web-2"}[i], r), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		p := pdb.DeepCopy()
		p.Status = status
		if _, err := cs.PolicyV1().PodDisruptionBudgets("app").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.observed(what)
		if err := w.observe(ctx, cs, func(string) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	computed := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 2, DesiredHealthy: 1}
	step("install", policyv1.PodDisruptionBudgetStatus{}, false, false) // not computed yet
	step("install", computed, false, false)                             // first computed: short, never satisfied
	if w.count != 0 {
		t.Fatalf("a budget whose pods are still starting counted %d violations: %v", w.count, w.violations)
	}
	step("running", computed, true, false)
	step("wave 1", computed, false, false)
	if w.count != 1 || len(w.violations) != 1 {
		t.Fatalf("violations %d %v, want the satisfied budget going short once", w.count, w.violations)
	}
	if want := `app/web: 0 healthy pods, 1 required, during wave 1; not healthy: web-1 on "n1" (not Ready), web-2 on "n1" (not Ready)`; w.violations[0] != want {
		t.Errorf("violation %q, want %q", w.violations[0], want)
	}
}
