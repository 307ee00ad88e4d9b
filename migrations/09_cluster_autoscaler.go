package migrations

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:          "09_cluster_autoscaler",
		Purpose:     "scale Cluster Autoscaler to zero replicas (replicas recorded)",
		Destructive: true,
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			return run{s}.ClusterAutoscalerAt(ctx, 0)
		},
		Up:   func(ctx context.Context, s *rollout.Session) error { return run{s}.ScaleClusterAutoscaler(ctx, 0) },
		Down: func(ctx context.Context, s *rollout.Session) error { return run{s}.RestoreClusterAutoscaler(ctx) },
	})
}
