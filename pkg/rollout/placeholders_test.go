package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	recreated := &[]string{}
	obs := recreations(&mu, recreated)
	if err := sc.runner(obs).Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if creates["km-placeholder-dev-w1-0"] != 1 || creates["km-placeholder-dev-w1-1"] != 2 || len(*recreated) != 1 {
		t.Errorf("creates %v, re-created %q; want the lost placeholder made once more", creates, *recreated)
	}
	for _, a := range annotations {
		if a != "true" {
			t.Errorf("a placeholder's %s annotation is %q, want true", apisv1.DoNotDisruptAnnotationKey, a)
		}
	}
}

// TestPlaceholderBeyondLimitsIsGivenUp: a placeholder Karpenter refuses
// because its NodePool's limits leave no room (its FailedScheduling event
// says so) is deleted and the wave drains on, instead of waiting out the
// node-ready gate for a node that cannot come; kube-scheduler's own
// FailedScheduling says nothing of limits, so with only that the wave
// still pauses at the gate.
func TestPlaceholderBeyondLimitsIsGivenUp(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		wantPause     bool
	}{
		{"karpenter at limits", "Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=default)", false},
		{"kube-scheduler only", "0/3 nodes are available: 3 Insufficient cpu.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScenario(t)
			sc.plan.Budget.PreProvision = true
			sc.plan.Budget.Gates.NodeReadyTimeout.Duration = 300 * time.Millisecond
			sc.plan.Waves[0].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}, {NodePool: "default", CPU: "1", Memory: "1Gi"}}
			if _, err := sc.kube.CoreV1().Events("karpenter-migrate").Create(context.Background(), &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "km-placeholder-dev-w1-1.1", Namespace: "karpenter-migrate"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "karpenter-migrate", Name: "km-placeholder-dev-w1-1"},
				Reason:         "FailedScheduling", Message: tc.message, Type: corev1.EventTypeWarning,
				LastTimestamp: metav1.Now(),
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				p, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
				if ok && strings.HasSuffix(p.Name, "-w1-0") {
					p.Spec.NodeName, p.Status.Phase = "karpenter-1", corev1.PodRunning
				}
				return false, nil, nil // -w1-1 stays Pending
			})
			var mu sync.Mutex
			var given []string
			obs := func(e rollout.Event) {
				if e.Kind == rollout.EventChange && strings.HasPrefix(e.Message, "delete placeholder pod karpenter-migrate/km-placeholder-dev-w1-1") {
					mu.Lock()
					given = append(given, e.Message)
					mu.Unlock()
				}
			}
			err := sc.runner(obs).Apply(context.Background())
			var paused *rollout.PausedError
			if tc.wantPause {
				if !errors.As(err, &paused) || !strings.Contains(paused.Reason, "placeholder") || len(given) != 0 {
					t.Fatalf("Apply: %v, given up %q; want a pause at the node-ready gate and nothing given up", err, given)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if len(given) != 1 || !strings.Contains(given[0], "exceed limits for nodepool") || !strings.Contains(given[0], "spec.limits") {
				t.Errorf("placeholders given up: %q; want the one Karpenter refused, with its reason and what to do", given)
			}
		})
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

// TestNextWavePreparedWhileThisOneDrains: with prepareAhead 1, wave 2's
// placeholders are created as wave 1 starts, recorded in the journal
// first, so their nodes launch while wave 1 drains: they exist at wave
// 1's first eviction. One preempted meanwhile (by a pod wave 1 evicted) is
// made again by wave 2's own pre-provisioning. A dry run says what it
// would create ahead, once per placeholder.
func TestNextWavePreparedWhileThisOneDrains(t *testing.T) {
	ctx := context.Background()
	setup := func() *scenario {
		sc := newScenario(t)
		sc.plan.Budget.PreProvision, sc.plan.Budget.PrepareAhead = true, 1
		for i := range sc.plan.Waves {
			sc.plan.Waves[i].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}}
		}
		return sc
	}

	t.Run("dry run", func(t *testing.T) {
		sc := setup()
		var mu sync.Mutex
		var creates []string
		r := sc.runner(func(e rollout.Event) {
			if e.Kind == rollout.EventChange && strings.HasPrefix(e.Message, "create placeholder pod") {
				mu.Lock()
				creates = append(creates, e.Message)
				mu.Unlock()
			}
		})
		r.Options.DryRun = true
		if err := r.Apply(ctx); err != nil {
			t.Fatalf("Apply --dry-run: %v", err)
		}
		if len(creates) != len(sc.plan.Waves) || !strings.Contains(creates[1], "km-placeholder-dev-w2-0") || !strings.HasSuffix(creates[1], "ahead of its wave 2") ||
			strings.Contains(creates[0], "ahead") {
			t.Errorf("dry run's placeholder creations: %q; want wave 1's, then wave 2's ahead of it, each once", creates)
		}
	})

	sc := setup()
	var mu sync.Mutex
	var seq []string
	evicting := false
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		mu.Lock()
		defer mu.Unlock()
		if ev, ok := ca.GetObject().(*policyv1.Eviction); ok && ca.GetSubresource() == "eviction" {
			if !evicting && ev.Namespace == "app" {
				evicting = true
				// The first eviction of wave 1: wave 2's placeholder is
				// there; a pod it evicts preempts it.
				_, err := sc.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "karpenter-migrate", "km-placeholder-dev-w2-0")
				seq = append(seq, fmt.Sprintf("evict a pod of wave 1 (wave 2's placeholder there: %t)", err == nil))
				if err == nil {
					if err := sc.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "karpenter-migrate", "km-placeholder-dev-w2-0"); err != nil {
						t.Error(err)
					}
				}
			}
			return false, nil, nil
		}
		if p, ok := ca.GetObject().(*corev1.Pod); ok && strings.HasPrefix(p.Name, "km-placeholder-") {
			seq = append(seq, "create "+p.Name)
			p.Spec.NodeName, p.Status.Phase = "karpenter-1", corev1.PodRunning
		}
		return false, nil, nil
	})
	recreated := &[]string{}
	obs := recreations(&mu, recreated)
	r := sc.runner(obs)
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := []string{"create km-placeholder-dev-w1-0", "create km-placeholder-dev-w2-0", "evict a pod of wave 1 (wave 2's placeholder there: true)", "create km-placeholder-dev-w2-0", "create km-placeholder-dev-w3-0"}
	if len(seq) < len(want) || !slices.Equal(seq[:len(want)], want) {
		t.Errorf("placeholder creations and wave 1's first eviction: %q; want wave 2's created with wave 1's, there as wave 1 evicts, and made again by wave 2 once preempted: %q", seq, want)
	}
	if len(*recreated) != 1 || !strings.Contains((*recreated)[0], "km-placeholder-dev-w2-0") {
		t.Errorf("re-created: %q; want wave 2's preempted placeholder, once", *recreated)
	}
	j := r.Journal
	// Wave 2's record, added as wave 1 prepared it, leaves wave 1's
	// progress recorded (it went to a copy the append left behind: wave 1
	// stayed at pre-provision, a resumed run would have run it again).
	for _, w := range j.Waves {
		if w.Phase != rollout.PhaseDone {
			t.Errorf("journal: wave %d at phase %q after the run; want %q", w.Index, w.Phase, rollout.PhaseDone)
		}
	}
	if j.Wave(1).Evicted == 0 {
		t.Errorf("journal: wave 1 evicted %d pods; want its evictions counted", j.Wave(1).Evicted)
	}
	w1, w2 := j.Wave(1), j.Wave(2)
	if w2.PreparedAt.IsZero() || w2.PreparedAt.Before(w1.PreparedAt) || w2.PreparedAt.After(w1.FinishedAt) || !w2.PreparedAt.Before(w2.StartedAt) {
		t.Errorf("journal: wave 1 prepared %s, done %s; wave 2 prepared %s, started %s; want wave 2 prepared as wave 1 ran, before it started", w1.PreparedAt, w1.FinishedAt, w2.PreparedAt, w2.StartedAt)
	}
}

// recreations observes the runner's events and keeps, under mu, the
// messages of the placeholders it re-created.
func recreations(mu *sync.Mutex, into *[]string) rollout.Observer {
	return func(e rollout.Event) {
		if e.Kind == rollout.EventChange && strings.HasPrefix(e.Message, "re-create placeholder pod") {
			mu.Lock()
			*into = append(*into, e.Message)
			mu.Unlock()
		}
	}
}

// TestReleasedPlaceholdersGuardTheirNodes: a placeholder released for the
// pods of its wave leaves a guard on its node — bound there, requesting
// nothing, annotated do-not-disrupt — so that Karpenter does not
// consolidate the room a later wave's pods land on before they come (with
// the demo's dev overlay, consolidateAfter 30s, it did: a pod of wave 7
// waited 65s for a node, and a pod the consolidation evicted preempted
// wave 5's placeholder). The guards go once the last wave is done.
func TestReleasedPlaceholdersGuardTheirNodes(t *testing.T) {
	ctx := context.Background()
	sc := newScenario(t)
	sc.plan.Budget.PreProvision = true
	for i := range sc.plan.Waves {
		sc.plan.Waves[i].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}}
	}
	var mu sync.Mutex
	var seq []string
	var guards []*corev1.Pod
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		mu.Lock()
		defer mu.Unlock()
		if ev, ok := ca.GetObject().(*policyv1.Eviction); ok && ca.GetSubresource() == "eviction" {
			if ev.Namespace == "app" {
				seq = append(seq, "evict")
			}
			return false, nil, nil
		}
		p, ok := ca.GetObject().(*corev1.Pod)
		switch {
		case ok && p.Labels["karpenter-migrate.io/guard"] == "true":
			guards = append(guards, p.DeepCopy())
			seq = append(seq, "guard "+p.Spec.NodeName)
		case ok && strings.HasPrefix(p.Name, "km-placeholder-"):
			p.Spec.NodeName, p.Status.Phase = "karpenter-"+p.Labels["karpenter-migrate.io/wave"], corev1.PodRunning
		}
		return false, nil, nil
	})
	sc.kube.PrependReactor("delete-collection", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if sel := a.(k8stesting.DeleteCollectionAction).GetListRestrictions().Labels.String(); strings.Contains(sel, "karpenter-migrate.io/guard") && !strings.Contains(sel, "!karpenter-migrate.io/guard") {
			mu.Lock()
			seq = append(seq, "delete guards")
			mu.Unlock()
		}
		return false, nil, nil
	})
	if err := sc.runner(nil).Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// Collapse the evictions of each wave.
	var got []string
	for _, s := range seq {
		if len(got) == 0 || s != "evict" || got[len(got)-1] != "evict" {
			got = append(got, s)
		}
	}
	// The web pods request nothing: each wave's placeholder is released
	// as its drain ends.
	want := []string{"evict", "guard karpenter-1", "evict", "guard karpenter-2", "evict", "guard karpenter-3", "delete guards"}
	if !slices.Equal(got, want) {
		t.Errorf("guards, evictions (collapsed) and the guards' deletion: %q; want a guard on each wave's placeholder's node as it is released, there for the later waves, deleted after the last: %q", got, want)
	}
	for _, g := range guards {
		if g.Annotations[apisv1.DoNotDisruptAnnotationKey] != "true" || len(g.Spec.Containers) != 1 || len(g.Spec.Containers[0].Resources.Requests) != 0 ||
			g.Labels["karpenter-migrate.io/component"] != "placeholder" {
			t.Errorf("guard %s: annotations %v, containers %v, labels %v; want do-not-disrupt, one container requesting nothing, labelled a placeholder", g.Name, g.Annotations, g.Spec.Containers, g.Labels)
		}
	}
}

// TestLaterWavesPreparedAsTheWaveStarts: with prepareAhead 2, the first
// wave creates the next two waves' placeholders with its own, not once its
// own run, so that every wave's nodes launch at once: here wave 1's
// placeholder runs only once wave 3's exists (were they created after it
// ran, wave 1 would wait out the node-ready gate).
func TestLaterWavesPreparedAsTheWaveStarts(t *testing.T) {
	ctx := context.Background()
	sc := newScenario(t)
	sc.plan.Budget.PreProvision, sc.plan.Budget.PrepareAhead = true, 2
	sc.plan.Budget.Gates.NodeReadyTimeout.Duration = 300 * time.Millisecond
	for i := range sc.plan.Waves {
		sc.plan.Waves[i].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}}
	}
	var mu sync.Mutex
	var creates []string
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if !ok || !strings.HasPrefix(p.Name, "km-placeholder-") {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		creates = append(creates, p.Name)
		if p.Name == "km-placeholder-dev-w1-0" {
			return false, nil, nil // Pending until wave 3's exists
		}
		p.Spec.NodeName, p.Status.Phase = "karpenter-"+p.Labels["karpenter-migrate.io/wave"], corev1.PodRunning
		if p.Name == "km-placeholder-dev-w3-0" {
			obj, err := sc.kube.Tracker().Get(pods, p.Namespace, "km-placeholder-dev-w1-0")
			if err != nil {
				t.Errorf("wave 3's placeholder created, wave 1's not there: %v", err)
				return false, nil, nil
			}
			w1 := obj.(*corev1.Pod)
			w1.Spec.NodeName, w1.Status.Phase = "karpenter-1", corev1.PodRunning
			if err := sc.kube.Tracker().Update(pods, w1, p.Namespace); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	if err := sc.runner(nil).Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := []string{"km-placeholder-dev-w1-0", "km-placeholder-dev-w2-0", "km-placeholder-dev-w3-0"}
	if !slices.Equal(creates, want) {
		t.Errorf("placeholders created: %q; want each wave's once, in order: %q", creates, want)
	}
}
