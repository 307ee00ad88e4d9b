package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "07_karpenter",
		Purpose: "install Karpenter with Helm (helm upgrade --install of the plan's chart, version and values, atomic) and wait for its controller; an installation made by someone else is compared with the plan and left alone",
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			return run{s}.KarpenterInstalled(ctx)
		},
		Up: func(ctx context.Context, s *rollout.Session) error { return run{s}.InstallKarpenter(ctx) },
		// Down uninstalls only a release this tool created, once every
		// NodeClaim is gone.
		Down: func(ctx context.Context, s *rollout.Session) error { return run{s}.UninstallKarpenter(ctx) },
	})
}
