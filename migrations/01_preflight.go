package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "01_preflight",
		Purpose: "cluster reachable, Karpenter CRDs installed (unless step 07 installs Karpenter), its controller kept off its own nodes, plan blockers resolved or acknowledged",
		// No Check: preflight always runs.
		Up:   func(ctx context.Context, s *rollout.Session) error { return run{s}.Preflight(ctx) },
		Down: func(context.Context, *rollout.Session) error { return nil },
	})
}
