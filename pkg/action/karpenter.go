package action

import (
	"cmp"
	"context"
	"errors"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
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
