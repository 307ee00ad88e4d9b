package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
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
