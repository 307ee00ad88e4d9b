package demo

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// TestDemoPlanLeavesClusterAutoscaler: the demo account runs Cluster
// Autoscaler (100m, 600Mi) on a system node that a wave drains; step 09
// scales it to zero before the waves, so its plan must have the waves
// (pods, predicted nodes, placeholders) and the forecast of the same
// account where that pod moves nowhere: no node predicted, pre-provisioned
// or forecast for it. It still runs while step 07 makes room for the
// Karpenter controller, so its requests still count where the pods evicted
// for that room land: the account to compare with runs it as a DaemonSet's
// pod, which no wave moves.
func TestDemoPlanLeavesClusterAutoscaler(t *testing.T) {
	env, err := newSandboxEnv(1)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	r := &runner{opts: Options{Seed: 1, OutDir: t.TempDir(), Environment: Env, Now: time.Now}, env: env, sum: &Summary{}, pdbs: &pdbWatcher{}}
	defer func() {
		if r.cancel != nil {
			r.cancel()
		}
	}()
	for _, step := range []func(context.Context) (string, error){r.stepSandbox, r.stepDiscover} {
		if _, err := step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	with := r.inv
	ca := with.ClusterAutoscaler
	without := with
	without.Pods = slices.Clone(with.Pods)
	running := 0
	for i, p := range without.Pods {
		if p.Namespace == ca.Namespace && p.OwnerName == ca.Name && p.NodeName != "" {
			without.Pods[i].OwnerKind, without.Pods[i].OwnerName = inventory.OwnerDaemonSet, "not-moved"
			running++
		}
	}
	if running != 1 {
		t.Fatalf("the demo account runs %d Cluster Autoscaler pods, want 1", running)
	}
	planOf := func(inv inventory.Inventory) *plan.Plan {
		t.Helper()
		p, err := plan.MakePlan(context.Background(), plan.PlanRequest{Environment: Env, Config: PlanConfig(inv.Cluster), Steps: migrations.Planned(), Now: time.Unix(0, 0),
			Inventory: func(context.Context) (*inventory.Inventory, error) { return &inv, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, po := planOf(with), planOf(without)
	pods := func(p *plan.Plan) (n int) {
		for _, w := range p.Waves {
			n += w.Pods
		}
		return n
	}
	if pods(pw) != pods(po) || !reflect.DeepEqual(pw.Waves, po.Waves) {
		t.Errorf("the waves move %d pods with Cluster Autoscaler running, %d with it moving nowhere, and differ otherwise: want the same waves", pods(pw), pods(po))
	}
	if !reflect.DeepEqual(pw.SteadyState, po.SteadyState) {
		t.Errorf("forecast with Cluster Autoscaler %+v, without %+v; want the same", pw.SteadyState.AfterConsolidation, po.SteadyState.AfterConsolidation)
	}
}
