package action

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/version"
)

// Run is what apply and rollback are asked beyond the plan.
type Run struct {
	// Dir is the tree generate wrote; its overlays/<env> are the NodePools
	// the runbook applies.
	Dir         string
	DryRun      bool
	ForceEvict  bool
	AckBlockers bool
	// LeaseDuration of the lock (0: the runner's default).
	LeaseDuration time.Duration
	// Confirm asks before a destructive step; nil does not ask.
	Confirm func(question string) (bool, error)
}

// Runner builds the rollout runner for p: the runbook of migrations/, the
// overlay of Dir, the plan's IAM steps over pkg/iam. It is the one place a
// Runner is built: apply, rollback, the wizard and the demo run the same.
func (c *Configuration) Runner(p *plan.Plan, o Run) (*rollout.Runner, error) {
	if c.Kube == nil {
		return nil, fmt.Errorf("apply needs the cluster: no Kubernetes client")
	}
	sdk := kmaws.NewClients(c.AWS)
	poll := c.PollInterval
	if poll <= 0 {
		poll = 2 * time.Second
	}
	drain := kube.DefaultDrainOptions()
	drain.PollInterval = min(drain.PollInterval, poll)
	drain.PodConcurrency = c.PodConcurrency
	identity := c.Identity
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%s@%s pid %d", c.operator(), host, os.Getpid())
	}
	r := &rollout.Runner{
		Session: rollout.Session{
			Kube: c.Kube, Dynamic: c.Dynamic, ASG: sdk.AutoScaling, EKS: sdk.EKS, Clock: c.Clock, Namespace: c.Namespace, Plan: p,
			Karpenter: c.KarpenterInstaller,
			Options: rollout.Options{
				DryRun: o.DryRun, ForceEvict: o.ForceEvict, AckBlockers: o.AckBlockers,
				Operator: c.operator(), ToolVersion: version.Version, Identity: identity,
				LeaseDuration: o.LeaseDuration, PollInterval: poll, Drain: &drain,
				Observer: c.Observer, Confirm: o.Confirm,
			},
		},
		Steps: migrations.All(),
	}
	if o.Dir != "" {
		r.Overlay = plan.OverlayDir{Dir: o.Dir, Env: p.Environment}
	}
	if p.IAM != nil {
		// A plan whose IAM steps cannot run (PlanIAM.Error) is refused
		// rather than run without them.
		d, err := p.IAM.Desired()
		if err != nil {
			return nil, err
		}
		r.Infra = &migrations.IAMInfra{Desired: d, Clients: c.IAMClients(d)}
	}
	return r, nil
}

// Apply runs p's runbook (rollout.Runner.Apply); replan, when set, plans
// the cluster again if it drifted since p.
func (c *Configuration) Apply(ctx context.Context, p *plan.Plan, o Run, replan func(context.Context) (*plan.Plan, error)) error {
	r, err := c.Runner(p, o)
	if err != nil {
		return err
	}
	r.Replan = replan
	return r.Apply(ctx)
}

// Rollback undoes every applied step, last first (IAM kept).
func (c *Configuration) Rollback(ctx context.Context, p *plan.Plan, o Run) error {
	r, err := c.Runner(p, o)
	if err != nil {
		return err
	}
	return r.Rollback(ctx, "")
}

// StepIDs names the runbook's steps in order, for flag help and errors.
func StepIDs() string { return migrations.IDs() }
