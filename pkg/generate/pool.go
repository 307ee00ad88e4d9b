package generate

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Metadata the generator puts on what it writes.
const (
	managedByLabel       = "app.kubernetes.io/managed-by"
	managedByValue       = "karpenter-migrate"
	nodeGroupsAnnotation = "karpenter-migrate.io/node-groups"
	// EnvironmentLabel marks the objects of an overlay with its environment.
	EnvironmentLabel = "karpenter-migrate.io/environment"
)

const (
	// spotMinFamilies is the minValues a spot pool asks of instance families
	// so that Karpenter keeps several spot capacity pools to choose from.
	spotMinFamilies = 3
	// spotFewTypes is the instance-type count below which a spot pool is
	// reported as fragile.
	spotFewTypes = 5
	// similarMaxCPUFactor caps --flexibility similar at this multiple of the
	// group's largest vCPU count, so nodes do not grow far beyond what the
	// group ran.
	similarMaxCPUFactor = 2
)

// Weights of the weighted strategy, most preferred first.
var strategyWeights = []int32{100, 10}

// poolPlan is one NodePool to write: the groups it stands for and how.
type poolPlan struct {
	name, className string
	class           karpv1.EC2NodeClassSpec
	plans           []*groupPlan
	capacity        []string
	weight          *int32
	// nodes caps the node count per group for the pool's limits (weighted
	// splits); a group absent here counts with its max size.
	nodes map[*groupPlan]int32
	// mergedFrom is set for pools of the single strategy that merged groups.
	merged bool
}

func strategyMultiple(plans []*groupPlan, _ *Options) []*poolPlan {
	names := newNameAllocator()
	var out []*poolPlan
	for _, p := range plans {
		n := names.name(p.g.Name, "")
		out = append(out, &poolPlan{name: n, className: n, class: p.class, plans: []*groupPlan{p}, capacity: p.capacity})
	}
	return out
}

// strategyWeighted gives every group one pool per capacity type it uses,
// weighted by opts.WeightOrder; a mixed group's on-demand/spot split
// becomes the limits of its pools.
func strategyWeighted(plans []*groupPlan, opts *Options) ([]*poolPlan, []Finding) {
	names := newNameAllocator()
	var out []*poolPlan
	var notes []Finding
	for _, p := range plans {
		className := names.name(p.g.Name, "")
		var caps []string
		for _, c := range opts.WeightOrder {
			if contains(p.capacity, c) {
				caps = append(caps, c)
			}
		}
		if len(caps) == 1 {
			w := weightOf(caps[0], opts)
			out = append(out, &poolPlan{name: className, className: className, class: p.class, plans: []*groupPlan{p}, capacity: caps, weight: &w})
			continue
		}
		shares := capacityShares(p.g, caps)
		var parts []string
		for _, c := range caps {
			w := weightOf(c, opts)
			pp := &poolPlan{name: names.name(p.g.Name, "-"+c), className: className, class: p.class,
				plans: []*groupPlan{p}, capacity: []string{c}, weight: &w}
			if n, ok := shares[c]; ok {
				pp.nodes = map[*groupPlan]int32{p: n}
				parts = append(parts, fmt.Sprintf("%s (weight %d, up to %d nodes)", pp.name, w, n))
			} else {
				parts = append(parts, fmt.Sprintf("%s (weight %d)", pp.name, w))
			}
			out = append(out, pp)
		}
		notes = append(notes, Finding{Subject: p.g.Name, Message: "weighted: split into " + strings.Join(parts, " then ")})
	}
	return out, notes
}

func weightOf(capacity string, opts *Options) int32 {
	for i, c := range opts.WeightOrder {
		if c == capacity {
			return strategyWeights[min(i, len(strategyWeights)-1)]
		}
	}
	return strategyWeights[len(strategyWeights)-1]
}

// capacityShares splits a mixed group's max size between capacity types as
// its MixedInstancesPolicy does: on-demand gets the base plus its percentage
// of the rest, spot the remainder. Without a policy there is no split.
func capacityShares(g *inventory.NodeGroup, caps []string) map[string]int32 {
	m := g.Mixed
	if m == nil || g.MaxSize <= 0 {
		return nil
	}
	base := min(m.OnDemandBaseCapacity, g.MaxSize)
	above := int32(math.Ceil(float64(g.MaxSize-base) * float64(m.OnDemandPercentageAboveBaseCapacity) / 100))
	od := min(base+above, g.MaxSize)
	shares := map[string]int32{karpv1.CapacityTypeOnDemand: od, karpv1.CapacityTypeSpot: g.MaxSize - od}
	out := map[string]int32{}
	for _, c := range caps {
		out[c] = shares[c]
	}
	return out
}

// mergeKey is what groups must share to share a NodePool.
type mergeKey struct {
	Taints   []corev1.Taint          `json:"taints"`
	Labels   map[string]string       `json:"labels"`
	Capacity []string                `json:"capacity"`
	OS       string                  `json:"os"`
	Class    karpv1.EC2NodeClassSpec `json:"class"`
}

func keyOf(p *groupPlan) mergeKey {
	return mergeKey{Taints: p.taints, Labels: p.labels, Capacity: p.capacity, OS: p.os, Class: p.class}
}

// strategySingle merges groups that can share a pool into "default"; the
// others stay separate, and the notes say why.
func strategySingle(plans []*groupPlan, opts *Options) ([]*poolPlan, []Finding) {
	type bucket struct {
		key   string
		plans []*groupPlan
	}
	var buckets []*bucket
	byKey := map[string]*bucket{}
	var notes []Finding
	for _, p := range plans {
		if opts.KeepNodeGroupLabel && p.g.Kind == inventory.Managed && len(p.pinnedBy) > 0 {
			buckets = append(buckets, &bucket{key: "pinned/" + p.g.Name, plans: []*groupPlan{p}})
			continue
		}
		b, _ := json.Marshal(keyOf(p))
		k := string(b)
		if bk, ok := byKey[k]; ok {
			bk.plans = append(bk.plans, p)
			continue
		}
		bk := &bucket{key: k, plans: []*groupPlan{p}}
		byKey[k] = bk
		buckets = append(buckets, bk)
	}
	// The largest mergeable bucket becomes "default"; when nothing merges
	// and there is more than one pool, every pool keeps its group's name.
	pinned := func(b *bucket) bool { return strings.HasPrefix(b.key, "pinned/") }
	primary := buckets[0]
	for _, b := range buckets[1:] {
		if len(b.plans) > len(primary.plans) || (pinned(primary) && !pinned(b) && len(b.plans) == len(primary.plans)) {
			primary = b
		}
	}
	names := newNameAllocator()
	var out []*poolPlan
	var primaryName string
	if len(primary.plans) > 1 || len(buckets) == 1 {
		primaryName = names.name("default", "")
	} else {
		primaryName = names.name(primary.plans[0].g.Name, "")
	}
	first := primary.plans[0]
	for _, b := range buckets {
		var name string
		if b == primary {
			name = primaryName
		} else {
			name = names.name(b.plans[0].g.Name, "")
		}
		pp := &poolPlan{name: name, className: name, class: b.plans[0].class, plans: b.plans, capacity: b.plans[0].capacity, merged: len(b.plans) > 1}
		out = append(out, pp)
		var groups []string
		for _, p := range b.plans {
			groups = append(groups, p.g.Name)
		}
		if b == primary {
			notes = append(notes, Finding{Subject: name, Message: "single: node groups " + strings.Join(groups, ", ") + " share this pool"})
			continue
		}
		for _, p := range b.plans {
			notes = append(notes, Finding{Subject: p.g.Name, Message: fmt.Sprintf("single: stays out of pool %s (in pool %s): %s", primaryName, name, whyApart(first, p, opts))})
		}
	}
	return out, notes
}

// whyApart explains why b cannot share a pool with a.
func whyApart(a, b *groupPlan, opts *Options) string {
	if opts.KeepNodeGroupLabel && b.g.Kind == inventory.Managed && len(b.pinnedBy) > 0 {
		return fmt.Sprintf("pods select %s=%s (%s), which a shared pool cannot label", labelEKSNodeGroup, b.g.Name, strings.Join(firstN(b.pinnedBy, 3), ", "))
	}
	var why []string
	if !reflect.DeepEqual(a.taints, b.taints) {
		why = append(why, fmt.Sprintf("taints differ (%s vs %s)", taintsString(a.taints), taintsString(b.taints)))
	}
	if !reflect.DeepEqual(a.labels, b.labels) {
		why = append(why, fmt.Sprintf("labels differ (%s vs %s)", labelsString(a.labels), labelsString(b.labels)))
	}
	if !reflect.DeepEqual(a.capacity, b.capacity) {
		why = append(why, fmt.Sprintf("capacity types differ (%s vs %s)", strings.Join(a.capacity, ","), strings.Join(b.capacity, ",")))
	}
	if a.os != b.os {
		why = append(why, fmt.Sprintf("operating systems differ (%s vs %s)", a.os, b.os))
	}
	if fields := classDiff(a.class, b.class); len(fields) > 0 {
		why = append(why, "EC2NodeClass settings differ ("+strings.Join(fields, ", ")+")")
	}
	if len(why) == 0 {
		return "a larger set of groups shares the default pool"
	}
	return strings.Join(why, "; ")
}

// classDiff names the EC2NodeClass fields that differ.
func classDiff(a, b karpv1.EC2NodeClassSpec) []string {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	keys := map[string]bool{}
	for k := range ma {
		keys[k] = true
	}
	for k := range mb {
		keys[k] = true
	}
	var out []string
	for _, k := range sortedKeys(keys) {
		if !reflect.DeepEqual(ma[k], mb[k]) {
			out = append(out, k)
		}
	}
	return out
}

func taintsString(ts []corev1.Taint) string {
	if len(ts) == 0 {
		return "none"
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.ToString()
	}
	return strings.Join(s, ",")
}

func labelsString(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	var s []string
	for _, k := range sortedKeys(m) {
		s = append(s, k+"="+m[k])
	}
	return strings.Join(s, ",")
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// buildNodePool writes the NodePool of a pool plan.
func buildNodePool(inv *inventory.Inventory, pp *poolPlan, opts *Options) (*karpv1.NodePool, PoolSummary, []Finding, []Finding) {
	var warnings, notes []Finding
	var groups []string
	for _, p := range pp.plans {
		groups = append(groups, p.g.Name)
	}
	reqs, count, rw, rn := requirements(pp, opts)
	warnings = append(warnings, rw...)
	notes = append(notes, rn...)

	labels := map[string]string{}
	for k, v := range pp.plans[0].labels {
		labels[k] = v
	}
	if opts.KeepNodeGroupLabel {
		if len(pp.plans) == 1 && pp.plans[0].g.Kind == inventory.Managed {
			labels[labelEKSNodeGroup] = pp.plans[0].g.Name
			if len(pp.capacity) == 1 && workloadsSelect(inv, labelEKSCapacityType) {
				labels[labelEKSCapacityType] = map[string]string{karpv1.CapacityTypeOnDemand: "ON_DEMAND", karpv1.CapacityTypeSpot: "SPOT"}[pp.capacity[0]]
			}
		} else if pp.merged {
			notes = append(notes, Finding{Subject: pp.name, Message: fmt.Sprintf("merged pool does not carry %s (no pod in the inventory selects these groups by it)", labelEKSNodeGroup)})
		}
	}
	for _, p := range pp.plans {
		if len(p.pinnedBy) > 0 && labels[labelEKSNodeGroup] != p.g.Name {
			warnings = append(warnings, Finding{Subject: p.g.Name, Message: fmt.Sprintf(
				"pods select %s=%s (%s) but pool %s does not carry that label: they would stay Pending after the drain; remove the selector, or add the label to the pool (--keep-nodegroup-label keeps it for managed groups only)",
				labelEKSNodeGroup, p.g.Name, strings.Join(firstN(p.pinnedBy, 3), ", "), pp.name)})
		}
	}

	np := &karpv1.NodePool{
		TypeMeta: metav1.TypeMeta{APIVersion: karpv1.APIVersion, Kind: karpv1.NodePoolKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        pp.name,
			Labels:      map[string]string{managedByLabel: managedByValue},
			Annotations: map[string]string{nodeGroupsAnnotation: strings.Join(groups, ",")},
		},
	}
	np.Spec.Template.ObjectMeta.Labels = labels
	np.Spec.Template.Spec.Taints = pp.plans[0].taints
	np.Spec.Template.Spec.Requirements = reqs
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: karpv1.AWSGroup, Kind: karpv1.EC2NodeClassKind, Name: pp.className}
	np.Spec.Disruption = karpv1.Disruption{
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
		ConsolidateAfter:    poolConsolidateAfter(pp),
	}
	np.Spec.Weight = pp.weight
	limits, lnotes := poolLimits(pp)
	np.Spec.Limits = limits
	notes = append(notes, lnotes...)

	return np, PoolSummary{
		Name: pp.name, NodeClass: pp.className, NodeGroups: groups,
		CapacityTypes: pp.capacity, Weight: pp.weight, InstanceTypes: count,
	}, warnings, notes
}

func workloadsSelect(inv *inventory.Inventory, key string) bool {
	for i := range inv.Pods {
		if _, ok := podSelections(&inv.Pods[i])[key]; ok {
			return true
		}
	}
	return false
}

// poolConsolidateAfter is the longest CA scale-down delay of the pool's
// groups, so the base is never more eager than Cluster Autoscaler was.
func poolConsolidateAfter(pp *poolPlan) karpv1.NillableDuration {
	var longest *time.Duration
	for _, p := range pp.plans {
		if p.consolidateAfter == nil {
			return karpv1.NillableDuration{}
		}
		if longest == nil || *p.consolidateAfter > *longest {
			longest = p.consolidateAfter
		}
	}
	return karpv1.NewNillableDuration(*longest)
}

// poolLimits caps the pool at what its groups could reach: max size times
// the largest instance type, summed over the groups.
func poolLimits(pp *poolPlan) (corev1.ResourceList, []Finding) {
	var cpu, memMiB int64
	for _, p := range pp.plans {
		nodes := p.g.MaxSize
		if n, ok := pp.nodes[p]; ok {
			nodes = n
		}
		if len(p.types) == 0 || len(p.unknownTypes) > 0 {
			return nil, []Finding{{Subject: pp.name, Message: "no limits: the size of some instance types is unknown"}}
		}
		if nodes <= 0 {
			return nil, []Finding{{Subject: pp.name, Message: fmt.Sprintf("no limits: node group %s has max size %d", p.g.Name, nodes)}}
		}
		var maxCPU, maxMem int64
		for _, it := range p.types {
			maxCPU = max(maxCPU, int64(it.VCPU))
			maxMem = max(maxMem, it.MemoryMiB)
		}
		cpu += int64(nodes) * maxCPU
		memMiB += int64(nodes) * maxMem
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(strconv.FormatInt(memMiB, 10) + "Mi"),
	}, nil
}

// requirements builds the pool's requirements and counts the catalogue
// types they allow.
func requirements(pp *poolPlan, opts *Options) ([]karpv1.NodeSelectorRequirementWithMinValues, int, []Finding, []Finding) {
	var warnings, notes []Finding
	var names []string
	var known []*catalog.InstanceType
	var arch, zones []string
	var pins []string
	osName := pp.plans[0].os
	unknown := false
	for _, p := range pp.plans {
		for _, it := range p.types {
			names = append(names, it.Name)
			known = append(known, it)
		}
		names = append(names, p.unknownTypes...)
		unknown = unknown || len(p.unknownTypes) > 0
		arch = append(arch, p.arch...)
		zones = append(zones, p.zones...)
		pins = append(pins, p.pinsInstanceType...)
	}
	names, arch, zones = sortedUnique(names), sortedUnique(arch), sortedUnique(zones)
	in := func(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	op := func(key string, o corev1.NodeSelectorOperator, v int64) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: o, Values: []string{strconv.FormatInt(v, 10)}}
	}
	flex := opts.Flexibility
	if flex != FlexibilityExact && (unknown || len(known) == 0) {
		warnings = append(warnings, Finding{Subject: pp.name, Message: fmt.Sprintf("--flexibility %s needs every instance type in the catalogue: using the exact types", flex)})
		flex = FlexibilityExact
	}
	var reqs []karpv1.NodeSelectorRequirementWithMinValues
	switch flex {
	case FlexibilityExact:
		reqs = append(reqs, in(corev1.LabelInstanceTypeStable, names...))
	case FlexibilityFamily:
		var fams, sizes []string
		for _, it := range known {
			fams = append(fams, it.Family)
			sizes = append(sizes, it.Size)
		}
		reqs = append(reqs, in(karpv1.LabelInstanceFamily, sortedUnique(fams)...), in(karpv1.LabelInstanceSize, sortedUnique(sizes)...))
	case FlexibilitySimilar:
		var cats []string
		minCPU, maxCPU, minMem, minGen := int64(math.MaxInt64), int64(0), int64(math.MaxInt64), math.MaxInt
		for _, it := range known {
			cats = append(cats, it.Category)
			minCPU, maxCPU = min(minCPU, int64(it.VCPU)), max(maxCPU, int64(it.VCPU))
			minMem = min(minMem, it.MemoryMiB)
			minGen = min(minGen, it.Generation)
		}
		reqs = append(reqs,
			in(karpv1.LabelInstanceCategory, sortedUnique(cats)...),
			op(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, minCPU-1),
			op(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, maxCPU*similarMaxCPUFactor+1),
			op(karpv1.LabelInstanceMemory, corev1.NodeSelectorOpGt, minMem-1),
		)
		if minGen > 0 {
			reqs = append(reqs, op(karpv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, int64(minGen-1)))
		}
	}
	reqs = append(reqs, in(corev1.LabelArchStable, arch...), in(corev1.LabelOSStable, osName))
	if len(zones) > 0 {
		reqs = append(reqs, in(corev1.LabelTopologyZone, zones...))
	}
	capacity := sortedUnique(pp.capacity)
	reqs = append(reqs, in(karpv1.CapacityTypeLabelKey, capacity...))

	matched := matchingTypes(opts.Catalog, reqs)
	count := len(matched)
	if contains(capacity, karpv1.CapacityTypeSpot) {
		families := map[string]bool{}
		for _, it := range matched {
			families[it.Family] = true
		}
		switch {
		case count < spotFewTypes:
			warnings = append(warnings, Finding{Subject: pp.name, Message: fmt.Sprintf("spot pool allows only %d instance type(s); spot capacity is reliable with many: consider --flexibility similar", count)})
		case len(pins) > 0:
			notes = append(notes, Finding{Subject: pp.name, Message: fmt.Sprintf("no minValues: pods pin instance types (%s)", strings.Join(firstN(pins, 3), ", "))})
		case len(families) >= 2 && flex != FlexibilityExact:
			mv := min(spotMinFamilies, len(families))
			reqs = append(reqs, karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpExists, MinValues: &mv})
		}
	}
	return reqs, count, warnings, notes
}

// matchingTypes returns the catalogue types the requirements allow.
func matchingTypes(cat *catalog.Catalog, reqs []karpv1.NodeSelectorRequirementWithMinValues) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, it := range cat.Types() {
		ok := true
		for _, r := range reqs {
			if r.Key == corev1.LabelTopologyZone || r.Key == karpv1.CapacityTypeLabelKey {
				continue // vary per offering
			}
			if !satisfies(it.Labels, r) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, it)
		}
	}
	return out
}

func satisfies(labels map[string]string, r karpv1.NodeSelectorRequirementWithMinValues) bool {
	v, has := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(v, 10, 64)
		b, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}

func buildNodeClass(name string, spec karpv1.EC2NodeClassSpec) *karpv1.EC2NodeClass {
	return &karpv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.AWSAPIVersion, Kind: karpv1.EC2NodeClassKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{managedByLabel: managedByValue}},
		Spec:       spec,
	}
}
