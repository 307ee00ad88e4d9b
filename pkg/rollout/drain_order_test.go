package rollout_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// orderScenario is the scenario's waves 2 (a-2) and 3 (b-1) drained
// together one node at a time, a-2 holding two pods of budget app/web
// (web-1 and web-x: it allows one disruption) and b-1 one of budget
// api/api (web-3 relabelled, its own Deployment api/api; it allows one).
// seq records, in order, the Deployments patched and read in namespaces
// app and api, the pods evicted (by node), and each listing of every
// namespace's Deployments ("list deployments": a gate's).
func orderScenario(t *testing.T, status func(ns string) policyv1.PodDisruptionBudgetStatus) (*scenario, func() []string) {
	t.Helper()
	sc := newScenario(t)
	sc.plan.Budget.Concurrency = 1
	sc.plan.Waves[1].DrainGroup, sc.plan.Waves[2].DrainGroup = 2, 2
	ctx := context.Background()
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	o, err := sc.kube.Tracker().Get(pods, "app", "web-3")
	if err != nil {
		t.Fatal(err)
	}
	api := o.(*corev1.Pod).DeepCopy()
	if err := sc.kube.Tracker().Delete(pods, "app", "web-3"); err != nil {
		t.Fatal(err)
	}
	api.Namespace, api.Labels = "api", map[string]string{"app": "api"}
	api.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-1", Controller: ptr.To(true)}}
	webX := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-x", Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "a-2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, obj := range []runtime.Object{api, webX,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "api", Name: "api"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))}, Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "api", Name: "api-1", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", Controller: ptr.To(true)}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "api", Name: "api"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}},
	} {
		if err := sc.kube.Tracker().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for ns, name := range map[string]string{"app": "web", "api": "api"} {
		pdb, err := sc.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pdb.Status = status(ns)
		if _, err := sc.kube.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var seq []string
	add := func(s string) { mu.Lock(); seq = append(seq, s); mu.Unlock() }
	deps := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	sc.kube.PrependReactor("*", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ns := a.GetNamespace()
		if _, ok := a.(k8stesting.ListAction); ok && ns == metav1.NamespaceAll {
			add("list deployments")
		}
		if (ns != "app" && ns != "api") || a.GetSubresource() != "" {
			return false, nil, nil
		}
		switch a := a.(type) {
		case k8stesting.PatchAction:
			add("patch " + ns + "/" + a.GetName())
			// The restart rolls out at once, its old pods on the
			// cordoned nodes gone.
			// (Reactors run under the clientset's lock: the tracker only.)
			o, err := sc.kube.Tracker().Get(deps, ns, a.GetName())
			if err != nil {
				return true, nil, err
			}
			d := o.(*appsv1.Deployment).DeepCopy()
			d.Generation++
			n := ptr.Deref(d.Spec.Replicas, 1)
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
			if err := sc.kube.Tracker().Update(deps, d, ns); err != nil {
				return true, nil, err
			}
			list, err := sc.kube.Tracker().List(pods, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, ns)
			if err != nil {
				return true, nil, err
			}
			nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
			for _, p := range list.(*corev1.PodList).Items {
				if n, err := sc.kube.Tracker().Get(nodes, "", p.Spec.NodeName); err == nil && n.(*corev1.Node).Spec.Unschedulable {
					if err := sc.kube.Tracker().Delete(pods, ns, p.Name); err != nil {
						return true, nil, err
					}
				}
			}
			return true, d, nil
		case k8stesting.GetAction:
			add("get " + ns + "/" + a.GetName())
		}
		return false, nil, nil
	})
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ev, ok := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction); ok {
			o, err := sc.kube.Tracker().Get(pods, ev.Namespace, ev.Name)
			if err == nil {
				add("evict " + o.(*corev1.Pod).Spec.NodeName)
			}
		}
		return false, nil, nil
	})
	return sc, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(seq) }
}

// TestDrainGoesFirstWhereBudgetsAllow: one node at a time, the group's
// drain takes b-1 (its one pod's budget free) before a-2 (two pods of a
// budget allowing one: the second waits for the first's replacement),
// though the plan lists a-2 first — in the plan's order b-1 waited
// behind a-2 for a replacement it does not need. At N4 (the demo
// replicated 4 times) that wait was most of the waves' 245s for 155s
// predicted: a copy's node waited on its budget while the other copies'
// nodes could have gone.
func TestDrainGoesFirstWhereBudgetsAllow(t *testing.T) {
	sc, seq := orderScenario(t, func(string) policyv1.PodDisruptionBudgetStatus {
		return policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	})
	if len(sc.plan.Waves[1].Nodes) != 1 || sc.plan.Waves[1].Nodes[0].Name != "a-2" || len(sc.plan.Waves[2].Nodes) != 1 || sc.plan.Waves[2].Nodes[0].Name != "b-1" {
		t.Fatalf("plan's waves 2 and 3: %v, %v; want a-2 then b-1", sc.plan.Waves[1].Nodes, sc.plan.Waves[2].Nodes)
	}
	if err := sc.runner(nil).Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var evicts []string
	for _, s := range seq() {
		if n, ok := strings.CutPrefix(s, "evict "); ok && (n == "a-2" || n == "b-1") {
			evicts = append(evicts, n)
		}
	}
	if want := []string{"b-1", "a-2", "a-2"}; !slices.Equal(evicts, want) {
		t.Errorf("the group's evictions by node: %q; want %q: b-1, whose budget allows its pod at once, before a-2", evicts, want)
	}
}

// TestSurgeRestartsGoTogether: two Deployments whose budgets allow no
// eviction (app/web in wave 2, api/api in wave 3, drained together) are
// both restarted before either rollout is waited for: each keeps its own
// budget, so one need not wait for the other's replacements (they went
// one after another: at N4 the 4 copies' billing restarts took 20s of
// wave 4's 40s).
func TestSurgeRestartsGoTogether(t *testing.T) {
	sc, seq := orderScenario(t, func(string) policyv1.PodDisruptionBudgetStatus {
		return policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 2}
	})
	sc.plan.Budget.RestartBlocked = true
	if err := sc.runner(nil).Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := seq()
	patchAPI := slices.Index(got, "patch api/api")
	if patchAPI < 0 {
		t.Fatalf("Deployment api/api never restarted: %q", got)
	}
	// Wave 1 restarted app/web already; the group restarts it again, and
	// api/api, before it reads app/web's rollout.
	first := slices.Index(got, "patch app/web")
	start := first + 1 + slices.Index(got[first+1:], "patch app/web")
	if first < 0 || start <= first || start > patchAPI || slices.Contains(got[start:patchAPI], "get app/web") {
		t.Errorf("sequence %q: app/web's rollout waited for before api/api's restart; want both restarted, then waited for", got)
	}
}

// TestNextGroupStartsDuringTheGate: wave 3 (b-1: api/api's pod, its
// budget allowing none) drains alone after wave 2 (a-2: two pods of
// app/web, allowing one). When the plan starts wave 3 early
// (WaveTiming.EarlySeconds), its Deployment is restarted as wave 2's gate
// starts, before the gate reads the Deployments; otherwise after it. The
// restart disrupts nothing; no pod of wave 3 is evicted before the gate
// passed either way.
func TestNextGroupStartsDuringTheGate(t *testing.T) {
	for _, early := range []bool{true, false} {
		sc, seq := orderScenario(t, func(ns string) policyv1.PodDisruptionBudgetStatus {
			if ns == "api" {
				return policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
			}
			return policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
		})
		sc.plan.Budget.RestartBlocked = true
		sc.plan.Waves[1].DrainGroup, sc.plan.Waves[2].DrainGroup = 0, 0
		if early {
			sc.plan.Waves[2].Timing = &plan.WaveTiming{RestartSeconds: 5, DrainSeconds: 5, EarlySeconds: 5}
		}
		if err := sc.runner(nil).Apply(context.Background()); err != nil {
			t.Fatalf("early %v: Apply: %v", early, err)
		}
		got := seq()
		lastEvict := -1
		for i, s := range got {
			if s == "evict a-2" {
				lastEvict = i
			}
		}
		patch := slices.Index(got, "patch api/api")
		if lastEvict < 0 || patch < 0 {
			t.Fatalf("early %v: sequence %q: want a-2 evicted and api/api restarted", early, got)
		}
		gate := lastEvict + slices.Index(got[lastEvict:], "list deployments")
		if gate < lastEvict {
			t.Fatalf("early %v: sequence %q: no gate after wave 2's drain", early, got)
		}
		if early != (patch < gate) {
			t.Errorf("early %v: sequence %q: api/api restarted at %d, wave 2's gate read the Deployments at %d", early, got, patch, gate)
		}
		if slices.Contains(got, "evict b-1") {
			t.Errorf("early %v: sequence %q: b-1's pod evicted; want it replaced by the restart", early, got)
		}
	}
}
