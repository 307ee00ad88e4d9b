package action

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Plan plans one environment's rollout (plan.MakePlan over the runbook
// of migrations/) and writes plan.yaml.
type Plan struct {
	Environment string
	Config      config.Config
	// Inventory reads the cluster: a snapshot, or Configuration.Discover.
	Inventory func(context.Context) (*inventory.Inventory, error)
	// Dir is the tree generate wrote ("": NodePools generated in memory).
	Dir                 string
	PoolForGroup        map[string]string
	ControllerNodeGroup string
	// IAM plans the IAM steps with these options; nil leaves them out.
	IAM *plan.IAMOptions
	// Progress is told each wave and forecast pass as it starts.
	Progress func(plan.PlanProgress)
	// File, when set, is where the plan is written.
	File string
	// KarpenterChart and KarpenterVersion are the release step 07 installs
	// (default: the official chart at the IAM options' version);
	// SkipKarpenter leaves the step out (Karpenter managed elsewhere).
	KarpenterChart, KarpenterVersion string
	SkipKarpenter                    bool
}

// Plan runs p. The plan is priced with the configuration's catalogue when
// one is set, else the inventory's recorded prices (catalog.ForInventory),
// as every verb prices.
func (c *Configuration) Plan(ctx context.Context, p Plan) (*plan.Plan, error) {
	pl, err := plan.MakePlan(ctx, plan.PlanRequest{
		Environment: p.Environment, Config: p.Config, Steps: migrations.Planned(), Inventory: p.Inventory, Dir: p.Dir,
		PoolForGroup: p.PoolForGroup, ControllerNodeGroup: p.ControllerNodeGroup, IAM: p.IAM,
		Catalog: c.Catalog, Now: c.now(), Progress: p.Progress,
		KarpenterChart: p.KarpenterChart, KarpenterVersion: p.KarpenterVersion, SkipKarpenter: p.SkipKarpenter,
	})
	if err != nil {
		return nil, err
	}
	if p.File != "" {
		if err := pl.WriteFile(p.File); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// Inventory is a source of an already-read inventory, for Plan.Inventory.
func Inventory(inv *inventory.Inventory) func(context.Context) (*inventory.Inventory, error) {
	return func(context.Context) (*inventory.Inventory, error) { return inv, nil }
}
