package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// SteadyStateReference is the instant the plan's consolidation forecast
// starts from: the predicted Karpenter nodes are created, and their pods
// bound, at this time, and ExpectedCommand.After counts from it. It is a
// constant rather than the wall clock so that a plan of the same cluster
// hashes the same whenever it is made; disruption budgets with a cron
// schedule are judged as if the last wave ended then (a Saturday, 00:00
// UTC).
var SteadyStateReference = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// SteadyState is what Karpenter's disruption controller is expected to do
// with the fleet the waves leave behind (pkg/engine/disruption.Settle on
// the predicted nodes and the environment's NodePools, their disruption
// policy, consolidateAfter and budgets): the fleet right after the last
// wave, the fleet it settles into and the commands on the way. Both fleets
// are every node the migrated cluster runs: the Karpenter nodes and the
// nodes kept for the Karpenter controller (Kept), which consolidation
// leaves alone. So AfterMigration's $/h is the plan's Cost.AfterPerHour,
// and AfterConsolidation's is the one figure the plan, the wizard and the
// demo show after consolidation.
type SteadyState struct {
	// AfterMigration is the fleet right after the last wave (every wave's
	// PredictedNodes, and Kept).
	AfterMigration disruption.Fleet `json:"afterMigration"`
	// AfterConsolidation is the fleet once no disruption method acts.
	AfterConsolidation disruption.Fleet `json:"afterConsolidation"`
	// Kept are the legacy nodes kept for the Karpenter controller,
	// included in both fleets; nil when no group is kept.
	Kept *disruption.Fleet `json:"kept,omitempty"`
	// Commands are the disruptions Karpenter is expected to start, in order.
	Commands []ExpectedCommand `json:"commands,omitempty"`
	// SavingsPerHour is AfterMigration's $/h minus AfterConsolidation's.
	SavingsPerHour float64 `json:"savingsPerHour"`
}

// ExpectedCommand is one disruption Karpenter is expected to start after
// the migration.
type ExpectedCommand struct {
	// After is when, counted from the end of the last wave (the nodes'
	// consolidateAfter, then Karpenter's polling and validation delay
	// between commands).
	After  Duration          `json:"after"`
	Method disruption.Method `json:"method"`
	Action disruption.Action `json:"action"`
	// Nodes are the nodes removed (a wave's PredictedNodes by name, or an
	// earlier command's replacement).
	Nodes []ExpectedNode `json:"nodes"`
	// Replacement is the one node a Replace launches.
	Replacement    *ExpectedNode `json:"replacement,omitempty"`
	SavingsPerHour float64       `json:"savingsPerHour"`
	Why            string        `json:"why"`
}

// ExpectedNode is a node a command removes or launches.
type ExpectedNode struct {
	Name         string  `json:"name,omitempty"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	PricePerHour float64 `json:"pricePerHour"`
}

// steadyState settles the predicted fleet. Scheduling simulations are
// Karpenter's own (Options.KarpenterOnly) and spot-to-spot consolidation is
// off, as in a default Karpenter install: the forecast is what Karpenter
// does, not what a better packer could. beforePass is Settle's.
func steadyState(pr *predictor, pdbs []inventory.PDB, beforePass func(pass, nodes int) error) (*SteadyState, error) {
	if pr.typedErr != nil {
		return nil, pr.typedErr
	}
	in := settleInput(pr, pr.typed, pdbs)
	s, err := disruption.Settle(in, disruption.SettleOptions{BeforePass: beforePass})
	if err != nil {
		return nil, err
	}
	out := &SteadyState{AfterMigration: roundFleet(s.Before), AfterConsolidation: roundFleet(s.After), SavingsPerHour: round4(s.Savings)}
	// Settle names a replacement node <pool>-replacement-<n>, n counting
	// commands; a later command removes it under that name. Keep the name
	// only if the settled cluster or a later command knows it.
	known := map[string]bool{}
	for _, n := range s.Final.Nodes {
		known[n.Node.Name] = true
	}
	for _, pass := range s.Passes {
		for _, c := range pass.Commands {
			for _, n := range c.Nodes {
				known[n.Name] = true
			}
		}
	}
	seq := 0
	for _, pass := range s.Passes {
		for _, c := range pass.Commands {
			seq++
			ec := ExpectedCommand{After: Duration{pass.Now.Sub(SteadyStateReference)}, Method: c.Method, Action: c.Action, SavingsPerHour: round4(c.Savings), Why: c.Why}
			for _, n := range c.Nodes {
				ec.Nodes = append(ec.Nodes, ExpectedNode{Name: n.Name, NodePool: n.NodePool, InstanceType: n.InstanceType, Zone: n.Zone, CapacityType: n.CapacityType, PricePerHour: round4(n.Price)})
			}
			if r := c.Replacement; r != nil {
				name := fmt.Sprintf("%s-replacement-%d", r.NodePool, seq)
				if !known[name] {
					name = ""
				}
				ec.Replacement = &ExpectedNode{Name: name, NodePool: r.NodePool, InstanceType: r.InstanceType, Zone: r.Zone, CapacityType: r.CapacityType, PricePerHour: round4(r.Price)}
			}
			out.Commands = append(out.Commands, ec)
		}
	}
	return out, nil
}

// addKept adds the controller's kept nodes to both fleets (and as Kept).
func (s *SteadyState) addKept(kept []disruption.TypeCount) {
	if len(kept) == 0 {
		return
	}
	k := &disruption.Fleet{}
	for _, tc := range kept {
		k.Nodes += tc.Nodes
		k.PricePerHour += tc.PricePerHour
		k.Types = mergeTypes(k.Types, tc)
	}
	for _, f := range []*disruption.Fleet{&s.AfterMigration, &s.AfterConsolidation} {
		f.Nodes += k.Nodes
		f.PricePerHour += k.PricePerHour
		for _, tc := range k.Types {
			f.Types = mergeTypes(f.Types, tc)
		}
		*f = roundFleet(*f)
	}
	s.Kept = ptr.To(roundFleet(*k))
}

// mergeTypes adds tc to the type counts, kept in Settle's order (instance
// type, then capacity type).
func mergeTypes(types []disruption.TypeCount, tc disruption.TypeCount) []disruption.TypeCount {
	for i := range types {
		if types[i].InstanceType == tc.InstanceType && types[i].CapacityType == tc.CapacityType {
			types[i].Nodes += tc.Nodes
			types[i].PricePerHour += tc.PricePerHour
			return types
		}
	}
	types = append(types, tc)
	slices.SortFunc(types, func(a, b disruption.TypeCount) int {
		return cmp.Or(cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.CapacityType, b.CapacityType))
	})
	return types
}

// settleInput is the cluster after the last wave: the predicted nodes,
// created and last given a pod at SteadyStateReference, with their pods.
func settleInput(pr *predictor, pools []engine.NodePool, pdbs []inventory.PDB) disruption.Input {
	in := disruption.Input{
		NodePools: pools, DaemonSets: pr.daemonSets, PDBs: pdbs, Catalog: pr.catalog, Now: SteadyStateReference,
		Options: disruption.Options{KarpenterOnly: true},
	}
	for _, n := range pr.fleet {
		n.Node.CreatedAt = metav1.NewTime(SteadyStateReference)
		pods := make([]inventory.Pod, len(n.Pods))
		for i, p := range n.Pods {
			p.NodeName = n.Node.Name
			pods[i] = p
		}
		n.Pods = pods
		in.Nodes = append(in.Nodes, disruption.Node{ExistingNode: n, Price: pr.price[n.Node.Name], LastPodEventTime: SteadyStateReference})
	}
	return in
}

// roundFleet rounds a fleet's prices to 1/100 cent, so the plan's YAML
// does not carry float noise.
func roundFleet(f disruption.Fleet) disruption.Fleet {
	f.PricePerHour = round4(f.PricePerHour)
	for i := range f.Types {
		f.Types[i].PricePerHour = round4(f.Types[i].PricePerHour)
	}
	return f
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// withTypes gives every NodePool that has no instance types of its own the
// catalogue's, narrowed to those its requirements allow, once: Settle
// simulates scheduling once per consolidation candidate, and each
// simulation otherwise re-derives and re-matches the whole catalogue for
// every pool (on 360 nodes, 13 s of a 14 s forecast). The narrowing only
// drops what the scheduler would drop too: a type whose own label a
// requirement rules out, or none of whose offerings is in an allowed zone
// and capacity type.
func withTypes(pools []engine.NodePool, cat *catalog.Catalog) ([]engine.NodePool, error) {
	out := slices.Clone(pools)
	byKubelet := map[string][]engine.InstanceType{}
	for i := range out {
		np := &out[i]
		if np.InstanceTypes != nil || cat == nil {
			continue
		}
		key := np.Kubelet.Key()
		all, ok := byKubelet[key]
		if !ok {
			var err error
			if all, err = engine.InstanceTypesFromCatalog(cat, np.Kubelet); err != nil {
				return nil, fmt.Errorf("NodePool %s: EC2NodeClass kubelet: %w", np.Name, err)
			}
			byKubelet[key] = all
		}
		var reqs []engine.Requirement
		for j, r := range np.Spec.Template.Spec.Requirements {
			req, err := engine.NewRequirement(r.Key, r.Operator, r.Values...)
			if err != nil {
				return nil, fmt.Errorf("NodePool %s: spec.template.spec.requirements[%d]: %w", np.Name, j, err)
			}
			reqs = append(reqs, req)
		}
		np.InstanceTypes = []engine.InstanceType{}
		for _, t := range all {
			if allows(reqs, t) {
				np.InstanceTypes = append(np.InstanceTypes, t)
			}
		}
	}
	return out, nil
}

// allows reports whether no requirement rules t out by one of its labels
// and some offering is in an allowed zone and capacity type.
func allows(reqs []engine.Requirement, t engine.InstanceType) bool {
	for _, r := range reqs {
		if v, ok := t.Labels[r.Key]; ok && !r.Has(v) {
			return false
		}
	}
	for _, o := range t.Offerings {
		ok := true
		for _, r := range reqs {
			switch r.Key {
			case catalog.LabelZone:
				ok = ok && r.Has(o.Zone)
			case catalog.LabelCapacityType:
				ok = ok && r.Has(o.CapacityType)
			}
		}
		if ok {
			return true
		}
	}
	return false
}
