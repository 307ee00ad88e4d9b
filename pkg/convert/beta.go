package convert

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1beta1"
)

// betaNodePool and betaNodeClass are v1beta1 objects waiting for the v1
// step, with the document they came from (for messages).
type betaNodePool struct {
	doc *Document
	obj *v1beta1.NodePool
}

type betaNodeClass struct {
	doc *Document
	obj *v1beta1.EC2NodeClass
}

// toV1 converts NodePools and EC2NodeClasses together, because the kubelet
// block moves from the NodePools to the EC2NodeClasses they share. The
// results keep the input order: each NodePool or EC2NodeClass at the place
// of its source, split EC2NodeClasses right after the original.
func toV1(pools []betaNodePool, classes []betaNodeClass, w *warnings, fail func(error)) map[*Document][]any {
	out := map[*Document][]any{}
	byName := map[string]int{}
	for i, c := range classes {
		byName[c.obj.Name] = i
	}
	taken := map[string]bool{}
	for _, c := range classes {
		taken[c.obj.Name] = true
	}

	v1pools := make([]*v1.NodePool, len(pools))
	for i, p := range pools {
		np, err := nodePoolToV1(p.doc, p.obj, w)
		if err != nil {
			fail(err)
			continue
		}
		v1pools[i] = np
	}

	// Group the NodePools of each EC2NodeClass by kubelet configuration.
	type group struct {
		kubelet *v1beta1.KubeletConfiguration
		key     string
		pools   []int
	}
	groups := map[string][]*group{}
	for i, p := range pools {
		ref := p.obj.Spec.Template.Spec.NodeClassRef
		k := p.obj.Spec.Template.Spec.Kubelet
		if v1pools[i] == nil {
			continue
		}
		if _, ok := byName[ref.Name]; !ok {
			if k != nil {
				raw, _ := json.Marshal(k)
				if v1pools[i].Annotations == nil {
					v1pools[i].Annotations = map[string]string{}
				}
				v1pools[i].Annotations[v1.KubeletCompatibilityAnnotationKey] = string(raw)
				w.add(p.doc, fmt.Sprintf("EC2NodeClass %q is not in the input, so spec.template.spec.kubelet cannot move to it; it is kept in the %s annotation, which Karpenter v1 honours — copy it into the EC2NodeClass's spec.kubelet and remove the annotation", ref.Name, v1.KubeletCompatibilityAnnotationKey))
			}
			continue
		}
		raw, _ := json.Marshal(k)
		key := string(raw)
		var g *group
		for _, x := range groups[ref.Name] {
			if x.key == key {
				g = x
			}
		}
		if g == nil {
			g = &group{kubelet: k, key: key}
			groups[ref.Name] = append(groups[ref.Name], g)
		}
		g.pools = append(g.pools, i)
	}

	for _, c := range classes {
		base, err := nodeClassToV1(c.doc, c.obj, w)
		if err != nil {
			fail(err)
			continue
		}
		gs := groups[c.obj.Name]
		if len(gs) == 0 {
			out[c.doc] = append(out[c.doc], base)
			continue
		}
		for gi, g := range gs {
			nc := base
			if gi > 0 {
				nc = deepCopyClass(base)
				nc.Name = uniqueName(c.obj.Name+"-"+pools[g.pools[0]].obj.Name, taken)
				var names []string
				for _, pi := range g.pools {
					v1pools[pi].Spec.Template.Spec.NodeClassRef.Name = nc.Name
					names = append(names, pools[pi].obj.Name)
				}
				w.add(c.doc, fmt.Sprintf("NodePools with different kubelet settings share this EC2NodeClass; split off EC2NodeClass %q for NodePool(s) %s (their nodes will drift and be replaced)", nc.Name, strings.Join(names, ", ")))
			}
			nc.Spec.Kubelet = kubeletToV1(g.kubelet)
			out[c.doc] = append(out[c.doc], nc)
		}
	}
	for i, p := range pools {
		if v1pools[i] != nil {
			out[p.doc] = append([]any{v1pools[i]}, out[p.doc]...)
		}
	}
	return out
}

func uniqueName(name string, taken map[string]bool) string {
	const maxLen = 253
	if len(name) > maxLen {
		name = name[:maxLen]
	}
	candidate := name
	for n := 2; taken[candidate]; n++ {
		suffix := fmt.Sprintf("-%d", n)
		candidate = name
		if len(candidate)+len(suffix) > maxLen {
			candidate = candidate[:maxLen-len(suffix)]
		}
		candidate += suffix
	}
	taken[candidate] = true
	return candidate
}

func deepCopyClass(in *v1.EC2NodeClass) *v1.EC2NodeClass {
	raw, _ := json.Marshal(in)
	out := &v1.EC2NodeClass{}
	_ = json.Unmarshal(raw, out)
	return out
}

func kubeletToV1(k *v1beta1.KubeletConfiguration) *v1.KubeletConfiguration {
	if k == nil {
		return nil
	}
	return &v1.KubeletConfiguration{
		ClusterDNS:                  k.ClusterDNS,
		MaxPods:                     k.MaxPods,
		PodsPerCore:                 k.PodsPerCore,
		SystemReserved:              k.SystemReserved,
		KubeReserved:                k.KubeReserved,
		EvictionHard:                k.EvictionHard,
		EvictionSoft:                k.EvictionSoft,
		EvictionSoftGracePeriod:     k.EvictionSoftGracePeriod,
		EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
		ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
		CPUCFSQuota:                 k.CPUCFSQuota,
	}
}

// nodePoolToV1 converts one NodePool; the kubelet is handled by toV1.
func nodePoolToV1(d *Document, in *v1beta1.NodePool, w *warnings) (*v1.NodePool, error) {
	out := &v1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.NodePoolKind},
		ObjectMeta: keptMeta(in.ObjectMeta),
	}
	ts := in.Spec.Template.Spec
	out.Spec.Template.ObjectMeta = v1.TemplateMetadata{Labels: in.Spec.Template.ObjectMeta.Labels, Annotations: in.Spec.Template.ObjectMeta.Annotations}
	out.Spec.Template.Spec.Taints = ts.Taints
	out.Spec.Template.Spec.StartupTaints = ts.StartupTaints
	out.Spec.Template.Spec.Requirements = make([]v1.NodeSelectorRequirementWithMinValues, len(ts.Requirements))
	for i, r := range ts.Requirements {
		out.Spec.Template.Spec.Requirements[i] = v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values, MinValues: r.MinValues}
	}
	ref := ts.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, &Error{Doc: d, Field: "spec.template.spec.nodeClassRef.name", Err: fmt.Errorf("is required: v1 NodePools must name their EC2NodeClass")}
	}
	group, kind := v1.AWSGroup, v1.EC2NodeClassKind
	if ref.APIVersion != "" {
		group, _, _ = strings.Cut(ref.APIVersion, "/")
	}
	if ref.Kind != "" && ref.Kind != "AWSNodeTemplate" {
		kind = ref.Kind
	}
	if ref.Kind == "AWSNodeTemplate" {
		w.add(d, fmt.Sprintf("nodeClassRef kind AWSNodeTemplate becomes %s (AWSNodeTemplate does not exist in v1); convert AWSNodeTemplate %q too", v1.EC2NodeClassKind, ref.Name))
	}
	out.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: group, Kind: kind, Name: ref.Name}
	if len(ts.Resources.Requests) > 0 {
		w.add(d, "spec.template.spec.resources is dropped: v1 NodePools have no static resource requests")
	}

	dis := in.Spec.Disruption
	if dis.ExpireAfter != nil {
		e := v1.NillableDuration{Duration: dis.ExpireAfter.Duration}
		out.Spec.Template.Spec.ExpireAfter = &e
		if e.Duration != nil {
			w.add(d, fmt.Sprintf("expireAfter %s moves to spec.template.spec.expireAfter; in v1 expiry is forceful (it does not wait for PDBs or do-not-disrupt) unless terminationGracePeriod bounds it", e.String()))
		}
	}
	switch dis.ConsolidationPolicy {
	case "", v1beta1.ConsolidationPolicyWhenUnderutilized:
		out.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
		out.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(0)
	case v1beta1.ConsolidationPolicyWhenEmpty:
		out.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
		if dis.ConsolidateAfter == nil {
			return nil, &Error{Doc: d, Field: "spec.disruption.consolidateAfter", Err: fmt.Errorf("is required with consolidationPolicy WhenEmpty (v1beta1 rejects it too); set a duration such as 30s, or Never")}
		}
		out.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{Duration: dis.ConsolidateAfter.Duration}
	default:
		return nil, &Error{Doc: d, Field: "spec.disruption.consolidationPolicy", Err: fmt.Errorf("%q: want WhenEmpty or WhenUnderutilized", dis.ConsolidationPolicy)}
	}
	for _, b := range dis.Budgets {
		out.Spec.Disruption.Budgets = append(out.Spec.Disruption.Budgets, v1.Budget{Nodes: b.Nodes, Schedule: b.Schedule, Duration: b.Duration})
	}
	out.Spec.Limits = in.Spec.Limits
	out.Spec.Weight = in.Spec.Weight
	return out, nil
}

// aliasFamilies are the v1beta1 families that have a v1 alias.
var aliasFamilies = map[string]string{
	v1beta1.AMIFamilyAL2:          "al2",
	v1beta1.AMIFamilyAL2023:       "al2023",
	v1beta1.AMIFamilyBottlerocket: "bottlerocket",
	v1beta1.AMIFamilyWindows2019:  "windows2019",
	v1beta1.AMIFamilyWindows2022:  "windows2022",
}

// restrictedTagPrefixes are tag keys v1 rejects on an EC2NodeClass.
var restrictedTagPrefixes = []string{"kubernetes.io/cluster", "eks:eks-cluster-name", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass"}

// nodeClassToV1 converts one EC2NodeClass (without the kubelet).
func nodeClassToV1(d *Document, in *v1beta1.EC2NodeClass, w *warnings) (*v1.EC2NodeClass, error) {
	out := &v1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.AWSAPIVersion, Kind: v1.EC2NodeClassKind},
		ObjectMeta: keptMeta(in.ObjectMeta),
	}
	s := in.Spec
	o := &out.Spec
	idOnly := func(field string, i int, id string) {
		w.add(d, fmt.Sprintf("spec.%s[%d] combines id %s with other fields, which v1 rejects; kept only the id", field, i, id))
	}
	for i, t := range s.SubnetSelectorTerms {
		if t.ID != "" && len(t.Tags) > 0 {
			idOnly("subnetSelectorTerms", i, t.ID)
			t.Tags = nil
		}
		o.SubnetSelectorTerms = append(o.SubnetSelectorTerms, v1.SubnetSelectorTerm{Tags: t.Tags, ID: t.ID})
	}
	for i, t := range s.SecurityGroupSelectorTerms {
		if t.ID != "" && (len(t.Tags) > 0 || t.Name != "") {
			idOnly("securityGroupSelectorTerms", i, t.ID)
			t.Tags, t.Name = nil, ""
		}
		o.SecurityGroupSelectorTerms = append(o.SecurityGroupSelectorTerms, v1.SecurityGroupSelectorTerm{Tags: t.Tags, ID: t.ID, Name: t.Name})
	}
	o.AssociatePublicIPAddress = s.AssociatePublicIPAddress
	o.UserData = s.UserData
	o.Role = s.Role
	o.InstanceProfile = s.InstanceProfile
	o.Tags = s.Tags
	o.DetailedMonitoring = s.DetailedMonitoring
	o.Context = s.Context
	if s.InstanceStorePolicy != nil {
		p := v1.InstanceStorePolicy(*s.InstanceStorePolicy)
		o.InstanceStorePolicy = &p
	}
	for _, b := range s.BlockDeviceMappings {
		if b == nil {
			continue
		}
		nb := &v1.BlockDeviceMapping{DeviceName: b.DeviceName, RootVolume: b.RootVolume}
		if e := b.EBS; e != nil {
			nb.EBS = &v1.BlockDevice{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
				KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
				VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
			}
		}
		o.BlockDeviceMappings = append(o.BlockDeviceMappings, nb)
	}
	if m := s.MetadataOptions; m != nil {
		o.MetadataOptions = &v1.MetadataOptions{HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6, HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, HTTPTokens: m.HTTPTokens}
	}
	if s.MetadataOptions == nil || s.MetadataOptions.HTTPPutResponseHopLimit == nil {
		w.add(d, "metadataOptions.httpPutResponseHopLimit is unset: the default changes from 2 (v1beta1) to 1 (v1), so pods without hostNetwork (AWS Load Balancer Controller, EBS CSI, SDKs using IMDS) lose instance-metadata access; set it to 2 to keep the old behaviour")
	}
	for _, k := range sortedKeys(s.Tags) {
		for _, p := range restrictedTagPrefixes {
			if strings.HasPrefix(k, p) {
				w.add(d, fmt.Sprintf("tag %q is reserved in v1 and the API server will reject the EC2NodeClass; remove it", k))
			}
		}
		if k == "karpenter.sh/managed-by" {
			w.add(d, "tag karpenter.sh/managed-by is no longer set by Karpenter v1 (replaced by eks:eks-cluster-name); policies or scripts matching it must change")
		}
	}

	family := "AL2"
	if s.AMIFamily == nil {
		w.add(d, "spec.amiFamily is unset (required in v1beta1); assuming AL2")
	} else {
		family = *s.AMIFamily
	}
	terms := make([]v1.AMISelectorTerm, 0, len(s.AMISelectorTerms))
	for i, t := range s.AMISelectorTerms {
		if t.ID != "" && (len(t.Tags) > 0 || t.Name != "" || t.Owner != "") {
			idOnly("amiSelectorTerms", i, t.ID)
			t.Tags, t.Name, t.Owner = nil, "", ""
		}
		terms = append(terms, v1.AMISelectorTerm{Tags: t.Tags, ID: t.ID, Name: t.Name, Owner: t.Owner})
	}
	switch {
	case aliasFamilies[family] != "" && len(terms) == 0:
		o.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: aliasFamilies[family] + "@latest"}}
		w.add(d, fmt.Sprintf("amiFamily %s without amiSelectorTerms becomes alias %s@latest; pin a version (e.g. %s@v20240807) so AMI releases do not drift your nodes unannounced", family, aliasFamilies[family], aliasFamilies[family]))
	case aliasFamilies[family] != "" || family == v1beta1.AMIFamilyCustom:
		o.AMIFamily = &family
		o.AMISelectorTerms = terms
		if family == v1beta1.AMIFamilyCustom {
			w.add(d, "amiFamily Custom: in v1 nodes must register with the taint karpenter.sh/unregistered:NoExecute; make sure your user data passes it to the kubelet")
		}
	case family == v1beta1.AMIFamilyUbuntu:
		al2 := v1.AMIFamilyAL2
		o.AMIFamily = &al2
		compat := []string{"amiFamily"}
		if len(o.BlockDeviceMappings) == 0 {
			size := resource.MustParse("20Gi")
			o.BlockDeviceMappings = []*v1.BlockDeviceMapping{{
				DeviceName: ptr("/dev/sda1"),
				RootVolume: true,
				EBS:        &v1.BlockDevice{Encrypted: ptr(true), VolumeSize: &size, VolumeType: ptr("gp3")},
			}}
			compat = append(compat, "blockDeviceMappings")
		}
		if len(terms) == 0 {
			terms = []v1.AMISelectorTerm{{ID: "ami-placeholder"}}
			compat = append(compat, "incompatible")
			w.add(d, "amiFamily Ubuntu without amiSelectorTerms has no v1 equivalent: it becomes AL2 with the placeholder AMI ami-placeholder, so the EC2NodeClass stays NotReady until you set amiSelectorTerms to your Ubuntu AMIs")
		} else {
			w.add(d, "amiFamily Ubuntu is not supported in v1: it becomes AL2 (AL2 user data and bootstrap) with your amiSelectorTerms; check that your Ubuntu AMIs accept AL2-style bootstrap, or switch to Custom with your own user data")
		}
		o.AMISelectorTerms = terms
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		} else {
			out.Annotations = copyMap(out.Annotations)
		}
		out.Annotations[v1.UbuntuCompatibilityAnnotationKey] = strings.Join(compat, ",")
	default:
		return nil, &Error{Doc: d, Field: "spec.amiFamily", Err: fmt.Errorf("%q: want AL2, AL2023, Bottlerocket, Ubuntu, Custom, Windows2019 or Windows2022", family)}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// warnings collects messages about behaviour changes, per object.
type warnings struct {
	list []Warning
}

// Warning is a behaviour change or loss the user should know about.
type Warning struct {
	Object  string
	Message string
}

func (w Warning) String() string { return w.Object + ": " + w.Message }

func (w *warnings) add(d *Document, msg string) {
	w.list = append(w.list, Warning{Object: d.String(), Message: msg})
}
