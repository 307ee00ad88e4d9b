package action

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// KarpenterStatus is what the runbook's Karpenter step would find for p's
// release, read as its Check reads it (the Helm release, the running
// controller, the environment's journal): nothing installed, this tool's
// release as planned or older, or an installation made by someone else,
// agreeing with the plan or contradicting it. It changes nothing.
func (c *Configuration) KarpenterStatus(ctx context.Context, p *plan.Plan) (*migrations.KarpenterState, error) {
	if c.Kube == nil || c.KarpenterInstaller == nil {
		return nil, errors.New("karpenter status needs the cluster: no Kubernetes client")
	}
	if p.Karpenter == nil {
		return nil, errors.New("the plan installs no Karpenter release (planned with --skip-karpenter)")
	}
	j, err := rollout.Status(ctx, c.Kube, cmp.Or(c.Namespace, "karpenter-migrate"), p.Environment)
	if err != nil {
		return nil, err
	}
	s := &rollout.Session{Kube: c.Kube, Dynamic: c.Dynamic, Plan: p, Journal: j, Karpenter: c.KarpenterInstaller}
	return migrations.ReadKarpenter(ctx, s)
}

// KarpenterCheck asks what the Karpenter step would do before a plan is
// made (the wizard's Karpenter screen): the release plan would record for
// the inventory, the config and the generated tree, read as its Check reads it.
type KarpenterCheck struct {
	Environment string
	Config      config.Config
	Inventory   *inventory.Inventory
	// Dir is the tree generate wrote: its Helm values are the release's.
	Dir                 string
	ControllerNodeGroup string
	// KarpenterChart and KarpenterVersion are plan's --karpenter-chart
	// and --karpenter-version (empty: the official chart at the default).
	KarpenterChart, KarpenterVersion string
}

// KarpenterCheck returns the release the plan would install and
// KarpenterStatus of it. It changes nothing.
func (c *Configuration) KarpenterCheck(ctx context.Context, k KarpenterCheck) (*plan.PlanKarpenter, *migrations.KarpenterState, error) {
	if k.Inventory == nil {
		return nil, nil, errors.New("karpenter check: no inventory (discover first)")
	}
	rel, err := plan.KarpenterRelease(k.Inventory, plan.PlanRequest{
		Environment: k.Environment, Config: k.Config, Dir: k.Dir, ControllerNodeGroup: k.ControllerNodeGroup,
		KarpenterChart: k.KarpenterChart, KarpenterVersion: k.KarpenterVersion,
	})
	if err != nil {
		return nil, nil, err
	}
	st, err := c.KarpenterStatus(ctx, &plan.Plan{Environment: k.Environment, Cluster: k.Inventory.Cluster.Name, Karpenter: rel})
	if err != nil {
		return nil, nil, err
	}
	return rel, st, nil
}

// KarpenterRelease is what the in-cluster Job's RBAC needs of the plan's
// Karpenter release (nil when the plan installs none): its namespace and
// the kinds its chart renders, rendered as `helm template` does, without
// a cluster (a chart in a registry is pulled).
func KarpenterRelease(ctx context.Context, p *plan.Plan) (*generate.KarpenterRelease, error) {
	k := p.Karpenter
	if k == nil {
		return nil, nil
	}
	manifest, err := (&helm.Client{}).Render(ctx, *k)
	if err != nil {
		return nil, fmt.Errorf("the Job's permissions for the Karpenter release follow what its chart renders: %w", err)
	}
	return &generate.KarpenterRelease{Namespace: k.Namespace, Kinds: generate.ChartKinds(manifest, k.Namespace)}, nil
}
