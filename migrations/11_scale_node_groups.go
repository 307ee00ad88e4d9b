package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:          "11_scale_node_groups",
		Purpose:     "scale the legacy node groups to zero and the Karpenter controller's kept group to its fixed size without Cluster Autoscaler tags, a managed one's config labelled karpenter-migrate.io/karpenter-controller for the nodes it launches later (sizes, processes, tags and config recorded), resume the processes suspended for the drain",
		Destructive: true,
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			if s.Journal.Step("10_drain_waves") == nil {
				return false, "", nil
			}
			return run{s}.GroupsScaled(ctx)
		},
		Up:   func(ctx context.Context, s *rollout.Session) error { return run{s}.ScaleGroups(ctx) },
		Down: func(ctx context.Context, s *rollout.Session) error { return run{s}.RestoreGroups(ctx) },
	})
}
