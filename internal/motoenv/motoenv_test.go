package motoenv

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

var moto = NewShared()

func TestMain(m *testing.M) { os.Exit(moto.Run(m)) }

// TestMotoStartResetClose: a server of its own answers the SDK, Reset
// empties it, Close kills its process group and frees the port.
func TestMotoStartResetClose(t *testing.T) {
	ctx := t.Context()
	srv, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			srv.Close()
		}
	})
	cfg, err := srv.Config(ctx, "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	c := ec2.NewFromConfig(cfg)
	vpc, err := c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: awssdk.String("10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	id := awssdk.ToString(vpc.Vpc.VpcId)
	if err := srv.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{id}}); err == nil || !strings.Contains(err.Error(), "InvalidVpcID.NotFound") {
		t.Errorf("VPC %s after reset: %v, want InvalidVpcID.NotFound", id, err)
	}

	pid := srv.PID()
	srv.Close()
	closed = true
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still alive after Close (kill 0: %v)", pid, err)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	if resp, err := client.Get(srv.URL + "/moto-api/data.json"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after Close", srv.URL)
	}
}

// TestMotoMissingFails: without moto_server on PATH the harness fails
// (it does not skip) and says what is missing.
func TestMotoMissingFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "moto_server not found on PATH") || !strings.Contains(err.Error(), "machine image") {
		t.Fatalf("Start without moto_server = %v, want an error naming it", err)
	}
}

// TestMotoSeed seeds a small account through the SDK and checks that moto
// holds it and that the returned account says so with moto's names.
func TestMotoSeed(t *testing.T) {
	srv := moto.Server(t)
	ctx := t.Context()
	cfg, err := srv.Config(ctx, "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	userData := base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh prod\n"))
	acct := &awsfake.Account{ID: "111122223333", Region: "us-west-2"}
	acct.EC2.Subnets = []ec2types.Subnet{
		{SubnetId: awssdk.String("subnet-a"), VpcId: awssdk.String("vpc-1"), AvailabilityZone: awssdk.String("us-west-2a"),
			Tags: []ec2types.Tag{{Key: awssdk.String("Name"), Value: awssdk.String("private-a")}}},
		{SubnetId: awssdk.String("subnet-b"), VpcId: awssdk.String("vpc-1"), AvailabilityZone: awssdk.String("us-west-2b")},
	}
	acct.EC2.SecurityGroups = []ec2types.SecurityGroup{{GroupId: awssdk.String("sg-nodes"), GroupName: awssdk.String("nodes"), VpcId: awssdk.String("vpc-1")}}
	acct.EC2.LaunchTemplateVersions = []ec2types.LaunchTemplateVersion{
		{LaunchTemplateId: awssdk.String("lt-1"), LaunchTemplateName: awssdk.String("general"), VersionNumber: awssdk.Int64(1),
			LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String("ami-1"), InstanceType: ec2types.InstanceTypeM5Large,
				UserData: awssdk.String(userData)}},
		{LaunchTemplateId: awssdk.String("lt-1"), LaunchTemplateName: awssdk.String("general"), VersionNumber: awssdk.Int64(2), DefaultVersion: awssdk.Bool(true),
			LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String("ami-1"), InstanceType: ec2types.InstanceTypeM5Large,
				SecurityGroupIds: []string{"sg-nodes"}}},
	}
	acct.EKS.Clusters = []awsfake.EKSCluster{{
		Cluster: ekstypes.Cluster{Name: awssdk.String("prod"), Version: awssdk.String("1.31"),
			ResourcesVpcConfig: &ekstypes.VpcConfigResponse{SubnetIds: []string{"subnet-a", "subnet-b"}}},
		Nodegroups: []ekstypes.Nodegroup{{NodegroupName: awssdk.String("batch"), Subnets: []string{"subnet-a"}, InstanceTypes: []string{"c5.xlarge"},
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(2), DesiredSize: awssdk.Int32(1)},
			Resources:     &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: awssdk.String("eks-batch")}}}}},
	}}
	acct.AutoScaling.Groups = []astypes.AutoScalingGroup{
		{AutoScalingGroupName: awssdk.String("general"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(4), DesiredCapacity: awssdk.Int32(2),
			VPCZoneIdentifier:  awssdk.String("subnet-a,subnet-b"),
			LaunchTemplate:     &astypes.LaunchTemplateSpecification{LaunchTemplateId: awssdk.String("lt-1"), Version: awssdk.String("$Default")},
			Instances:          []astypes.Instance{{InstanceId: awssdk.String("i-seeded1")}},
			SuspendedProcesses: []astypes.SuspendedProcess{{ProcessName: awssdk.String("AZRebalance")}},
			Tags:               []astypes.TagDescription{{Key: awssdk.String("k8s.io/cluster-autoscaler/enabled"), Value: awssdk.String("true")}}},
		{AutoScalingGroupName: awssdk.String("eks-batch"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(2), DesiredCapacity: awssdk.Int32(1),
			VPCZoneIdentifier: awssdk.String("subnet-a"),
			Tags:              []astypes.TagDescription{{Key: awssdk.String("eks:nodegroup-name"), Value: awssdk.String("batch")}}},
	}
	seeded, err := Seed(ctx, cfg, acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"vpc-1", "subnet-a", "subnet-b", "sg-nodes", "lt-1", "i-seeded1", "eks-batch", "111122223333"} {
		if seeded.ID(id) == id {
			t.Errorf("%s was not given moto's name", id)
		}
	}

	groups, err := autoscaling.NewFromConfig(cfg).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{"general", seeded.ID("eks-batch")}})
	if err != nil || len(groups.AutoScalingGroups) != 2 {
		t.Fatalf("groups in moto: %+v, %v", groups, err)
	}
	general := groups.AutoScalingGroups[0]
	if awssdk.ToString(general.AutoScalingGroupName) != "general" {
		general = groups.AutoScalingGroups[1]
	}
	if len(general.Instances) != 2 || awssdk.ToString(general.Instances[0].InstanceId) != seeded.ID("i-seeded1") ||
		awssdk.ToString(general.VPCZoneIdentifier) != seeded.ID("subnet-a")+","+seeded.ID("subnet-b") ||
		len(general.SuspendedProcesses) != 1 || awssdk.ToString(general.LaunchTemplate.LaunchTemplateId) != seeded.ID("lt-1") {
		t.Errorf("group general in moto: %+v", general)
	}
	ng, err := eks.NewFromConfig(cfg).DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String("prod"), NodegroupName: awssdk.String("batch")})
	if err != nil || awssdk.ToString(ng.Nodegroup.Resources.AutoScalingGroups[0].Name) != seeded.ID("eks-batch") {
		t.Errorf("node group batch: %+v, %v", ng, err)
	}
	v, err := ec2.NewFromConfig(cfg).DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: awssdk.String(seeded.ID("lt-1")), Versions: []string{"$Default"}})
	if err != nil || len(v.LaunchTemplateVersions) != 1 || awssdk.ToInt64(v.LaunchTemplateVersions[0].VersionNumber) != 2 ||
		v.LaunchTemplateVersions[0].LaunchTemplateData.SecurityGroupIds[0] != seeded.ID("sg-nodes") {
		t.Errorf("default version of lt-1: %+v, %v", v, err)
	}
	v, err = ec2.NewFromConfig(cfg).DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: awssdk.String(seeded.ID("lt-1")), Versions: []string{"1"}})
	if err != nil || len(v.LaunchTemplateVersions) != 1 || awssdk.ToString(v.LaunchTemplateVersions[0].LaunchTemplateData.UserData) != userData {
		t.Errorf("version 1 of lt-1 (user data): %+v, %v", v, err)
	}

	// The returned account: moto's names, the seed's content, moto's instances.
	a := seeded.Account
	if a.ID != AccountID || len(a.EC2.Subnets) != 2 || awssdk.ToString(a.EC2.Subnets[0].SubnetId) != seeded.ID("subnet-a") ||
		awssdk.ToString(a.EC2.Subnets[0].Tags[0].Value) != "private-a" || len(a.EC2.Instances) != 3 || len(a.AutoScaling.Groups) != 2 ||
		len(a.EC2.LaunchTemplateVersions) != 3 { // two versions of lt-1 and the node group's
		t.Errorf("seeded account = %+v", a)
	}
	// And it loads into awsfake.
	fake := awsfake.New(a)
	fake.Close()
}

// TestMotoSeedRefusesWhatMotoCannotHold: parts moto cannot take are
// refused with the reason, not left in awsfake alone.
func TestMotoSeedRefusesWhatMotoCannotHold(t *testing.T) {
	srv := moto.Server(t)
	cfg, err := srv.Config(t.Context(), "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	lt := func(n int64, ud *string) ec2types.LaunchTemplateVersion {
		return ec2types.LaunchTemplateVersion{LaunchTemplateId: awssdk.String("lt-1"), VersionNumber: awssdk.Int64(n),
			LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String("ami-1"), UserData: ud}}
	}
	for name, acct := range map[string]*awsfake.Account{
		"access entries":               {EKSAccess: awsfake.EKSAccessState{AccessEntries: []ekstypes.AccessEntry{{PrincipalArn: awssdk.String("arn:aws:iam::1:role/x")}}}},
		"user data in a later version": {EC2: awsfake.EC2State{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{lt(1, nil), lt(2, awssdk.String("IyEvYmluL3No"))}}},
		"another region":               {Region: "eu-west-1"},
	} {
		if _, err := Seed(t.Context(), cfg, acct); err == nil {
			t.Errorf("%s: seeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
