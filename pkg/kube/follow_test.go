package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// budgetCluster is a fake API server with one PDB over pods app=web that
// behaves like the eviction subresource and the disruption controller: an
// eviction is accepted while status.disruptionsAllowed > 0 (and spends
// one), refused with 429 otherwise; the pod goes at once and its
// replacement is Ready after heal, which gives the disruption back.
type budgetCluster struct {
	cs                *fake.Clientset
	accepted, refused atomic.Int32
	mu                sync.Mutex // serialises read-modify-write of the PDB
}

var pdbGVR = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}

func newBudgetCluster(t *testing.T, allowed int32, heal time.Duration, pods ...*corev1.Pod) *budgetCluster {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	objs := []runtime.Object{pdb}
	for _, p := range pods {
		objs = append(objs, p)
	}
	b := &budgetCluster{cs: fake.NewClientset(objs...)}
	spend := func(d int32) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		o, err := b.cs.Tracker().Get(pdbGVR, "app", "web")
		if err != nil {
			return false
		}
		cur := o.(*policyv1.PodDisruptionBudget).DeepCopy()
		if cur.Status.DisruptionsAllowed+d < 0 {
			return false
		}
		cur.Status.DisruptionsAllowed += d
		return b.cs.Tracker().Update(pdbGVR, cur, "app") == nil
	}
	b.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		if !spend(-1) {
			b.refused.Add(1)
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		b.accepted.Add(1)
		ev := ca.GetObject().(*policyv1.Eviction)
		if err := b.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name); err != nil {
			return true, nil, err
		}
		time.AfterFunc(heal, func() { spend(1) })
		return true, nil, nil
	})
	return b
}

func readyPod(name string) *corev1.Pod {
	return testPod(name, "n1", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
}

// TestDrainWatchFollowsTheBudget: with Watch, evictions under a budget that
// allows one disruption at a time go one after another as fast as the
// budget heals — woken by the PDB's and the pods' events, not by the retry
// and poll timers, which are set far longer than the whole test — and
// hardly any is refused, where without Watch most requests are 429s.
func TestDrainWatchFollowsTheBudget(t *testing.T) {
	const heal = 30 * time.Millisecond
	tests := map[string]struct {
		watch bool
		slow  bool // timers of 5 s: only events can finish in time
	}{
		"watch, slow timers":   {watch: true, slow: true},
		"polling, fast timers": {watch: false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBudgetCluster(t, 1, heal, readyPod("a"), readyPod("b"), readyPod("c"), readyPod("d"))
			o := fastDrain()
			if tt.slow {
				o.RetryInitial, o.RetryMax, o.PollInterval = 5*time.Second, 5*time.Second, 5*time.Second
			}
			o.Watch = tt.watch
			d := &Drainer{Client: b.cs, Clock: clock.RealClock{}, Options: o}
			began := time.Now()
			res, err := d.Drain(context.Background(), "n1")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Evicted) != 4 || b.accepted.Load() != 4 {
				t.Fatalf("evicted %v (%d accepted), want all 4", res.Evicted, b.accepted.Load())
			}
			if took := time.Since(began); tt.slow && took > 3*time.Second {
				t.Errorf("drain took %s: it waited for the 5 s timers instead of the budget's events", took)
			}
			// The cache may lag the budget by an event, so a refusal or two
			// can happen; blind retries make many.
			if tt.watch && b.refused.Load() > 2 {
				t.Errorf("%d evictions refused with Watch, want at most 2", b.refused.Load())
			}
			if !tt.watch && b.refused.Load() <= 2 {
				t.Errorf("%d evictions refused without Watch: the case no longer shows what Watch saves", b.refused.Load())
			}
		})
	}
}

// TestDrainWatchForbidden: a client that may not watch pods and PDBs, nor
// list PDBs (an RBAC role made for polling), still drains, on the timers.
func TestDrainWatchForbidden(t *testing.T) {
	b := newBudgetCluster(t, 1, time.Millisecond, readyPod("a"), readyPod("b"))
	var denied atomic.Int32
	deny := func(a k8stesting.Action) (bool, runtime.Object, error) {
		denied.Add(1)
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", nil)
	}
	b.cs.PrependReactor("watch", "pods", deny)
	b.cs.PrependReactor("watch", "poddisruptionbudgets", deny)
	b.cs.PrependReactor("list", "poddisruptionbudgets", deny)
	o := fastDrain()
	o.Watch = true
	d := &Drainer{Client: b.cs, Clock: clock.RealClock{}, Options: o}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := d.Drain(ctx, "n1")
	if err != nil || len(res.Evicted) != 2 {
		t.Fatalf("Drain = %+v, %v; want both pods evicted", res, err)
	}
	if denied.Load() == 0 {
		t.Error("the followers never asked: the case tests nothing")
	}
}
