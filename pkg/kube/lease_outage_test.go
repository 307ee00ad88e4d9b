package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestLockRidesOutAnAPIServerOutage (#19 rungs 3 and 4): renewals that fail
// because the API server is away are tried again; the lock is kept while
// the last successful renewal is less than two thirds of Duration old, and
// lost (ErrLockLost, naming the failure) once it is older.
func TestLockRidesOutAnAPIServerOutage(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	var down atomic.Bool
	cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &Lock{Client: cs, Namespace: "karpenter-migrate", Name: "rollout-prod", Identity: "laptop", Duration: 30 * time.Second, Clock: clk}
	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(ctx) }()
	step := func(d time.Duration) {
		t.Helper()
		waitForWaiters(t, clk)
		clk.Step(d)
	}

	// Down for 15s from the first renewal (10s): renewed at 10+15s.
	down.Store(true)
	step(10 * time.Second)
	for range 14 {
		step(time.Second)
		if h.Context().Err() != nil {
			t.Fatalf("lock lost %s after the last renewal: %v", clk.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), context.Cause(h.Context()))
		}
	}
	down.Store(false)
	step(time.Second)
	waitRenewed(t, cs, clk.Now())
	renewedAt := clk.Now()
	if h.Context().Err() != nil {
		t.Fatalf("lock lost after a 15s outage: %v", context.Cause(h.Context()))
	}

	// Down for good: lost once 20s (2/3 of 30s) pass without a renewal.
	down.Store(true)
	for i := 0; h.Context().Err() == nil; i++ {
		if i > 40 {
			t.Fatal("lock still held 40s into an outage of a 30s lease")
		}
		step(time.Second)
		time.Sleep(time.Millisecond)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, ErrLockLost) || clk.Since(renewedAt) < 20*time.Second {
		t.Errorf("lost at %s with %v; want ErrLockLost 20s after the last renewal (%s)", clk.Now().Format(time.TimeOnly), cause, renewedAt.Format(time.TimeOnly))
	}
}
