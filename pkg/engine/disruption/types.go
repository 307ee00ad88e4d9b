// Package disruption is the embedded consolidation engine: given a cluster
// that runs Karpenter, it predicts what Karpenter's disruption controller does
// next (emptiness, drift, multi-node and single-node consolidation, in
// Karpenter's order, within disruption budgets) and why each node is or is
// not a candidate, and Settle repeats passes until nothing acts to give the
// fleet the cluster settles into.
//
// It mirrors sigs.k8s.io/karpenter pkg/controllers/disruption and simulates
// scheduling with pkg/engine's provisioning scheduler ("consolidation is
// scheduling without these nodes"). Like pkg/engine it is pure: no clients,
// no clocks (the time is Input.Now), no globals.
package disruption

import (
	"time"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Input is the cluster state one disruption pass looks at. It is read-only.
type Input struct {
	// Nodes are every node of the cluster (Karpenter's and others) and
	// in-flight NodeClaims, with the pods bound to them.
	Nodes []Node
	// Pending are unbound pods; simulations schedule them too, as Karpenter's
	// SimulateScheduling does.
	Pending []inventory.Pod
	// NodePools are the cluster's NodePools (spec.disruption decides policy,
	// consolidateAfter and budgets).
	NodePools []engine.NodePool
	// DaemonSets add overhead to replacement nodes.
	DaemonSets []inventory.DaemonSet
	// PDBs block eviction of the pods they cover when they allow 0 disruptions.
	PDBs []inventory.PDB
	// Catalog prices nodes and supplies instance types to NodePools that
	// have none of their own.
	Catalog *catalog.Catalog
	// Now is the time of the pass: consolidateAfter and budget schedules are
	// judged against it. The package never reads a clock.
	Now time.Time
	// Options tune the pass.
	Options Options
}

// Node is a cluster node as the disruption controller sees it.
type Node struct {
	engine.ExistingNode
	// Price is the node's $/h; 0 looks it up from its NodePool's instance
	// types (or the catalogue) by instance type, zone and capacity type.
	Price float64 `json:"price,omitempty"`
	// LastPodEventTime is when a pod was last bound to or removed from the
	// node (NodeClaim status.lastPodEventTime); zero means never, and the
	// node's creation time stands in for initialization.
	LastPodEventTime time.Time `json:"lastPodEventTime,omitzero"`
	// Deleting marks a node already being disrupted or deleted; it also
	// reads the karpenter.sh/disrupted taint.
	Deleting bool `json:"deleting,omitempty"`
	// Nominated marks a node the provisioner has nominated for pending pods.
	Nominated bool `json:"nominated,omitempty"`
}

// Options tune a pass.
type Options struct {
	// KarpenterOnly is the faithful baseline: scheduling simulations use
	// Karpenter's greedy scheduler with no improvement pass and commands are
	// exactly those Karpenter's methods compute. The default also tries the
	// engine's improved packing and keeps whichever command saves more.
	KarpenterOnly bool
	// SpotToSpot is Karpenter's SpotToSpotConsolidation feature gate
	// (default false): without it a spot node is never replaced, only deleted.
	SpotToSpot bool
	// MaxCandidates caps multi-node consolidation's batch (Karpenter: 100).
	MaxCandidates int
	// ExplainAll simulates every consolidation candidate on its own, so each
	// node's candidacy says whether it could be deleted or replaced and why
	// not (one simulation per candidate; the CLI's dry-run sets it).
	ExplainAll bool
	// NodePoolHashes are the live NodePools' karpenter.sh/nodepool-hash
	// annotations, by NodePool name; a node whose own annotation differs
	// (at the same hash version) has drifted.
	NodePoolHashes map[string]string
	// Proposed are changed NodePools (same names) to compare with
	// Input.NodePools: drift reports the nodes the change would roll.
	Proposed []engine.NodePool
}

// Method is a disruption method, in Karpenter's order.
type Method string

// Methods in the order the controller runs them.
const (
	MethodEmptiness  Method = "Emptiness"
	MethodDrift      Method = "Drift"
	MethodMultiNode  Method = "MultiNodeConsolidation"
	MethodSingleNode Method = "SingleNodeConsolidation"
)

// Action is what a command does to its nodes.
type Action string

// Actions.
const (
	ActionDelete  Action = "Delete"
	ActionReplace Action = "Replace"
)

// NodeRef names a node with what it costs.
type NodeRef struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

// Command is one disruption Karpenter would start.
type Command struct {
	Method Method                 `json:"method"`
	Reason apiv1.DisruptionReason `json:"reason"`
	Action Action                 `json:"action"`
	// Nodes are the candidates removed.
	Nodes []NodeRef `json:"nodes"`
	// Replacement is the one new node of a Replace: its instance-type
	// options are those cheaper than the nodes at their worst launch price,
	// and its capacity type is pinned to spot when it allowed both.
	Replacement *engine.NodeClaim `json:"replacement,omitempty"`
	// Placements are where the candidates' pods (and pending pods) go on
	// the remaining nodes; the replacement's pods are in Replacement.Pods.
	Placements []engine.Placement `json:"placements,omitempty"`
	// Price is the candidates' $/h, ReplacementPrice the replacement's
	// expected launch price, Savings the difference.
	Price            float64 `json:"price"`
	ReplacementPrice float64 `json:"replacementPrice"`
	Savings          float64 `json:"savings"`
	// Why is one sentence for people.
	Why string `json:"why"`
}

// Candidacy explains whether a node is a disruption candidate.
type Candidacy struct {
	Node NodeRef `json:"node"`
	// Candidate is true when some method may disrupt the node now.
	Candidate bool `json:"candidate"`
	// Empty is true when no reschedulable pod runs on the node.
	Empty bool `json:"empty"`
	// Reasons say why the node is not a candidate (or, for candidates, what
	// the simulation found).
	Reasons []string `json:"reasons,omitempty"`
	// Outcome is what happens to the node in this pass's command, if any.
	Outcome string `json:"outcome,omitempty"`
	// SavingsRatio is Karpenter's ordering key: price per unit of
	// rescheduling disruption.
	SavingsRatio float64 `json:"savingsRatio,omitempty"`
}

// DriftedNode is a node Karpenter's drift method would roll.
type DriftedNode struct {
	Node NodeRef `json:"node"`
	// Reason is NodePoolDrifted or RequirementsDrifted.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Blocked says why drift cannot disrupt it yet (budget, PDB, ...).
	Blocked string `json:"blocked,omitempty"`
}

// BudgetStatus is how many nodes a NodePool may still disrupt for a reason.
type BudgetStatus struct {
	NodePool   string                 `json:"nodePool"`
	Reason     apiv1.DisruptionReason `json:"reason"`
	Allowed    int                    `json:"allowed"`
	Nodes      int                    `json:"nodes"`
	Disrupting int                    `json:"disrupting"`
}

// Decision is the outcome of one disruption pass.
type Decision struct {
	Now time.Time `json:"now"`
	// Method is the method whose commands act this pass ("" when none does).
	Method   Method    `json:"method,omitempty"`
	Commands []Command `json:"commands,omitempty"`
	// Drifted is the drift report (drift never acts here).
	Drifted []DriftedNode `json:"drifted,omitempty"`
	// Nodes explains every node, in input order.
	Nodes   []Candidacy    `json:"nodes"`
	Budgets []BudgetStatus `json:"budgets,omitempty"`
	// Savings is the $/h the commands save.
	Savings float64 `json:"savings"`
}
