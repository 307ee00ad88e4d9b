package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// migrationProcesses are suspended on every group while its nodes are
// drained and removed, so the ASG neither replaces nor rebalances them.
var migrationProcesses = []string{"AZRebalance", "ReplaceUnhealthy", "Launch"}

// recordGroups records each planned group's sizes and suspended processes
// before anything changes them (once: a resumed run keeps the originals).
func (s run) recordGroups(ctx context.Context) error {
	for _, g := range s.Plan.NodeGroups {
		if s.Journal.Recorded.Group(g.Name) != nil {
			continue
		}
		asg, err := s.DescribeGroup(ctx, g.ASGName)
		if err != nil {
			return err
		}
		rec := rollout.GroupRecord{GroupState: plan.GroupState{
			Name: g.Name, Kind: g.Kind, ASGName: g.ASGName,
			Min: ptr.Deref(asg.MinSize, 0), Max: ptr.Deref(asg.MaxSize, 0), Desired: ptr.Deref(asg.DesiredCapacity, 0),
		}}
		for _, p := range asg.SuspendedProcesses {
			rec.SuspendedProcesses = append(rec.SuspendedProcesses, ptr.Deref(p.ProcessName, ""))
		}
		slices.Sort(rec.SuspendedProcesses)
		if s.keptGroup() == g.Name {
			if err := s.recordKeptGroup(ctx, asg, &rec); err != nil {
				return err
			}
		}
		s.Journal.Recorded.NodeGroups = append(s.Journal.Recorded.NodeGroups, rec)
		if err := s.Save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// prepareGroups suspends the migration processes and lowers each group's
// minimum to zero so instances can be removed with a decrement.
func (s run) prepareGroups(ctx context.Context) error {
	if err := s.recordGroups(ctx); err != nil {
		return err
	}
	for i := range s.Journal.Recorded.NodeGroups {
		rec := &s.Journal.Recorded.NodeGroups[i]
		var suspend []string
		for _, p := range migrationProcesses {
			if !slices.Contains(rec.SuspendedProcesses, p) {
				suspend = append(suspend, p)
			}
		}
		if len(suspend) > 0 && !slices.Equal(rec.WeSuspended, suspend) {
			s.Change("suspend processes %s on ASG %s", strings.Join(suspend, ","), rec.ASGName)
			if !s.Options.DryRun {
				rec.WeSuspended = suspend // recorded before the call: resuming a not-suspended process is harmless
				if err := s.Save(ctx); err != nil {
					return err
				}
				if _, err := s.ASG.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: &rec.ASGName, ScalingProcesses: suspend}); err != nil {
					return fmt.Errorf("suspend %v on ASG %s: %w", suspend, rec.ASGName, err)
				}
			}
		}
		if err := s.setGroupSize(ctx, rec, ptr.To(int32(0)), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// setGroupSize changes the given sizes (nil leaves one as it is) through
// the ASG (self-managed) or the managed node group's scaling config.
func (s run) setGroupSize(ctx context.Context, rec *rollout.GroupRecord, minSize, maxSize, desired *int32) error {
	desc := func(name string, v *int32) string {
		if v == nil {
			return ""
		}
		return fmt.Sprintf(" %s=%d", name, *v)
	}
	s.Change("set %s group %s size%s%s%s", rec.Kind, rec.Name, desc("min", minSize), desc("max", maxSize), desc("desired", desired))
	if s.Options.DryRun {
		return nil
	}
	if rec.Kind == inventory.Managed && s.EKS != nil {
		asg, err := s.DescribeGroup(ctx, rec.ASGName)
		if err != nil {
			return err
		}
		sc := &ekstypes.NodegroupScalingConfig{
			MinSize: orPtr(minSize, asg.MinSize), MaxSize: orPtr(maxSize, asg.MaxSize), DesiredSize: orPtr(desired, asg.DesiredCapacity),
		}
		if ptr.Deref(sc.MaxSize, 0) < 1 {
			sc.MaxSize = ptr.To(int32(1)) // EKS requires maxSize >= 1
		}
		_, err = s.EKS.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: &s.Plan.Cluster, NodegroupName: &rec.Name, ScalingConfig: sc})
		if err != nil {
			return fmt.Errorf("update managed node group %s scaling config: %w", rec.Name, err)
		}
		return nil
	}
	_, err := s.ASG.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{
		AutoScalingGroupName: &rec.ASGName, MinSize: minSize, MaxSize: maxSize, DesiredCapacity: desired,
	})
	if err != nil {
		return fmt.Errorf("update ASG %s sizes: %w", rec.ASGName, err)
	}
	return nil
}

func orPtr(v, def *int32) *int32 {
	if v != nil {
		return v
	}
	return def
}

// terminate removes an instance from its group without a replacement.
func (s run) terminate(ctx context.Context, instanceID string) error {
	s.Change("terminate instance %s with desired-capacity decrement", instanceID)
	if s.Options.DryRun {
		return nil
	}
	_, err := s.ASG.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: &instanceID, ShouldDecrementDesiredCapacity: ptr.To(true),
	})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(strings.ToLower(ae.ErrorMessage()), "not found") {
		return nil // already gone
	}
	if err != nil {
		return fmt.Errorf("terminate instance %s in its ASG: %w", instanceID, err)
	}
	return nil
}

// ScaleGroups sets every planned group to zero but the controller's kept
// group, which gets its final fixed size (min = max = desired) without
// its Cluster Autoscaler tags; then it resumes the processes the rollout
// suspended and waits for the kept group's nodes, reserved.
func (s run) ScaleGroups(ctx context.Context) error {
	if err := s.recordGroups(ctx); err != nil {
		return err
	}
	zero := ptr.To(int32(0))
	for i := range s.Journal.Recorded.NodeGroups {
		rec := &s.Journal.Recorded.NodeGroups[i]
		if rec.Name == s.keptGroup() {
			size := ptr.To(s.Plan.Controller.Size)
			if err := s.setGroupSize(ctx, rec, size, size, size); err != nil {
				return err
			}
			if err := s.removeCATags(ctx, rec); err != nil {
				return err
			}
			// Now that the waves removed its other nodes, every node of the
			// group is kept: a managed group's config labels those it
			// launches from now on (a replacement) for the controller.
			if rec.Labels[generate.KeptLabel] != generate.KeptLabelValue {
				if err := s.setConfigLabel(ctx, rec, generate.KeptLabelValue, true); err != nil {
					return err
				}
			}
		} else {
			maxSize := zero
			if rec.Kind == inventory.Managed && s.EKS != nil {
				maxSize = nil
			}
			if err := s.setGroupSize(ctx, rec, zero, maxSize, zero); err != nil {
				return err
			}
		}
		if err := s.resumeOurs(ctx, rec); err != nil {
			return err
		}
	}
	return s.waitKeptGroup(ctx)
}

// GroupsScaled reports whether every planned group is at zero (min and
// desired, and max for self-managed groups) — the kept group at its fixed
// size without Cluster Autoscaler tags — with the processes the rollout
// suspended resumed.
func (s run) GroupsScaled(ctx context.Context) (bool, string, error) {
	for _, g := range s.Plan.NodeGroups {
		asg, err := s.DescribeGroup(ctx, g.ASGName)
		if err != nil {
			return false, "", err
		}
		mn, mx, d := ptr.Deref(asg.MinSize, 0), ptr.Deref(asg.MaxSize, 0), ptr.Deref(asg.DesiredCapacity, 0)
		if g.Name == s.keptGroup() {
			size := s.Plan.Controller.Size
			if mn != size || mx != size || d != size {
				return false, fmt.Sprintf("ASG %s is at min/max/desired %d/%d/%d, want %d for the Karpenter controller", g.ASGName, mn, mx, d, size), nil
			}
			for _, t := range asg.Tags {
				if slices.Contains(inventory.CAAutoDiscoveryTags(s.Plan.Cluster), ptr.Deref(t.Key, "")) {
					return false, fmt.Sprintf("ASG %s still has the Cluster Autoscaler tag %s", g.ASGName, ptr.Deref(t.Key, "")), nil
				}
			}
			if g.Kind == inventory.Managed && s.EKS != nil {
				out, err := s.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &s.Plan.Cluster, NodegroupName: &g.Name})
				if err != nil {
					return false, "", fmt.Errorf("describe managed node group %s: %w", g.Name, err)
				}
				if out.Nodegroup == nil || out.Nodegroup.Labels[generate.KeptLabel] != generate.KeptLabelValue {
					return false, fmt.Sprintf("managed node group %s has not the label %s=%s for the Karpenter controller", g.Name, generate.KeptLabel, generate.KeptLabelValue), nil
				}
			}
		} else if d != 0 || mn != 0 || (mx != 0 && !(g.Kind == inventory.Managed && s.EKS != nil)) {
			return false, fmt.Sprintf("ASG %s is at min/max/desired %d/%d/%d", g.ASGName, mn, mx, d), nil
		}
		if rec := s.Journal.Recorded.Group(g.Name); rec != nil {
			for _, p := range asg.SuspendedProcesses {
				if slices.Contains(rec.WeSuspended, ptr.Deref(p.ProcessName, "")) {
					return false, fmt.Sprintf("ASG %s still has %s suspended", g.ASGName, ptr.Deref(p.ProcessName, "")), nil
				}
			}
		}
	}
	if h := s.Plan.Controller; h != nil && h.Kept {
		return true, fmt.Sprintf("every group is at zero but %s, kept at %d for the Karpenter controller", h.NodeGroup, h.Size), nil
	}
	return true, "every group is at zero", nil
}

func (s run) resumeOurs(ctx context.Context, rec *rollout.GroupRecord) error {
	if len(rec.WeSuspended) == 0 {
		return nil
	}
	s.Change("resume processes %s on ASG %s", strings.Join(rec.WeSuspended, ","), rec.ASGName)
	if s.Options.DryRun {
		return nil
	}
	if _, err := s.ASG.ResumeProcesses(ctx, &autoscaling.ResumeProcessesInput{AutoScalingGroupName: &rec.ASGName, ScalingProcesses: rec.WeSuspended}); err != nil {
		return fmt.Errorf("resume %v on ASG %s: %w", rec.WeSuspended, rec.ASGName, err)
	}
	return nil
}

// RestoreGroups puts every recorded group back to its recorded sizes,
// processes, Cluster Autoscaler tags and config taints.
func (s run) RestoreGroups(ctx context.Context) error {
	for i := range s.Journal.Recorded.NodeGroups {
		rec := &s.Journal.Recorded.NodeGroups[i]
		if err := s.resumeOurs(ctx, rec); err != nil {
			return err
		}
		if err := s.restoreKeptGroup(ctx, rec); err != nil {
			return err
		}
		if err := s.setGroupSize(ctx, rec, ptr.To(rec.Min), ptr.To(rec.Max), ptr.To(rec.Desired)); err != nil {
			return err
		}
	}
	return nil
}
