package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// infraStep builds an IAM/AWS step that delegates to Session.Infra (pkg/iam)
// for one runbook group. Without Infra the step records that it was not
// run. Down removes the tool's IAM objects only with --remove-iam, once for
// all groups (pkg/iam's Down works on the whole set).
func infraStep(id, group, purpose string) rollout.Step {
	return rollout.Step{
		ID: id, Purpose: purpose,
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			if s.Infra == nil {
				return true, "not run: no IAM configuration was given to this run (pkg/iam is wired by the CLI with --snapshot and AWS access)", nil
			}
			return s.Infra.Check(ctx, group)
		},
		Up: func(ctx context.Context, s *rollout.Session) error {
			if s.Options.DryRun {
				return nil
			}
			return s.Infra.Up(ctx, group)
		},
		Down: func(ctx context.Context, s *rollout.Session) error {
			if s.Infra == nil || !s.Options.RemoveIAM || s.Options.DryRun {
				return nil
			}
			return s.Infra.Down(ctx)
		},
	}
}
