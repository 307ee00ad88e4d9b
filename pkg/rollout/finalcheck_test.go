package rollout_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// TestFinalCheckWaitsForAReplacement: the final check (step 12) finds
// Deployment app/web at 3/4 ready while a replacement starts. It waits for
// it, as a wave's gate does, and passes once the replacement is ready; when
// it never is, it pauses only once the PDB wait gate has run out, naming
// the Deployment. On the fake clock.
func TestFinalCheckWaitsForAReplacement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		readyIn time.Duration // 0: never
	}{{"ready after 30s", 30 * time.Second}, {"never ready", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScenario(t)
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			var mu sync.Mutex
			var started time.Time
			deps := appsv1.SchemeGroupVersion.WithResource("deployments")
			setReady := func(n int32) {
				o, err := sc.kube.Tracker().Get(deps, "app", "web")
				if err != nil {
					t.Error(err)
					return
				}
				d := o.(*appsv1.Deployment).DeepCopy()
				d.Status.ReadyReplicas = n
				if err := sc.kube.Tracker().Update(deps, d, "app"); err != nil {
					t.Error(err)
				}
			}
			var waiting []string
			// The replacement is ready readyIn after the step started, and
			// only once the check has said it waits: the loop below steps
			// the clock for any waiter, so under load the clock can pass
			// readyIn before the check first reads the Deployment.
			sc.kube.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if !started.IsZero() && tc.readyIn > 0 && len(waiting) > 0 && !clk.Now().Before(started.Add(tc.readyIn)) {
					setReady(4)
				}
				return false, nil, nil
			})
			obs := func(e rollout.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case e.Kind == rollout.EventStepStarted && e.Step == "12_consolidation_check":
					started = clk.Now()
					setReady(3) // a replacement is starting
				case e.Kind == rollout.EventWaiting && e.Step == "12_consolidation_check":
					waiting = append(waiting, e.Message)
				}
			}
			r := sc.runner(obs)
			r.Clock = clk
			done := make(chan error)
			go func() { done <- r.Apply(context.Background()) }()
			var err error
		step:
			for {
				select {
				case err = <-done:
					break step
				case <-time.After(100 * time.Microsecond):
					if clk.HasWaiters() {
						clk.Step(time.Second)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			waited := clk.Now().Sub(started)
			gate := sc.plan.Budget.Gates.PDBWaitTimeout.Duration
			if len(waiting) == 0 || !strings.Contains(waiting[0], "Deployment app/web 3/4 ready") {
				t.Errorf("the final check waited for %q; want it to say it waits for Deployment app/web 3/4 ready", waiting)
			}
			if tc.readyIn > 0 {
				if err != nil || waited < tc.readyIn || waited >= gate {
					t.Fatalf("Apply = %v after waiting %s at the final check; want done once the replacement is ready (%s)", err, waited, tc.readyIn)
				}
				return
			}
			var paused *rollout.PausedError
			if !errors.As(err, &paused) || paused.Step != "12_consolidation_check" || !strings.Contains(paused.Reason, "final check did not pass within "+gate.String()) ||
				!strings.Contains(paused.Reason, "Deployment app/web 3/4 ready") || waited < gate {
				t.Fatalf("Apply = %v after waiting %s at the final check; want it paused there once the %s gate ran out, naming app/web", err, waited, gate)
			}
		})
	}
}
