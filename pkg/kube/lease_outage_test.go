package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	// Down for 8s from the first renewal (10s), under the 20s (2/3 of 30s)
	// the lock allows since the acquisition: renewed at 10+8s.
	down.Store(true)
	step(10 * time.Second)
	for range 7 {
		step(time.Second)
		if h.Context().Err() != nil {
			t.Fatalf("lock lost %s after the last renewal: %v", clk.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), context.Cause(h.Context()))
		}
	}
	down.Store(false)
	// The loop retries every second, but may have asked the clock for its
	// next retry only after the last step: step until a retry renewed.
	outage := clk.Now()
	var renewedAt time.Time
	for i := 0; ; i++ {
		step(time.Second)
		time.Sleep(10 * time.Millisecond)
		l, err := cs.CoordinationV1().Leases("karpenter-migrate").Get(ctx, "rollout-prod", metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.After(outage) {
			renewedAt = l.Spec.RenewTime.Time
			break
		}
		if i == 3 {
			t.Fatalf("lease not renewed 3s after the outage ended (%s)", outage.Format(time.TimeOnly))
		}
	}
	if h.Context().Err() != nil {
		t.Fatalf("lock lost after an 8s outage: %v", context.Cause(h.Context()))
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
