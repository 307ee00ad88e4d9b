package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// TestDrainOrder: with node concurrency 1 nodes drain in the order given,
// and with PodConcurrency 1 a node's evictions never overlap; 0 keeps
// evicting a node's pods at once.
func TestDrainOrder(t *testing.T) {
	for _, tc := range []struct {
		name           string
		podConcurrency int
		wantMaxFlight  int
	}{
		{"sequential", 1, 1},
		{"two at a time", 2, 2},
		{"all at once", 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			nodes := []string{"n3", "n1", "n2"}
			for _, n := range nodes {
				for i := range 4 {
					objs = append(objs, testPod(fmt.Sprintf("%s-p%d", n, i), n))
				}
			}
			cs := fake.NewClientset(objs...)
			var mu sync.Mutex
			inFlight, maxFlight := 0, 0
			var order []string
			cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				ca, ok := a.(k8stesting.CreateAction)
				if !ok || a.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				ev := ca.GetObject().(*policyv1.Eviction)
				mu.Lock()
				order = append(order, ev.Name)
				mu.Unlock()
				// Hold the request (the fake serialises them) so that
				// concurrent evictions pile up behind it.
				time.Sleep(5 * time.Millisecond)
				return true, nil, cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), a.GetNamespace(), ev.Name)
			})
			o := fastDrain()
			o.PodConcurrency = tc.podConcurrency
			// In flight: from the eviction request to the pod being gone.
			d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: o, OnEvent: func(e DrainEvent) {
				mu.Lock()
				defer mu.Unlock()
				switch e.Type {
				case DrainEvicting:
					inFlight++
					maxFlight = max(maxFlight, inFlight)
				case DrainEvicted:
					inFlight--
				}
			}}
			res, err := d.DrainNodes(context.Background(), nodes, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Node != nodes[i] || len(r.Evicted) != 4 {
					t.Errorf("result %d = %+v, want node %s with 4 pods evicted", i, r, nodes[i])
				}
			}
			// The bound is exact; overlap itself depends on scheduling, so
			// a bound above 1 only needs some.
			if maxFlight > tc.wantMaxFlight || (tc.wantMaxFlight > 1) != (maxFlight > 1) {
				t.Errorf("at most %d evictions in flight, want %d", maxFlight, tc.wantMaxFlight)
			}
			// Nodes go one at a time in the given order: each node's
			// evictions are contiguous.
			var nodeOrder []string
			for _, p := range order {
				n := p[:2]
				if len(nodeOrder) == 0 || nodeOrder[len(nodeOrder)-1] != n {
					nodeOrder = append(nodeOrder, n)
				}
			}
			if !slices.Equal(nodeOrder, nodes) {
				t.Errorf("nodes drained in order %v, want %v", nodeOrder, nodes)
			}
		})
	}
}
