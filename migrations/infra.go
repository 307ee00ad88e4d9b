package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// infraStep builds an IAM/AWS step that delegates to Session.Infra
// (IAMInfra over pkg/iam) for one runbook group. Without Infra the
// step records that it was not run. Down removes the tool's IAM objects
// only with --remove-iam, once for all groups (pkg/iam's Down works on the
// whole set). In a dry run only a rollout.SessionInfra is called: it
// reports what would change itself.
func infraStep(id, group, purpose string) rollout.Step {
	return rollout.Step{
		ID: id, Purpose: purpose,
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			if s.Infra == nil {
				return true, "not run: the plan has no IAM section (planned with --skip-iam); IAM is managed elsewhere", nil
			}
			return s.Infra.Check(ctx, group)
		},
		Up: func(ctx context.Context, s *rollout.Session) error {
			if s.Options.DryRun && !reportsDryRun(s.Infra) {
				return nil
			}
			return s.Infra.Up(ctx, group)
		},
		Down: func(ctx context.Context, s *rollout.Session) error {
			if s.Infra == nil || !s.Options.RemoveIAM || s.Options.DryRun && !reportsDryRun(s.Infra) {
				return nil
			}
			return s.Infra.Down(ctx)
		},
	}
}

func reportsDryRun(i rollout.Infra) bool {
	_, ok := i.(rollout.SessionInfra)
	return ok
}
