package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func (r *runner) stepDiscover(ctx context.Context) (string, error) {
	cfg := r.clients.AWS
	inv, err := discover.Run(ctx, discover.Sources{
		AutoScaling: autoscaling.NewFromConfig(cfg), EC2: ec2.NewFromConfig(cfg), EKS: eks.NewFromConfig(cfg), Kube: r.clients.Kube,
	}, discover.Options{ClusterName: r.sb.Cloud().Cluster.Name, Region: cfg.Region, Now: r.sb.Now})
	if err != nil {
		return "", err
	}
	r.inv = *inv
	n, byType, cost := r.fleet()
	r.sum.Cluster = inv.Cluster.Name
	r.sum.NodesBefore, r.sum.NodesBeforeByType, r.sum.CostPerHourBefore = n, byType, cost
	path := filepath.Join(r.opts.OutDir, "snapshot.json")
	if err := inventory.NewSnapshot(r.inv, r.sb.Now()).WriteFile(path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
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
