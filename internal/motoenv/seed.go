package motoenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

// Seeded is an account as moto holds it after Seed.
type Seeded struct {
	// Account is the seeded description with moto's names for everything
	// moto names (account, VPCs, subnets, security groups, launch templates,
	// a managed node group's Auto Scaling group), the fields moto generates
	// (ARNs, the OIDC issuer, CIDRs left empty, creation times), the
	// instances moto launched for each group, and the launch template EKS
	// makes for a managed node group's group. What the seed set stays as
	// set, also where moto dropped it, so that loading Account into awsfake
	// and comparing the two shows what moto lost. Parts moto serves from
	// its own data (instance types, offerings, spot prices, images, prices)
	// are kept for awsfake only.
	Account *awsfake.Account
	// IDs maps each seeded ID or name to moto's.
	IDs map[string]string
}

// ID returns moto's name for a seeded ID or name (the seeded one if moto
// kept it).
func (s *Seeded) ID(seeded string) string {
	if v, ok := s.IDs[seeded]; ok {
		return v
	}
	return seeded
}

// Seed creates an account's resources in moto through the real SDK:
// VPCs, subnets and security groups with their tags; launch templates
// with all their versions; EKS clusters and managed node groups; Auto
// Scaling groups with launch templates or mixed instances policies, tags
// and suspended processes (moto launches their instances); SSM
// parameters, IAM OIDC providers and SQS queues. cfg must point at moto.
// Anything else in the account (IAM roles and policies, EventBridge,
// access entries, launch configurations, instances outside a group) is
// refused: it would be in awsfake only.
func Seed(ctx context.Context, cfg awssdk.Config, acct *awsfake.Account) (*Seeded, error) {
	if acct.Region != "" && acct.Region != cfg.Region {
		return nil, fmt.Errorf("seed: the account is in %s, the client in %s", acct.Region, cfg.Region)
	}
	if err := refuseUnseedable(acct); err != nil {
		return nil, err
	}
	s := &seeder{
		ec2: ec2.NewFromConfig(cfg), asg: autoscaling.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg),
		iam: iam.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg), ssm: ssm.NewFromConfig(cfg),
		ids: map[string]string{}, names: map[string]string{},
	}
	out := &awsfake.Account{Region: cfg.Region, ID: AccountID}
	if acct.ID != "" && acct.ID != AccountID {
		s.ids[acct.ID] = AccountID
	}
	steps := []struct {
		what string
		fn   func(context.Context, *awsfake.Account, *awsfake.Account) error
	}{
		{"VPCs and subnets", s.subnets},
		{"security groups", s.securityGroups},
		{"launch templates", s.launchTemplates},
		{"EKS clusters and managed node groups", s.clusters},
		{"Auto Scaling groups", s.groups},
		{"instances", s.instances},
		{"SSM parameters", s.parameters},
		{"IAM OIDC providers", s.oidcProviders},
		{"SQS queues", s.queues},
	}
	for _, st := range steps {
		if err := st.fn(ctx, acct, out); err != nil {
			return nil, fmt.Errorf("seed moto: %s: %w", st.what, err)
		}
	}
	// Served by moto from its own data; kept for awsfake.
	out.EC2.InstanceTypes, out.EC2.InstanceTypeOfferings = acct.EC2.InstanceTypes, acct.EC2.InstanceTypeOfferings
	out.EC2.SpotPrices, out.EC2.Images, out.Pricing = acct.EC2.SpotPrices, acct.EC2.Images, acct.Pricing
	ids := make(map[string]string, len(s.ids)+len(s.names))
	for k, v := range s.ids {
		ids[k] = v
	}
	for k, v := range s.names {
		ids[k] = v
	}
	return &Seeded{Account: out, IDs: ids}, nil
}

func refuseUnseedable(a *awsfake.Account) error {
	var parts []string
	if len(a.IAM.Roles)+len(a.IAM.Policies)+len(a.IAM.InstanceProfiles) > 0 {
		parts = append(parts, "IAM roles, policies and instance profiles")
	}
	if len(a.EventBridge.Rules) > 0 {
		parts = append(parts, "EventBridge rules")
	}
	if len(a.EKSAccess.AccessEntries)+len(a.EKSAccess.PodIdentityAssociations) > 0 {
		parts = append(parts, "EKS access entries and pod identity associations (moto has no such API)")
	}
	if len(a.AutoScaling.LaunchConfigurations) > 0 {
		parts = append(parts, "launch configurations")
	}
	inGroup := map[string]bool{}
	for _, g := range a.AutoScaling.Groups {
		for _, in := range g.Instances {
			inGroup[awssdk.ToString(in.InstanceId)] = true
		}
	}
	for _, in := range a.EC2.Instances {
		if !inGroup[awssdk.ToString(in.InstanceId)] {
			parts = append(parts, "instance "+awssdk.ToString(in.InstanceId)+" outside an Auto Scaling group")
		}
	}
	if len(parts) > 0 {
		return fmt.Errorf("seed moto: not supported: %s", strings.Join(parts, "; "))
	}
	return nil
}

type seeder struct {
	ec2 *ec2.Client
	asg *autoscaling.Client
	eks *eks.Client
	iam *iam.Client
	sqs *sqs.Client
	ssm *ssm.Client
	// ids maps seeded IDs (and the account ID) to moto's; they are
	// rewritten wherever they appear as a whole token.
	ids map[string]string
	// names maps a managed node group's seeded Auto Scaling group name to
	// moto's; it is rewritten only where a group is named.
	names map[string]string
	// vpcs maps each seeded VPC id ("" for none named) to moto's.
	vpcs map[string]string
}

var idToken = regexp.MustCompile(`[A-Za-z0-9-]+`)

// rewrite returns v with every seeded ID replaced by moto's, wherever it
// appears as a token of a string (ARNs, comma-separated subnet lists).
func rewrite[T any](s *seeder, v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return out, err
	}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case string:
			return idToken.ReplaceAllStringFunc(x, func(tok string) string {
				if v, ok := s.ids[tok]; ok {
					return v
				}
				return tok
			})
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return x
	}
	if b, err = json.Marshal(walk(tree)); err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}

// overlay returns what moto generated with every field the seed set laid
// over it: the seed wins where it said something, moto fills the rest.
func overlay[T any](generated, seeded T) (T, error) {
	var out T
	g, err := toMap(generated)
	if err != nil {
		return out, err
	}
	sd, err := toMap(seeded)
	if err != nil {
		return out, err
	}
	for k, v := range sd {
		if !isZero(v) {
			g[k] = v
		}
	}
	b, err := json.Marshal(g)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	return m, json.Unmarshal(b, &m)
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func (s *seeder) subnets(ctx context.Context, in, out *awsfake.Account) error {
	// One VPC per seeded VPC id ("" for subnets and groups that name none),
	// its CIDR the /16 of its first subnet's.
	var vpcs []string
	wide := map[string]netip.Prefix{}
	note := func(id string, cidr *string) {
		if !slices.Contains(vpcs, id) {
			vpcs = append(vpcs, id)
		}
		if p, err := netip.ParsePrefix(awssdk.ToString(cidr)); err == nil && !wide[id].IsValid() {
			wide[id], _ = p.Addr().Prefix(16)
		}
	}
	for _, sn := range in.EC2.Subnets {
		note(awssdk.ToString(sn.VpcId), sn.CidrBlock)
	}
	for _, sg := range in.EC2.SecurityGroups {
		note(awssdk.ToString(sg.VpcId), nil)
	}
	s.vpcs = map[string]string{}
	for i, id := range vpcs {
		if !wide[id].IsValid() {
			wide[id] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i), 0, 0}), 16)
		}
		v, err := s.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: awssdk.String(wide[id].String())})
		if err != nil {
			return err
		}
		s.vpcs[id] = awssdk.ToString(v.Vpc.VpcId)
		if id != "" {
			s.ids[id] = s.vpcs[id]
		}
	}
	next := map[string]byte{}
	for _, sn := range in.EC2.Subnets {
		vpc := awssdk.ToString(sn.VpcId)
		cidr := awssdk.ToString(sn.CidrBlock)
		if cidr == "" { // 10.x.200.0/24, 10.x.201.0/24, ...
			b := wide[vpc].Addr().As4()
			b[2] = 200 + next[vpc]
			next[vpc]++
			cidr = netip.PrefixFrom(netip.AddrFrom4(b), 24).String()
		}
		created, err := s.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: awssdk.String(s.vpcs[vpc]), CidrBlock: awssdk.String(cidr), AvailabilityZone: sn.AvailabilityZone,
			TagSpecifications: ec2TagSpec(ec2types.ResourceTypeSubnet, sn.Tags),
		})
		if err != nil {
			return fmt.Errorf("subnet %s: %w", awssdk.ToString(sn.SubnetId), err)
		}
		s.ids[awssdk.ToString(sn.SubnetId)] = awssdk.ToString(created.Subnet.SubnetId)
		seeded, err := rewrite(s, sn)
		if err != nil {
			return err
		}
		seeded.VpcId = created.Subnet.VpcId
		merged, err := overlay(*created.Subnet, seeded)
		if err != nil {
			return err
		}
		out.EC2.Subnets = append(out.EC2.Subnets, merged)
	}
	return nil
}

func ec2TagSpec(rt ec2types.ResourceType, tags []ec2types.Tag) []ec2types.TagSpecification {
	if len(tags) == 0 {
		return nil
	}
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: tags}}
}

func (s *seeder) securityGroups(ctx context.Context, in, out *awsfake.Account) error {
	for _, sg := range in.EC2.SecurityGroups {
		id := awssdk.ToString(sg.GroupId)
		vpc := s.vpcs[awssdk.ToString(sg.VpcId)]
		name := awssdk.ToString(sg.GroupName)
		if name == "" {
			name = id
		}
		desc := awssdk.ToString(sg.Description)
		if desc == "" {
			desc = "seeded " + name
		}
		created, err := s.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: awssdk.String(name), Description: awssdk.String(desc), VpcId: awssdk.String(vpc),
			TagSpecifications: ec2TagSpec(ec2types.ResourceTypeSecurityGroup, sg.Tags),
		})
		if err != nil {
			return fmt.Errorf("security group %s: %w", id, err)
		}
		s.ids[id] = awssdk.ToString(created.GroupId)
		got, err := s.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{awssdk.ToString(created.GroupId)}})
		if err != nil || len(got.SecurityGroups) != 1 {
			return errors.Join(err, fmt.Errorf("security group %s: not found after create", id))
		}
		seeded, err := rewrite(s, sg)
		if err != nil {
			return err
		}
		seeded.VpcId = awssdk.String(vpc)
		merged, err := overlay(got.SecurityGroups[0], seeded)
		if err != nil {
			return err
		}
		out.EC2.SecurityGroups = append(out.EC2.SecurityGroups, merged)
	}
	return nil
}

func (s *seeder) launchTemplates(ctx context.Context, in, out *awsfake.Account) error {
	var order []string
	versions := map[string][]ec2types.LaunchTemplateVersion{}
	for _, v := range in.EC2.LaunchTemplateVersions {
		id := awssdk.ToString(v.LaunchTemplateId)
		if _, ok := versions[id]; !ok {
			order = append(order, id)
		}
		versions[id] = append(versions[id], v)
	}
	for _, id := range order {
		vs := versions[id]
		slices.SortFunc(vs, func(a, b ec2types.LaunchTemplateVersion) int {
			return int(awssdk.ToInt64(a.VersionNumber) - awssdk.ToInt64(b.VersionNumber))
		})
		if err := s.launchTemplate(ctx, id, vs); err != nil {
			return fmt.Errorf("launch template %s: %w", id, err)
		}
		got, err := s.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: awssdk.String(s.ids[id])})
		if err != nil {
			return err
		}
		for i, mv := range got.LaunchTemplateVersions {
			if i >= len(vs) {
				break
			}
			seeded, err := rewrite(s, vs[i])
			if err != nil {
				return err
			}
			merged, err := overlay(mv, seeded)
			if err != nil {
				return err
			}
			out.EC2.LaunchTemplateVersions = append(out.EC2.LaunchTemplateVersions, merged)
		}
	}
	return nil
}

func (s *seeder) launchTemplate(ctx context.Context, id string, vs []ec2types.LaunchTemplateVersion) error {
	name := awssdk.ToString(vs[0].LaunchTemplateName)
	if name == "" {
		name = id
	}
	defaultVersion := int64(0)
	for i, v := range vs {
		if i > 0 && v.LaunchTemplateData != nil && v.LaunchTemplateData.UserData != nil {
			// moto 5.2.1 keeps CreateLaunchTemplateVersion's user data
			// undecoded and answers HTTP 500 when a group launches from it.
			return fmt.Errorf("version %d has user data, which moto cannot launch from when it is not version 1 (moto 5.2.1 gap)", awssdk.ToInt64(v.VersionNumber))
		}
		data, err := rewrite(s, v.LaunchTemplateData)
		if err != nil {
			return err
		}
		// The request and response shapes share their field names.
		var req ec2types.RequestLaunchTemplateData
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return err
		}
		if i == 0 {
			created, err := s.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: awssdk.String(name), LaunchTemplateData: &req})
			if err != nil {
				return err
			}
			s.ids[id] = awssdk.ToString(created.LaunchTemplate.LaunchTemplateId)
		} else if _, err := s.ec2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: awssdk.String(s.ids[id]), LaunchTemplateData: &req}); err != nil {
			return err
		}
		if awssdk.ToBool(v.DefaultVersion) {
			defaultVersion = int64(i + 1)
		}
	}
	if defaultVersion > 1 {
		_, err := s.ec2.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: awssdk.String(s.ids[id]), DefaultVersion: awssdk.String(strconv.FormatInt(defaultVersion, 10))})
		return err
	}
	return nil
}

func (s *seeder) clusters(ctx context.Context, in, out *awsfake.Account) error {
	for _, c := range in.EKS.Clusters {
		c, err := rewrite(s, c)
		if err != nil {
			return err
		}
		cl := c.Cluster
		name := awssdk.ToString(cl.Name)
		req := &eks.CreateClusterInput{Name: cl.Name, Version: cl.Version, Tags: cl.Tags,
			RoleArn: awssdk.String(orDefault(awssdk.ToString(cl.RoleArn), "arn:aws:iam::"+AccountID+":role/eks-cluster-"+name))}
		if v := cl.ResourcesVpcConfig; v != nil {
			req.ResourcesVpcConfig = &ekstypes.VpcConfigRequest{SubnetIds: v.SubnetIds, SecurityGroupIds: v.SecurityGroupIds,
				EndpointPrivateAccess: awssdk.Bool(v.EndpointPrivateAccess), EndpointPublicAccess: awssdk.Bool(v.EndpointPublicAccess)}
		} else {
			req.ResourcesVpcConfig = &ekstypes.VpcConfigRequest{}
		}
		if a := cl.AccessConfig; a != nil {
			req.AccessConfig = &ekstypes.CreateAccessConfigRequest{AuthenticationMode: a.AuthenticationMode}
		}
		created, err := s.eks.CreateCluster(ctx, req)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		merged, err := overlay(*created.Cluster, cl)
		if err != nil {
			return err
		}
		// Generated by EKS, not chosen by the seed.
		merged.Arn, merged.Identity, merged.Endpoint = created.Cluster.Arn, created.Cluster.Identity, created.Cluster.Endpoint
		oc := awsfake.EKSCluster{Cluster: merged}
		for _, ng := range c.Nodegroups {
			got, err := s.nodegroup(ctx, name, ng)
			if err != nil {
				return fmt.Errorf("cluster %s: node group %s: %w", name, awssdk.ToString(ng.NodegroupName), err)
			}
			oc.Nodegroups = append(oc.Nodegroups, got)
		}
		out.EKS.Clusters = append(out.EKS.Clusters, oc)
	}
	return nil
}

func (s *seeder) nodegroup(ctx context.Context, cluster string, ng ekstypes.Nodegroup) (ekstypes.Nodegroup, error) {
	req := &eks.CreateNodegroupInput{
		ClusterName: awssdk.String(cluster), NodegroupName: ng.NodegroupName, Subnets: ng.Subnets,
		NodeRole:      awssdk.String(orDefault(awssdk.ToString(ng.NodeRole), "arn:aws:iam::"+AccountID+":role/eks-node")),
		ScalingConfig: ng.ScalingConfig, InstanceTypes: ng.InstanceTypes, AmiType: ng.AmiType, CapacityType: ng.CapacityType,
		Labels: ng.Labels, Taints: ng.Taints, Tags: ng.Tags, DiskSize: ng.DiskSize, ReleaseVersion: ng.ReleaseVersion, Version: ng.Version,
	}
	if lt := ng.LaunchTemplate; lt != nil {
		req.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Id: lt.Id, Name: lt.Name, Version: lt.Version}
	}
	created, err := s.eks.CreateNodegroup(ctx, req)
	if err != nil {
		return ekstypes.Nodegroup{}, err
	}
	// The Auto Scaling group behind it is named by EKS; moto names it but
	// does not create it (Auto Scaling does not know it): s.groups does.
	if r := ng.Resources; r != nil && len(r.AutoScalingGroups) == 1 {
		if mr := created.Nodegroup.Resources; mr != nil && len(mr.AutoScalingGroups) == 1 {
			s.names[awssdk.ToString(r.AutoScalingGroups[0].Name)] = awssdk.ToString(mr.AutoScalingGroups[0].Name)
		}
	}
	seeded := ng
	seeded.Resources = nil
	merged, err := overlay(*created.Nodegroup, seeded)
	if err != nil {
		return ekstypes.Nodegroup{}, err
	}
	return merged, nil
}

func (s *seeder) groups(ctx context.Context, in, out *awsfake.Account) error {
	for _, g := range in.AutoScaling.Groups {
		g, err := rewrite(s, g)
		if err != nil {
			return err
		}
		seededName := awssdk.ToString(g.AutoScalingGroupName)
		name := seededName
		if n, ok := s.names[seededName]; ok {
			name = n
		}
		req := &autoscaling.CreateAutoScalingGroupInput{
			AutoScalingGroupName: awssdk.String(name), MinSize: g.MinSize, MaxSize: g.MaxSize, DesiredCapacity: g.DesiredCapacity,
			VPCZoneIdentifier: g.VPCZoneIdentifier, LaunchTemplate: g.LaunchTemplate, MixedInstancesPolicy: g.MixedInstancesPolicy,
			CapacityRebalance: g.CapacityRebalance, HealthCheckType: g.HealthCheckType, TerminationPolicies: g.TerminationPolicies,
		}
		if req.VPCZoneIdentifier == nil {
			req.AvailabilityZones = g.AvailabilityZones
		}
		if req.LaunchTemplate == nil && req.MixedInstancesPolicy == nil {
			// A managed node group's group: EKS gives it a launch template of its own.
			lt, err := s.eksLaunchTemplate(ctx, name, in, out)
			if err != nil {
				return fmt.Errorf("group %s: %w", seededName, err)
			}
			req.LaunchTemplate = lt
			g.LaunchTemplate = lt
		}
		for _, t := range g.Tags {
			req.Tags = append(req.Tags, astypes.Tag{Key: t.Key, Value: t.Value, PropagateAtLaunch: t.PropagateAtLaunch,
				ResourceId: awssdk.String(name), ResourceType: awssdk.String("auto-scaling-group")})
		}
		if _, err := s.asg.CreateAutoScalingGroup(ctx, req); err != nil {
			return fmt.Errorf("group %s: %w", seededName, err)
		}
		if len(g.SuspendedProcesses) > 0 {
			var procs []string
			for _, p := range g.SuspendedProcesses {
				procs = append(procs, awssdk.ToString(p.ProcessName))
			}
			if _, err := s.asg.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: awssdk.String(name), ScalingProcesses: procs}); err != nil {
				return fmt.Errorf("group %s: %w", seededName, err)
			}
		}
		got, err := s.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		if err != nil || len(got.AutoScalingGroups) != 1 {
			return errors.Join(err, fmt.Errorf("group %s: not found after create", name))
		}
		mg := got.AutoScalingGroups[0]
		// The instances are moto's: map the seeded ones onto them in order.
		for i, sin := range g.Instances {
			if i < len(mg.Instances) {
				s.ids[awssdk.ToString(sin.InstanceId)] = awssdk.ToString(mg.Instances[i].InstanceId)
			}
		}
		seeded := g
		seeded.AutoScalingGroupName, seeded.Instances, seeded.AutoScalingGroupARN = awssdk.String(name), nil, nil
		for i := range seeded.Tags {
			seeded.Tags[i].ResourceId = awssdk.String(name)
		}
		merged, err := overlay(mg, seeded)
		if err != nil {
			return err
		}
		merged.Instances = mg.Instances
		out.AutoScaling.Groups = append(out.AutoScaling.Groups, merged)
	}
	return nil
}

// eksLaunchTemplate makes the launch template EKS gives a managed node
// group's Auto Scaling group: the node group's first instance type.
func (s *seeder) eksLaunchTemplate(ctx context.Context, group string, in, out *awsfake.Account) (*astypes.LaunchTemplateSpecification, error) {
	instanceType := "m5.large"
	for _, c := range out.EKS.Clusters {
		for _, ng := range c.Nodegroups {
			if r := ng.Resources; r != nil && len(r.AutoScalingGroups) == 1 && awssdk.ToString(r.AutoScalingGroups[0].Name) == group && len(ng.InstanceTypes) > 0 {
				instanceType = ng.InstanceTypes[0]
			}
		}
	}
	name := group
	created, err := s.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: awssdk.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: awssdk.String("ami-0eks0000000000000"), InstanceType: ec2types.InstanceType(instanceType)}})
	if err != nil {
		return nil, fmt.Errorf("the launch template EKS would create: %w", err)
	}
	id := awssdk.ToString(created.LaunchTemplate.LaunchTemplateId)
	got, err := s.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: awssdk.String(id)})
	if err != nil {
		return nil, err
	}
	out.EC2.LaunchTemplateVersions = append(out.EC2.LaunchTemplateVersions, got.LaunchTemplateVersions...)
	return &astypes.LaunchTemplateSpecification{LaunchTemplateId: awssdk.String(id), Version: awssdk.String("1")}, nil
}

// instances copies moto's instances, all launched by the groups, and the
// free addresses they left in each subnet.
func (s *seeder) instances(ctx context.Context, _, out *awsfake.Account) error {
	p := ec2.NewDescribeInstancesPaginator(s.ec2, &ec2.DescribeInstancesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, r := range page.Reservations {
			out.EC2.Instances = append(out.EC2.Instances, r.Instances...)
		}
	}
	for i := range out.EC2.Subnets {
		sn := &out.EC2.Subnets[i]
		got, err := s.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{awssdk.ToString(sn.SubnetId)}})
		if err != nil || len(got.Subnets) != 1 {
			return errors.Join(err, fmt.Errorf("subnet %s: not found", awssdk.ToString(sn.SubnetId)))
		}
		sn.AvailableIpAddressCount = got.Subnets[0].AvailableIpAddressCount
	}
	return nil
}

func (s *seeder) parameters(ctx context.Context, in, out *awsfake.Account) error {
	for _, p := range in.SSM.Parameters {
		p, err := rewrite(s, p)
		if err != nil {
			return err
		}
		typ := p.Type
		if typ == "" {
			typ = ssmtypes.ParameterTypeString
		}
		if _, err := s.ssm.PutParameter(ctx, &ssm.PutParameterInput{Name: p.Name, Value: p.Value, Type: typ, DataType: p.DataType}); err != nil {
			return fmt.Errorf("parameter %s: %w", awssdk.ToString(p.Name), err)
		}
		out.SSM.Parameters = append(out.SSM.Parameters, p)
	}
	return nil
}

func (s *seeder) oidcProviders(ctx context.Context, in, out *awsfake.Account) error {
	for _, p := range in.IAM.OIDCProviders {
		p, err := rewrite(s, p)
		if err != nil {
			return err
		}
		created, err := s.iam.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{
			Url: awssdk.String("https://" + strings.TrimPrefix(p.URL, "https://")), ClientIDList: p.ClientIDList,
			ThumbprintList: []string{strings.Repeat("9", 40)}, Tags: slices.Clone(p.Tags),
		})
		if err != nil {
			return fmt.Errorf("OIDC provider %s: %w", p.URL, err)
		}
		p.ARN = awssdk.ToString(created.OpenIDConnectProviderArn)
		out.IAM.OIDCProviders = append(out.IAM.OIDCProviders, p)
	}
	return nil
}

func (s *seeder) queues(ctx context.Context, in, out *awsfake.Account) error {
	for _, q := range in.SQS.Queues {
		q, err := rewrite(s, q)
		if err != nil {
			return err
		}
		if _, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(q.Name), Attributes: q.Attributes, Tags: q.Tags}); err != nil {
			return fmt.Errorf("queue %s: %w", q.Name, err)
		}
		out.SQS.Queues = append(out.SQS.Queues, q)
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
