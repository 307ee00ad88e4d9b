package discover_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/motoenv"
	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/cli"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

// moto is moto_server for this package's TestMoto* tests.
var moto = motoenv.NewShared()

const motoRegion = "us-west-2"

// User data of the three bootstrap formats discover parses.
const (
	al2UserData = `#!/bin/bash
set -ex
/etc/eks/bootstrap.sh prod --b64-cluster-ca Y2E= --apiserver-endpoint https://prod.example \
  --kubelet-extra-args '--node-labels=team=web,tier=frontend --register-with-taints=dedicated=web:NoSchedule --max-pods=29'
`
	al2023UserData = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" +
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod\n  kubelet:\n    config:\n      maxPods: 58\n" +
		"      registerWithTaints:\n      - key: api\n        value: \"true\"\n        effect: NoSchedule\n    flags:\n    - --node-labels=team=api\n--BOUNDARY--\n"
	bottlerocketUserData = `[settings.kubernetes]
cluster-name = "prod"
[settings.kubernetes.node-labels]
"team" = "batch"
[settings.kubernetes.node-taints]
"gpu" = "true:NoSchedule"
`
)

// motoAccount is a cluster "prod" with every shape discover reads: a
// self-managed group with a mixed instances policy (AL2 bootstrap.sh, IMDSv2
// hop limit 2) and Cluster Autoscaler node-template label, taint and
// resources tags; one on AL2023 nodeadm (hop limit 1); one on Bottlerocket;
// a managed node group with its Auto Scaling group; and two groups that are
// not the cluster's (another cluster's, and one without tags).
func motoAccount() *awsfake.Account {
	s := awssdk.String
	ud := func(text string) *string { return s(base64.StdEncoding.EncodeToString([]byte(text))) }
	tag := func(k, v string) astypes.TagDescription {
		return astypes.TagDescription{Key: s(k), Value: s(v), PropagateAtLaunch: awssdk.Bool(true)}
	}
	ca := func(cluster string, more ...astypes.TagDescription) []astypes.TagDescription {
		return append([]astypes.TagDescription{tag("k8s.io/cluster-autoscaler/enabled", "true"), tag("k8s.io/cluster-autoscaler/"+cluster, "owned")}, more...)
	}
	lt := func(id, name string, data ec2types.ResponseLaunchTemplateData) ec2types.LaunchTemplateVersion {
		return ec2types.LaunchTemplateVersion{LaunchTemplateId: s(id), LaunchTemplateName: s(name), VersionNumber: awssdk.Int64(1), DefaultVersion: awssdk.Bool(true), LaunchTemplateData: &data}
	}
	a := &awsfake.Account{ID: "111122223333", Region: motoRegion}
	a.EC2.Subnets = []ec2types.Subnet{
		{SubnetId: s("subnet-a"), VpcId: s("vpc-main"), AvailabilityZone: s("us-west-2a"), CidrBlock: s("10.20.1.0/24"),
			Tags: []ec2types.Tag{{Key: s("Name"), Value: s("private-a")}, {Key: s("kubernetes.io/role/internal-elb"), Value: s("1")}}},
		{SubnetId: s("subnet-b"), VpcId: s("vpc-main"), AvailabilityZone: s("us-west-2b"), CidrBlock: s("10.20.2.0/24"),
			Tags: []ec2types.Tag{{Key: s("Name"), Value: s("private-b")}}},
		{SubnetId: s("subnet-c"), VpcId: s("vpc-main"), AvailabilityZone: s("us-west-2c"), CidrBlock: s("10.20.3.0/24")},
	}
	a.EC2.SecurityGroups = []ec2types.SecurityGroup{
		{GroupId: s("sg-cluster"), GroupName: s("eks-cluster-sg-prod"), Description: s("EKS cluster"), VpcId: s("vpc-main")},
		{GroupId: s("sg-nodes"), GroupName: s("prod-nodes"), Description: s("nodes"), VpcId: s("vpc-main"),
			Tags: []ec2types.Tag{{Key: s("team"), Value: s("platform")}}},
	}
	a.EC2.LaunchTemplateVersions = []ec2types.LaunchTemplateVersion{
		lt("lt-al2", "web-al2", ec2types.ResponseLaunchTemplateData{ImageId: s("ami-0a1200000000000a2"), InstanceType: ec2types.InstanceTypeM5Large,
			SecurityGroupIds: []string{"sg-nodes"}, UserData: ud(al2UserData),
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecification{Arn: s("arn:aws:iam::111122223333:instance-profile/prod-nodes")},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired,
				HttpPutResponseHopLimit: awssdk.Int32(2), HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled},
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMapping{{DeviceName: s("/dev/xvda"),
				Ebs: &ec2types.LaunchTemplateEbsBlockDevice{VolumeSize: awssdk.Int32(100), VolumeType: ec2types.VolumeTypeGp3, Encrypted: awssdk.Bool(true)}}},
			TagSpecifications: []ec2types.LaunchTemplateTagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: s("cost-center"), Value: s("web")}}}}}),
		lt("lt-al2023", "api-al2023", ec2types.ResponseLaunchTemplateData{ImageId: s("ami-0a2023000000000a3"), InstanceType: ec2types.InstanceTypeC6iXlarge,
			SecurityGroupIds: []string{"sg-nodes"}, UserData: ud(al2023UserData),
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: awssdk.Int32(1)}}),
		// A second, default version the group does not use: it pins version 1.
		{LaunchTemplateId: s("lt-al2023"), LaunchTemplateName: s("api-al2023"), VersionNumber: awssdk.Int64(2), DefaultVersion: awssdk.Bool(true),
			LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: s("ami-0a2023000000000a3"), InstanceType: ec2types.InstanceTypeC6i2xlarge}},
		lt("lt-br", "batch-bottlerocket", ec2types.ResponseLaunchTemplateData{ImageId: s("ami-0b0771e00000000b4"), InstanceType: ec2types.InstanceTypeG5Xlarge,
			SecurityGroupIds: []string{"sg-nodes"}, UserData: ud(bottlerocketUserData)}),
		lt("lt-other", "staging", ec2types.ResponseLaunchTemplateData{ImageId: s("ami-0a1200000000000a2"), InstanceType: ec2types.InstanceTypeM5Large}),
	}
	a.EC2.LaunchTemplateVersions[1].DefaultVersion = awssdk.Bool(false) // lt-al2023 version 1
	a.EKS.Clusters = []awsfake.EKSCluster{{
		Cluster: ekstypes.Cluster{Name: s("prod"), Version: s("1.31"), Status: ekstypes.ClusterStatusActive,
			AccessConfig:       &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap},
			ResourcesVpcConfig: &ekstypes.VpcConfigResponse{SubnetIds: []string{"subnet-a", "subnet-b", "subnet-c"}, SecurityGroupIds: []string{"sg-cluster"}},
			Tags:               map[string]string{"env": "prod"}},
		Nodegroups: []ekstypes.Nodegroup{{NodegroupName: s("managed"), Status: ekstypes.NodegroupStatusActive,
			Subnets: []string{"subnet-a", "subnet-b"}, InstanceTypes: []string{"c5.xlarge"}, AmiType: ekstypes.AMITypesAl2023X8664Standard,
			CapacityType: ekstypes.CapacityTypesOnDemand, NodeRole: s("arn:aws:iam::111122223333:role/prod-managed-nodes"),
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(3), DesiredSize: awssdk.Int32(1)},
			Labels:        map[string]string{"role": "managed"},
			Taints:        []ekstypes.Taint{{Key: s("workload"), Value: s("managed"), Effect: ekstypes.TaintEffectNoSchedule}},
			Resources:     &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: s("eks-managed")}}}}},
	}}
	a.AutoScaling.Groups = []astypes.AutoScalingGroup{
		{AutoScalingGroupName: s("web-mixed"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(10), DesiredCapacity: awssdk.Int32(2),
			VPCZoneIdentifier: s("subnet-a,subnet-b"),
			MixedInstancesPolicy: &astypes.MixedInstancesPolicy{
				LaunchTemplate: &astypes.LaunchTemplate{LaunchTemplateSpecification: &astypes.LaunchTemplateSpecification{LaunchTemplateId: s("lt-al2"), Version: s("$Default")},
					Overrides: []astypes.LaunchTemplateOverrides{{InstanceType: s("m5.large")}, {InstanceType: s("m5a.large")}, {InstanceType: s("m6i.large")}}},
				// 0% above base: moto 5.2.1 rounds a partial share above
				// the base down to no instance (25% of 1 launches nothing).
				InstancesDistribution: &astypes.InstancesDistribution{OnDemandBaseCapacity: awssdk.Int32(1), OnDemandPercentageAboveBaseCapacity: awssdk.Int32(0),
					SpotAllocationStrategy: s("price-capacity-optimized")}},
			Tags: ca("prod", tag("k8s.io/cluster-autoscaler/node-template/label/team", "web"),
				tag("k8s.io/cluster-autoscaler/node-template/taint/dedicated", "web:NoSchedule"),
				tag("k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage", "100Gi"),
				tag("aws:cloudformation:stack-name", "eksctl-prod-nodegroup-web"))},
		{AutoScalingGroupName: s("api-al2023"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(4), DesiredCapacity: awssdk.Int32(1),
			VPCZoneIdentifier: s("subnet-b"), SuspendedProcesses: []astypes.SuspendedProcess{{ProcessName: s("AZRebalance")}},
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: s("lt-al2023"), Version: s("1")},
			Tags:           ca("prod")},
		{AutoScalingGroupName: s("batch-bottlerocket"), MinSize: awssdk.Int32(0), MaxSize: awssdk.Int32(2), DesiredCapacity: awssdk.Int32(1),
			VPCZoneIdentifier: s("subnet-c"),
			LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: s("batch-bottlerocket"), Version: s("$Latest")},
			Tags:              ca("prod", tag("k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu.present", "true"))},
		{AutoScalingGroupName: s("eks-managed"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(3), DesiredCapacity: awssdk.Int32(1),
			VPCZoneIdentifier: s("subnet-a,subnet-b"),
			Tags:              ca("prod", tag("eks:cluster-name", "prod"), tag("eks:nodegroup-name", "managed"))},
		{AutoScalingGroupName: s("staging-general"), MinSize: awssdk.Int32(0), MaxSize: awssdk.Int32(2), DesiredCapacity: awssdk.Int32(0),
			VPCZoneIdentifier: s("subnet-a"), LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: s("lt-other"), Version: s("1")},
			Tags: ca("staging")},
		{AutoScalingGroupName: s("bastion"), MinSize: awssdk.Int32(0), MaxSize: awssdk.Int32(1), DesiredCapacity: awssdk.Int32(0),
			VPCZoneIdentifier: s("subnet-a"), LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: s("lt-other"), Version: s("1")}},
	}
	return a
}

// seedMoto seeds motoAccount into this package's moto_server.
func seedMoto(t *testing.T) (*motoenv.Server, *motoenv.Seeded) {
	t.Helper()
	srv := moto.Server(t)
	cfg, err := srv.Config(t.Context(), motoRegion)
	if err != nil {
		t.Fatal(err)
	}
	seeded, err := motoenv.Seed(t.Context(), cfg, motoAccount())
	if err != nil {
		t.Fatal(err)
	}
	return srv, seeded
}

// discoverCLI runs `karpenter-migrate discover --skip-kubernetes` against
// an endpoint and returns the snapshot it wrote.
func discoverCLI(t *testing.T, endpoint string) *inventory.Snapshot {
	t.Helper()
	motoenv.Env(t)
	path := filepath.Join(t.TempDir(), "snapshot.json")
	streams, _, _, errOut := iostreams.Test()
	cmd := cli.NewRootCmd(streams)
	cmd.SetArgs([]string{"discover", "--cluster", "prod", "--region", motoRegion, "--endpoint-url", endpoint, "--skip-kubernetes", "--snapshot", path, "-o", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("discover against %s: %v\n%s", endpoint, err, errOut)
	}
	snap, err := inventory.ReadSnapshotFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestMotoDiscoverSkipKubernetes runs `discover --skip-kubernetes` against
// moto_server and checks every node group fact moto serves.
func TestMotoDiscoverSkipKubernetes(t *testing.T) {
	srv, seeded := seedMoto(t)
	inv := discoverCLI(t, srv.URL).Inventory
	id := seeded.ID

	var names []string
	for _, ng := range inv.NodeGroups {
		names = append(names, ng.Name)
	}
	if want := []string{"api-al2023", "batch-bottlerocket", "managed", "web-mixed"}; !slices.Equal(names, want) {
		t.Fatalf("node groups = %v, want %v (not staging's, not the untagged bastion)", names, want)
	}
	group := func(name string) *inventory.NodeGroup {
		ng, _ := inv.NodeGroup(name)
		return ng
	}

	web := group("web-mixed")
	if web.Kind != inventory.SelfManaged || web.ASGName != "web-mixed" || web.MinSize != 1 || web.MaxSize != 10 || web.DesiredSize != 2 ||
		!slices.Equal(web.InstanceTypes, []string{"m5.large", "m5a.large", "m6i.large"}) ||
		!slices.Equal(web.SubnetIDs, []string{id("subnet-a"), id("subnet-b")}) || !slices.Equal(web.SecurityGroupIDs, []string{id("sg-nodes")}) {
		t.Errorf("web-mixed group: %+v", web)
	}
	if m := web.Mixed; m == nil || m.OnDemandBaseCapacity != 1 || m.OnDemandPercentageAboveBaseCapacity != 0 || m.SpotAllocationStrategy != "price-capacity-optimized" {
		t.Errorf("web-mixed mixed instances policy: %+v", web.Mixed)
	}
	if web.Labels["team"] != "web" || web.Labels["tier"] != "frontend" || web.TemplateResources["ephemeral-storage"] != "100Gi" ||
		!slices.ContainsFunc(web.Taints, func(tn corev1.Taint) bool {
			return tn.Key == "dedicated" && tn.Value == "web" && tn.Effect == corev1.TaintEffectNoSchedule
		}) {
		t.Errorf("web-mixed labels %v taints %v resources %v", web.Labels, web.Taints, web.TemplateResources)
	}
	if lt := web.LaunchTemplate; lt == nil || lt.ID != id("lt-al2") || lt.Bootstrap == nil || lt.Bootstrap.Format != inventory.BootstrapAL2 ||
		lt.Bootstrap.MaxPods == nil || *lt.Bootstrap.MaxPods != 29 || lt.MetadataOptions == nil || lt.MetadataOptions.HTTPTokens != "required" ||
		lt.MetadataOptions.HTTPPutResponseHopLimit == nil || *lt.MetadataOptions.HTTPPutResponseHopLimit != 2 ||
		lt.InstanceProfileARN != "arn:aws:iam::"+motoenv.AccountID+":instance-profile/prod-nodes" || len(lt.BlockDeviceMappings) != 1 || lt.Tags["cost-center"] != "web" {
		t.Errorf("web-mixed launch template: %+v", web.LaunchTemplate)
	}
	if web.Tags["aws:cloudformation:stack-name"] != "eksctl-prod-nodegroup-web" || len(web.Instances) != 2 {
		t.Errorf("web-mixed tags %v, instances %v", web.Tags, web.Instances)
	}

	api := group("api-al2023")
	if lt := api.LaunchTemplate; lt == nil || lt.Bootstrap == nil || lt.Bootstrap.Format != inventory.BootstrapNodeadm || api.Labels["team"] != "api" ||
		len(api.Taints) != 1 || api.Taints[0].Key != "api" || lt.MetadataOptions == nil || *lt.MetadataOptions.HTTPPutResponseHopLimit != 1 ||
		!slices.Equal(api.SuspendedProcesses, []string{"AZRebalance"}) || !slices.Equal(api.InstanceTypes, []string{"c6i.xlarge"}) {
		t.Errorf("api-al2023 group: %+v, launch template %+v", api, api.LaunchTemplate)
	}

	batch := group("batch-bottlerocket")
	if lt := batch.LaunchTemplate; lt == nil || lt.Bootstrap == nil || lt.Bootstrap.Format != inventory.BootstrapBottlerocket ||
		batch.Labels["team"] != "batch" || batch.Labels["nvidia.com/gpu.present"] != "true" || len(batch.Taints) != 1 || batch.Taints[0].Key != "gpu" {
		t.Errorf("batch-bottlerocket group: %+v, launch template %+v", batch, batch.LaunchTemplate)
	}

	managed := group("managed")
	if managed.Kind != inventory.Managed || managed.ASGName != id("eks-managed") || managed.AMIType != "AL2023_x86_64_STANDARD" ||
		managed.Labels["role"] != "managed" || len(managed.Taints) != 1 || managed.Taints[0].Key != "workload" ||
		managed.Taints[0].Effect != corev1.TaintEffectNoSchedule || !slices.Contains(managed.InstanceTypes, "c5.xlarge") ||
		managed.NodeRoleARN != "arn:aws:iam::"+motoenv.AccountID+":role/prod-managed-nodes" || len(managed.Instances) != 1 {
		t.Errorf("managed node group: %+v", managed)
	}

	c := inv.Cluster
	if c.Name != "prod" || c.Version != "1.31" || c.AccountID != motoenv.AccountID || c.OIDCIssuer == "" ||
		!slices.Equal(c.SubnetIDs, []string{id("subnet-a"), id("subnet-b"), id("subnet-c")}) {
		t.Errorf("cluster: %+v", c)
	}
	var subnets []string
	for _, sn := range inv.Subnets {
		subnets = append(subnets, sn.ID+" "+sn.Zone+" "+sn.CIDR+" "+sn.Tags["Name"])
	}
	want := []string{id("subnet-a") + " us-west-2a 10.20.1.0/24 private-a", id("subnet-b") + " us-west-2b 10.20.2.0/24 private-b", id("subnet-c") + " us-west-2c 10.20.3.0/24 "}
	slices.Sort(want) // the inventory is sorted by ID
	if !slices.Equal(subnets, want) {
		t.Errorf("subnets = %q, want %q", subnets, want)
	}
	if len(inv.SecurityGroups) == 0 || !slices.ContainsFunc(inv.SecurityGroups, func(sg inventory.SecurityGroup) bool {
		return sg.ID == id("sg-nodes") && sg.Name == "prod-nodes" && sg.Tags["team"] == "platform"
	}) {
		t.Errorf("security groups: %+v", inv.SecurityGroups)
	}
}

// runCLI runs karpenter-migrate with args and returns its stdout.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	streams, _, out, errOut := iostreams.Test()
	cmd := cli.NewRootCmd(streams)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("karpenter-migrate %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out.String()
}

// flatten renders a JSON value as path -> scalar, paths like
// nodeGroups[web-mixed].launchTemplate.id (list items named by their
// name or id field where they have one).
func flatten(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			flatten(prefix+"."+k, x, out)
		}
	case []any:
		for i, x := range v {
			key := strconv.Itoa(i)
			if m, ok := x.(map[string]any); ok {
				for _, f := range []string{"name", "id", "ID"} {
					if s, ok := m[f].(string); ok && s != "" {
						key = s
						break
					}
				}
			}
			flatten(prefix+"["+key+"]", x, out)
		}
	default:
		b, _ := json.Marshal(v)
		out[prefix] = string(b)
	}
}

func flattenJSON(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	flatten("", v, out)
	return out
}

// TestMotoDifferential loads one seeded account into moto_server and into
// awsfake and runs the same commands against both: discover gives the same
// snapshot, generate the same tree, iam plan the same plan. Each difference
// is either fixed (in awsfake, when the AWS API reference says moto is
// right) or listed here as a known moto gap with its reason.
func TestMotoDifferential(t *testing.T) {
	srv, seeded := seedMoto(t)
	fake := awsfake.New(seeded.Account)
	t.Cleanup(fake.Close)

	snapshotGaps := []motoenv.Gap{
		motoenv.KnownGap(`^\.inventory\.cluster\.authenticationMode$`, "moto's CreateCluster drops accessConfig: DescribeCluster has no authentication mode"),
	}
	fakeSnap, motoSnap := discoverCLI(t, fake.URL()), discoverCLI(t, srv.URL)
	fakeSnap.TakenAt, motoSnap.TakenAt = time.Time{}, time.Time{}
	fb, _ := fakeSnap.Marshal()
	mb, _ := motoSnap.Marshal()
	motoenv.Differential(t, "snapshot", flattenJSON(t, fb), flattenJSON(t, mb), snapshotGaps)

	// generate: the tree from each snapshot.
	dir := t.TempDir()
	trees := map[string]map[string]string{}
	for name, snap := range map[string]*inventory.Snapshot{"awsfake": fakeSnap, "moto": motoSnap} {
		path := filepath.Join(dir, name+".json")
		if err := snap.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+"-tree")
		runCLI(t, "generate", "--snapshot", path, "--out", out)
		files := map[string]string{}
		err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(out, p)
			files[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		trees[name] = files
	}
	if len(trees["moto"]) == 0 {
		t.Fatal("generate wrote nothing")
	}
	motoenv.Differential(t, "generated tree", trees["awsfake"], trees["moto"], nil)

	// iam plan: each snapshot against its own emulator. Node access is left
	// out: moto has no access entries (and lost the authentication mode).
	plans := map[string]map[string]string{}
	for name, endpoint := range map[string]string{"awsfake": fake.URL(), "moto": srv.URL} {
		out := runCLI(t, "iam", "plan", "--snapshot", filepath.Join(dir, name+".json"), "--endpoint-url", endpoint, "-o", "json",
			"--identity", "irsa", "--create-oidc-provider", "--only", "discovery-tags,node-role,controller-role,interruption-queue")
		plans[name] = flattenJSON(t, []byte(out))
	}
	motoenv.Differential(t, "iam plan", plans["awsfake"], plans["moto"], []motoenv.Gap{
		motoenv.KnownGap(`^\.nodeAccess$`, "follows the authentication mode moto drops (CONFIG_MAP, so aws-auth, when accessConfig is lost)"),
	})
}

// TestMotoDiscoverWithControlPlane discovers moto's account together with a
// real control plane whose kwok nodes are moto's instances: every node is
// joined to its group through providerID -> instance -> Auto Scaling group.
func TestMotoDiscoverWithControlPlane(t *testing.T) {
	env := testenv.Start(t, testenv.Options{}) // skips with KM_SKIP_E2E=1
	srv, seeded := seedMoto(t)
	ctx := t.Context()
	want := map[string]string{} // node -> group
	var names []string
	for _, g := range seeded.Account.AutoScaling.Groups {
		group := awssdk.ToString(g.AutoScalingGroupName)
		spec := testenv.NodeSpec{}
		for _, tg := range g.Tags {
			if awssdk.ToString(tg.Key) == "eks:nodegroup-name" {
				group = awssdk.ToString(tg.Value)
				spec.NodeGroup = group
			}
		}
		for i, in := range g.Instances {
			spec.Name = fmt.Sprintf("%s-%d", group, i)
			spec.Zone = awssdk.ToString(in.AvailabilityZone)
			spec.InstanceType = awssdk.ToString(in.InstanceType)
			spec.ProviderID = "aws:///" + spec.Zone + "/" + awssdk.ToString(in.InstanceId)
			if _, err := env.CreateKwokNode(ctx, spec); err != nil {
				t.Fatal(err)
			}
			want[spec.Name] = group
			names = append(names, spec.Name)
		}
	}
	if len(names) < 4 {
		t.Fatalf("moto launched %d instances for the cluster's groups, want one per group at least", len(names))
	}
	if err := env.WaitForNodesReady(ctx, names...); err != nil {
		t.Fatal(err)
	}
	cfg, err := srv.Config(ctx, motoRegion)
	if err != nil {
		t.Fatal(err)
	}
	c := kmaws.NewClients(cfg)
	inv, err := discover.Run(ctx, discover.Sources{AutoScaling: c.AutoScaling, EC2: c.EC2, EKS: c.EKS, Kube: env.Client},
		discover.Options{ClusterName: "prod", Region: motoRegion})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range inv.Nodes {
		got[n.Name] = n.NodeGroup
		if !n.Ready || n.InstanceID == "" {
			t.Errorf("node %s: ready %v, instance %q", n.Name, n.Ready, n.InstanceID)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("nodes joined to groups = %v, want %v", got, want)
	}
}
