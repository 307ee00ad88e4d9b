package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "08_nodepools",
		Purpose: "server-side apply the environment's NodePools and node classes (the built overlay)",
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			if s.Overlay == nil {
				return true, "not run: no overlay given (pass --dir with the generated tree)", nil
			}
			return run{s}.OverlayApplied(ctx)
		},
		Up: func(ctx context.Context, s *rollout.Session) error { return run{s}.ApplyOverlay(ctx) },
		// Down keeps the NodePools until their nodes are drained.
		Down: func(ctx context.Context, s *rollout.Session) error { return run{s}.RemoveOverlay(ctx) },
	})
}
