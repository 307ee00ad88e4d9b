package kube

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// TestEvictNow: a pass asks once per pod and returns without waiting —
// on a clock that never moves — with what was evicted and what a budget
// refused; the next pass asks again for what is left, and the node is
// drained once a pass finds nothing to evict. The filters are Drain's.
func TestEvictNow(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "agent"}}
	dsPod := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
	}
	bare := func(p *corev1.Pod) { p.OwnerReferences = nil }
	doNotDisrupt := func(p *corev1.Pod) { p.Annotations = map[string]string{inventory.AnnotationDoNotDisrupt: "true"} }
	names := func(ss []SkippedPod) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Pod)
		}
		return strings.Join(out, ",")
	}

	tests := []struct {
		name string
		opts func(*DrainOptions)
		// passes are the Evicted, Blocked and Skipped of each pass, the
		// last one drained.
		passes [][3]string
	}{
		{
			name:   "a refused pod is asked again next pass",
			passes: [][3]string{{"app/a,app/c", "app/b", "app/bare,app/keep"}, {"app/b", "", "app/bare,app/keep"}, {"", "", "app/bare,app/keep"}},
		},
		{
			name:   "Karpenter's termination: do-not-disrupt and bare pods go too",
			opts:   func(o *DrainOptions) { o.ForceEvict, o.EvictUnreplicated = true, true },
			passes: [][3]string{{"app/a,app/bare,app/c,app/keep", "app/b", ""}, {"app/b", "", ""}, {"", "", ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(ds, testPod("a", "n1"), testPod("b", "n1"), testPod("c", "n1"), testPod("agent-x", "n1", dsPod),
				testPod("bare", "n1", bare), testPod("keep", "n1", doNotDisrupt), testPod("other", "n2"))
			refuse := 1 // b is refused once
			var calls atomic.Int32
			evictionReactor(cs, func(name string) bool {
				if name == "b" && refuse > 0 {
					refuse--
					return true
				}
				return false
			}, &calls)
			opts := DefaultDrainOptions()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			var blocked []DrainEvent
			d := &Drainer{Client: cs, Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Options: opts, OnEvent: func(e DrainEvent) {
				if e.Type == DrainBlocked {
					blocked = append(blocked, e)
				}
			}}
			for i, want := range tt.passes {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				pass, err := d.EvictNow(ctx, "n1")
				cancel()
				if err != nil {
					t.Fatalf("pass %d: %v", i, err)
				}
				got := [3]string{strings.Join(pass.Evicted, ","), strings.Join(pass.Blocked, ","), names(pass.Skipped)}
				if got != want {
					t.Errorf("pass %d: evicted, blocked, skipped = %q, want %q", i, got, want)
				}
				if last := i == len(tt.passes)-1; pass.Drained() != last {
					t.Errorf("pass %d: Drained() = %v, want %v", i, pass.Drained(), last)
				}
			}
			if len(blocked) != 1 || blocked[0].Pod != "app/b" {
				t.Errorf("Blocked events = %+v, want one for app/b", blocked)
			}
			left, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var on []string
			for _, p := range left.Items {
				on = append(on, p.Name)
			}
			wantLeft := "agent-x,bare,keep,other"
			if opts.ForceEvict {
				wantLeft = "agent-x,other"
			}
			if got := strings.Join(on, ","); got != wantLeft {
				t.Errorf("pods left = %q, want %q", got, wantLeft)
			}
		})
	}
}

// TestEvictNowCancelled: a pass under a cancelled context asks nothing.
func TestEvictNowCancelled(t *testing.T) {
	cs := fake.NewClientset(testPod("a", "n1"))
	var calls atomic.Int32
	evictionReactor(cs, func(string) bool { return false }, &calls)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &Drainer{Client: cs, Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Options: DefaultDrainOptions()}
	if _, err := d.EvictNow(ctx, "n1"); err == nil {
		t.Fatal("EvictNow under a cancelled context: no error")
	}
	if calls.Load() != 0 {
		t.Errorf("eviction calls = %d, want 0", calls.Load())
	}
}
