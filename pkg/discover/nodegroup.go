package discover

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// eks reads the cluster and its managed node groups.
func (d *run) eks(ctx context.Context) error {
	d.mngByASG = map[string]string{}
	out, err := d.src.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &d.opts.ClusterName})
	if err != nil {
		return fmt.Errorf("cluster %s: %w", d.opts.ClusterName, err)
	}
	if cl := out.Cluster; cl != nil {
		c := &d.inv.Cluster
		c.ARN, c.Version, c.Endpoint, c.Tags = deref(cl.Arn), deref(cl.Version), deref(cl.Endpoint), cl.Tags
		if cl.AccessConfig != nil {
			c.AuthenticationMode = string(cl.AccessConfig.AuthenticationMode)
		}
		if cl.Identity != nil && cl.Identity.Oidc != nil {
			c.OIDCIssuer = deref(cl.Identity.Oidc.Issuer)
		}
		if v := cl.ResourcesVpcConfig; v != nil {
			c.VPCID, c.SubnetIDs, c.ClusterSecurityGroupID, c.SecurityGroupIDs = deref(v.VpcId), v.SubnetIds, deref(v.ClusterSecurityGroupId), v.SecurityGroupIds
		}
		if k := cl.KubernetesNetworkConfig; k != nil {
			c.ServiceIPv4CIDR = deref(k.ServiceIpv4Cidr)
		}
		if arn := deref(cl.Arn); c.AccountID == "" && strings.Count(arn, ":") >= 5 {
			c.AccountID = strings.Split(arn, ":")[4]
		}
	}
	p := eks.NewListNodegroupsPaginator(d.src.EKS, &eks.ListNodegroupsInput{ClusterName: &d.opts.ClusterName})
	var names []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		names = append(names, page.Nodegroups...)
	}
	for _, name := range names { // one call per managed node group, never per node
		out, err := d.src.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &d.opts.ClusterName, NodegroupName: &name})
		if err != nil {
			return fmt.Errorf("node group %s: %w", name, err)
		}
		ng := nodeGroupFromMNG(out.Nodegroup)
		d.inv.NodeGroups = append(d.inv.NodeGroups, ng)
		if out.Nodegroup.Resources != nil {
			for _, a := range out.Nodegroup.Resources.AutoScalingGroups {
				d.mngByASG[deref(a.Name)] = ng.Name
			}
		}
	}
	return d.fargateProfiles(ctx)
}

// fargateProfiles reads the cluster's Fargate profiles: one that selects
// the Karpenter controller's namespace is where the controller lives.
func (d *run) fargateProfiles(ctx context.Context) error {
	p := eks.NewListFargateProfilesPaginator(d.src.EKS, &eks.ListFargateProfilesInput{ClusterName: &d.opts.ClusterName})
	var names []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list Fargate profiles: %w", err)
		}
		names = append(names, page.FargateProfileNames...)
	}
	sort.Strings(names)
	for _, name := range names {
		out, err := d.src.EKS.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: &d.opts.ClusterName, FargateProfileName: &name})
		if err != nil {
			return fmt.Errorf("describe Fargate profile %s: %w", name, err)
		}
		fp := inventory.FargateProfile{Name: name}
		if f := out.FargateProfile; f != nil {
			fp.Status = string(f.Status)
			for _, s := range f.Selectors {
				fp.Selectors = append(fp.Selectors, inventory.FargateSelector{Namespace: deref(s.Namespace), Labels: s.Labels})
			}
		}
		d.inv.FargateProfiles = append(d.inv.FargateProfiles, fp)
	}
	return nil
}

func nodeGroupFromMNG(n *ekstypes.Nodegroup) inventory.NodeGroup {
	ng := inventory.NodeGroup{
		Name: deref(n.NodegroupName), Kind: inventory.Managed, ARN: deref(n.NodegroupArn),
		InstanceTypes: n.InstanceTypes, SubnetIDs: n.Subnets, AMIType: string(n.AmiType),
		ReleaseVersion: deref(n.ReleaseVersion), NodeRoleARN: deref(n.NodeRole), Labels: n.Labels,
		CapacityType: inventory.CapacityOnDemand, Tags: n.Tags,
	}
	if n.CapacityType == ekstypes.CapacityTypesSpot {
		ng.CapacityType = inventory.CapacitySpot
	}
	if s := n.ScalingConfig; s != nil {
		ng.MinSize, ng.MaxSize, ng.DesiredSize = deref(s.MinSize), deref(s.MaxSize), deref(s.DesiredSize)
	}
	if u := n.UpdateConfig; u != nil {
		ng.MaxUnavailable, ng.MaxUnavailablePercentage = u.MaxUnavailable, u.MaxUnavailablePercentage
	}
	for _, t := range n.Taints {
		ng.Taints = append(ng.Taints, kmaws.KubeTaint(t))
	}
	if lt := n.LaunchTemplate; lt != nil {
		ng.LaunchTemplate = &inventory.LaunchTemplate{ID: deref(lt.Id), Name: deref(lt.Name), Version: deref(lt.Version)}
	}
	ng.Arch, ng.OS = archOS(string(n.AmiType))
	return ng
}

func archOS(amiType string) (arch, os string) {
	arch, os = "amd64", "linux"
	if strings.Contains(amiType, "ARM") || strings.Contains(amiType, "arm64") {
		arch = "arm64"
	}
	if strings.HasPrefix(amiType, "WINDOWS") {
		os = "windows"
	}
	return arch, os
}

// nodeGroupFromASG reads a self-managed group (or the ASG side of a
// managed one).
func nodeGroupFromASG(g astypes.AutoScalingGroup) inventory.NodeGroup {
	tags := asgTagMap(g.Tags)
	ng := inventory.NodeGroup{
		Name: deref(g.AutoScalingGroupName), Kind: inventory.SelfManaged, ASGName: deref(g.AutoScalingGroupName),
		ARN: deref(g.AutoScalingGroupARN), MinSize: deref(g.MinSize), MaxSize: deref(g.MaxSize), DesiredSize: deref(g.DesiredCapacity),
		Zones: append([]string(nil), g.AvailabilityZones...), SubnetIDs: splitCSV(deref(g.VPCZoneIdentifier)),
		LaunchConfiguration: deref(g.LaunchConfigurationName), NewInstancesProtectedFromScaleIn: deref(g.NewInstancesProtectedFromScaleIn),
		CapacityType: inventory.CapacityOnDemand, Tags: tags,
	}
	sort.Strings(ng.Zones)
	for _, sp := range g.SuspendedProcesses {
		ng.SuspendedProcesses = append(ng.SuspendedProcesses, deref(sp.ProcessName))
	}
	sort.Strings(ng.SuspendedProcesses)
	if m := g.MixedInstancesPolicy; m != nil {
		if dist := m.InstancesDistribution; dist != nil {
			ng.Mixed = &inventory.MixedPolicy{
				OnDemandBaseCapacity: deref(dist.OnDemandBaseCapacity), OnDemandPercentageAboveBaseCapacity: deref(dist.OnDemandPercentageAboveBaseCapacity),
				SpotAllocationStrategy: deref(dist.SpotAllocationStrategy), OnDemandAllocationStrategy: deref(dist.OnDemandAllocationStrategy),
			}
			if dist.OnDemandPercentageAboveBaseCapacity != nil && *dist.OnDemandPercentageAboveBaseCapacity < 100 {
				ng.CapacityType = inventory.CapacitySpot
				if deref(dist.OnDemandBaseCapacity) > 0 || *dist.OnDemandPercentageAboveBaseCapacity > 0 {
					ng.CapacityType = "mixed"
				}
			}
		}
		if lt := m.LaunchTemplate; lt != nil {
			if s := lt.LaunchTemplateSpecification; s != nil {
				ng.LaunchTemplate = &inventory.LaunchTemplate{ID: deref(s.LaunchTemplateId), Name: deref(s.LaunchTemplateName), Version: deref(s.Version)}
			}
			for _, o := range lt.Overrides {
				if t := deref(o.InstanceType); t != "" {
					ng.InstanceTypes = append(ng.InstanceTypes, t)
				}
			}
		}
	}
	if lt := g.LaunchTemplate; lt != nil {
		ng.LaunchTemplate = &inventory.LaunchTemplate{ID: deref(lt.LaunchTemplateId), Name: deref(lt.LaunchTemplateName), Version: deref(lt.Version)}
	}
	applyCATags(&ng, tags)
	return ng
}

// mergeASG folds the ASG side of a managed node group into it.
func mergeASG(mng *inventory.NodeGroup, asg inventory.NodeGroup) {
	mng.ASGName = asg.ASGName
	mng.SuspendedProcesses = asg.SuspendedProcesses
	mng.NewInstancesProtectedFromScaleIn = asg.NewInstancesProtectedFromScaleIn
	if len(mng.Zones) == 0 {
		mng.Zones = asg.Zones
	}
	if len(mng.SubnetIDs) == 0 {
		mng.SubnetIDs = asg.SubnetIDs
	}
	if mng.Tags == nil {
		mng.Tags = map[string]string{}
	}
	for k, v := range asg.Tags {
		if _, ok := mng.Tags[k]; !ok {
			mng.Tags[k] = v
		}
	}
	mng.TemplateResources, mng.AutoscalingOptions = asg.TemplateResources, asg.AutoscalingOptions
	// EKS labels and taints win over the ASG's node-template tags (as in CA).
	for k, v := range asg.Labels {
		if _, ok := mng.Labels[k]; !ok {
			if mng.Labels == nil {
				mng.Labels = map[string]string{}
			}
			mng.Labels[k] = v
		}
	}
	if len(mng.Taints) == 0 {
		mng.Taints = asg.Taints
	}
}

var taintValueRe = regexp.MustCompile(`^(.*):(NoSchedule|NoExecute|PreferNoSchedule)$`)

// applyCATags reads Cluster Autoscaler's node-template tags (formats in
// testdata/cluster-autoscaler/README.md): labels, taints, resources and
// autoscaling options. Malformed values are skipped, as CA skips them.
func applyCATags(ng *inventory.NodeGroup, tags map[string]string) {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := tags[k]
		rest, ok := strings.CutPrefix(k, TagCANodeTemplate)
		if !ok {
			continue
		}
		kind, name, _ := strings.Cut(rest, "/")
		if name == "" {
			continue
		}
		switch kind {
		case "label":
			if ng.Labels == nil {
				ng.Labels = map[string]string{}
			}
			ng.Labels[name] = v
		case "taint":
			if m := taintValueRe.FindStringSubmatch(v); m != nil {
				ng.Taints = append(ng.Taints, corev1.Taint{Key: name, Value: m[1], Effect: corev1.TaintEffect(m[2])})
			}
		case "resources":
			if _, err := resource.ParseQuantity(v); err == nil {
				if ng.TemplateResources == nil {
					ng.TemplateResources = map[string]string{}
				}
				ng.TemplateResources[name] = v
			}
		case "autoscaling-options":
			if ng.AutoscalingOptions == nil {
				ng.AutoscalingOptions = map[string]string{}
			}
			ng.AutoscalingOptions[name] = v
		}
	}
}

type templateRef struct{ id, name, version string }

func groupTemplateRefs(g astypes.AutoScalingGroup) []templateRef {
	var out []templateRef
	if lt := g.LaunchTemplate; lt != nil {
		out = append(out, templateRef{deref(lt.LaunchTemplateId), deref(lt.LaunchTemplateName), deref(lt.Version)})
	}
	if m := g.MixedInstancesPolicy; m != nil && m.LaunchTemplate != nil && m.LaunchTemplate.LaunchTemplateSpecification != nil {
		s := m.LaunchTemplate.LaunchTemplateSpecification
		out = append(out, templateRef{deref(s.LaunchTemplateId), deref(s.LaunchTemplateName), deref(s.Version)})
	}
	return out
}

// applyTemplate fills a group from its launch template version or launch
// configuration.
func (d *run) applyTemplate(ng *inventory.NodeGroup, g astypes.AutoScalingGroup) {
	for _, r := range groupTemplateRefs(g) {
		v, ok := d.ltVersions[ltKey(r.id, r.name, r.version)]
		if !ok || v.LaunchTemplateData == nil {
			continue
		}
		data := v.LaunchTemplateData
		lt := &inventory.LaunchTemplate{ID: deref(v.LaunchTemplateId), Name: deref(v.LaunchTemplateName), Version: fmt.Sprint(deref(v.VersionNumber)),
			AMIID: deref(data.ImageId), InstanceType: string(data.InstanceType), SecurityGroupIDs: data.SecurityGroupIds}
		for _, ni := range data.NetworkInterfaces {
			lt.SecurityGroupIDs = append(lt.SecurityGroupIDs, ni.Groups...)
			if ni.AssociatePublicIpAddress != nil {
				lt.AssociatePublicIP = ni.AssociatePublicIpAddress
			}
		}
		if p := data.IamInstanceProfile; p != nil {
			lt.InstanceProfileARN = deref(p.Arn)
			if lt.InstanceProfileARN == "" {
				lt.InstanceProfileARN = deref(p.Name)
			}
		}
		if m := data.MetadataOptions; m != nil {
			lt.MetadataOptions = &inventory.MetadataOptions{HTTPEndpoint: string(m.HttpEndpoint), HTTPTokens: string(m.HttpTokens),
				HTTPPutResponseHopLimit: m.HttpPutResponseHopLimit, HTTPProtocolIPv6: string(m.HttpProtocolIpv6)}
		}
		if m := data.Monitoring; m != nil {
			lt.DetailedMonitoring = deref(m.Enabled)
		}
		for _, bd := range data.BlockDeviceMappings {
			lt.BlockDeviceMappings = append(lt.BlockDeviceMappings, blockDevice(bd))
		}
		for _, ts := range data.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeInstance {
				lt.Tags = ec2TagMap(ts.Tags)
			}
		}
		if ud := deref(data.UserData); ud != "" {
			text := DecodeUserData(ud)
			lt.Bootstrap = ParseUserData(text)
			if d.opts.IncludeUserData {
				lt.UserData = text
			} else {
				lt.UserDataRedacted = true
			}
		}
		ng.LaunchTemplate = lt
		ng.AMIID = lt.AMIID
		ng.SecurityGroupIDs = unique(lt.SecurityGroupIDs)
		ng.InstanceProfileARN = lt.InstanceProfileARN
		if lt.InstanceType != "" && !contains(ng.InstanceTypes, lt.InstanceType) {
			ng.InstanceTypes = append([]string{lt.InstanceType}, ng.InstanceTypes...)
		}
		if b := lt.Bootstrap; b != nil {
			for k, v := range b.NodeLabels {
				if ng.Labels == nil {
					ng.Labels = map[string]string{}
				}
				if _, ok := ng.Labels[k]; !ok {
					ng.Labels[k] = v
				}
			}
			if len(ng.Taints) == 0 {
				ng.Taints = b.Taints
			}
		}
		break
	}
	if name := deref(g.LaunchConfigurationName); name != "" {
		if lc, ok := d.launchCfgs[name]; ok {
			ng.AMIID = deref(lc.ImageId)
			ng.SecurityGroupIDs = unique(lc.SecurityGroups)
			ng.InstanceProfileARN = deref(lc.IamInstanceProfile)
			if t := deref(lc.InstanceType); t != "" && !contains(ng.InstanceTypes, t) {
				ng.InstanceTypes = append([]string{t}, ng.InstanceTypes...)
			}
			if deref(lc.SpotPrice) != "" {
				ng.CapacityType = inventory.CapacitySpot
			}
			if m := lc.MetadataOptions; m != nil {
				ng.LaunchTemplate = &inventory.LaunchTemplate{Name: name, MetadataOptions: &inventory.MetadataOptions{
					HTTPEndpoint: string(m.HttpEndpoint), HTTPTokens: string(m.HttpTokens), HTTPPutResponseHopLimit: m.HttpPutResponseHopLimit}}
			}
		}
	}
	if ng.Arch == "" {
		ng.Arch, ng.OS = "amd64", "linux"
		for _, t := range ng.InstanceTypes {
			if isGraviton(t) {
				ng.Arch = "arm64"
			}
		}
	}
}

// isGraviton tells arm64 families by their "g" processor letter (m6g, c7gn, t4g).
func isGraviton(t string) bool {
	fam, _, _ := strings.Cut(t, ".")
	for i := 1; i < len(fam); i++ {
		if fam[i-1] >= '0' && fam[i-1] <= '9' {
			return strings.Contains(fam[i:], "g") && !strings.HasPrefix(fam, "g")
		}
	}
	return false
}

func blockDevice(bd ec2types.LaunchTemplateBlockDeviceMapping) inventory.BlockDevice {
	out := inventory.BlockDevice{DeviceName: deref(bd.DeviceName)}
	if e := bd.Ebs; e != nil {
		out.VolumeSizeGiB, out.VolumeType, out.IOPS, out.Throughput = deref(e.VolumeSize), string(e.VolumeType), e.Iops, e.Throughput
		out.Encrypted, out.KMSKeyID, out.DeleteOnTermination, out.SnapshotID = e.Encrypted, deref(e.KmsKeyId), e.DeleteOnTermination, deref(e.SnapshotId)
	}
	return out
}

func asgTagMap(tags []astypes.TagDescription) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	return m
}

func ec2TagMap(tags []ec2types.Tag) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	return m
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
