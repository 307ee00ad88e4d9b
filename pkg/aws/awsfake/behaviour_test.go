package awsfake_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithy "github.com/aws/smithy-go"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

func groups(n int) []astypes.AutoScalingGroup {
	var out []astypes.AutoScalingGroup
	for i := 0; i < n; i++ {
		tags := []astypes.TagDescription{{Key: awssdk.String("team"), Value: awssdk.String("a")}}
		if i%2 == 0 {
			tags = append(tags, astypes.TagDescription{Key: awssdk.String("k8s.io/cluster-autoscaler/enabled"), Value: awssdk.String("true")})
		}
		out = append(out, astypes.AutoScalingGroup{
			AutoScalingGroupName: awssdk.String(fmt.Sprintf("asg-%03d", i)),
			MinSize:              awssdk.Int32(0), MaxSize: awssdk.Int32(10), DesiredCapacity: awssdk.Int32(1),
			AvailabilityZones: []string{"us-east-1a"}, Tags: tags,
			Instances: []astypes.Instance{{InstanceId: awssdk.String(fmt.Sprintf("i-%03d", i)), InstanceType: awssdk.String("m5.large"),
				AvailabilityZone: awssdk.String("us-east-1a"), LifecycleState: astypes.LifecycleStateInService}},
		})
	}
	return out
}

func TestPaginationAndFilters(t *testing.T) {
	ctx := context.Background()
	srv, c := clients(t, &awsfake.Account{AutoScaling: awsfake.AutoScalingState{Groups: groups(230)}})

	var names []string
	pages := 0
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(c.AutoScaling, &autoscaling.DescribeAutoScalingGroupsInput{
		Filters: []astypes.Filter{{Name: awssdk.String("tag-key"), Values: []string{"k8s.io/cluster-autoscaler/enabled"}}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, g := range page.AutoScalingGroups {
			names = append(names, *g.AutoScalingGroupName)
		}
	}
	if len(names) != 115 || names[0] != "asg-000" || names[114] != "asg-228" {
		t.Fatalf("got %d groups (%v..), want the 115 tagged ones", len(names), names[:1])
	}
	// 50 + 50 + 15, exactly: no transparent retry (see TestNoSpuriousRetries).
	if got := srv.Calls("autoscaling", "DescribeAutoScalingGroups"); pages != 3 || got != 3 {
		t.Errorf("DescribeAutoScalingGroups: %d pages in %d calls, want 3 pages of 50", pages, got)
	}

	var ids []string
	ip := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{MaxResults: awssdk.Int32(100)})
	for ip.HasMorePages() {
		page, err := ip.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				ids = append(ids, *in.InstanceId)
			}
		}
	}
	if n := srv.Calls("ec2", "DescribeInstances"); len(ids) != 230 || n != 3 {
		t.Errorf("instances = %d in %d calls, want 230 in 3", len(ids), srv.Calls("ec2", "DescribeInstances"))
	}

	_, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{NextToken: awssdk.String("garbage")})
	assertCode(t, err, "InvalidNextToken")
	_, err = c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: awssdk.String("bogus"), Values: []string{"x"}}}})
	assertCode(t, err, "InvalidParameterValue")
}

func TestThrottlingIsRetried(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		service, action string
		call            func(*kmaws.Clients) error
	}{
		{"ec2", "DescribeInstances", func(c *kmaws.Clients) error {
			_, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
			return err
		}},
		{"autoscaling", "DescribeAutoScalingGroups", func(c *kmaws.Clients) error {
			_, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
			return err
		}},
		{"eks", "ListClusters", func(c *kmaws.Clients) error {
			_, err := c.EKS.ListClusters(ctx, &eks.ListClustersInput{})
			return err
		}},
	} {
		t.Run(tc.service, func(t *testing.T) {
			// A short burst is absorbed; EC2 checks the production
			// (adaptive) retryer, whose rate limiter makes it take seconds.
			mode := awssdk.RetryModeStandard
			if tc.service == "ec2" {
				mode = awssdk.RetryModeAdaptive
			}
			srv, c := clientsMode(t, mode, nil, awsfake.WithFault(tc.service, tc.action, awsfake.Fault{Throttle: 2}))
			if err := tc.call(c); err != nil {
				t.Fatalf("after 2 throttles the retryer should succeed: %v", err)
			}
			if got := srv.Calls(tc.service, tc.action); got != 3 {
				t.Errorf("calls = %d, want 3 (2 throttled + 1)", got)
			}
			// Persistent throttling surfaces once attempts run out.
			srv, c = clients(t, nil, awsfake.WithFault(tc.service, tc.action, awsfake.Fault{Throttle: 100}))
			err := tc.call(c)
			var api smithy.APIError
			if !errors.As(err, &api) || !strings.Contains(api.ErrorCode(), "Throttl") && api.ErrorCode() != "RequestLimitExceeded" {
				t.Fatalf("persistent throttling: got %v, want a throttling error", err)
			}
			if got := srv.Calls(tc.service, tc.action); got != 5 {
				t.Errorf("persistent throttling: %d calls, want the retryer's 5 attempts", got)
			}
		})
	}
}

// TestThrottleRatio: a ratio throttles that share of the calls, evenly
// (0.5: every other one), which the retryer absorbs call by call.
func TestThrottleRatio(t *testing.T) {
	ctx := context.Background()
	srv, c := clientsMode(t, awssdk.RetryModeStandard, nil, awsfake.WithFault("autoscaling", "*", awsfake.Fault{ThrottleRatio: 0.5}))
	for i := range 10 {
		if _, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
			t.Fatalf("call %d at 50%% throttling: %v", i, err)
		}
	}
	if got := srv.Calls("autoscaling", "DescribeAutoScalingGroups"); got != 20 {
		t.Errorf("%d requests for 10 calls at 50%% throttling, want 20 (each throttled once)", got)
	}
}

func TestAccessDeniedNamesTheAction(t *testing.T) {
	ctx := context.Background()
	srv, c := clients(t, nil)
	for _, tc := range []struct {
		service, action string
		call            func() error
	}{
		{"autoscaling", "DescribeAutoScalingGroups", func() error {
			_, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
			return err
		}},
		{"ec2", "DescribeSubnets", func() error { _, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); return err }},
		{"eks", "DescribeCluster", func() error {
			_, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String("x")})
			return err
		}},
		{"sts", "GetCallerIdentity", func() error { _, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); return err }},
	} {
		srv.SetFault(tc.service, tc.action, awsfake.Fault{Deny: true})
		err := tc.call()
		var denied *kmaws.AccessDeniedError
		if !errors.As(err, &denied) {
			t.Fatalf("%s:%s: got %v, want *AccessDeniedError", tc.service, tc.action, err)
		}
		want := tc.service + ":" + tc.action + " denied: grant it to the caller"
		if denied.Action != tc.service+":"+tc.action || !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
}

func TestMutations(t *testing.T) {
	ctx := context.Background()
	gs := groups(1)
	gs[0].DesiredCapacity = awssdk.Int32(3)
	gs[0].Instances = nil
	acct := &awsfake.Account{
		AutoScaling: awsfake.AutoScalingState{Groups: gs},
		EKS: awsfake.EKSState{Clusters: []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: awssdk.String("prod")},
			Nodegroups: []ekstypes.Nodegroup{{NodegroupName: awssdk.String("mng"), Status: ekstypes.NodegroupStatusActive,
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(10), DesiredSize: awssdk.Int32(3)},
				Resources:     &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: awssdk.String("asg-000")}}}}}}}},
	}
	srv, c := clients(t, acct)
	describe := func() astypes.AutoScalingGroup {
		out, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"asg-000"}})
		if err != nil {
			t.Fatal(err)
		}
		return out.AutoScalingGroups[0]
	}
	// Seeded desired 3 with no instances: the fake does not launch until asked to reconcile.
	if _, err := c.AutoScaling.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("asg-000"), DesiredCapacity: awssdk.Int32(4)}); err != nil {
		t.Fatal(err)
	}
	if g := describe(); len(g.Instances) != 4 {
		t.Fatalf("instances after SetDesiredCapacity(4) = %d, want 4", len(g.Instances))
	}
	_, err := c.AutoScaling.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("asg-000"), DesiredCapacity: awssdk.Int32(11)})
	assertCode(t, err, "ValidationError")

	if _, err := c.AutoScaling.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: awssdk.String("asg-000"), ScalingProcesses: []string{"Launch"}}); err != nil {
		t.Fatal(err)
	}
	victim := describe().Instances[0].InstanceId
	if _, err := c.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: victim, ShouldDecrementDesiredCapacity: awssdk.Bool(false)}); err != nil {
		t.Fatal(err)
	}
	if g := describe(); len(g.Instances) != 3 || *g.DesiredCapacity != 4 || len(g.SuspendedProcesses) != 1 {
		t.Fatalf("after terminate with Launch suspended: %d instances, desired %d; want 3 and 4", len(g.Instances), *g.DesiredCapacity)
	}
	if _, err := c.AutoScaling.ResumeProcesses(ctx, &autoscaling.ResumeProcessesInput{AutoScalingGroupName: awssdk.String("asg-000")}); err != nil {
		t.Fatal(err)
	}
	if g := describe(); len(g.Instances) != 4 || len(g.SuspendedProcesses) != 0 {
		t.Fatalf("after resume: %d instances, want the replacement launched (4)", len(g.Instances))
	}
	if _, err := c.AutoScaling.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: []astypes.Tag{{ResourceId: awssdk.String("asg-000"), ResourceType: awssdk.String("auto-scaling-group"), Key: awssdk.String("migrated"), Value: awssdk.String("yes")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.AutoScaling.DescribeTags(ctx, &autoscaling.DescribeTagsInput{Filters: []astypes.Filter{{Name: awssdk.String("key"), Values: []string{"migrated"}}}})
	if err != nil || len(tags.Tags) != 1 || *tags.Tags[0].Value != "yes" {
		t.Fatalf("DescribeTags after CreateOrUpdateTags: %v %v", tags, err)
	}

	if _, err := c.EKS.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: awssdk.String("prod"), NodegroupName: awssdk.String("mng"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(0), DesiredSize: awssdk.Int32(0)}}); err != nil {
		t.Fatal(err)
	}
	if g := describe(); *g.DesiredCapacity != 0 || len(g.Instances) != 0 {
		t.Errorf("UpdateNodegroupConfig to 0 should drain the node group's ASG; have desired %d, %d instances", *g.DesiredCapacity, len(g.Instances))
	}
	_, err = c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String("prod"), NodegroupName: awssdk.String("nope")})
	assertCode(t, err, "ResourceNotFoundException")
	if srv.TotalCalls() == 0 {
		t.Error("no calls counted")
	}
}

func TestLoadAccountErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"ok", "id: \"111122223333\"\nautoScaling:\n  groups:\n  - AutoScalingGroupName: a\n    MinSize: 1\n", ""},
		{"unknown", "id: \"1\"\nautoScaling:\n  groups:\n  - AutoScalingGroupName: a\n    MinSise: 1\n", ":5: account.autoScaling.groups[0]: unknown field \"MinSise\""},
		{"type", "ec2:\n  instances:\n  - InstanceId: i-1\n    LaunchTime: yesterday\n", ":4: account.ec2.instances[0].LaunchTime: \"yesterday\" is not an RFC 3339 time"},
		{"int", "autoScaling:\n  groups:\n  - MaxSize: many\n", ":3: account.autoScaling.groups[0].MaxSize: want an integer"},
		{"number as string", "eks:\n  clusters:\n  - cluster: {Name: a, Version: 1.30}\n", ":3: account.eks.clusters[0].cluster.Version: 1.30 is read as a float; quote it"},
		{"syntax", "id: [\n", "line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			a, err := awsfake.LoadAccount(path)
			if tc.want == "" {
				if err != nil || a.ID != "111122223333" || *a.AutoScaling.Groups[0].MinSize != 1 {
					t.Fatalf("LoadAccount = %+v, %v", a, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v does not name the file and contain %q", err, tc.want)
			}
		})
	}
}

func assertCode(t *testing.T, err error, code string) {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != code {
		t.Fatalf("got %v, want AWS error %s", err, code)
	}
}

// TestNoSpuriousRetries sends many requests with bodies and large answers on
// loopback, where the answer can arrive before net/http has finished
// writing the request: each must reach the server exactly once (pkg/aws
// hides the request body's WriteTo, which smithy-go's closed body fails).
func TestNoSpuriousRetries(t *testing.T) {
	srv, c := clients(t, &awsfake.Account{AutoScaling: awsfake.AutoScalingState{Groups: groups(10)}})
	ctx := context.Background()
	const n = 1000
	for i := 0; i < n; i++ {
		if _, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: awssdk.Int32(100)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.CallSummary(); got != fmt.Sprintf("autoscaling:DescribeAutoScalingGroups %d\nec2:DescribeInstances %d\n", n, n) {
		t.Errorf("calls served for %d of each:\n%s", n, got)
	}
}
