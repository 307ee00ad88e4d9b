package generate

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// eksMNGDefaultHopLimit is the IMDS hop limit of the launch template EKS
// makes for a managed group that has none of its own.
const eksMNGDefaultHopLimit = 2

// amiChoice is the AMI selection of a node group.
type amiChoice struct {
	// sourceFamily is the family the group runs now, targetFamily the one
	// the EC2NodeClass will run (they differ when AL2 moves to AL2023).
	sourceFamily, targetFamily string
	terms                      []karpv1.AMISelectorTerm
	// amiFamily is set for id terms (an alias implies the family).
	amiFamily string
}

var (
	releaseDate        = regexp.MustCompile(`-(\d{8})$`)
	bottlerocketSemver = regexp.MustCompile(`^(\d+\.\d+\.\d+)`)
)

// nodeClassFor maps a group's launch settings to an EC2NodeClass spec; an
// error means the group cannot be mapped.
func nodeClassFor(inv *inventory.Inventory, g *inventory.NodeGroup, p *groupPlan, opts *Options) (karpv1.EC2NodeClassSpec, error) {
	var spec karpv1.EC2NodeClassSpec
	ami, err := chooseAMI(g, p, opts)
	if err != nil {
		return spec, err
	}
	spec.AMISelectorTerms = ami.terms
	if ami.amiFamily != "" {
		spec.AMIFamily = ptr(ami.amiFamily)
	}
	spec.Role = nodeRole(inv, g, p, opts)
	spec.SubnetSelectorTerms, spec.SecurityGroupSelectorTerms = selectors(inv, g, p, opts)

	lt := g.LaunchTemplate
	var bs *inventory.Bootstrap
	if lt != nil {
		bs = lt.Bootstrap
	}
	kubelet, extraFlags := kubeletFrom(bs, p)
	spec.Kubelet = kubelet
	spec.UserData = userDataFor(lt, bs, ami, extraFlags, p)

	if lt != nil {
		spec.BlockDeviceMappings = blockDevices(lt.BlockDeviceMappings, ami.targetFamily, p)
		if lt.DetailedMonitoring {
			spec.DetailedMonitoring = ptr(true)
		}
		if lt.AssociatePublicIP != nil {
			spec.AssociatePublicIPAddress = ptr(*lt.AssociatePublicIP)
		}
		spec.Tags = instanceTags(lt.Tags, p)
	}
	spec.MetadataOptions = metadataOptions(g, p)
	return spec, nil
}

func chooseAMI(g *inventory.NodeGroup, p *groupPlan, opts *Options) (amiChoice, error) {
	amiType := strings.ToUpper(g.AMIType)
	amiID := g.AMIID
	if amiID == "" && g.LaunchTemplate != nil {
		amiID = g.LaunchTemplate.AMIID
	}
	alias := func(family, version string) []karpv1.AMISelectorTerm {
		return []karpv1.AMISelectorTerm{{Alias: strings.ToLower(family) + "@" + version}}
	}
	var c amiChoice
	switch {
	case strings.HasPrefix(amiType, "AL2023"):
		c.sourceFamily, c.targetFamily = karpv1.AMIFamilyAL2023, karpv1.AMIFamilyAL2023
	case strings.HasPrefix(amiType, "AL2_"):
		c.sourceFamily, c.targetFamily = karpv1.AMIFamilyAL2, karpv1.AMIFamilyAL2
		if !opts.KeepAL2 {
			c.targetFamily = karpv1.AMIFamilyAL2023
		}
	case strings.HasPrefix(amiType, "BOTTLEROCKET"):
		c.sourceFamily, c.targetFamily = karpv1.AMIFamilyBottlerocket, karpv1.AMIFamilyBottlerocket
	case strings.HasPrefix(amiType, "WINDOWS_"):
		f := windowsFamily(amiType)
		if f == "" {
			return c, fmt.Errorf("AMI type %s names no Windows Server version Karpenter supports (2019, 2022, 2025)", g.AMIType)
		}
		c.sourceFamily, c.targetFamily = f, f
		c.terms = alias(f, "latest")
		p.note("Windows AMIs can only be selected as %s@latest", strings.ToLower(f))
		return c, nil
	default:
		return customAMI(g, p, amiType, amiID)
	}

	switch {
	case c.sourceFamily != c.targetFamily:
		c.terms = alias(c.targetFamily, "latest")
		p.note("Amazon Linux 2 is end of life: moved from AL2 to AL2023 (al2023@latest; pin a version once tested, or keep AL2 with --keep-al2)")
	case g.ReleaseVersion != "":
		if v := aliasVersion(c.targetFamily, g.ReleaseVersion); v != "" {
			c.terms = alias(c.targetFamily, v)
			p.note("AMI pinned to the group's release %s (%s)", g.ReleaseVersion, c.terms[0].Alias)
		} else {
			c.terms = alias(c.targetFamily, "latest")
			p.warn("release version %q does not read as an AMI version: using %s@latest", g.ReleaseVersion, strings.ToLower(c.targetFamily))
		}
	case amiID != "":
		c.terms = []karpv1.AMISelectorTerm{{ID: amiID}}
		c.amiFamily = c.targetFamily
		p.note("AMI pinned to %s, the one the group runs; an alias (%s@latest) would follow EKS releases", amiID, strings.ToLower(c.targetFamily))
	default:
		c.terms = alias(c.targetFamily, "latest")
	}
	return c, nil
}

// customAMI maps a group that runs its own AMI: an id term plus the family
// its user data shows.
func customAMI(g *inventory.NodeGroup, p *groupPlan, amiType, amiID string) (amiChoice, error) {
	var c amiChoice
	windows := p.os == "windows"
	if amiID == "" {
		if amiType == "" && !windows {
			c.sourceFamily, c.targetFamily = karpv1.AMIFamilyAL2023, karpv1.AMIFamilyAL2023
			c.terms = []karpv1.AMISelectorTerm{{Alias: "al2023@latest"}}
			p.warn("neither AMI type nor AMI id is known: using al2023@latest")
			return c, nil
		}
		return c, fmt.Errorf("AMI type %q without an AMI id: nothing to select the AMI by", g.AMIType)
	}
	var bs *inventory.Bootstrap
	userData, redacted := "", false
	if lt := g.LaunchTemplate; lt != nil {
		bs = lt.Bootstrap
		userData, redacted = lt.UserData, lt.UserDataRedacted
	}
	format := ""
	if bs != nil {
		format = bs.Format
	}
	switch {
	case windows:
		return c, fmt.Errorf("custom Windows AMI %s of unknown family: Karpenter needs amiFamily Windows2019, Windows2022 or Windows2025; write this EC2NodeClass by hand", amiID)
	case format == inventory.BootstrapAL2:
		c.sourceFamily = karpv1.AMIFamilyAL2
		p.note("custom AMI %s bootstraps like AL2 (amiFamily AL2; AL2 is end of life: rebuild it on AL2023)", amiID)
	case format == inventory.BootstrapNodeadm:
		c.sourceFamily = karpv1.AMIFamilyAL2023
	case format == inventory.BootstrapBottlerocket:
		c.sourceFamily = karpv1.AMIFamilyBottlerocket
	case userData != "":
		c.sourceFamily = karpv1.AMIFamilyCustom
		p.warn("custom AMI %s of unknown family: amiFamily Custom, so Karpenter adds no bootstrap and the carried user data must join the node to the cluster", amiID)
	case redacted:
		return c, fmt.Errorf("its launch template runs custom AMI %s and the snapshot's copy of its user data was redacted, so how its nodes join the cluster (AL2 bootstrap.sh, AL2023 nodeadm, Bottlerocket) is unknown: run generate again on a snapshot discovered with --include-user-data; %s", amiID, mapByHand(g.Name, amiID))
	default:
		return c, fmt.Errorf("its launch template runs custom AMI %s with no user data, so how its nodes join the cluster (AL2 bootstrap.sh, AL2023 nodeadm, Bottlerocket) is unknown and no amiFamily can be chosen: %s", amiID, mapByHand(g.Name, amiID))
	}
	c.targetFamily = c.sourceFamily
	c.terms = []karpv1.AMISelectorTerm{{ID: amiID}}
	c.amiFamily = c.sourceFamily
	return c, nil
}

// mapByHand says what to do for a group generate cannot map: write its
// NodePool and EC2NodeClass by hand, or leave it out of the rollout.
func mapByHand(group, amiID string) string {
	return fmt.Sprintf("write an EC2NodeClass for it by hand (amiSelectorTerms id %s, the amiFamily the AMI bootstraps as, AL2023 or Bottlerocket or Custom with user data that joins the node) and a NodePool using it annotated %s: %s, or leave the group out of the rollout (nodeGroups.exclude in migrations/<env>.yaml)", amiID, nodeGroupsAnnotation, group)
}

func windowsFamily(amiType string) string {
	for _, v := range []string{"2019", "2022", "2025"} {
		if strings.Contains(amiType, "_"+v+"_") {
			return "Windows" + v
		}
	}
	return ""
}

// aliasVersion reads an EKS release version as an alias version:
// 1.29.3-20240531 is v20240531 for AL2/AL2023, 1.20.1-7c3e9198 is v1.20.1
// for Bottlerocket.
func aliasVersion(family, release string) string {
	switch family {
	case karpv1.AMIFamilyAL2, karpv1.AMIFamilyAL2023:
		if m := releaseDate.FindStringSubmatch(release); m != nil {
			return "v" + m[1]
		}
	case karpv1.AMIFamilyBottlerocket:
		if m := bottlerocketSemver.FindStringSubmatch(release); m != nil {
			return "v" + m[1]
		}
	}
	return ""
}

func nodeRole(inv *inventory.Inventory, g *inventory.NodeGroup, p *groupPlan, opts *Options) string {
	def := "KarpenterNodeRole-" + inv.Cluster.Name
	switch opts.NodeRole {
	case "":
		return def
	case NodeRoleFromNodeGroup:
		if g.NodeRoleARN == "" {
			p.warn("--node-role %s: the group's node role is unknown; using %s", NodeRoleFromNodeGroup, def)
			return def
		}
		arn := g.NodeRoleARN
		return arn[strings.LastIndex(arn, "/")+1:]
	default:
		return opts.NodeRole
	}
}

func selectors(inv *inventory.Inventory, g *inventory.NodeGroup, p *groupPlan, opts *Options) ([]karpv1.SubnetSelectorTerm, []karpv1.SecurityGroupSelectorTerm) {
	tag := map[string]string{DiscoveryTagKey: inv.Cluster.Name}
	tagSubnets := []karpv1.SubnetSelectorTerm{{Tags: tag}}
	tagSGs := []karpv1.SecurityGroupSelectorTerm{{Tags: tag}}
	if opts.Selectors == SelectorsTag {
		return tagSubnets, tagSGs
	}
	var subnets []karpv1.SubnetSelectorTerm
	for _, id := range sortedUnique(g.SubnetIDs) {
		subnets = append(subnets, karpv1.SubnetSelectorTerm{ID: id})
	}
	if len(subnets) == 0 {
		p.warn("--selectors ids: the group's subnets are unknown; selecting subnets by the %s tag", DiscoveryTagKey)
		subnets = tagSubnets
	}
	ids := slices.Clone(g.SecurityGroupIDs)
	if g.LaunchTemplate != nil {
		ids = append(ids, g.LaunchTemplate.SecurityGroupIDs...)
	}
	if len(ids) == 0 && inv.Cluster.ClusterSecurityGroupID != "" {
		ids = []string{inv.Cluster.ClusterSecurityGroupID}
		p.note("the group sets no security groups: selecting the cluster security group %s, which EKS gives such nodes", inv.Cluster.ClusterSecurityGroupID)
	}
	var sgs []karpv1.SecurityGroupSelectorTerm
	for _, id := range sortedUnique(ids) {
		sgs = append(sgs, karpv1.SecurityGroupSelectorTerm{ID: id})
	}
	if len(sgs) == 0 {
		p.warn("--selectors ids: the group's security groups are unknown; selecting them by the %s tag", DiscoveryTagKey)
		sgs = tagSGs
	}
	return subnets, sgs
}

func sortedUnique(s []string) []string {
	out := uniqueStrings(s)
	sort.Strings(out)
	return out
}

var (
	reservedKeys  = map[string]bool{"cpu": true, "memory": true, "ephemeral-storage": true, "pid": true}
	evictionSigns = map[string]bool{"memory.available": true, "nodefs.available": true, "nodefs.inodesFree": true,
		"imagefs.available": true, "imagefs.inodesFree": true, "pid.available": true}
)

// kubeletFrom maps bootstrap settings to the EC2NodeClass kubelet block and
// returns the kubelet flags it has no field for.
func kubeletFrom(bs *inventory.Bootstrap, p *groupPlan) (*karpv1.KubeletConfiguration, []string) {
	if bs == nil {
		return nil, nil
	}
	k := &karpv1.KubeletConfiguration{
		MaxPods:        bs.MaxPods,
		ClusterDNS:     bs.ClusterDNS,
		KubeReserved:   filterKeys(bs.KubeReserved, reservedKeys, "kubeReserved", p),
		SystemReserved: filterKeys(bs.SystemReserved, reservedKeys, "systemReserved", p),
		EvictionHard:   filterKeys(bs.EvictionHard, evictionSigns, "evictionHard", p),
		EvictionSoft:   filterKeys(bs.EvictionSoft, evictionSigns, "evictionSoft", p),
	}
	var extra []string
	args := bs.ExtraArgs
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			val = args[i+1]
			i++
		}
		flag := strings.TrimLeft(name, "-")
		var err error
		switch flag {
		case "image-gc-high-threshold":
			k.ImageGCHighThresholdPercent, err = parseInt32(val)
		case "image-gc-low-threshold":
			k.ImageGCLowThresholdPercent, err = parseInt32(val)
		case "pods-per-core":
			k.PodsPerCore, err = parseInt32(val)
		case "eviction-max-pod-grace-period":
			k.EvictionMaxPodGracePeriod, err = parseInt32(val)
		case "cpu-cfs-quota":
			var b bool
			b, err = strconv.ParseBool(val)
			k.CPUCFSQuota = &b
		case "eviction-soft-grace-period":
			k.EvictionSoftGracePeriod, err = parseGracePeriods(val)
		default:
			extra = append(extra, "--"+flag+"="+val)
			continue
		}
		if err != nil {
			p.warn("kubelet flag --%s=%s is not valid and was dropped: %v", flag, val, err)
		}
	}
	for key := range k.EvictionSoft {
		if _, ok := k.EvictionSoftGracePeriod[key]; !ok {
			p.warn("kubelet evictionSoft %s has no grace period (--eviction-soft-grace-period) and was dropped: Karpenter requires one", key)
			delete(k.EvictionSoft, key)
		}
	}
	for key := range k.EvictionSoftGracePeriod {
		if _, ok := k.EvictionSoft[key]; !ok {
			delete(k.EvictionSoftGracePeriod, key)
		}
	}
	if len(k.EvictionSoft) == 0 {
		k.EvictionSoft, k.EvictionSoftGracePeriod = nil, nil
	}
	if reflect.ValueOf(*k).IsZero() {
		return nil, extra
	}
	return k, extra
}

func filterKeys(m map[string]string, allowed map[string]bool, field string, p *groupPlan) map[string]string {
	var out map[string]string
	for _, k := range sortedKeys(m) {
		if !allowed[k] {
			p.warn("kubelet %s key %q is not one Karpenter accepts and was dropped", field, k)
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = m[k]
	}
	return out
}

func parseInt32(s string) (*int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return nil, err
	}
	i := int32(v)
	return &i, nil
}

// parseGracePeriods reads memory.available=1m30s,nodefs.available=2m.
func parseGracePeriods(s string) (map[string]metav1.Duration, error) {
	out := map[string]metav1.Duration{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not signal=duration", kv)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = metav1.Duration{Duration: d}
	}
	return out, nil
}

// rootDevice is the device whose size is the node's ephemeral storage.
func rootDevice(family string) string {
	if family == karpv1.AMIFamilyBottlerocket {
		return "/dev/xvdb"
	}
	return "/dev/xvda"
}

func blockDevices(in []inventory.BlockDevice, family string, p *groupPlan) []*karpv1.BlockDeviceMapping {
	var out []*karpv1.BlockDeviceMapping
	root := rootDevice(family)
	for _, bd := range in {
		if bd.VolumeSizeGiB <= 0 && bd.SnapshotID == "" {
			p.note("block device %s has neither size nor snapshot (instance store or no-device) and was not carried", bd.DeviceName)
			continue
		}
		ebs := &karpv1.BlockDevice{
			DeleteOnTermination: bd.DeleteOnTermination,
			Encrypted:           bd.Encrypted,
		}
		if bd.VolumeSizeGiB > 0 {
			q := resource.MustParse(strconv.Itoa(int(bd.VolumeSizeGiB)) + "Gi")
			ebs.VolumeSize = &q
		}
		if bd.VolumeType != "" {
			ebs.VolumeType = ptr(bd.VolumeType)
		}
		if bd.IOPS != nil {
			ebs.IOPS = ptr(int64(*bd.IOPS))
		}
		if bd.Throughput != nil {
			ebs.Throughput = ptr(int64(*bd.Throughput))
		}
		if bd.KMSKeyID != "" {
			ebs.KMSKeyID = ptr(bd.KMSKeyID)
		}
		if bd.SnapshotID != "" {
			ebs.SnapshotID = ptr(bd.SnapshotID)
		}
		out = append(out, &karpv1.BlockDeviceMapping{
			DeviceName: ptr(bd.DeviceName),
			EBS:        ebs,
			RootVolume: bd.DeviceName == root,
		})
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].DeviceName < *out[j].DeviceName })
	return out
}

// restrictedTag says whether Karpenter rejects or owns an instance tag, or
// it belongs to the old group and must not follow the nodes.
func restrictedTag(k string) bool {
	switch {
	case k == "eks:eks-cluster-name", k == "karpenter.sh/nodepool", k == "karpenter.sh/nodeclaim", k == "karpenter.k8s.aws/ec2nodeclass":
		return true
	case strings.HasPrefix(k, "kubernetes.io/cluster"), strings.HasPrefix(k, "aws:"), strings.HasPrefix(k, "eks:"),
		strings.HasPrefix(k, "k8s.io/cluster-autoscaler"), strings.HasPrefix(k, "aws-cloudformation:"):
		return true
	}
	return false
}

func instanceTags(tags map[string]string, p *groupPlan) map[string]string {
	var out map[string]string
	var dropped []string
	for _, k := range sortedKeys(tags) {
		if restrictedTag(k) {
			dropped = append(dropped, k)
			continue
		}
		if tags[k] == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = tags[k]
	}
	if len(dropped) > 0 {
		p.note("instance tags not carried (owned by EKS, Karpenter, Cluster Autoscaler or AWS): %s", strings.Join(dropped, ", "))
	}
	return out
}

func metadataOptions(g *inventory.NodeGroup, p *groupPlan) *karpv1.MetadataOptions {
	var mo *inventory.MetadataOptions
	if g.LaunchTemplate != nil {
		mo = g.LaunchTemplate.MetadataOptions
	}
	if mo == nil {
		if g.Kind == inventory.Managed {
			p.note("IMDS hop limit %d carried over from the EKS managed-group default (Karpenter's default is 1, which blocks IMDS from pods not on the host network)", eksMNGDefaultHopLimit)
			return &karpv1.MetadataOptions{
				HTTPEndpoint:            ptr("enabled"),
				HTTPProtocolIPv6:        ptr("disabled"),
				HTTPPutResponseHopLimit: ptr(int64(eksMNGDefaultHopLimit)),
				HTTPTokens:              ptr("required"),
			}
		}
		return nil
	}
	out := &karpv1.MetadataOptions{}
	if mo.HTTPEndpoint != "" {
		out.HTTPEndpoint = ptr(mo.HTTPEndpoint)
	}
	if mo.HTTPProtocolIPv6 != "" {
		out.HTTPProtocolIPv6 = ptr(mo.HTTPProtocolIPv6)
	}
	if mo.HTTPTokens != "" {
		out.HTTPTokens = ptr(mo.HTTPTokens)
		if mo.HTTPTokens == "optional" {
			p.note("IMDSv1 stays allowed (httpTokens optional) as the group had it; consider required")
		}
	}
	if mo.HTTPPutResponseHopLimit != nil {
		out.HTTPPutResponseHopLimit = ptr(int64(*mo.HTTPPutResponseHopLimit))
		if *mo.HTTPPutResponseHopLimit != 1 {
			p.note("IMDS hop limit %d carried over from the launch template (Karpenter's default is 1)", *mo.HTTPPutResponseHopLimit)
		}
	}
	if *out == (karpv1.MetadataOptions{}) {
		return nil
	}
	return out
}

func ptr[T any](v T) *T { return &v }
