package action_test

import (
	"context"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// TestKarpenterStatus reads, as the Karpenter step's Check does, a cluster
// without Karpenter (install), one where someone else installed it as the
// plan would (left alone) and a plan for another cluster (mismatch, naming
// the field).
func TestKarpenterStatus(t *testing.T) {
	ctx := context.Background()
	sb, err := sandbox.New(sandbox.Options{Seed: 1, DeferKarpenter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Load(ctx, sandbox.DemoInventory()); err != nil {
		t.Fatal(err)
	}
	clients, ctx, cancel := sb.Clients(ctx)
	defer cancel()
	c := action.ForSandbox(clients, "karpenter-migrate", "", "test")
	plan := func(cluster string) *plan.Plan {
		return &plan.Plan{Environment: "dev", Karpenter: &plan.PlanKarpenter{Release: "karpenter", Namespace: "kube-system", Chart: plan.KarpenterChartOCI, Version: "1.14.1",
			Values: map[string]any{"settings": map[string]any{"clusterName": cluster, "interruptionQueue": cluster}}}}
	}
	st, err := c.KarpenterStatus(ctx, plan("demo"))
	if err != nil || st.Verdict() != "install" {
		t.Fatalf("before install: %+v %v, want install", st, err)
	}
	if _, err := clients.Karpenter.Install(ctx, *plan("demo").Karpenter); err != nil {
		t.Fatal(err)
	}
	st, err = c.KarpenterStatus(ctx, plan("demo"))
	if err != nil || st.Verdict() != "left alone" {
		t.Errorf("installed by someone else as planned: %+v %v, want left alone", st, err)
	}
	st, err = c.KarpenterStatus(ctx, plan("other"))
	if err != nil || st.Verdict() != "mismatch" || !strings.Contains(strings.Join(st.Mismatches, "\n"), `settings.clusterName: Deployment kube-system/karpenter runs for cluster "demo", the plan is for "other"`) {
		t.Errorf("a plan for another cluster: %+v %v, want a mismatch naming settings.clusterName", st, err)
	}
}
