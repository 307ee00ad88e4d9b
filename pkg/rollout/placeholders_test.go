package rollout_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// TestPlaceholdersComeBack: the first wave pre-provisions two placeholders
// that Karpenter may not consolidate (do-not-disrupt: at their priority it
// would count their nodes Empty), and one that vanishes before it runs (its
// node removed, the pod collected) is made again instead of waiting out
// the node-ready gate for a pod nothing would recreate.
func TestPlaceholdersComeBack(t *testing.T) {
	sc := newScenario(t)
	sc.plan.Budget.PreProvision = true
	sc.plan.Waves[0].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}, {NodePool: "default", CPU: "1", Memory: "1Gi"}}
	var mu sync.Mutex
	creates := map[string]int{}
	var annotations []string
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if !ok || !strings.HasPrefix(p.Name, "km-placeholder-") {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		creates[p.Name]++
		annotations = append(annotations, p.Annotations[apisv1.DoNotDisruptAnnotationKey])
		if strings.HasSuffix(p.Name, "-1") && creates[p.Name] == 1 {
			return true, p, nil // accepted, then gone before it ran
		}
		p.Spec.NodeName, p.Status.Phase = "karpenter-1", corev1.PodRunning
		return false, nil, nil
	})
	var recreated []string
	obs := func(e rollout.Event) {
		if e.Kind == rollout.EventChange && strings.HasPrefix(e.Message, "re-create placeholder pod") {
			mu.Lock()
			recreated = append(recreated, e.Message)
			mu.Unlock()
		}
	}
	if err := sc.runner(obs).Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if creates["km-placeholder-dev-w1-0"] != 1 || creates["km-placeholder-dev-w1-1"] != 2 || len(recreated) != 1 {
		t.Errorf("creates %v, re-created %q; want the lost placeholder made once more", creates, recreated)
	}
	for _, a := range annotations {
		if a != "true" {
			t.Errorf("a placeholder's %s annotation is %q, want true", apisv1.DoNotDisruptAnnotationKey, a)
		}
	}
}

// TestPlaceholdersReleasedAsTheirPodsAreEvicted: a wave's placeholders
// hold their room until the pods it was reserved for are evicted, one
// placeholder's room per pod here (each web pod requests what one
// placeholder holds), released just before the eviction — not all as the
// drain starts, which left the nodes prepared for the pods evicted last
// empty while the budgets held those pods back, for Karpenter to
// consolidate away before they came.
func TestPlaceholdersReleasedAsTheirPodsAreEvicted(t *testing.T) {
	ctx := context.Background()
	sc := newScenario(t)
	sc.plan.Budget.PreProvision = true
	sc.plan.Budget.Concurrency = 1
	sc.plan.Waves[0].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}, {NodePool: "default", CPU: "1", Memory: "1Gi"}}
	for _, name := range []string{"web-0", "web-1", "web-2", "web-3"} {
		p, err := sc.kube.CoreV1().Pods("app").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Spec.Containers = []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
		if _, err := sc.kube.CoreV1().Pods("app").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var seq []string
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		mu.Lock()
		defer mu.Unlock()
		if ev, ok := ca.GetObject().(*policyv1.Eviction); ok && ca.GetSubresource() == "eviction" {
			seq = append(seq, "evict "+ev.Name)
			return false, nil, nil
		}
		if p, ok := ca.GetObject().(*corev1.Pod); ok && strings.HasPrefix(p.Name, "km-placeholder-") {
			p.Spec.NodeName, p.Status.Phase = "karpenter-1", corev1.PodRunning
		}
		return false, nil, nil
	})
	sc.kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if name := a.(k8stesting.DeleteAction).GetName(); strings.HasPrefix(name, "km-placeholder-") {
			mu.Lock()
			seq = append(seq, "delete "+name)
			mu.Unlock()
		}
		return false, nil, nil
	})
	sc.kube.PrependReactor("delete-collection", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		seq = append(seq, "delete every placeholder")
		mu.Unlock()
		return false, nil, nil
	})
	r := sc.runner(nil)
	drain := *r.Options.Drain
	drain.PodConcurrency = 1
	r.Options.Drain = &drain
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := []string{"delete km-placeholder-dev-w1-0", "evict web-0", "delete km-placeholder-dev-w1-1", "evict web-2"}
	if len(seq) < len(want) || !slices.Equal(seq[:len(want)], want) {
		t.Errorf("wave 1's placeholder deletions and evictions: %q; want each placeholder released just before the pod it holds room for is evicted: %q", seq, want)
	}
}
