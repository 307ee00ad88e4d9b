package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:          "10_drain_waves",
		Purpose:     "reserve the Karpenter controller's kept nodes (CriticalAddonsOnly) and steer evicted pods off the other legacy nodes (PreferNoSchedule), taints recorded; per wave: pre-provision Karpenter capacity, cordon, drain PDB-safe, gate, remove the instances from their groups",
		Destructive: true,
		Check: func(_ context.Context, s *rollout.Session) (bool, string, error) {
			done, why := run{s}.WavesDone()
			return done, why, nil
		},
		Up: func(ctx context.Context, s *rollout.Session) error { return run{s}.RunWaves(ctx) },
		// Down brings the legacy nodes back: restore the groups' recorded
		// sizes, processes, tags and config taints (again, if 11's Down
		// did), uncordon, remove the taints it added, wait Ready.
		Down: func(ctx context.Context, s *rollout.Session) error {
			r := run{s}
			if err := r.RestoreGroups(ctx); err != nil {
				return err
			}
			return r.RestoreLegacyNodes(ctx)
		},
	})
}
