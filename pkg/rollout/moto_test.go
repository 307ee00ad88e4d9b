package rollout_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/karpenter-migrate/karpenter-migrate/internal/motoenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

var moto = motoenv.NewShared()

func TestMain(m *testing.M) { os.Exit(moto.Run(m)) }

// motoASG is the Auto Scaling client against moto_server, with what the
// kubelet would do: a Ready node for every instance moto launches, none for
// one it terminates. It records the calls and, after each SuspendProcesses,
// what moto then reports suspended.
type motoASG struct {
	*autoscaling.Client
	kube *fake.Clientset

	mu           sync.Mutex
	groupOf      map[string]string // ASG -> node group
	nodeOf       map[string]string // instance -> node
	calls        []string
	afterSuspend map[string][]string
	seq          int
}

func (m *motoASG) record(format string, a ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf(format, a...))
}

func (m *motoASG) group(ctx context.Context, name string) (astypes.AutoScalingGroup, error) {
	out, err := m.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		return astypes.AutoScalingGroup{}, fmt.Errorf("describe %s: %v (%d groups)", name, err, len(out.AutoScalingGroups))
	}
	return out.AutoScalingGroups[0], nil
}

// syncNodes creates a node for each instance of the group that has none.
func (m *motoASG) syncNodes(ctx context.Context, asg string) error {
	g, err := m.group(ctx, asg)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, in := range g.Instances {
		id := awssdk.ToString(in.InstanceId)
		if _, ok := m.nodeOf[id]; ok {
			continue
		}
		m.seq++
		name := fmt.Sprintf("%s-new-%d", m.groupOf[asg], m.seq)
		if _, err := m.kube.CoreV1().Nodes().Create(ctx, legacyNode(name, m.groupOf[asg], awssdk.ToString(in.AvailabilityZone), id), metav1.CreateOptions{}); err != nil {
			return err
		}
		m.nodeOf[id] = name
	}
	return nil
}

func (m *motoASG) UpdateAutoScalingGroup(ctx context.Context, in *autoscaling.UpdateAutoScalingGroupInput, opts ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error) {
	m.record("update %s min=%d max=%d desired=%d", awssdk.ToString(in.AutoScalingGroupName), awssdk.ToInt32(in.MinSize), awssdk.ToInt32(in.MaxSize), awssdk.ToInt32(in.DesiredCapacity))
	out, err := m.Client.UpdateAutoScalingGroup(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	return out, m.syncNodes(ctx, awssdk.ToString(in.AutoScalingGroupName))
}

func (m *motoASG) TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, opts ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
	m.record("terminate %s decrement=%v", awssdk.ToString(in.InstanceId), awssdk.ToBool(in.ShouldDecrementDesiredCapacity))
	out, err := m.Client.TerminateInstanceInAutoScalingGroup(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	m.mu.Lock()
	node, ok := m.nodeOf[awssdk.ToString(in.InstanceId)]
	m.mu.Unlock()
	if ok {
		err = m.kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	}
	return out, err
}

func (m *motoASG) SuspendProcesses(ctx context.Context, in *autoscaling.SuspendProcessesInput, opts ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error) {
	name := awssdk.ToString(in.AutoScalingGroupName)
	m.record("suspend %s %v", name, in.ScalingProcesses)
	out, err := m.Client.SuspendProcesses(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	g, err := m.group(ctx, name)
	m.mu.Lock()
	m.afterSuspend[name] = suspended(g)
	m.mu.Unlock()
	return out, err
}

func (m *motoASG) ResumeProcesses(ctx context.Context, in *autoscaling.ResumeProcessesInput, opts ...func(*autoscaling.Options)) (*autoscaling.ResumeProcessesOutput, error) {
	m.record("resume %s %v", awssdk.ToString(in.AutoScalingGroupName), in.ScalingProcesses)
	return m.Client.ResumeProcesses(ctx, in, opts...)
}

func suspended(g astypes.AutoScalingGroup) []string {
	var out []string
	for _, p := range g.SuspendedProcesses {
		out = append(out, awssdk.ToString(p.ProcessName))
	}
	slices.Sort(out)
	return out
}

// motoEKS is the EKS client against moto_server, with what EKS does and
// moto does not: a managed node group's new scaling config is given to its
// Auto Scaling group.
type motoEKS struct {
	*eks.Client
	asg      *motoASG
	asgOfMNG map[string]string
}

func (m *motoEKS) UpdateNodegroupConfig(ctx context.Context, in *eks.UpdateNodegroupConfigInput, opts ...func(*eks.Options)) (*eks.UpdateNodegroupConfigOutput, error) {
	out, err := m.Client.UpdateNodegroupConfig(ctx, in, opts...)
	if err != nil || in.ScalingConfig == nil {
		return out, err
	}
	sc := in.ScalingConfig
	_, err = m.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(m.asgOfMNG[awssdk.ToString(in.NodegroupName)]),
		MinSize: sc.MinSize, MaxSize: sc.MaxSize, DesiredCapacity: sc.DesiredSize})
	return out, err
}

// TestMotoRolloutThenRollback runs the whole runbook with its Auto Scaling
// and EKS calls against moto_server — two self-managed groups (one with
// AZRebalance already suspended) and a managed node group — then rolls it
// back: processes suspended and resumed, minimum and desired lowered,
// every instance terminated with a decrement, groups scaled to zero, and
// every recorded size and process restored.
func TestMotoRolloutThenRollback(t *testing.T) {
	srv := moto.Server(t)
	ctx := t.Context()
	cfg, err := srv.Config(ctx, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	s := awssdk.String
	acct := &awsfake.Account{Region: "us-east-1"}
	acct.EC2.Subnets = []ec2types.Subnet{{SubnetId: s("subnet-a"), VpcId: s("vpc-1"), AvailabilityZone: s("us-east-1a")}}
	acct.EC2.LaunchTemplateVersions = []ec2types.LaunchTemplateVersion{{LaunchTemplateId: s("lt-1"), LaunchTemplateName: s("legacy"), VersionNumber: awssdk.Int64(1),
		DefaultVersion: awssdk.Bool(true), LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: s("ami-1"), InstanceType: ec2types.InstanceTypeM5Xlarge}}}
	acct.EKS.Clusters = []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: s("demo"), Version: s("1.31")},
		Nodegroups: []ekstypes.Nodegroup{{NodegroupName: s("ng-m"), Subnets: []string{"subnet-a"}, InstanceTypes: []string{"m5.xlarge"},
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(2), DesiredSize: awssdk.Int32(1)},
			Resources:     &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: s("asg-ng-m")}}}}}}}
	groups := append(slices.Clone(scenarioGroups), scenarioGroup{name: "ng-m", min: 1, max: 2, managed: true})
	desired := map[string]int32{"ng-a": 3, "ng-b": 1, "ng-m": 1}
	for _, g := range groups {
		asg := astypes.AutoScalingGroup{AutoScalingGroupName: s(g.asgName()), MinSize: awssdk.Int32(g.min), MaxSize: awssdk.Int32(g.max),
			DesiredCapacity: awssdk.Int32(desired[g.name]), VPCZoneIdentifier: s("subnet-a")}
		if !g.managed {
			asg.LaunchTemplate = &astypes.LaunchTemplateSpecification{LaunchTemplateId: s("lt-1"), Version: s("$Default")}
		}
		for _, p := range g.suspended {
			asg.SuspendedProcesses = append(asg.SuspendedProcesses, astypes.SuspendedProcess{ProcessName: s(p)})
		}
		acct.AutoScaling.Groups = append(acct.AutoScaling.Groups, asg)
	}
	seeded, err := motoenv.Seed(ctx, cfg, acct)
	if err != nil {
		t.Fatal(err)
	}
	groups[2].asg = seeded.ID("asg-ng-m")

	cs := fake.NewClientset()
	asg := &motoASG{Client: autoscaling.NewFromConfig(cfg), kube: cs, groupOf: map[string]string{}, nodeOf: map[string]string{}, afterSuspend: map[string][]string{}}
	var nodes []scenarioNode
	for _, g := range groups {
		asg.groupOf[g.asgName()] = g.name
		mg, err := asg.group(ctx, g.asgName())
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range mg.Instances {
			id := awssdk.ToString(in.InstanceId)
			n := scenarioNode{fmt.Sprintf("%s-%d", g.name, i), g.name, awssdk.ToString(in.AvailabilityZone), id}
			nodes = append(nodes, n)
			asg.nodeOf[id] = n.name
		}
	}
	if len(nodes) != 5 {
		t.Fatalf("moto launched %d instances, want 5", len(nodes))
	}
	_, plan := kubeScenario(t, cs, groups, nodes)
	mng := &motoEKS{Client: eks.NewFromConfig(cfg), asg: asg, asgOfMNG: map[string]string{"ng-m": groups[2].asgName()}}

	if err := newRunner(cs, plan, asg, mng, nil).Apply(ctx); err != nil {
		t.Fatalf("Apply against moto: %v\ncalls: %v", err, asg.calls)
	}
	if j, err := rollout.Status(ctx, cs, "karpenter-migrate", "dev"); err != nil || j.State != rollout.StateCompleted {
		t.Fatalf("journal after apply: %+v, %v", j, err)
	}
	state := func(g scenarioGroup) string {
		mg, err := asg.group(ctx, g.asgName())
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d/%d/%d, %d instances, suspended %v", awssdk.ToInt32(mg.MinSize), awssdk.ToInt32(mg.MaxSize), awssdk.ToInt32(mg.DesiredCapacity), len(mg.Instances), suspended(mg))
	}
	for _, tc := range []struct {
		g    scenarioGroup
		want string
	}{
		{groups[0], "0/0/0, 0 instances, suspended []"},
		{groups[1], "0/0/0, 0 instances, suspended [AZRebalance]"},
		{groups[2], "0/2/0, 0 instances, suspended []"}, // EKS keeps maxSize >= 1
	} {
		if got := state(tc.g); got != tc.want {
			t.Errorf("%s in moto after apply: %s, want %s", tc.g.name, got, tc.want)
		}
	}
	for _, g := range groups {
		if got := asg.afterSuspend[g.asgName()]; !slices.Equal(got, []string{"AZRebalance", "Launch", "ReplaceUnhealthy"}) {
			t.Errorf("%s suspended in moto during the drain: %v, want AZRebalance, Launch, ReplaceUnhealthy", g.name, got)
		}
	}
	terminations := 0
	for _, c := range asg.calls {
		if strings.HasPrefix(c, "terminate") {
			terminations++
			if !strings.HasSuffix(c, "decrement=true") {
				t.Errorf("call %q: want a decrementing termination", c)
			}
		}
	}
	if terminations != 5 {
		t.Errorf("terminations = %d, want 5", terminations)
	}
	ng, err := mng.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: s("demo"), NodegroupName: s("ng-m")})
	if err != nil {
		t.Fatal(err)
	}
	if sc := ng.Nodegroup.ScalingConfig; awssdk.ToInt32(sc.MinSize) != 0 || awssdk.ToInt32(sc.DesiredSize) != 0 || awssdk.ToInt32(sc.MaxSize) != 2 {
		t.Errorf("managed node group scaling config in moto after apply: %+v", sc)
	}

	if err := newRunner(cs, plan, asg, mng, nil).Rollback(ctx, ""); err != nil {
		t.Fatalf("Rollback against moto: %v", err)
	}
	for _, tc := range []struct {
		g    scenarioGroup
		want string
	}{
		{groups[0], "2/6/3, 3 instances, suspended []"},
		{groups[1], "1/3/1, 1 instances, suspended [AZRebalance]"},
		{groups[2], "1/2/1, 1 instances, suspended []"},
	} {
		if got := state(tc.g); got != tc.want {
			t.Errorf("%s in moto after rollback: %s, want %s", tc.g.name, got, tc.want)
		}
	}
	ng, err = mng.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: s("demo"), NodegroupName: s("ng-m")})
	if err != nil {
		t.Fatal(err)
	}
	if sc := ng.Nodegroup.ScalingConfig; awssdk.ToInt32(sc.MinSize) != 1 || awssdk.ToInt32(sc.DesiredSize) != 1 || awssdk.ToInt32(sc.MaxSize) != 2 {
		t.Errorf("managed node group scaling config in moto after rollback: %+v", sc)
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if n.Spec.Unschedulable {
			t.Errorf("node %s still cordoned after rollback", n.Name)
		}
	}
	if len(list.Items) != 5 {
		t.Errorf("legacy nodes after rollback = %d, want 5 (moto's new instances)", len(list.Items))
	}
}
