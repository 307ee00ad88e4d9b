package kube

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// TestDrainTimeoutIsDeadlineExceeded: a drain bounded by Options.Timeout
// that a PDB blocks forever ends with context.DeadlineExceeded (the cause
// of its clock timeout), not context.Canceled, so the rollout can tell a
// gate timeout (paused) from an interrupted run.
func TestDrainTimeoutIsDeadlineExceeded(t *testing.T) {
	cs := fake.NewClientset(testPod("a", "n1"))
	var calls atomic.Int32
	evictionReactor(cs, func(string) bool { return true }, &calls)
	o := fastDrain()
	o.Timeout = 50 * time.Millisecond
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: o}
	_, err := d.Drain(context.Background(), "n1")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if calls.Load() < 2 {
		t.Errorf("eviction attempts = %d, want retries until the timeout", calls.Load())
	}
}

// TestDrainTimeoutInFlight: when the timeout ends the drain while an
// eviction request is on the wire, client-go returns context.Canceled; the
// drain still reports its cause, DeadlineExceeded.
func TestDrainTimeoutInFlight(t *testing.T) {
	const timeout = 50 * time.Millisecond
	cs := fake.NewClientset(testPod("a", "n1"))
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		time.Sleep(3 * timeout)
		return true, nil, &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api/v1/namespaces/app/pods/a/eviction", Err: context.Canceled}
	})
	o := fastDrain()
	o.Timeout = timeout
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: o}
	_, err := d.Drain(context.Background(), "n1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}
