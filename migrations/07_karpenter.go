package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "07_karpenter",
		Purpose: "install Karpenter with Helm (helm upgrade --install of the plan's chart, version and values, atomic) and wait for its controller, after reserving the kept nodes (the reservation taint, and the label karpenter-migrate.io/karpenter-controller the plan's values require of the controller's nodes) and evicting (PDB-safe) the pods that leave it no room there, so that it preempts nothing; an installation made by someone else is compared with the plan and left alone",
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			return run{s}.KarpenterInstalled(ctx)
		},
		Up: func(ctx context.Context, s *rollout.Session) error { return run{s}.InstallKarpenter(ctx) },
		// Down uninstalls only a release this tool created, once every
		// NodeClaim is gone, and takes the reservation and the label it put
		// on the kept nodes off them (as the journal records them).
		Down: func(ctx context.Context, s *rollout.Session) error {
			if err := (run{s}).UninstallKarpenter(ctx); err != nil {
				return err
			}
			return run{s}.releaseReservation(ctx)
		},
	})
}
