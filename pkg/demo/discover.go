package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
)

func (r *runner) stepDiscover(ctx context.Context) (string, error) {
	path := filepath.Join(r.opts.OutDir, "snapshot.json")
	inv, err := r.cfg.Discover(ctx, action.Discover{Cluster: r.cluster, Snapshot: path})
	if err != nil {
		return "", err
	}
	r.inv = *inv
	n, byType, cost, err := r.fleet(ctx)
	if err != nil {
		return "", err
	}
	r.sum.Cluster = inv.Cluster.Name
	r.sum.NodesBefore, r.sum.NodesBeforeByType, r.sum.CostPerHourBefore = n, byType, cost
	return fmt.Sprintf("%d node groups, %d nodes, %d pods, %d PDBs ($%.4f/h) → %s", len(inv.NodeGroups), len(inv.Nodes), len(inv.Pods), len(inv.PDBs), cost, path), nil
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
