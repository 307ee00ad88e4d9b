package rollout_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// TestDrainTimeoutPauses: a wave whose evictions a PodDisruptionBudget
// refuses until the gate's PDB wait runs out pauses the rollout
// (*PausedError, exit 4, journal "paused") — also when the timeout cancels
// an eviction request in flight, which client-go reports as
// "context canceled" — while the operator's own interruption stays an
// interruption.
func TestDrainTimeoutPauses(t *testing.T) {
	const gateTimeout = 150 * time.Millisecond
	refuse := func(context.CancelFunc, int32) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	}
	tests := map[string]struct {
		// evict answers the n-th eviction request (from 1).
		evict      func(interrupt context.CancelFunc, n int32) error
		wantPaused bool
		wantState  string
	}{
		"429 until the timeout": {evict: refuse, wantPaused: true, wantState: rollout.StatePaused},
		"request in flight when the timeout hits": {
			evict: func(_ context.CancelFunc, n int32) error {
				if n == 1 {
					return refuse(nil, n)
				}
				// The drain's timeout fires while this request is on the
				// wire; a real client returns the context's Err, Canceled.
				time.Sleep(3 * gateTimeout)
				return &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api/v1/namespaces/app/pods/web-0/eviction", Err: context.Canceled}
			},
			wantPaused: true, wantState: rollout.StatePaused,
		},
		"operator interrupts (Ctrl-C)": {
			evict: func(interrupt context.CancelFunc, n int32) error {
				interrupt()
				return refuse(nil, n)
			},
			wantState: rollout.StateInterrupted,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			sc := newScenario(t)
			// A budget that allows no disruption, and no surge restart to
			// get around it: only the drain's timeout ends the wait.
			sc.plan.Budget.RestartBlocked = false
			sc.plan.Budget.Gates.PDBWaitTimeout.Duration = gateTimeout
			pdbs := sc.kube.PolicyV1().PodDisruptionBudgets("app")
			pdb, err := pdbs.Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 3, DesiredHealthy: 3}
			if _, err := pdbs.UpdateStatus(context.Background(), pdb, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			ctx, interrupt := context.WithCancel(context.Background())
			defer interrupt()
			var n atomic.Int32
			sc.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" || a.GetNamespace() != "app" {
					return false, nil, nil
				}
				return true, nil, tt.evict(interrupt, n.Add(1))
			})

			began := time.Now()
			err = sc.runner(nil).Apply(ctx)
			var paused *rollout.PausedError
			if got := errors.As(err, &paused); got != tt.wantPaused {
				t.Fatalf("Apply = %v; paused %v, want %v", err, got, tt.wantPaused)
			}
			if tt.wantPaused && (paused.Wave != 1 || !strings.Contains(paused.Reason, "evictions still refused after "+gateTimeout.String())) {
				t.Errorf("paused at wave %d: %q; want wave 1, evictions refused after %s", paused.Wave, paused.Reason, gateTimeout)
			}
			if !tt.wantPaused && !errors.Is(err, context.Canceled) {
				t.Errorf("Apply = %v, want context.Canceled", err)
			}
			if d := time.Since(began); d > 20*gateTimeout {
				t.Errorf("Apply took %s with a %s gate", d, gateTimeout)
			}
			j, err := rollout.Status(context.Background(), sc.kube, "karpenter-migrate", "dev")
			if err != nil || j == nil {
				t.Fatalf("Status: %v, %v", j, err)
			}
			if j.State != tt.wantState || j.Current.Wave != 1 || j.Current.Phase != rollout.PhaseDrain {
				t.Errorf("journal state %q at wave %d phase %q; want %q at wave 1 drain", j.State, j.Current.Wave, j.Current.Phase, tt.wantState)
			}
			if n.Load() == 0 {
				t.Error("no eviction was requested")
			}
		})
	}
}
