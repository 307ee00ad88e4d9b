package generate

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Cluster Autoscaler's node-template tag prefixes.
const (
	caLabelTagPrefix = "k8s.io/cluster-autoscaler/node-template/label/"
	caTaintTagPrefix = "k8s.io/cluster-autoscaler/node-template/taint/"
	// caDefaultScaleDownUnneeded is CA's --scale-down-unneeded-time default.
	caDefaultScaleDownUnneeded = 10 * time.Minute
)

// groupPlan is one node group read for mapping: everything a NodePool and
// EC2NodeClass need, before a strategy decides how groups become pools.
type groupPlan struct {
	g            *inventory.NodeGroup
	types        []*catalog.InstanceType // known types, in the group's order
	unknownTypes []string
	arch         []string
	os           string
	zones        []string
	capacity     []string
	labels       map[string]string // without the legacy node-group label
	taints       []corev1.Taint
	class        karpv1.EC2NodeClassSpec
	// consolidateAfter mirrors CA's scale-down-unneeded-time; nil is Never.
	consolidateAfter *time.Duration
	pinnedBy         []string // pods selecting eks.amazonaws.com/nodegroup=<group>
	pinsInstanceType []string // pods on the group selecting an instance type
	maxRequest       corev1.ResourceList
	warnings, notes  []Finding
}

func (p *groupPlan) warn(format string, a ...any) {
	p.warnings = append(p.warnings, Finding{Subject: p.g.Name, Message: fmt.Sprintf(format, a...)})
}

func (p *groupPlan) note(format string, a ...any) {
	p.notes = append(p.notes, Finding{Subject: p.g.Name, Message: fmt.Sprintf(format, a...)})
}

// planGroup reads one node group; an error means it cannot be mapped.
func planGroup(inv *inventory.Inventory, g *inventory.NodeGroup, opts *Options, usage *workloadUsage) (*groupPlan, error) {
	p := &groupPlan{
		g:                g,
		pinnedBy:         usage.pinnedToGroup[g.Name],
		pinsInstanceType: usage.pinsInstanceType[g.Name],
		maxRequest:       usage.maxRequest[g.Name],
	}
	p.os = groupOS(g)

	names := uniqueStrings(g.InstanceTypes)
	if len(names) == 0 && g.LaunchTemplate != nil && g.LaunchTemplate.InstanceType != "" {
		names = []string{g.LaunchTemplate.InstanceType}
	}
	if len(names) == 0 {
		for _, in := range g.Instances {
			names = append(names, in.InstanceType)
		}
		names = uniqueStrings(names)
		sort.Strings(names)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no instance types: neither the group, its launch template nor its instances name one")
	}
	for _, n := range names {
		if it, ok := opts.Catalog.Get(n); ok {
			p.types = append(p.types, it)
		} else {
			p.unknownTypes = append(p.unknownTypes, n)
		}
	}
	if len(p.unknownTypes) > 0 {
		p.warn("instance types %s are not in the catalogue: kept as named, but limits and --flexibility cannot use them", strings.Join(p.unknownTypes, ", "))
	}

	class, err := nodeClassFor(inv, g, p, opts)
	if err != nil {
		return nil, err
	}
	p.class = class
	p.arch = groupArch(g, p.types, class)

	p.zones = groupZones(inv, g)
	if len(p.zones) == 0 {
		p.warn("no zones found for the group's subnets: the NodePool may launch in any zone the EC2NodeClass subnets cover")
	}
	p.capacity = groupCapacity(g, p, opts)
	p.labels = groupLabels(g, p)
	p.taints = groupTaints(g, p)
	p.consolidateAfter = scaleDownUnneeded(inv, g, p)
	return p, nil
}

func groupOS(g *inventory.NodeGroup) string {
	if g.OS != "" {
		return strings.ToLower(g.OS)
	}
	if strings.HasPrefix(strings.ToUpper(g.AMIType), "WINDOWS") {
		return "windows"
	}
	return "linux"
}

// groupArch returns the architectures the pool may launch: those of the
// instance types, narrowed to the AMI's when the EC2NodeClass pins one AMI.
func groupArch(g *inventory.NodeGroup, types []*catalog.InstanceType, class karpv1.EC2NodeClassSpec) []string {
	amiArch := g.Arch
	if amiArch == "" && g.AMIType != "" {
		if strings.Contains(strings.ToUpper(g.AMIType), "ARM") {
			amiArch = "arm64"
		} else if g.AMIType != "CUSTOM" {
			amiArch = "amd64"
		}
	}
	var arch []string
	for _, it := range types {
		arch = append(arch, it.Arch)
	}
	arch = uniqueStrings(arch)
	pinned := len(class.AMISelectorTerms) > 0 && class.AMISelectorTerms[0].ID != ""
	switch {
	case len(arch) == 0 && amiArch != "":
		arch = []string{amiArch}
	case len(arch) == 0:
		arch = []string{"amd64"}
	case pinned && amiArch != "" && slices.Contains(arch, amiArch):
		arch = []string{amiArch}
	}
	sort.Strings(arch)
	return arch
}

func groupZones(inv *inventory.Inventory, g *inventory.NodeGroup) []string {
	zones := slices.Clone(g.Zones)
	if len(zones) == 0 {
		byID := map[string]string{}
		for _, s := range inv.Subnets {
			byID[s.ID] = s.Zone
		}
		for _, id := range g.SubnetIDs {
			if z := byID[id]; z != "" {
				zones = append(zones, z)
			}
		}
	}
	zones = uniqueStrings(zones)
	sort.Strings(zones)
	return zones
}

func groupCapacity(g *inventory.NodeGroup, p *groupPlan, opts *Options) []string {
	if m := g.Mixed; m != nil {
		switch {
		case m.OnDemandPercentageAboveBaseCapacity >= 100:
			return []string{karpv1.CapacityTypeOnDemand}
		case m.OnDemandBaseCapacity == 0 && m.OnDemandPercentageAboveBaseCapacity == 0:
			return []string{karpv1.CapacityTypeSpot}
		default:
			if opts.Strategy == StrategyWeighted {
				return []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}
			}
			p.note("mixed instances policy (on-demand base %d, %d%% on-demand above base): a NodePool cannot hold that split, so its pool allows both capacity types and Karpenter prefers spot; the weighted strategy keeps the split with limits",
				m.OnDemandBaseCapacity, m.OnDemandPercentageAboveBaseCapacity)
			return []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}
		}
	}
	switch c := strings.ReplaceAll(strings.ToLower(g.CapacityType), "_", "-"); c {
	case karpv1.CapacityTypeSpot:
		return []string{karpv1.CapacityTypeSpot}
	case karpv1.CapacityTypeOnDemand, "":
		return []string{karpv1.CapacityTypeOnDemand}
	default:
		p.warn("capacity type %q is not on-demand or spot: using on-demand", g.CapacityType)
		return []string{karpv1.CapacityTypeOnDemand}
	}
}

// groupLabels collects the labels the group's nodes carry: Cluster
// Autoscaler's node-template tags, then the managed group's labels, then the
// bootstrap --node-labels (each source wins over the one before), keeping
// only labels Karpenter may set.
func groupLabels(g *inventory.NodeGroup, p *groupPlan) map[string]string {
	type src struct {
		name   string
		labels map[string]string
	}
	ca := map[string]string{}
	for k, v := range g.Tags {
		if key, ok := strings.CutPrefix(k, caLabelTagPrefix); ok {
			ca[key] = v
		}
	}
	sources := []src{{"Cluster Autoscaler node-template tag", ca}, {"node group label", g.Labels}}
	if g.LaunchTemplate != nil && g.LaunchTemplate.Bootstrap != nil {
		sources = append(sources, src{"bootstrap --node-labels", g.LaunchTemplate.Bootstrap.NodeLabels})
	}
	out := map[string]string{}
	from := map[string]string{}
	for _, s := range sources {
		for _, k := range sortedKeys(s.labels) {
			v := s.labels[k]
			if ok, why := labelAllowed(k); !ok {
				if why != "" {
					p.note("label %s=%s (%s) not carried: %s", k, v, s.name, why)
				}
				continue
			}
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				p.warn("label key %q (%s) is not valid and was dropped: %s", k, s.name, strings.Join(errs, "; "))
				continue
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				p.warn("label %s=%q (%s) has an invalid value and was dropped: %s", k, v, s.name, strings.Join(errs, "; "))
				continue
			}
			if prev, ok := out[k]; ok && prev != v {
				p.warn("label %s is %q by %s but %q by %s: using %q", k, prev, from[k], v, s.name, v)
			}
			out[k] = v
			from[k] = s.name
		}
	}
	return out
}

// wellKnownRequirementKeys are labels Karpenter sets from requirements; a
// node-group label with one of these keys is expressed as a requirement.
var wellKnownRequirementKeys = map[string]bool{
	corev1.LabelInstanceTypeStable: true, corev1.LabelArchStable: true, corev1.LabelOSStable: true,
	corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true, labelBetaInstance: true,
	"beta.kubernetes.io/arch": true, "beta.kubernetes.io/os": true,
	"failure-domain.beta.kubernetes.io/zone": true, "failure-domain.beta.kubernetes.io/region": true,
	karpv1.CapacityTypeLabelKey: true,
}

// labelAllowed says whether a node-group label may become a NodePool
// template label; why is empty for labels dropped silently (set by EKS or
// Karpenter themselves).
func labelAllowed(key string) (ok bool, why string) {
	if wellKnownRequirementKeys[key] {
		return false, "" // expressed by the requirements
	}
	domain, _, hasDomain := strings.Cut(key, "/")
	if !hasDomain {
		return true, ""
	}
	switch {
	case domain == "eks.amazonaws.com":
		return false, "" // set by EKS on managed nodes; the node-group label is handled on its own
	case domain == "karpenter.sh" || strings.HasSuffix(domain, ".karpenter.sh"),
		domain == "karpenter.k8s.aws" || strings.HasSuffix(domain, ".karpenter.k8s.aws"):
		return false, "the domain is Karpenter's own"
	case domain == "node.kubernetes.io" || domain == "node-restriction.kubernetes.io":
		return true, ""
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"),
		domain == "k8s.io" || strings.HasSuffix(domain, ".k8s.io"):
		return false, "Karpenter and the kubelet may not set labels in the kubernetes.io and k8s.io domains (except node.kubernetes.io and node-restriction.kubernetes.io)"
	}
	return true, ""
}

var caTaintValue = regexp.MustCompile(`^(.*):(NoSchedule|NoExecute|PreferNoSchedule)$`)

// groupTaints collects taints from the managed group, the bootstrap
// --register-with-taints and Cluster Autoscaler's node-template tags; the
// first source that names a key and effect wins.
func groupTaints(g *inventory.NodeGroup, p *groupPlan) []corev1.Taint {
	var all []corev1.Taint
	all = append(all, g.Taints...)
	if g.LaunchTemplate != nil && g.LaunchTemplate.Bootstrap != nil {
		all = append(all, g.LaunchTemplate.Bootstrap.Taints...)
	}
	for _, k := range sortedKeys(g.Tags) {
		key, ok := strings.CutPrefix(k, caTaintTagPrefix)
		if !ok {
			continue
		}
		m := caTaintValue.FindStringSubmatch(g.Tags[k])
		if m == nil {
			p.warn("Cluster Autoscaler taint tag %s=%q is not value:Effect (NoSchedule, NoExecute or PreferNoSchedule) and was ignored", k, g.Tags[k])
			continue
		}
		all = append(all, corev1.Taint{Key: key, Value: m[1], Effect: corev1.TaintEffect(m[2])})
	}
	var out []corev1.Taint
	seen := map[string]corev1.Taint{}
	for _, t := range all {
		t.TimeAdded = nil
		id := t.Key + ":" + string(t.Effect)
		if prev, ok := seen[id]; ok {
			if prev.Value != t.Value {
				p.warn("taint %s has value %q and %q in different sources: using %q", id, prev.Value, t.Value, prev.Value)
			}
			continue
		}
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			p.warn("taint key %q is not valid and was dropped: %s", t.Key, strings.Join(errs, "; "))
			continue
		}
		seen[id] = t
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Effect < out[j].Effect
	})
	return out
}

// scaleDownUnneeded is how long CA waited before removing an unneeded node
// of this group, which is what consolidateAfter means to Karpenter.
func scaleDownUnneeded(inv *inventory.Inventory, g *inventory.NodeGroup, p *groupPlan) *time.Duration {
	d := caDefaultScaleDownUnneeded
	if ca := inv.ClusterAutoscaler; ca != nil {
		for i, a := range ca.Args {
			name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasVal && i+1 < len(ca.Args) && !strings.HasPrefix(ca.Args[i+1], "-") {
				val = ca.Args[i+1]
			}
			switch name {
			case "scale-down-enabled":
				if val == "false" {
					p.note("Cluster Autoscaler runs with --scale-down-enabled=false: the base pool does not consolidate (consolidateAfter Never) until a profile says otherwise")
					return nil
				}
			case "scale-down-unneeded-time":
				if v, err := time.ParseDuration(val); err == nil {
					d = v
				}
			}
		}
	}
	if v, ok := g.AutoscalingOptions["scaledownunneededtime"]; ok {
		if pd, err := time.ParseDuration(v); err == nil {
			d = pd
		} else {
			p.warn("autoscaling option scaledownunneededtime %q is not a duration and was ignored", v)
		}
	}
	return &d
}

func uniqueStrings(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
