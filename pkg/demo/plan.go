package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// stepPlan plans the rollout with the plan action, as
// `plan --env prod --snapshot snapshot.json --dir karpenter` does: the
// runbook's steps, zone-balanced waves of legacy nodes, the predicted
// Karpenter fleet per wave and the cost before and after.
func (r *runner) stepPlan(ctx context.Context) (string, error) {
	inv := r.inv
	cfg, err := r.envConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.opts.OutDir, "plan.yaml")
	p, err := r.cfg.Plan(ctx, action.Plan{
		Environment: r.opts.Environment, Config: cfg, Inventory: action.Inventory(&inv), Dir: filepath.Join(r.opts.OutDir, "karpenter"), File: path,
		// On the control plane the real Karpenter runs beside the cluster
		// (testenv) and the demo installs the official chart itself
		// (stepKarpenter): no registry to pull it from offline.
		SkipKarpenter: r.opts.ControlPlane,
		IAM:           &plan.IAMOptions{KarpenterVersion: desired.DefaultKarpenterVersion, CreateOIDCProvider: true},
	})
	if err != nil {
		return "", err
	}
	r.plan = p
	r.sum.PredictedSeconds, r.sum.BoundSeconds = p.Timing.PredictedSeconds, p.Timing.BoundSeconds
	r.sum.PlannedCostPerHour = round4(p.Cost.AfterPerHour)
	if p.Karpenter != nil {
		r.sum.PlannedControllerRoomEvictions = len(p.Karpenter.Room)
	}
	if ss := p.SteadyState; ss != nil {
		r.sum.PlannedCostPerHour = ss.AfterConsolidation.PricePerHour
	}
	predicted := 0
	for _, w := range p.Waves {
		predicted += len(w.PredictedNodes)
	}
	return fmt.Sprintf("%d steps, %d waves of up to %d nodes, %d predicted Karpenter nodes; $%.4f/h → $%.4f/h; waves predicted %s, bound %s (%s)",
		len(p.Steps), len(p.Waves), p.Budget.WaveSize, predicted, p.Cost.BeforePerHour, p.Cost.AfterPerHour, plan.Seconds(p.Timing.PredictedSeconds), plan.Seconds(p.Timing.BoundSeconds), path), nil
}

// demoPrepareAhead is the demo's rollout.prepareAhead: every wave after
// the first of its seeded cluster (7 waves in each environment).
const demoPrepareAhead = 6

// ConfigFile is the environment config the demo plans with by default.
const ConfigFile = Env + ".yaml"

// PlanConfig is the environment config the demo plans a cluster with
// (written as prod.yaml, what `plan --config prod.yaml` reads): the
// defaults, draining one node at a time so the run is reproducible, and
// moving the demo's pods that ask not to be evicted or keep emptyDir data,
// as `apply --force-evict` and rollout.allowEmptyDir would, and preparing
// every later wave's capacity as the first starts (rollout.prepareAhead):
// the demo's waves drain in seconds against a minute's launch, so each
// wave prepared ahead hides a launch, and the transient capacity of a
// simulated cluster costs nothing.
func PlanConfig(c inventory.Cluster) config.Config { return planConfig(c, Env) }

func planConfig(c inventory.Cluster, env string) config.Config {
	cfg := config.Default(env)
	cfg.Cluster, cfg.Region = c.Name, c.Region
	cfg.Rollout.Concurrency = 1
	cfg.Rollout.ForceEvict, cfg.Rollout.AllowEmptyDir = true, true
	cfg.Rollout.PrepareAhead = demoPrepareAhead
	return cfg
}

// envConfig writes the plan's config for the demo's cluster as <env>.yaml.
func (r *runner) envConfig() (config.Config, error) {
	cfg := planConfig(r.inv.Cluster, r.opts.Environment)
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return cfg, fmt.Errorf("render the environment config: %w", err)
	}
	if _, err := config.Parse(b); err != nil {
		return cfg, fmt.Errorf("environment config: %w", err)
	}
	path := filepath.Join(r.opts.OutDir, r.opts.Environment+".yaml")
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return cfg, fmt.Errorf("write %s: %w", path, err)
	}
	return cfg, nil
}

// waveName is a wave's step id: its index and node groups.
func waveName(w plan.Wave) string {
	groups := map[string]bool{}
	for _, n := range w.Nodes {
		groups[n.NodeGroup] = true
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	return fmt.Sprintf("wave-%d-%s", w.Index, strings.Join(names, "+"))
}
