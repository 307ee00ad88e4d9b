// Package generate turns the node groups of an inventory into Karpenter v1
// NodePools and EC2NodeClasses (strategies multiple, single and weighted),
// and writes them as a kustomize tree — a base plus one overlay per
// environment profile — that it builds with kustomize before it succeeds.
//
// Generate is pure: inventory and options in, objects and findings out.
// Write lays the result out on disk without overwriting files a user edited.
// Run does both, as the `generate` command does.
package generate

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Strategy is how node groups become NodePools.
type Strategy string

// Strategies.
const (
	// StrategyMultiple makes one NodePool and EC2NodeClass per node group.
	StrategyMultiple Strategy = "multiple"
	// StrategySingle merges the groups that can share a NodePool.
	StrategySingle Strategy = "single"
	// StrategyWeighted makes ordered pools per capacity type, so scheduling
	// prefers the first (WeightOrder) and falls back to the next.
	StrategyWeighted Strategy = "weighted"
)

// Flexibility is how wide a NodePool's instance-type requirements are.
type Flexibility string

// Flexibilities.
const (
	// FlexibilityExact allows exactly the group's instance types.
	FlexibilityExact Flexibility = "exact"
	// FlexibilityFamily allows the group's families in the group's sizes.
	FlexibilityFamily Flexibility = "family"
	// FlexibilitySimilar allows types of the same category and architecture
	// with at least the CPU and memory of the group's smallest type.
	FlexibilitySimilar Flexibility = "similar"
)

// SelectorMode is how EC2NodeClasses select subnets and security groups.
type SelectorMode string

// Selector modes.
const (
	// SelectorsTag selects by the karpenter.sh/discovery=<cluster> tag.
	SelectorsTag SelectorMode = "tag"
	// SelectorsIDs selects the group's subnets and security groups by id.
	SelectorsIDs SelectorMode = "ids"
)

// NodeRoleFromNodeGroup as Options.NodeRole reuses each group's node role.
const NodeRoleFromNodeGroup = "from-nodegroup"

// DiscoveryTagKey is the tag Karpenter discovers subnets and security groups by.
const DiscoveryTagKey = "karpenter.sh/discovery"

// Options tune Generate. The zero value generates with the defaults.
type Options struct {
	Strategy    Strategy
	Flexibility Flexibility
	// KeepNodeGroupLabel puts eks.amazonaws.com/nodegroup=<group> on the
	// nodes of a managed group's pool so workloads pinned to it still schedule.
	KeepNodeGroupLabel bool
	// NodeRole is the EC2NodeClass role: empty for KarpenterNodeRole-<cluster>,
	// NodeRoleFromNodeGroup for each group's own role, or a role name.
	NodeRole  string
	Selectors SelectorMode
	// WeightOrder lists capacity types from most to least preferred for the
	// weighted strategy; default on-demand, spot.
	WeightOrder []string
	// KeepAL2 keeps Amazon Linux 2 EKS-optimised AMIs instead of moving them
	// to AL2023 (AL2 is end of life).
	KeepAL2 bool
	// ControllerNodeGroup is the legacy group the Karpenter controller stays
	// on; empty picks one (see HelmValues).
	ControllerNodeGroup string
	// Overprovisioning adds pause pods under a negative PriorityClass, one
	// Deployment per NodePool, in Namespace.
	Overprovisioning bool
	Namespace        string
	// Catalog holds instance-type facts; nil means catalog.Default().
	Catalog *catalog.Catalog
}

// DefaultOptions are the command's defaults.
func DefaultOptions() Options {
	return Options{
		Strategy:           StrategyMultiple,
		Flexibility:        FlexibilityExact,
		KeepNodeGroupLabel: true,
		Selectors:          SelectorsTag,
		WeightOrder:        []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot},
		Namespace:          "karpenter-migrate",
	}
}

func (o *Options) normalise() error {
	d := DefaultOptions()
	if o.Strategy == "" {
		o.Strategy = d.Strategy
	}
	if o.Flexibility == "" {
		o.Flexibility = d.Flexibility
	}
	if o.Selectors == "" {
		o.Selectors = d.Selectors
	}
	if len(o.WeightOrder) == 0 {
		o.WeightOrder = d.WeightOrder
	}
	if o.Namespace == "" {
		o.Namespace = d.Namespace
	}
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	var errs []error
	if !slices.Contains([]Strategy{StrategyMultiple, StrategySingle, StrategyWeighted}, o.Strategy) {
		errs = append(errs, fmt.Errorf("strategy %q: want multiple, single or weighted", o.Strategy))
	}
	if !slices.Contains([]Flexibility{FlexibilityExact, FlexibilityFamily, FlexibilitySimilar}, o.Flexibility) {
		errs = append(errs, fmt.Errorf("flexibility %q: want exact, family or similar", o.Flexibility))
	}
	if o.Selectors != SelectorsTag && o.Selectors != SelectorsIDs {
		errs = append(errs, fmt.Errorf("selectors %q: want tag or ids", o.Selectors))
	}
	seen := map[string]bool{}
	for _, c := range o.WeightOrder {
		if c != karpv1.CapacityTypeOnDemand && c != karpv1.CapacityTypeSpot {
			errs = append(errs, fmt.Errorf("weight order %q: want on-demand and spot in order of preference", c))
		}
		if seen[c] {
			errs = append(errs, fmt.Errorf("weight order names %q twice", c))
		}
		seen[c] = true
	}
	return errors.Join(errs...)
}

// Finding is a warning or a note about one node group or pool.
type Finding struct {
	// Subject is the node group (or pool) the finding is about; empty for
	// the cluster as a whole.
	Subject string `json:"subject,omitempty"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	if f.Subject == "" {
		return f.Message
	}
	return f.Subject + ": " + f.Message
}

// PoolSummary describes one generated NodePool.
type PoolSummary struct {
	Name          string   `json:"name"`
	NodeClass     string   `json:"nodeClass"`
	NodeGroups    []string `json:"nodeGroups"`
	CapacityTypes []string `json:"capacityTypes"`
	Weight        *int32   `json:"weight,omitempty"`
	// InstanceTypes is how many catalogue types the requirements allow.
	InstanceTypes int `json:"instanceTypes"`
}

// Result is what Generate produced.
type Result struct {
	Cluster     string                 `json:"cluster"`
	Strategy    Strategy               `json:"strategy"`
	NodePools   []*karpv1.NodePool     `json:"-"`
	NodeClasses []*karpv1.EC2NodeClass `json:"-"`
	Pools       []PoolSummary          `json:"pools"`
	// Warnings are problems: a group that could not be mapped, or mapped
	// with something lost. Notes say what was carried over or decided.
	Warnings []Finding `json:"warnings,omitempty"`
	Notes    []Finding `json:"notes,omitempty"`
	// Unmapped says, for each group no NodePool was written for, why and
	// what to do (also among Warnings); plan names it when a wave of the
	// group finds no NodePool.
	Unmapped map[string]string `json:"unmapped,omitempty"`
	// HelmValues are the Karpenter chart values for this cluster.
	HelmValues map[string]any `json:"-"`
	// Overprovisioning are the pause-pod objects, when asked for.
	Overprovisioning []map[string]any `json:"-"`
}

// NoPoolWritten starts the reason a group was not mapped (Result.Unmapped).
const NoPoolWritten = "no NodePool or EC2NodeClass written for this group: "

// Generate maps the inventory's node groups to NodePools and EC2NodeClasses.
// A group that cannot be mapped becomes a warning and the rest still
// generate; it is an error only when the options are invalid or no group
// could be mapped at all.
func Generate(inv *inventory.Inventory, opts Options) (*Result, error) {
	if inv == nil {
		return nil, errors.New("no inventory")
	}
	if err := opts.normalise(); err != nil {
		return nil, err
	}
	if inv.Cluster.Name == "" {
		return nil, errors.New("inventory: cluster.name is empty; the EC2NodeClass role, discovery tags and Helm values need it")
	}
	res := &Result{Cluster: inv.Cluster.Name, Strategy: opts.Strategy}
	usage := analyseWorkloads(inv)

	groups := slices.Clone(inv.NodeGroups)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	var plans []*groupPlan
	for i := range groups {
		g := &groups[i]
		p, err := planGroup(inv, g, &opts, usage)
		if err != nil {
			if res.Unmapped == nil {
				res.Unmapped = map[string]string{}
			}
			res.Unmapped[g.Name] = NoPoolWritten + err.Error()
			res.Warnings = append(res.Warnings, Finding{Subject: g.Name, Message: res.Unmapped[g.Name]})
			continue
		}
		res.Warnings = append(res.Warnings, p.warnings...)
		res.Notes = append(res.Notes, p.notes...)
		plans = append(plans, p)
	}
	if len(plans) == 0 {
		if len(groups) == 0 {
			return nil, errors.New("inventory has no node groups to generate from")
		}
		return nil, fmt.Errorf("no node group could be mapped: %s", joinFindings(res.Warnings))
	}

	var pools []*poolPlan
	switch opts.Strategy {
	case StrategyMultiple:
		pools = strategyMultiple(plans, &opts)
	case StrategySingle:
		var notes []Finding
		pools, notes = strategySingle(plans, &opts)
		res.Notes = append(res.Notes, notes...)
	case StrategyWeighted:
		var notes []Finding
		pools, notes = strategyWeighted(plans, &opts)
		res.Notes = append(res.Notes, notes...)
	}
	for _, pp := range pools {
		np, summary, warnings, notes := buildNodePool(inv, pp, &opts)
		res.NodePools = append(res.NodePools, np)
		res.Pools = append(res.Pools, summary)
		res.Warnings = append(res.Warnings, warnings...)
		res.Notes = append(res.Notes, notes...)
	}
	classes := map[string]*karpv1.EC2NodeClass{}
	for _, pp := range pools {
		if _, ok := classes[pp.className]; !ok {
			classes[pp.className] = buildNodeClass(pp.className, pp.class)
		}
	}
	for _, name := range sortedKeys(classes) {
		res.NodeClasses = append(res.NodeClasses, classes[name])
	}
	sort.Slice(res.NodePools, func(i, j int) bool { return res.NodePools[i].Name < res.NodePools[j].Name })
	sort.Slice(res.Pools, func(i, j int) bool { return res.Pools[i].Name < res.Pools[j].Name })

	hv, notes, err := helmValues(inv, &opts)
	if err != nil {
		return nil, err
	}
	res.HelmValues = hv
	res.Notes = append(res.Notes, notes...)
	if opts.Overprovisioning {
		res.Overprovisioning = overprovisioning(res.NodePools, pools, &opts)
	}
	return res, nil
}

// Unmapped is Result.Unmapped without generating the pools: for each
// group Generate would write no NodePool for, why and what to do.
func Unmapped(inv *inventory.Inventory, opts Options) (map[string]string, error) {
	if err := opts.normalise(); err != nil {
		return nil, err
	}
	usage := analyseWorkloads(inv)
	out := map[string]string{}
	for i := range inv.NodeGroups {
		g := &inv.NodeGroups[i]
		if _, err := planGroup(inv, g, &opts, usage); err != nil {
			out[g.Name] = NoPoolWritten + err.Error()
		}
	}
	return out, nil
}

func joinFindings(fs []Finding) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
