package convert

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1alpha5"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1beta1"
)

// RoleFromEnv is the placeholder karpenter-convert writes as the
// EC2NodeClass role, meant to be replaced with envsubst.
const RoleFromEnv = "$KARPENTER_NODE_ROLE"

// Label keys used by the v1alpha5 defaults.
const (
	labelCapacityType       = "karpenter.sh/capacity-type"
	labelInstanceFamily     = "karpenter.k8s.aws/instance-family"
	labelInstanceCategory   = "karpenter.k8s.aws/instance-category"
	labelInstanceGeneration = "karpenter.k8s.aws/instance-generation"
)

// normalizedLabels are the deprecated aliases Karpenter treats as the
// stable keys when it checks whether a requirement is present.
var normalizedLabels = map[string]string{
	corev1.LabelFailureDomainBetaZone:   corev1.LabelTopologyZone,
	"beta.kubernetes.io/arch":           corev1.LabelArchStable,
	"beta.kubernetes.io/os":             corev1.LabelOSStable,
	corev1.LabelInstanceType:            corev1.LabelInstanceTypeStable,
	corev1.LabelFailureDomainBetaRegion: corev1.LabelTopologyRegion,
}

// provisionerDefaults appends the v1alpha5 defaulting requirements
// (aws/karpenter v0.32 Provisioner.SetDefaults) for keys that are absent.
func provisionerDefaults(reqs []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	has := map[string]bool{}
	for _, r := range reqs {
		k := r.Key
		if n, ok := normalizedLabels[k]; ok {
			k = n
		}
		has[k] = true
	}
	if !has[corev1.LabelOSStable] {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Linux)}})
	}
	if !has[corev1.LabelArchStable] {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
	}
	if !has[labelCapacityType] {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: labelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}})
	}
	if !has[corev1.LabelInstanceTypeStable] && !has[labelInstanceFamily] && !has[labelInstanceCategory] && !has[labelInstanceGeneration] {
		reqs = append(reqs,
			corev1.NodeSelectorRequirement{Key: labelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
			corev1.NodeSelectorRequirement{Key: labelInstanceGeneration, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
		)
	}
	return reqs
}

// keptMeta is what karpenter-convert keeps of the input metadata.
func keptMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations, Finalizers: m.Finalizers}
}

// provisionerToNodePool converts a Provisioner. When the Provisioner has an
// inline spec.provider, the EC2NodeClass made from it is returned too.
func provisionerToNodePool(d *Document, p *v1alpha5.Provisioner, ignoreDefaults bool, warn func(string)) (*v1beta1.NodePool, *v1beta1.EC2NodeClass, error) {
	reqs := p.Spec.Requirements
	if !ignoreDefaults {
		reqs = provisionerDefaults(append([]corev1.NodeSelectorRequirement(nil), reqs...))
	}
	np := &v1beta1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.APIVersion, Kind: v1beta1.NodePoolKind},
		ObjectMeta: keptMeta(p.ObjectMeta),
	}
	spec := &np.Spec
	spec.Template.ObjectMeta = v1beta1.TemplateMetadata{Labels: p.Spec.Labels, Annotations: p.Spec.Annotations}
	ts := &spec.Template.Spec
	ts.Taints = p.Spec.Taints
	ts.StartupTaints = p.Spec.StartupTaints
	if reqs != nil {
		ts.Requirements = make([]v1beta1.NodeSelectorRequirementWithMinValues, len(reqs))
		for i, r := range reqs {
			ts.Requirements[i] = v1beta1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values}
		}
	}
	if k := p.Spec.KubeletConfiguration; k != nil {
		if k.ContainerRuntime != nil {
			warn(fmt.Sprintf("spec.kubeletConfiguration.containerRuntime %q is dropped: v1beta1 always uses containerd", *k.ContainerRuntime))
		}
		ts.Kubelet = &v1beta1.KubeletConfiguration{
			ClusterDNS:                  k.ClusterDNS,
			MaxPods:                     k.MaxPods,
			PodsPerCore:                 k.PodsPerCore,
			SystemReserved:              quantities(k.SystemReserved),
			KubeReserved:                quantities(k.KubeReserved),
			EvictionHard:                k.EvictionHard,
			EvictionSoft:                k.EvictionSoft,
			EvictionSoftGracePeriod:     k.EvictionSoftGracePeriod,
			EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
			ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
			ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
			CPUCFSQuota:                 k.CPUCFSQuota,
		}
	}
	if r := p.Spec.ProviderRef; r != nil {
		ts.NodeClassRef = &v1beta1.NodeClassReference{Kind: r.Kind, Name: r.Name, APIVersion: r.APIVersion}
	}
	if p.Spec.Limits != nil {
		spec.Limits = p.Spec.Limits.Resources
	}
	spec.Weight = p.Spec.Weight

	expire := v1beta1.NillableDuration{}
	if t := p.Spec.TTLSecondsUntilExpired; t != nil {
		expire = v1beta1.NewNillableDuration(time.Duration(*t) * time.Second)
	}
	spec.Disruption.ExpireAfter = &expire
	switch {
	case p.Spec.Consolidation != nil && p.Spec.Consolidation.Enabled != nil && *p.Spec.Consolidation.Enabled:
		spec.Disruption.ConsolidationPolicy = v1beta1.ConsolidationPolicyWhenUnderutilized
	case p.Spec.TTLSecondsAfterEmpty != nil:
		spec.Disruption.ConsolidationPolicy = v1beta1.ConsolidationPolicyWhenEmpty
		after := v1beta1.NewNillableDuration(time.Duration(*p.Spec.TTLSecondsAfterEmpty) * time.Second)
		spec.Disruption.ConsolidateAfter = &after
	default:
		warn("neither consolidation nor ttlSecondsAfterEmpty is set: the NodePool gets no consolidationPolicy, so the API server defaults it to WhenUnderutilized and Karpenter will consolidate nodes this Provisioner never removed; add `consolidationPolicy: WhenEmpty` and `consolidateAfter: Never` to keep the old behaviour")
	}

	var nc *v1beta1.EC2NodeClass
	if len(p.Spec.Provider) > 0 {
		var aws v1alpha5.AWS
		if err := decodeAt(d, p.Spec.Provider, []any{"spec", "provider"}, &aws); err != nil {
			return nil, nil, err
		}
		var err error
		nc, err = awsToEC2NodeClass(metav1.ObjectMeta{Name: p.Name}, v1alpha5.AWSNodeTemplateSpec{AWS: aws}, warn)
		if err != nil {
			return nil, nil, &Error{Doc: d, Field: "spec.provider", Err: err}
		}
		ts.NodeClassRef = &v1beta1.NodeClassReference{Name: p.Name}
	}
	return np, nc, nil
}

func quantities(l corev1.ResourceList) map[string]string {
	if l == nil {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

// errLaunchTemplate is karpenter-convert's error for launch templates.
var errLaunchTemplate = errors.New(`converting AWSNodeTemplate, cannot convert with "spec.launchTemplate": v1beta1 has no launch template support; move its settings (AMI, user data, block devices, security groups) into the EC2NodeClass by hand`)

// awsToEC2NodeClass converts an AWSNodeTemplate spec (or an inline provider).
func awsToEC2NodeClass(meta metav1.ObjectMeta, s v1alpha5.AWSNodeTemplateSpec, warn func(string)) (*v1beta1.EC2NodeClass, error) {
	if s.LaunchTemplateName != nil {
		return nil, errLaunchTemplate
	}
	family := s.AMIFamily
	if family == nil {
		al2 := v1beta1.AMIFamilyAL2
		family = &al2
	}
	nc := &v1beta1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.AWSAPIVersion, Kind: v1beta1.EC2NodeClassKind},
		ObjectMeta: keptMeta(meta),
		Spec: v1beta1.EC2NodeClassSpec{
			AMIFamily:          family,
			UserData:           s.UserData,
			Role:               RoleFromEnv,
			Tags:               s.Tags,
			DetailedMonitoring: s.DetailedMonitoring,
			Context:            s.Context,
		},
	}
	subnets, err := selectorTerms(s.SubnetSelector, false)
	if err != nil {
		return nil, fmt.Errorf("subnetSelector %w", err)
	}
	groups, err := selectorTerms(s.SecurityGroupSelector, false)
	if err != nil {
		return nil, fmt.Errorf("securityGroupSelector %w", err)
	}
	amis, err := selectorTerms(s.AMISelector, true)
	if err != nil {
		return nil, fmt.Errorf("amiSelector %w", err)
	}
	for _, sel := range subnets {
		nc.Spec.SubnetSelectorTerms = append(nc.Spec.SubnetSelectorTerms, v1beta1.SubnetSelectorTerm{Tags: sel.Tags, ID: sel.ID})
	}
	for _, sel := range groups {
		nc.Spec.SecurityGroupSelectorTerms = append(nc.Spec.SecurityGroupSelectorTerms, v1beta1.SecurityGroupSelectorTerm{Tags: sel.Tags, ID: sel.ID})
	}
	nc.Spec.AMISelectorTerms = amis
	for _, sel := range []struct {
		field string
		terms []v1beta1.AMISelectorTerm
	}{
		{"subnetSelector", subnets},
		{"securityGroupSelector", groups},
		{"amiSelector", amis},
	} {
		field := sel.field
		for _, t := range sel.terms {
			if t.ID != "" && (len(t.Tags) > 0 || t.Name != "" || t.Owner != "") {
				warn(fmt.Sprintf("spec.%s combines aws::ids with other keys; karpenter-convert (and so this output) puts both into one term, which the v1beta1 API server rejects ('id' is mutually exclusive): keep only the ids", field))
				break
			}
		}
	}
	if s.BlockDeviceMappings != nil {
		nc.Spec.BlockDeviceMappings = make([]*v1beta1.BlockDeviceMapping, len(s.BlockDeviceMappings))
		for i, b := range s.BlockDeviceMappings {
			if b == nil {
				continue
			}
			out := &v1beta1.BlockDeviceMapping{DeviceName: b.DeviceName}
			if e := b.EBS; e != nil {
				out.EBS = &v1beta1.BlockDevice{
					DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
					KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
					VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
				}
			}
			nc.Spec.BlockDeviceMappings[i] = out
		}
	}
	if m := s.MetadataOptions; m != nil {
		nc.Spec.MetadataOptions = &v1beta1.MetadataOptions{
			HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, HTTPTokens: m.HTTPTokens,
		}
	}
	return nc, nil
}

// selectorTerms turns a v1alpha5 selector map into v1beta1 terms as
// karpenter-convert does: keys sorted; "aws::ids"/"aws-ids" (and, for AMIs,
// "aws::name" and "aws::owners") comma-split and trimmed; every other key a
// tag whose comma-separated values fan out; the result the cross product
// owners × ids × names × tag combinations.
func selectorTerms(sel map[string]string, ami bool) ([]v1beta1.AMISelectorTerm, error) {
	if len(sel) == 0 {
		return nil, nil
	}
	ids, names, owners := []string{""}, []string{""}, []string{""}
	tagSets := []map[string]string{{}}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case k == "aws-ids" || k == "aws::ids":
			ids = splitTrim(sel[k])
		case ami && k == "aws::name":
			names = splitTrim(sel[k])
		case ami && k == "aws::owners":
			owners = splitTrim(sel[k])
		default:
			var next []map[string]string
			for _, v := range splitTrim(sel[k]) {
				for _, t := range tagSets {
					c := make(map[string]string, len(t)+1)
					for tk, tv := range t {
						c[tk] = tv
					}
					c[k] = v
					next = append(next, c)
				}
			}
			tagSets = next
		}
		if n := len(ids) * len(names) * len(owners) * len(tagSets); n > maxSelectorTerms {
			return nil, fmt.Errorf("expands to more than %d selector terms (comma-separated values multiply); split it by hand", maxSelectorTerms)
		}
	}
	var terms []v1beta1.AMISelectorTerm
	for _, owner := range owners {
		for _, id := range ids {
			for _, name := range names {
				for _, tags := range tagSets {
					terms = append(terms, v1beta1.AMISelectorTerm{Tags: tags, ID: id, Name: name, Owner: owner})
				}
			}
		}
	}
	return terms, nil
}

// maxSelectorTerms bounds the cross product; v1 accepts at most 30 terms.
const maxSelectorTerms = 1000

func splitTrim(s string) []string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.Trim(p, " ")
	}
	return parts
}
