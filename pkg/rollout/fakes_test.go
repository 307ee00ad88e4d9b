package rollout_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// fakeASG is an in-memory Auto Scaling service: terminating an instance
// deletes its node; raising desired creates Ready nodes for the group.
type fakeASG struct {
	mu     sync.Mutex
	groups map[string]*astypes.AutoScalingGroup
	kube   kubernetes.Interface
	nodeOf map[string]string // instance -> node
	seq    int
	calls  []string
}

func (f *fakeASG) record(c string) { f.calls = append(f.calls, c) }

func (f *fakeASG) DescribeAutoScalingGroups(_ context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &autoscaling.DescribeAutoScalingGroupsOutput{}
	for _, n := range in.AutoScalingGroupNames {
		if g, ok := f.groups[n]; ok {
			out.AutoScalingGroups = append(out.AutoScalingGroups, *g)
		}
	}
	return out, nil
}

func (f *fakeASG) UpdateAutoScalingGroup(ctx context.Context, in *autoscaling.UpdateAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[*in.AutoScalingGroupName]
	f.record(fmt.Sprintf("update %s min=%v max=%v desired=%v", *in.AutoScalingGroupName, ptr.Deref(in.MinSize, -1), ptr.Deref(in.MaxSize, -1), ptr.Deref(in.DesiredCapacity, -1)))
	if in.MinSize != nil {
		g.MinSize = in.MinSize
	}
	if in.MaxSize != nil {
		g.MaxSize = in.MaxSize
	}
	if in.DesiredCapacity != nil {
		g.DesiredCapacity = in.DesiredCapacity
	}
	for int32(len(g.Instances)) < *g.DesiredCapacity {
		f.seq++
		id := fmt.Sprintf("i-new%013d", f.seq)
		name := fmt.Sprintf("%s-new-%d", *g.AutoScalingGroupName, f.seq)
		g.Instances = append(g.Instances, astypes.Instance{InstanceId: &id})
		f.nodeOf[id] = name
		if _, err := f.kube.CoreV1().Nodes().Create(ctx, legacyNode(name, groupOf(g), "us-east-1a", id), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	return &autoscaling.UpdateAutoScalingGroupOutput{}, nil
}

func groupOf(g *astypes.AutoScalingGroup) string {
	for _, t := range g.Tags {
		if ptr.Deref(t.Key, "") == "group" {
			return ptr.Deref(t.Value, "")
		}
	}
	return ""
}

func (f *fakeASG) SuspendProcesses(_ context.Context, in *autoscaling.SuspendProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[*in.AutoScalingGroupName]
	f.record(fmt.Sprintf("suspend %s %v", *in.AutoScalingGroupName, in.ScalingProcesses))
	for _, p := range in.ScalingProcesses {
		g.SuspendedProcesses = append(g.SuspendedProcesses, astypes.SuspendedProcess{ProcessName: ptr.To(p)})
	}
	return &autoscaling.SuspendProcessesOutput{}, nil
}

func (f *fakeASG) ResumeProcesses(_ context.Context, in *autoscaling.ResumeProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.ResumeProcessesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[*in.AutoScalingGroupName]
	f.record(fmt.Sprintf("resume %s %v", *in.AutoScalingGroupName, in.ScalingProcesses))
	g.SuspendedProcesses = slices.DeleteFunc(g.SuspendedProcesses, func(p astypes.SuspendedProcess) bool {
		return slices.Contains(in.ScalingProcesses, ptr.Deref(p.ProcessName, ""))
	})
	return &autoscaling.ResumeProcessesOutput{}, nil
}

func (f *fakeASG) TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("terminate %s decrement=%v", *in.InstanceId, ptr.Deref(in.ShouldDecrementDesiredCapacity, false)))
	for _, g := range f.groups {
		i := slices.IndexFunc(g.Instances, func(x astypes.Instance) bool { return *x.InstanceId == *in.InstanceId })
		if i < 0 {
			continue
		}
		if !ptr.Deref(in.ShouldDecrementDesiredCapacity, false) || *g.DesiredCapacity-1 < *g.MinSize {
			return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "would go below min"}
		}
		g.Instances = slices.Delete(g.Instances, i, i+1)
		g.DesiredCapacity = ptr.To(*g.DesiredCapacity - 1)
		if err := f.kube.CoreV1().Nodes().Delete(ctx, f.nodeOf[*in.InstanceId], metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		return &autoscaling.TerminateInstanceInAutoScalingGroupOutput{}, nil
	}
	return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "Instance Id not found"}
}

func (f *fakeASG) CreateOrUpdateTags(_ context.Context, in *autoscaling.CreateOrUpdateTagsInput, _ ...func(*autoscaling.Options)) (*autoscaling.CreateOrUpdateTagsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range in.Tags {
		g := f.groups[*t.ResourceId]
		f.record(fmt.Sprintf("tag %s %s=%s", *t.ResourceId, *t.Key, ptr.Deref(t.Value, "")))
		g.Tags = slices.DeleteFunc(g.Tags, func(x astypes.TagDescription) bool { return *x.Key == *t.Key })
		g.Tags = append(g.Tags, astypes.TagDescription{Key: t.Key, Value: t.Value, ResourceId: t.ResourceId, PropagateAtLaunch: t.PropagateAtLaunch})
	}
	return &autoscaling.CreateOrUpdateTagsOutput{}, nil
}

func (f *fakeASG) DeleteTags(_ context.Context, in *autoscaling.DeleteTagsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteTagsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range in.Tags {
		g := f.groups[*t.ResourceId]
		f.record(fmt.Sprintf("untag %s %s", *t.ResourceId, *t.Key))
		g.Tags = slices.DeleteFunc(g.Tags, func(x astypes.TagDescription) bool { return *x.Key == *t.Key })
	}
	return &autoscaling.DeleteTagsOutput{}, nil
}

func legacyNode(name, group, zone, id string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"eks.amazonaws.com/nodegroup": group, corev1.LabelTopologyZone: zone}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + zone + "/" + id},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}
