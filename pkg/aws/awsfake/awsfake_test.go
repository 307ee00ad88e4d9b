package awsfake_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"sigs.k8s.io/randfill"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

// clients points real SDK clients at a fresh fake seeded with acct.
func clients(t testing.TB, acct *awsfake.Account, opts ...awsfake.Option) (*awsfake.Server, *kmaws.Clients) {
	t.Helper()
	return clientsMode(t, awssdk.RetryModeStandard, acct, opts...)
}

func clientsMode(t testing.TB, mode awssdk.RetryMode, acct *awsfake.Account, opts ...awsfake.Option) (*awsfake.Server, *kmaws.Clients) {
	t.Helper()
	srv := awsfake.New(acct, opts...)
	t.Cleanup(srv.Close)
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{
		Region:      "us-east-1",
		EndpointURL: srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		MaxBackoff:  time.Millisecond,
		RetryMode:   mode,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, kmaws.NewClients(cfg)
}

// filler fills every exported field with random values that survive the wire:
// times to the millisecond, strings non-empty.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0).NumElements(1, 2).MaxDepth(12).Funcs(
		func(tm *time.Time, c randfill.Continue) {
			*tm = time.UnixMilli(c.Int63n(4102444800000)).UTC()
		},
		func(s *string, c randfill.Continue) {
			*s = "v" + c.String(12)
		},
	)
}

// TestRoundTrip seeds fully populated resources and reads them back with the
// real SDK: every field must survive the fake's encoding, which proves the
// element names and shapes match what the SDK deserializes.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for seed := int64(1); seed <= 3; seed++ {
		f := filler(seed)
		var g astypes.AutoScalingGroup
		f.Fill(&g)
		g.AutoScalingGroupName = awssdk.String("asg-1")
		var lc astypes.LaunchConfiguration
		f.Fill(&lc)
		var in ec2types.Instance
		f.Fill(&in)
		var sn ec2types.Subnet
		f.Fill(&sn)
		var sg ec2types.SecurityGroup
		f.Fill(&sg)
		var ltv ec2types.LaunchTemplateVersion
		f.Fill(&ltv)
		ltv.LaunchTemplateId, ltv.VersionNumber, ltv.DefaultVersion = awssdk.String("lt-1"), awssdk.Int64(1), awssdk.Bool(true)
		var it ec2types.InstanceTypeInfo
		f.Fill(&it)
		var sp ec2types.SpotPrice
		f.Fill(&sp)
		var img ec2types.Image
		f.Fill(&img)
		var cl ekstypes.Cluster
		f.Fill(&cl)
		cl.Name = awssdk.String("prod")
		var ng ekstypes.Nodegroup
		f.Fill(&ng)
		ng.NodegroupName = awssdk.String("mng")
		var fp ekstypes.FargateProfile
		f.Fill(&fp)
		fp.FargateProfileName = awssdk.String("fp")
		var p ssmtypes.Parameter
		f.Fill(&p)
		p.Name = awssdk.String("/p")

		acct := &awsfake.Account{
			AutoScaling: awsfake.AutoScalingState{Groups: []astypes.AutoScalingGroup{g}, LaunchConfigurations: []astypes.LaunchConfiguration{lc}},
			EC2: awsfake.EC2State{Instances: []ec2types.Instance{in}, Subnets: []ec2types.Subnet{sn}, SecurityGroups: []ec2types.SecurityGroup{sg},
				LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{ltv}, InstanceTypes: []ec2types.InstanceTypeInfo{it},
				SpotPrices: []ec2types.SpotPrice{sp}, Images: []ec2types.Image{img}},
			EKS: awsfake.EKSState{Clusters: []awsfake.EKSCluster{{Cluster: cl, Nodegroups: []ekstypes.Nodegroup{ng}, FargateProfiles: []ekstypes.FargateProfile{fp}}}},
			SSM: awsfake.SSMState{Parameters: []ssmtypes.Parameter{p}},
		}
		// The fake adds EC2 twins for ASG instances; compare against the seeded one only.
		_, c := clients(t, acct)

		asgs, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"asg-1"}})
		check(t, "AutoScalingGroup", err, g, first(asgs.AutoScalingGroups))
		lcs, err := c.AutoScaling.DescribeLaunchConfigurations(ctx, &autoscaling.DescribeLaunchConfigurationsInput{})
		check(t, "LaunchConfiguration", err, lc, first(lcs.LaunchConfigurations))
		insts, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{*in.InstanceId}})
		if err == nil {
			check(t, "Instance", err, in, first(first(insts.Reservations).Instances))
		} else {
			t.Fatalf("DescribeInstances: %v", err)
		}
		sns, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
		check(t, "Subnet", err, sn, first(sns.Subnets))
		sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
		check(t, "SecurityGroup", err, sg, first(sgs.SecurityGroups))
		ltvs, err := c.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: awssdk.String("lt-1")})
		check(t, "LaunchTemplateVersion", err, ltv, first(ltvs.LaunchTemplateVersions))
		its, err := c.EC2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
		check(t, "InstanceTypeInfo", err, it, first(its.InstanceTypes))
		sps, err := c.EC2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{})
		check(t, "SpotPrice", err, sp, first(sps.SpotPriceHistory))
		imgs, err := c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
		check(t, "Image", err, img, first(imgs.Images))
		dc, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String("prod")})
		if err != nil {
			t.Fatalf("DescribeCluster: %v", err)
		}
		check(t, "Cluster", err, cl, *dc.Cluster)
		dn, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String("prod"), NodegroupName: awssdk.String("mng")})
		if err != nil {
			t.Fatalf("DescribeNodegroup: %v", err)
		}
		check(t, "Nodegroup", err, ng, *dn.Nodegroup)
		fps, err := c.EKS.ListFargateProfiles(ctx, &eks.ListFargateProfilesInput{ClusterName: awssdk.String("prod")})
		if err != nil || len(fps.FargateProfileNames) != 1 || fps.FargateProfileNames[0] != "fp" {
			t.Fatalf("ListFargateProfiles: %v %v", fps, err)
		}
		df, err := c.EKS.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: awssdk.String("prod"), FargateProfileName: awssdk.String("fp")})
		if err != nil {
			t.Fatalf("DescribeFargateProfile: %v", err)
		}
		check(t, "FargateProfile", err, fp, *df.FargateProfile)
		gp, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: awssdk.String("/p")})
		if err != nil {
			t.Fatalf("GetParameter: %v", err)
		}
		check(t, "Parameter", err, p, *gp.Parameter)
	}
}

func first[T any](s []T) T {
	var zero T
	if len(s) == 0 {
		return zero
	}
	return s[0]
}

func check(t *testing.T, what string, err error, want, got any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diff := fieldDiff(reflect.ValueOf(want), reflect.ValueOf(got), what); diff != "" {
		t.Errorf("%s did not round-trip: %s", what, diff)
	}
}

// fieldDiff names the first field path where want and got differ.
func fieldDiff(want, got reflect.Value, path string) string {
	if want.Kind() != got.Kind() {
		return path + ": kind differs"
	}
	switch want.Kind() {
	case reflect.Pointer, reflect.Interface:
		if want.IsNil() || got.IsNil() {
			if want.IsNil() != got.IsNil() {
				return path + ": nil differs"
			}
			return ""
		}
		return fieldDiff(want.Elem(), got.Elem(), path)
	case reflect.Struct:
		if tw, ok := want.Interface().(time.Time); ok {
			if !tw.Equal(got.Interface().(time.Time)) {
				return path + ": time differs"
			}
			return ""
		}
		for i := 0; i < want.NumField(); i++ {
			if !want.Type().Field(i).IsExported() {
				continue
			}
			if d := fieldDiff(want.Field(i), got.Field(i), path+"."+want.Type().Field(i).Name); d != "" {
				return d
			}
		}
	case reflect.Slice:
		if want.Len() != got.Len() {
			return path + ": length differs"
		}
		for i := 0; i < want.Len(); i++ {
			if d := fieldDiff(want.Index(i), got.Index(i), path+"[]"); d != "" {
				return d
			}
		}
	case reflect.Map:
		if want.Len() != got.Len() {
			return path + ": map size differs"
		}
		for _, k := range want.MapKeys() {
			if d := fieldDiff(want.MapIndex(k), got.MapIndex(k), path+"["+k.String()+"]"); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(want.Interface(), got.Interface()) {
			return path + ": " + strings.TrimSpace(reflect.ValueOf(want.Interface()).String()) + " != " + reflect.ValueOf(got.Interface()).String()
		}
	}
	return ""
}
