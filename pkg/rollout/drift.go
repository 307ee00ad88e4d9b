package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// DetectDrift compares the planned node groups with the ASGs now: a group
// gone, resized, or a legacy node in a group the plan does not know.
func DetectDrift(ctx context.Context, s *Session) ([]string, error) {
	var changes []string
	known := map[string]bool{}
	for _, g := range s.Plan.NodeGroups {
		known[g.Name] = true
		if s.ASG == nil {
			continue
		}
		asg, err := s.DescribeGroup(ctx, g.ASGName)
		if err != nil {
			if strings.Contains(err.Error(), "not found") {
				changes = append(changes, fmt.Sprintf("node group %s (ASG %s) was removed", g.Name, g.ASGName))
				continue
			}
			return nil, err
		}
		mn, mx, d := ptr.Deref(asg.MinSize, 0), ptr.Deref(asg.MaxSize, 0), ptr.Deref(asg.DesiredCapacity, 0)
		if mn != g.Min || mx != g.Max || d != g.Desired {
			changes = append(changes, fmt.Sprintf("node group %s sizes changed from min/max/desired %d/%d/%d to %d/%d/%d", g.Name, g.Min, g.Max, g.Desired, mn, mx, d))
		}
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	// A node of a planned group that no wave lists would never be drained
	// and would go with its group's scale to zero: its group replaced its
	// instances since the plan (a rollback, a node refresh).
	planned := map[string]bool{}
	for _, w := range s.Plan.Waves {
		for _, n := range w.Nodes {
			planned[n.Name] = true
		}
	}
	added := map[string]bool{}
	for _, n := range nodes.Items {
		g := NodeGroupOf(&n)
		switch {
		case g != "" && !known[g] && !added[g]:
			added[g] = true
			changes = append(changes, fmt.Sprintf("node group %s was added (node %s)", g, n.Name))
		case known[g] && len(planned) > 0 && !planned[n.Name]:
			changes = append(changes, fmt.Sprintf("node %s of group %s is in no wave of the plan (the group replaced its nodes since)", n.Name, g))
		}
	}
	slices.Sort(changes)
	return changes, nil
}

// NodeGroupOf returns the legacy node group a node's labels name, or ""
// (inventory.NodeGroupOf: Karpenter's nodes are never legacy).
func NodeGroupOf(n *corev1.Node) string { return inventory.NodeGroupOf(n.Labels) }
