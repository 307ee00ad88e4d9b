package rollout_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
