package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "12_consolidation_check",
		Purpose: "final check: no workload left on legacy nodes, nothing pending, every workload ready and PDB satisfied",
		Up:      func(ctx context.Context, s *rollout.Session) error { return run{s}.FinalCheck(ctx) },
		Down:    func(context.Context, *rollout.Session) error { return nil },
	})
}
