package migrations

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:          "10_drain_waves",
		Purpose:     "reserve the Karpenter controller's kept nodes (CriticalAddonsOnly, label karpenter-migrate.io/karpenter-controller) and steer evicted pods off the other legacy nodes (PreferNoSchedule), taints and labels recorded; per wave: pre-provision Karpenter capacity, cordon, drain PDB-safe, gate, remove the instances from their groups",
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

// RestoreLegacyNodes uncordons the planned groups' nodes that are left,
// removes the taints the rollout put on them, deletes leftover
// placeholders and waits until each group has its recorded desired count
// of Ready nodes.
func (s run) RestoreLegacyNodes(ctx context.Context) error {
	if err := s.deletePlaceholders(ctx, 0); err != nil {
		return err
	}
	want := map[string]int{}
	total := 0
	for _, g := range s.Journal.Recorded.NodeGroups {
		want[g.Name] = int(g.Desired)
		total += int(g.Desired)
	}
	removed := s.removedInstances()
	err := s.Poll(ctx, s.Plan.Budget.Gates.NodeReadyTimeout.Duration, func() (bool, error) {
		nodes, groupOf, err := s.listNodes(ctx)
		if err != nil {
			return false, err
		}
		ready := map[string]int{}
		n := 0
		for i := range nodes {
			node := &nodes[i]
			g := groupOf[node.Name]
			if _, ok := want[g]; !ok || removed[plan.InstanceIDFromProviderID(node.Spec.ProviderID)] {
				continue
			}
			if node.Spec.Unschedulable {
				s.Change("uncordon node %s", node.Name)
				if !s.Options.DryRun {
					if err := kube.Cordon(ctx, s.Kube, node.Name, false); err != nil {
						return false, err
					}
				}
			}
			if err := s.untaintForRollback(ctx, node, g); err != nil {
				return false, err
			}
			if nodeReady(node) {
				ready[g]++
				n++
			}
		}
		if s.Options.DryRun {
			return true, nil
		}
		s.Waiting(ctx, "legacy nodes Ready after restoring the groups' sizes", n, total)
		for g, w := range want {
			if ready[g] < w {
				return false, nil
			}
		}
		return true, nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: fmt.Sprintf("legacy nodes not Ready within %s after restoring group sizes; check the ASGs' activity history", s.Plan.Budget.Gates.NodeReadyTimeout.Duration)}
	}
	return err
}

// groupInstances maps the instances of the planned groups' ASGs to the
// group's name.
func (s run) groupInstances(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, g := range s.Plan.NodeGroups {
		if g.ASGName == "" {
			continue
		}
		asg, err := s.DescribeGroup(ctx, g.ASGName)
		if err != nil {
			return nil, err
		}
		for _, in := range asg.Instances {
			if in.InstanceId != nil {
				out[*in.InstanceId] = g.Name
			}
		}
	}
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
