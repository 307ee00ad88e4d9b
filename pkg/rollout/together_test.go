package rollout_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// togetherScenario is the scenario's waves (1: a-1, a-2; 2: a-3; 3: b-1)
// pre-provisioned, waves 2 and 3 a drain group (as a plan whose budgets
// do not overlap there would make it), each placeholder running at once
// on a node of its wave; seq records, in order, the placeholders created,
// the nodes cordoned, the pods evicted (by node) and the gates evaluated
// (by wave).
func togetherScenario(t *testing.T) (*scenario, func() []string, rollout.Observer) {
	sc := newScenario(t)
	// One node at a time: a-3's pod is evicted before b-1's.
	sc.plan.Budget.PreProvision, sc.plan.Budget.Concurrency = true, 1
	for i := range sc.plan.Waves {
		sc.plan.Waves[i].PreProvision = []plan.Placeholder{{NodePool: "default", CPU: "1", Memory: "1Gi"}}
	}
	sc.plan.Waves[1].DrainGroup, sc.plan.Waves[2].DrainGroup = 2, 2
	var mu sync.Mutex
	var seq []string
	add := func(s string) { mu.Lock(); seq = append(seq, s); mu.Unlock() }
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if p, ok := ca.GetObject().(*corev1.Pod); ok && strings.HasPrefix(p.Name, "km-placeholder-") {
			add("create " + p.Name)
			p.Spec.NodeName, p.Status.Phase = "karpenter-"+p.Labels["karpenter-migrate.io/wave"], corev1.PodRunning
		}
		return false, nil, nil
	})
	sc.kube.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `"unschedulable":true`) {
			add("cordon " + a.(k8stesting.PatchAction).GetName())
		}
		return false, nil, nil
	})
	obs := func(e rollout.Event) {
		switch {
		case e.Kind == rollout.EventEviction && e.Message == "evicted":
			add("evict " + e.Node)
		case e.Kind == rollout.EventGate:
			add("gate " + string(rune('0'+e.Wave)))
		}
	}
	return sc, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(seq) }, obs
}

// TestDrainGroupDrainsTogether: the waves of a drain group are each
// pre-provisioned (all their placeholders created before either waits)
// and cordoned, then their nodes drain in one drain, behind one gate;
// evictions are counted per wave, by node, and the journal names the
// group. Rollback (Down) then brings every wave's nodes back.
func TestDrainGroupDrainsTogether(t *testing.T) {
	ctx := context.Background()
	sc, seq, obs := togetherScenario(t)
	var mu sync.Mutex
	evictedIn := map[string]int{} // node -> the wave its eviction events name
	r := sc.runner(func(e rollout.Event) {
		obs(e)
		if e.Kind == rollout.EventEviction && e.Message == "evicted" {
			mu.Lock()
			evictedIn[e.Node] = e.Wave
			mu.Unlock()
		}
	})
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := seq()
	// After wave 1's gate: both placeholders, both cordons, both nodes'
	// evictions, then one gate, of wave 2.
	at := slices.Index(got, "create km-placeholder-dev-w2-0")
	if at < 0 {
		t.Fatalf("no placeholder of wave 2 in %q", got)
	}
	var gates []string
	for _, s := range got[at:] {
		if strings.HasPrefix(s, "gate") {
			gates = append(gates, s)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(got[at:]), func(s string) bool { return strings.HasPrefix(s, "gate") })
	n2, n3 := sc.plan.Waves[1].Nodes[0].Name, sc.plan.Waves[2].Nodes[0].Name
	want := []string{"create km-placeholder-dev-w2-0", "create km-placeholder-dev-w3-0", "cordon " + n2, "cordon " + n3, "evict " + n2, "evict " + n3}
	if !slices.Equal(rest, want) {
		t.Errorf("waves 2 and 3: %q; want both prepared, both cordoned, then both drained: %q", rest, want)
	}
	if last := slices.Index(got, "evict "+n3); last < 0 || slices.ContainsFunc(got[at:last], func(s string) bool { return strings.HasPrefix(s, "gate") }) {
		t.Errorf("sequence %q: a gate between the group's placeholders and its last eviction; want one gate after the group's drain", got)
	}
	if slices.Contains(gates, "gate 3") || !slices.Contains(gates, "gate 2") {
		t.Errorf("gates after wave 2's placeholders: %q; want the group's only, of wave 2", gates)
	}
	if evictedIn[n2] != 2 || evictedIn[n3] != 3 {
		t.Errorf("eviction events' waves: %v; want %s's in wave 2, %s's in wave 3", evictedIn, n2, n3)
	}
	j := r.Journal
	for _, w := range []struct{ index, group int }{{1, 0}, {2, 2}, {3, 2}} {
		rec := j.Wave(w.index)
		if rec.Phase != rollout.PhaseDone || rec.DrainGroup != w.group || rec.Evicted != 1+btoi(w.index == 1) {
			t.Errorf("journal: wave %d at %q, drain group %d, evicted %d; want done, group %d, its own pods counted", w.index, rec.Phase, rec.DrainGroup, rec.Evicted, w.group)
		}
	}

	if err := sc.runner(nil).Rollback(ctx, ""); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	nodes, _ := sc.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 4 || slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return n.Spec.Unschedulable }) {
		t.Errorf("after rollback: %d legacy nodes, cordoned: %v; want all 4 back, none cordoned", len(nodes.Items), slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return n.Spec.Unschedulable }))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDrainGroupResumes: a run killed in the group's drain (after wave
// 2's eviction, before wave 3's: b-1's pod, web-3) leaves both waves at the drain in the journal;
// the resumed run starts the group again there, drains what is left in
// one drain (wave 2's pod is not evicted again) and passes one gate.
func TestDrainGroupResumes(t *testing.T) {
	sc, seq, obs := togetherScenario(t)
	ctx, cancel := context.WithCancel(context.Background())
	sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ev, ok := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction); ok && ev.Name == "web-3" {
			cancel() // killed as it evicts b-1's pod
			return true, nil, context.Canceled
		}
		return false, nil, nil
	})
	err := sc.runner(obs).Apply(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Apply = %v, want context.Canceled", err)
	}
	j, _ := rollout.Status(context.Background(), sc.kube, "karpenter-migrate", "dev")
	if w2, w3 := j.Wave(2), j.Wave(3); w2.Phase != rollout.PhaseDrain || w3.Phase != rollout.PhaseDrain || w2.DrainGroup != 2 || w3.DrainGroup != 2 {
		t.Fatalf("journal after the kill: wave 2 %+v, wave 3 %+v; want both at the drain, in group 2", *w2, *w3)
	}
	before := len(seq())
	sc.kube.ReactionChain = sc.kube.ReactionChain[1:] // the kill's reactor
	if err := sc.runner(obs).Apply(context.Background()); err != nil {
		t.Fatalf("resumed Apply: %v", err)
	}
	got := seq()[before:]
	var evicts, gates []string
	for _, s := range got {
		switch {
		case strings.HasPrefix(s, "evict"):
			evicts = append(evicts, s)
		case strings.HasPrefix(s, "gate"):
			gates = append(gates, s)
		}
	}
	if !slices.Equal(evicts, []string{"evict b-1"}) || slices.Contains(gates, "gate 3") || len(gates) == 0 {
		t.Errorf("resumed run: evictions %q, gates %q; want b-1's pod only, and the group's gate (wave 2's)", evicts, gates)
	}
	j, _ = rollout.Status(context.Background(), sc.kube, "karpenter-migrate", "dev")
	if j.State != rollout.StateCompleted || j.Wave(2).Phase != rollout.PhaseDone || j.Wave(3).Phase != rollout.PhaseDone {
		t.Errorf("after resume: state %q, waves 2 and 3 at %q, %q; want completed, both done", j.State, j.Wave(2).Phase, j.Wave(3).Phase)
	}
}
