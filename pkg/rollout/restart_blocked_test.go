package rollout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// TestRestartBlockedOnlyWhenTheBudgetCannotAllow: the surge restart is for
// a budget that allows no disruption even with all its pods healthy (one
// replica, minAvailable 1). A budget at 0 only because a pod of it is
// still being replaced — an eviction in flight when apply was paused or
// killed and resumed at once — is waited for, not restarted around: a
// restart would move every pod of the Deployment again, those already
// moved included, and delete old pods beside the eviction in flight (#19
// rung 4: 10 moves for 7 pods and a budget below its minimum after a
// resume).
func TestRestartBlockedOnlyWhenTheBudgetCannotAllow(t *testing.T) {
	tests := map[string]struct {
		status      policyv1.PodDisruptionBudgetStatus
		wantRestart bool
	}{
		"one pod of four being replaced (maxUnavailable 1)": {
			status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 3, DesiredHealthy: 3, ExpectedPods: 4},
		},
		"minAvailable equal to the replicas (4 of 4)": {
			status:      policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 4, DesiredHealthy: 4, ExpectedPods: 4},
			wantRestart: true,
		},
	}
	deps := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			sc := newScenario(t)
			sc.plan.Budget.Gates.PDBWaitTimeout.Duration = 3 * time.Second
			ctx := context.Background()
			pdbs := sc.kube.PolicyV1().PodDisruptionBudgets("app")
			setStatus := func(st policyv1.PodDisruptionBudgetStatus) {
				pdb, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				pdb.Status = st
				if _, err := pdbs.UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
			}
			setStatus(tt.status)
			// A restart rolls out at once: the old pods go, the status
			// says rolled out.
			var restarts int
			var mu sync.Mutex
			sc.kube.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetNamespace() != "app" || a.(k8stesting.PatchAction).GetName() != "web" {
					return false, nil, nil
				}
				mu.Lock()
				restarts++
				mu.Unlock()
				o, err := sc.kube.Tracker().Get(deps, "app", "web")
				if err != nil {
					return true, nil, err
				}
				d := o.(*appsv1.Deployment).DeepCopy()
				d.Status = appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
				if err := sc.kube.Tracker().Update(deps, d, "app"); err != nil {
					return true, nil, err
				}
				// (Reactors run under the clientset's lock: the tracker only.)
				pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
				list, err := sc.kube.Tracker().List(pods, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "app")
				if err != nil {
					return true, nil, err
				}
				for _, p := range list.(*corev1.PodList).Items {
					if err := sc.kube.Tracker().Delete(pods, "app", p.Name); err != nil {
						return true, nil, err
					}
				}
				return true, d, nil
			})
			// The pod being replaced turns Ready soon after the drain
			// first waits on the budget.
			var ready sync.Once
			obs := func(e rollout.Event) {
				if e.Kind == rollout.EventPDBWait {
					ready.Do(func() {
						go func() {
							time.Sleep(100 * time.Millisecond)
							setStatus(policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 4, DesiredHealthy: 3, ExpectedPods: 4})
						}()
					})
				}
			}
			if err := sc.runner(obs).Apply(ctx); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := restarts > 0; got != tt.wantRestart {
				t.Errorf("Deployment app/web restarted %d times; want a restart %t", restarts, tt.wantRestart)
			}
		})
	}
}
