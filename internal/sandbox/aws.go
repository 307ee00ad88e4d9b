package sandbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"sort"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// startAWS seeds the wire-level AWS fake with the account (EKS cluster and
// managed node groups, ASGs with their tags, mixed-instances policies,
// launch templates and instances, EC2 instances, subnets, security groups,
// instance types and spot prices) and starts it on loopback.
func (s *Sandbox) startAWS(inv inventory.Inventory) {
	s.aws = awsfake.New(s.account(inv))
	s.awsCfg = awssdk.Config{
		Region:       s.cloud.Cluster.Region,
		BaseEndpoint: awssdk.String(s.aws.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIASANDBOX", "sandbox", ""),
	}
	s.cloud.asg = autoscaling.NewFromConfig(s.awsCfg)
	s.cloud.eks = eks.NewFromConfig(s.awsCfg)
}

// AWSConfig is the SDK configuration that points every client at the
// sandbox's AWS fake; build real clients from it (autoscaling.NewFromConfig…).
func (s *Sandbox) AWSConfig() awssdk.Config { return s.awsCfg }

// Close stops the AWS fake.
func (s *Sandbox) Close() {
	if s.aws != nil {
		s.aws.Close()
	}
}

func (s *Sandbox) account(inv inventory.Inventory) *awsfake.Account {
	c := s.cloud.Cluster
	a := &awsfake.Account{ID: c.AccountID, Region: c.Region}
	cl := ekstypes.Cluster{
		Name: awssdk.String(c.Name), Arn: awssdk.String(c.ARN), Version: awssdk.String(c.Version), Endpoint: awssdk.String(c.Endpoint),
		Status: ekstypes.ClusterStatusActive, Tags: c.Tags,
		AccessConfig:            &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationMode(c.AuthenticationMode)},
		ResourcesVpcConfig:      &ekstypes.VpcConfigResponse{VpcId: awssdk.String(c.VPCID), SubnetIds: c.SubnetIDs, ClusterSecurityGroupId: awssdk.String(c.ClusterSecurityGroupID), SecurityGroupIds: c.SecurityGroupIDs},
		KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{ServiceIpv4Cidr: awssdk.String(c.ServiceIPv4CIDR)},
	}
	if c.OIDCIssuer != "" {
		cl.Identity = &ekstypes.Identity{Oidc: &ekstypes.OIDC{Issuer: awssdk.String(c.OIDCIssuer)}}
	}
	ec := awsfake.EKSCluster{Cluster: cl}
	types := map[string]bool{}
	for _, name := range s.cloud.groupNames() {
		g := s.cloud.groups[name]
		asgName := g.ASGName
		tags := map[string]string{}
		for k, v := range g.Tags {
			tags[k] = v
		}
		lt := &astypes.LaunchTemplateSpecification{LaunchTemplateId: awssdk.String("lt-" + name), LaunchTemplateName: awssdk.String(name), Version: awssdk.String("1")}
		if g.Kind == inventory.Managed {
			tags["eks:cluster-name"], tags["eks:nodegroup-name"] = c.Name, g.Name
			ng := ekstypes.Nodegroup{
				NodegroupName: awssdk.String(g.Name), ClusterName: awssdk.String(c.Name), Status: ekstypes.NodegroupStatusActive,
				NodegroupArn:  awssdk.String(fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s", c.Region, c.AccountID, c.Name, g.Name)),
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(g.MinSize), MaxSize: awssdk.Int32(g.MaxSize), DesiredSize: awssdk.Int32(g.DesiredSize)},
				InstanceTypes: g.InstanceTypes, CapacityType: ekstypes.CapacityTypesOnDemand, AmiType: ekstypes.AMITypes(g.AMIType),
				NodeRole: awssdk.String(g.NodeRoleARN), Labels: g.Labels, Subnets: g.SubnetIDs, Tags: g.Tags,
				Resources: &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: awssdk.String(asgName)}}},
			}
			if g.CapacityType == inventory.CapacitySpot {
				ng.CapacityType = ekstypes.CapacityTypesSpot
			}
			for _, t := range g.Taints {
				ng.Taints = append(ng.Taints, kmaws.EKSTaint(t))
			}
			ec.Nodegroups = append(ec.Nodegroups, ng)
		}
		asg := astypes.AutoScalingGroup{
			AutoScalingGroupName: awssdk.String(asgName),
			AutoScalingGroupARN:  awssdk.String(fmt.Sprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s", c.Region, c.AccountID, asgName)),
			MinSize:              awssdk.Int32(g.MinSize), MaxSize: awssdk.Int32(g.MaxSize), DesiredCapacity: awssdk.Int32(g.DesiredSize),
			AvailabilityZones: g.Zones, VPCZoneIdentifier: awssdk.String(strings.Join(g.SubnetIDs, ",")),
		}
		for _, k := range sortedStringKeys(tags) {
			asg.Tags = append(asg.Tags, astypes.TagDescription{Key: awssdk.String(k), Value: awssdk.String(tags[k]), ResourceId: awssdk.String(asgName),
				ResourceType: awssdk.String("auto-scaling-group"), PropagateAtLaunch: awssdk.Bool(true)})
		}
		if g.Mixed != nil {
			mp := &astypes.MixedInstancesPolicy{
				LaunchTemplate: &astypes.LaunchTemplate{LaunchTemplateSpecification: lt},
				InstancesDistribution: &astypes.InstancesDistribution{OnDemandBaseCapacity: awssdk.Int32(g.Mixed.OnDemandBaseCapacity),
					OnDemandPercentageAboveBaseCapacity: awssdk.Int32(g.Mixed.OnDemandPercentageAboveBaseCapacity),
					SpotAllocationStrategy:              awssdk.String(g.Mixed.SpotAllocationStrategy)},
			}
			for _, t := range g.InstanceTypes {
				mp.LaunchTemplate.Overrides = append(mp.LaunchTemplate.Overrides, astypes.LaunchTemplateOverrides{InstanceType: awssdk.String(t)})
			}
			asg.MixedInstancesPolicy = mp
		} else {
			asg.LaunchTemplate = lt
		}
		first := "m5.large"
		if len(g.InstanceTypes) > 0 {
			first = g.InstanceTypes[0]
		}
		ltd := &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String(amiID(g)), InstanceType: ec2types.InstanceType(first)}
		if g.Kind != inventory.Managed {
			ltd.UserData = awssdk.String(base64.StdEncoding.EncodeToString([]byte(nodeadmUserData(c, g))))
		}
		a.EC2.LaunchTemplateVersions = append(a.EC2.LaunchTemplateVersions, ec2types.LaunchTemplateVersion{
			LaunchTemplateId: lt.LaunchTemplateId, LaunchTemplateName: lt.LaunchTemplateName, VersionNumber: awssdk.Int64(1), DefaultVersion: awssdk.Bool(true),
			LaunchTemplateData: ltd,
		})
		a.EC2.Images = append(a.EC2.Images, ec2types.Image{ImageId: awssdk.String(amiID(g)), Architecture: ec2types.ArchitectureValuesX8664,
			Name: awssdk.String("amazon-eks-node-al2023-x86_64-standard-" + c.Version + "-v20261101"), OwnerId: awssdk.String("602401143452"),
			State: ec2types.ImageStateAvailable})
		for _, in := range s.cloud.groupInstances(name) {
			types[in.InstanceType] = true
			asg.Instances = append(asg.Instances, astypes.Instance{
				InstanceId: awssdk.String(in.ID), InstanceType: awssdk.String(in.InstanceType), AvailabilityZone: awssdk.String(in.Zone),
				LifecycleState: astypes.LifecycleStateInService, HealthStatus: awssdk.String("Healthy"), ProtectedFromScaleIn: awssdk.Bool(false),
			})
			ei := ec2types.Instance{
				InstanceId: awssdk.String(in.ID), InstanceType: ec2types.InstanceType(in.InstanceType),
				Placement:      &ec2types.Placement{AvailabilityZone: awssdk.String(in.Zone)},
				State:          &ec2types.InstanceState{Code: awssdk.Int32(16), Name: ec2types.InstanceStateNameRunning},
				PrivateDnsName: awssdk.String(in.hostname), ImageId: awssdk.String(amiID(g)),
				Tags: []ec2types.Tag{{Key: awssdk.String("aws:autoscaling:groupName"), Value: awssdk.String(asgName)}},
			}
			if in.CapacityType == inventory.CapacitySpot {
				ei.InstanceLifecycle = ec2types.InstanceLifecycleTypeSpot
			}
			a.EC2.Instances = append(a.EC2.Instances, ei)
		}
		for _, t := range g.InstanceTypes {
			types[t] = true
		}
		a.AutoScaling.Groups = append(a.AutoScaling.Groups, asg)
	}
	a.EKS.Clusters = []awsfake.EKSCluster{ec}
	for _, sn := range inv.Subnets {
		a.EC2.Subnets = append(a.EC2.Subnets, ec2types.Subnet{SubnetId: awssdk.String(sn.ID), AvailabilityZone: awssdk.String(sn.Zone),
			VpcId: awssdk.String(sn.VPCID), CidrBlock: awssdk.String(sn.CIDR), AvailableIpAddressCount: awssdk.Int32(sn.AvailableIPs), Tags: ec2Tags(sn.Tags)})
	}
	for _, sg := range inv.SecurityGroups {
		a.EC2.SecurityGroups = append(a.EC2.SecurityGroups, ec2types.SecurityGroup{GroupId: awssdk.String(sg.ID), GroupName: awssdk.String(sg.Name),
			VpcId: awssdk.String(sg.VPCID), Tags: ec2Tags(sg.Tags)})
	}
	for _, t := range sortedStringKeys(types) {
		it, ok := s.cat.Get(t)
		if !ok {
			continue
		}
		arch := ec2types.ArchitectureTypeX8664
		if it.Arch == "arm64" {
			arch = ec2types.ArchitectureTypeArm64
		}
		a.EC2.InstanceTypes = append(a.EC2.InstanceTypes, ec2types.InstanceTypeInfo{
			InstanceType: ec2types.InstanceType(t), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(int32(it.VCPU))},
			MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(it.MemoryMiB)},
			ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
		})
		for _, z := range s.zones() {
			a.EC2.SpotPrices = append(a.EC2.SpotPrices, ec2types.SpotPrice{InstanceType: ec2types.InstanceType(t), AvailabilityZone: awssdk.String(z),
				ProductDescription: ec2types.RIProductDescription("Linux/UNIX"), Timestamp: awssdk.Time(s.Now().Add(-10 * 60e9)),
				SpotPrice: awssdk.String(strconv.FormatFloat(s.price(t, z, inventory.CapacitySpot), 'f', 4, 64))})
		}
	}
	return a
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range sortedStringKeys(m) {
		out = append(out, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}

func sortedStringKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// asgView is what the sandbox reads back from the fake each tick.
type asgView struct {
	min, max, desired int32
	instances         []astypes.Instance
	// managed is set for a managed node group's ASG; taints and labels
	// are then its config's, which EKS gives the nodes it launches.
	managed bool
	taints  []corev1.Taint
	labels  map[string]string
}

// readASGs snapshots the fake's ASGs (sizes and instances) and managed
// node groups' taints under its lock.
func (s *Sandbox) readASGs() map[string]asgView {
	out := map[string]asgView{}
	if s.aws == nil {
		return out
	}
	s.aws.Account(func(a *awsfake.Account) {
		for _, g := range a.AutoScaling.Groups {
			v := asgView{min: deref32(g.MinSize), max: deref32(g.MaxSize), desired: deref32(g.DesiredCapacity)}
			v.instances = append(v.instances, g.Instances...)
			out[awssdk.ToString(g.AutoScalingGroupName)] = v
		}
		for _, c := range a.EKS.Clusters {
			for _, ng := range c.Nodegroups {
				if ng.Resources == nil {
					continue
				}
				for _, asg := range ng.Resources.AutoScalingGroups {
					v := out[awssdk.ToString(asg.Name)]
					v.managed, v.taints, v.labels = true, nil, maps.Clone(ng.Labels)
					for _, t := range ng.Taints {
						v.taints = append(v.taints, kmaws.KubeTaint(t))
					}
					out[awssdk.ToString(asg.Name)] = v
				}
			}
		}
	})
	return out
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// UpdateGroupSize sets a node group's min, max and desired size through
// the AWS API, as the rollout does: EKS UpdateNodegroupConfig for a
// managed group, UpdateAutoScalingGroup for a self-managed one. The ASG
// launches or terminates instances; the sandbox mirrors them as nodes.
func (c *Cloud) UpdateGroupSize(ctx context.Context, name string, min, max, desired int32) error {
	g, ok := c.groups[name]
	if !ok {
		return fmt.Errorf("node group %q not found in the sandbox account; known: %s", name, strings.Join(c.groupNames(), ", "))
	}
	if min < 0 || min > desired || desired > max {
		return fmt.Errorf("node group %s: need 0 <= min (%d) <= desired (%d) <= max (%d)", name, min, desired, max)
	}
	if c.asg == nil {
		return fmt.Errorf("node group %s: the sandbox's AWS endpoint is not running (call Load first)", name)
	}
	if g.Kind == inventory.Managed {
		_, err := c.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: awssdk.String(c.Cluster.Name), NodegroupName: awssdk.String(name),
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(min), MaxSize: awssdk.Int32(max), DesiredSize: awssdk.Int32(desired)}})
		if err != nil {
			return fmt.Errorf("update managed node group %s: %w", name, err)
		}
	} else {
		_, err := c.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(g.ASGName),
			MinSize: awssdk.Int32(min), MaxSize: awssdk.Int32(max), DesiredCapacity: awssdk.Int32(desired)})
		if err != nil {
			return fmt.Errorf("update Auto Scaling group %s: %w", g.ASGName, err)
		}
	}
	g.MinSize, g.MaxSize, g.DesiredSize = min, max, desired
	return nil
}

// amiID is the AMI a group's launch template runs.
func amiID(g *inventory.NodeGroup) string {
	if g.AMIID != "" {
		return g.AMIID
	}
	return "ami-0eks" + fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(g.Name)))
}

// nodeadmUserData is the AL2023 user data of a self-managed group: a
// nodeadm NodeConfig whose kubelet flags carry the group's labels and taints.
func nodeadmUserData(c inventory.Cluster, g *inventory.NodeGroup) string {
	var flags []string
	if len(g.Labels) > 0 {
		var kv []string
		for _, k := range sortedStringKeys(g.Labels) {
			kv = append(kv, k+"="+g.Labels[k])
		}
		flags = append(flags, "--node-labels="+strings.Join(kv, ","))
	}
	if len(g.Taints) > 0 {
		var ts []string
		for _, t := range g.Taints {
			ts = append(ts, t.Key+"="+t.Value+":"+string(t.Effect))
		}
		flags = append(flags, "--register-with-taints="+strings.Join(ts, ","))
	}
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\n")
	fmt.Fprintf(&b, "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: %s\n    apiServerEndpoint: %s\n    certificateAuthority: LS0tLS1CRUdJTi1TQU5EQk9YLUNBLS0tLS0=\n    cidr: %s\n", c.Name, c.Endpoint, c.ServiceIPv4CIDR)
	if len(flags) > 0 {
		b.WriteString("  kubelet:\n    flags:\n")
		for _, f := range flags {
			fmt.Fprintf(&b, "    - %s\n", f)
		}
	}
	b.WriteString("\n--BOUNDARY--\n")
	return b.String()
}

// AccountCopy is a deep copy of the AWS fake's account as it is now (after
// Load: the seeded groups, instances, subnets, prices), to seed another
// fake with the same account — the demo on a real control plane.
func (s *Sandbox) AccountCopy() (*awsfake.Account, error) {
	if s.aws == nil {
		return nil, fmt.Errorf("the sandbox has no account yet: call Load first")
	}
	var b []byte
	var err error
	s.aws.Account(func(a *awsfake.Account) { b, err = json.Marshal(a) })
	if err != nil {
		return nil, fmt.Errorf("copy the sandbox's account: %w", err)
	}
	var out awsfake.Account
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("copy the sandbox's account: %w", err)
	}
	return &out, nil
}
