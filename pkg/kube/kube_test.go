package kube

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func testPod(name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "app", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(5))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// evictionReactor makes the fake clientset behave like the API server's
// eviction subresource: refuse with 429 while refuse() says so, else delete.
func evictionReactor(cs *fake.Clientset, refuse func(name string) bool, count *atomic.Int32) {
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := ca.GetObject().(*policyv1.Eviction)
		count.Add(1)
		if refuse(ev.Name) {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
		if err := cs.Tracker().Delete(gvr, ev.Namespace, ev.Name); err != nil {
			return true, nil, err
		}
		return true, nil, nil
	})
}

func fastDrain() DrainOptions {
	o := DefaultDrainOptions()
	o.RetryInitial, o.RetryMax, o.PollInterval = time.Millisecond, 4*time.Millisecond, time.Millisecond
	return o
}

func TestDrain(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "agent"}}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	dsPod := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
	}
	annotate := func(k, v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
	}
	emptyDir := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	bare := func(p *corev1.Pod) { p.OwnerReferences = nil }

	tests := []struct {
		name        string
		pods        []*corev1.Pod
		opts        func(*DrainOptions)
		refuseTimes int // 429s before each eviction succeeds
		wantEvicted []string
		wantSkipped []string
		wantLeft    []string
		wantBlocked string
	}{
		{
			name:        "evicts replicated pods and ignores DaemonSet pods",
			pods:        []*corev1.Pod{testPod("a", "n1"), testPod("b", "n1"), testPod("other", "n2"), testPod("agent-x", "n1", dsPod)},
			wantEvicted: []string{"app/a", "app/b"},
			wantLeft:    []string{"agent-x", "other"},
		},
		{
			name:        "retries 429 naming the PDB",
			pods:        []*corev1.Pod{testPod("a", "n1")},
			refuseTimes: 3,
			wantEvicted: []string{"app/a"},
			wantBlocked: "app/web",
		},
		{
			name:        "skips do-not-disrupt and safe-to-evict=false",
			pods:        []*corev1.Pod{testPod("a", "n1", annotate(inventory.AnnotationDoNotDisrupt, "true")), testPod("b", "n1", annotate(inventory.AnnotationSafeToEvict, "false")), testPod("c", "n1")},
			wantEvicted: []string{"app/c"},
			wantSkipped: []string{"app/a", "app/b"},
			wantLeft:    []string{"a", "b"},
		},
		{
			name:        "force-evict moves do-not-disrupt pods",
			pods:        []*corev1.Pod{testPod("a", "n1", annotate(inventory.AnnotationDoNotDisrupt, "true"))},
			opts:        func(o *DrainOptions) { o.ForceEvict = true },
			wantEvicted: []string{"app/a"},
		},
		{
			name:        "emptyDir blocks unless allowed",
			pods:        []*corev1.Pod{testPod("a", "n1", emptyDir), testPod("b", "n1", bare)},
			wantSkipped: []string{"app/a", "app/b"},
			wantLeft:    []string{"a", "b"},
		},
		{
			name:        "emptyDir evicted when the plan allows",
			pods:        []*corev1.Pod{testPod("a", "n1", emptyDir)},
			opts:        func(o *DrainOptions) { o.DeleteEmptyDirData = true },
			wantEvicted: []string{"app/a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{ds, pdb}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			cs := fake.NewClientset(objs...)
			var mu sync.Mutex
			refused := map[string]int{}
			var calls atomic.Int32
			evictionReactor(cs, func(name string) bool {
				mu.Lock()
				defer mu.Unlock()
				if refused[name] < tt.refuseTimes {
					refused[name]++
					return true
				}
				return false
			}, &calls)
			opts := fastDrain()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			var events []DrainEvent
			d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: opts, OnEvent: func(e DrainEvent) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}}
			res, err := d.DrainNodes(context.Background(), []string{"n1"}, 2)
			if err != nil {
				t.Fatalf("DrainNodes: %v", err)
			}
			if got := strings.Join(res[0].Evicted, ","); got != strings.Join(tt.wantEvicted, ",") {
				t.Errorf("evicted = %q, want %q", got, strings.Join(tt.wantEvicted, ","))
			}
			var skipped []string
			for _, s := range res[0].Skipped {
				skipped = append(skipped, s.Pod)
			}
			if got := strings.Join(skipped, ","); got != strings.Join(tt.wantSkipped, ",") {
				t.Errorf("skipped = %q, want %q (%+v)", got, strings.Join(tt.wantSkipped, ","), res[0].Skipped)
			}
			if res[0].Complete() != (len(tt.wantSkipped) == 0) {
				t.Errorf("Complete() = %v with skipped %v", res[0].Complete(), skipped)
			}
			left, _ := cs.CoreV1().Pods("app").List(context.Background(), metav1.ListOptions{})
			var names []string
			for _, p := range left.Items {
				names = append(names, p.Name)
			}
			if got := strings.Join(names, ","); got != strings.Join(tt.wantLeft, ",") {
				t.Errorf("pods left = %q, want %q", got, strings.Join(tt.wantLeft, ","))
			}
			if want := int32(len(tt.wantEvicted) * (tt.refuseTimes + 1)); calls.Load() != want {
				t.Errorf("eviction calls = %d, want %d", calls.Load(), want)
			}
			if tt.wantBlocked != "" {
				found := false
				for _, e := range events {
					if e.Type == DrainBlocked && e.PDB == tt.wantBlocked {
						found = true
					}
				}
				if !found {
					t.Errorf("no Blocked event naming PDB %s in %+v", tt.wantBlocked, events)
				}
			}
		})
	}
}

func TestDrainCancelledStartsNoEviction(t *testing.T) {
	cs := fake.NewClientset(testPod("a", "n1"))
	var calls atomic.Int32
	evictionReactor(cs, func(string) bool { return false }, &calls)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: fastDrain()}
	_, err := d.Drain(ctx, "n1")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if calls.Load() != 0 {
		t.Errorf("eviction calls after cancel = %d, want 0", calls.Load())
	}
}

// Cordon sends one request, a patch of spec.unschedulable, and leaves the
// node's other fields alone; before #33 it read the node first (one GET
// per node a wave cordons).
func TestCordon(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}})
	ctx := context.Background()
	for _, want := range []bool{true, true, false} {
		cs.ClearActions()
		if err := Cordon(ctx, cs, "n1", want); err != nil {
			t.Fatalf("Cordon(%v): %v", want, err)
		}
		var verbs []string
		for _, a := range cs.Actions() {
			verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
		}
		if got := strings.Join(verbs, ", "); got != "patch nodes" {
			t.Errorf("Cordon(%v) sent %q, want one patch", want, got)
		}
		n, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if n.Spec.Unschedulable != want {
			t.Errorf("unschedulable = %v, want %v", n.Spec.Unschedulable, want)
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != taint || n.Labels["pool"] != "a" {
			t.Errorf("Cordon(%v) changed the node's taints %v or labels %v", want, n.Spec.Taints, n.Labels)
		}
	}
	err := Cordon(ctx, cs, "missing", true)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Cordon(missing) = %v, want an error naming the node", err)
	}
	// The waves step skips a node that is gone by this test.
	if !apierrors.IsNotFound(errors.Unwrap(err)) {
		t.Errorf("Cordon(missing) = %v, want it to wrap not found once", err)
	}
}

// Pods lists the node's pods once (before #33 it listed them twice:
// kubectl's list, then its own to check their node), still filters what
// a client ignoring the field selector returns (client-go's fake: a pod
// without a controller on another node is not reported), and the pods
// it returns carry their UID for the eviction's precondition.
func TestPodsListsOnce(t *testing.T) {
	bare := func(p *corev1.Pod) { p.OwnerReferences = nil }
	stays := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "controller"} }
	cs := fake.NewClientset(testPod("a", "n1"), testPod("b", "n1", bare), testPod("c", "n1", stays), testPod("x", "n2"), testPod("y", "n2", bare))
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: fastDrain()}
	d.Options.Stay = func(p *corev1.Pod) bool { return p.Labels["app"] == "controller" }
	pods, skipped, err := d.Pods(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Name != "a" || pods[0].UID != "uid-a" {
		t.Errorf("pods to evict %v, want app/a with its UID", pods)
	}
	if len(skipped) != 1 || skipped[0].Pod != "app/b" {
		t.Errorf("skipped %+v, want app/b alone (app/y is on n2, app/c stays)", skipped)
	}
	lists := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("%d pod lists, want 1", lists)
	}
}

// TestDaemonSetsAskedOnce: kubectl's filter asks for the DaemonSet of
// each DaemonSet pod it lists; the Drainer asks once for each DaemonSet
// that exists, however many nodes it lists, and again for one not found.
func TestDaemonSetsAskedOnce(t *testing.T) {
	ofDaemonSet := func(name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, Controller: ptr.To(true)}}
		}
	}
	cs := fake.NewClientset(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "agent"}},
		testPod("a1", "n1", ofDaemonSet("agent")), testPod("o1", "n1", ofDaemonSet("gone")), testPod("w1", "n1"),
		testPod("a2", "n2", ofDaemonSet("agent")), testPod("o2", "n2", ofDaemonSet("gone")), testPod("w2", "n2"))
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: fastDrain()}
	for _, n := range []string{"n1", "n2", "n1"} {
		pods, skipped, err := d.Pods(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		// The orphan is refused (no --force), the DaemonSet's pod ignored.
		if len(pods) != 1 || pods[0].Name != "w"+n[1:] || len(skipped) != 1 || skipped[0].Pod != "app/o"+n[1:] {
			t.Errorf("node %s: evict %v, skipped %+v; want w%s, and o%s refused", n, pods, skipped, n[1:], n[1:])
		}
	}
	gets := map[string]int{}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "daemonsets" {
			gets[a.(k8stesting.GetAction).GetName()]++
		}
	}
	if gets["agent"] != 1 || gets["gone"] < 3 {
		t.Errorf("DaemonSet gets %v, want agent 1 (found once), gone at least 3 (at every listing)", gets)
	}
}

func TestSetTaint(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{other}}})
	ctx := context.Background()
	reserve := corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	for i, step := range []struct {
		present, changed bool
		want             int
	}{{true, true, 2}, {true, false, 2}, {false, true, 1}, {false, false, 1}} {
		changed, err := SetTaint(ctx, cs, "n1", reserve, step.present)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if changed != step.changed || len(n.Spec.Taints) != step.want || n.Spec.Taints[0] != other {
			t.Errorf("step %d: changed %t, taints %v; want changed %t, %d taints, %s kept", i, changed, n.Spec.Taints, step.changed, step.want, other.ToString())
		}
	}
	if _, err := SetTaint(ctx, cs, "missing", reserve, true); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("SetTaint(missing) = %v, want an error naming the node", err)
	}
}

func TestStateStore(t *testing.T) {
	cs := fake.NewClientset()
	s := &StateStore{Client: cs, Namespace: "karpenter-migrate", Name: "journal-prod", Key: "journal.json", Environment: "prod"}
	ctx := context.Background()
	got, err := s.Load(ctx)
	if err != nil || got != nil {
		t.Fatalf("Load on empty cluster = %q, %v; want nil, nil", got, err)
	}
	for _, doc := range []string{`{"v":1}`, `{"v":2}`} {
		if err := s.Save(ctx, []byte(doc)); err != nil {
			t.Fatalf("Save: %v", err)
		}
		got, err := s.Load(ctx)
		if err != nil || string(got) != doc {
			t.Fatalf("Load = %q, %v; want %q", got, err, doc)
		}
	}
	cm, _ := cs.CoreV1().ConfigMaps("karpenter-migrate").Get(ctx, "journal-prod", metav1.GetOptions{})
	if cm.Labels[LabelEnvironment] != "prod" || cm.Labels[LabelManagedBy] != FieldManager {
		t.Errorf("labels = %v", cm.Labels)
	}
}

// TestStateStoreWritesWithoutReading: a save updates the ConfigMap it
// wrote last without a get; a conflict (another writer) reads it again,
// keeping that writer's other keys.
func TestStateStoreWritesWithoutReading(t *testing.T) {
	cs := fake.NewClientset()
	s := &StateStore{Client: cs, Namespace: "karpenter-migrate", Name: "journal-prod", Key: "journal.json", Environment: "prod"}
	ctx := context.Background()
	for _, doc := range []string{`{"v":1}`, `{"v":2}`, `{"v":3}`} {
		if err := s.Save(ctx, []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	verbs := func() string {
		var out []string
		for _, a := range cs.Actions() {
			if a.GetResource().Resource == "configmaps" {
				out = append(out, a.GetVerb())
			}
		}
		cs.ClearActions()
		return strings.Join(out, " ")
	}
	if got, want := verbs(), "get create update update"; got != want {
		t.Errorf("three saves sent %q, want %q", got, want)
	}
	// Another writer adds a key; the store's next update conflicts once.
	cm, _ := cs.CoreV1().ConfigMaps("karpenter-migrate").Get(ctx, "journal-prod", metav1.GetOptions{})
	cm.Data["other"] = "kept"
	if _, err := cs.CoreV1().ConfigMaps("karpenter-migrate").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	conflicts := 1
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), "journal-prod", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	if err := s.Save(ctx, []byte(`{"v":4}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := verbs(), "update get update"; got != want {
		t.Errorf("a save that conflicts sent %q, want %q", got, want)
	}
	cm, _ = cs.CoreV1().ConfigMaps("karpenter-migrate").Get(ctx, "journal-prod", metav1.GetOptions{})
	if cm.Data["journal.json"] != `{"v":4}` || cm.Data["other"] != "kept" {
		t.Errorf("after the conflict: %v, want the journal at v4 and the other key kept", cm.Data)
	}
}

func TestLock(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lock := func(id string) *Lock {
		return &Lock{Client: cs, Namespace: "karpenter-migrate", Name: "rollout-prod", Identity: id, Duration: 30 * time.Second, Clock: clk}
	}
	first, err := lock("laptop").Acquire(ctx)
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	_, err = lock("ci").Acquire(ctx)
	var held *HeldError
	if !errors.As(err, &held) || held.Holder != "laptop" {
		t.Fatalf("second Acquire = %v, want HeldError naming laptop", err)
	}
	if !strings.Contains(err.Error(), `"laptop"`) {
		t.Errorf("error %q does not name the holder", err)
	}

	// Renewal keeps it: after 50s (> Duration) of renewals every 10s, ci still fails.
	for i := 0; i < 5; i++ {
		waitForWaiters(t, clk)
		clk.Step(10 * time.Second)
		waitRenewed(t, cs, clk.Now())
	}
	if _, err := lock("ci").Acquire(ctx); !errors.As(err, &held) {
		t.Fatalf("Acquire while renewed = %v, want HeldError", err)
	}

	// Release frees it at once.
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	second, err := lock("ci").Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	// A holder that dies (no Release, no renewal) loses it after Duration.
	second.cancel(context.Canceled)
	<-second.done
	if _, err := lock("laptop").Acquire(ctx); !errors.As(err, &held) {
		t.Fatalf("Acquire before expiry = %v, want HeldError", err)
	}
	clk.Step(31 * time.Second)
	third, err := lock("laptop").Acquire(ctx)
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	l, _ := cs.CoordinationV1().Leases("karpenter-migrate").Get(ctx, "rollout-prod", metav1.GetOptions{})
	if got := ptr.Deref(l.Spec.LeaseTransitions, 0); got != 2 {
		t.Errorf("lease transitions = %d, want 2", got)
	}
	// The dead holder's renewal now finds it lost.
	if err := lock("ci").renew(ctx); err == nil {
		t.Error("renew by the old holder succeeded, want an error")
	}
	_ = third.Release(ctx)
}

func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("renewal loop never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func waitRenewed(t *testing.T, cs *fake.Clientset, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := cs.CoordinationV1().Leases("karpenter-migrate").Get(context.Background(), "rollout-prod", metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Time.Before(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not renewed to %s", want)
		}
		time.Sleep(time.Millisecond)
	}
}
