package tui

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Backend is everything the wizard does to a cluster and an account. Ops
// implements it with the actions the plain commands run (pkg/action);
// model tests substitute a fake. Every
// method may block: the wizard calls them from tea.Cmds, never from Update.
type Backend interface {
	// Connect builds the clients for c and checks them live (the API
	// server answers, the EKS cluster exists).
	Connect(ctx context.Context, c Connection) (ConnectInfo, error)
	// Discover reads the cluster (discover.Run), reporting each stage to
	// progress, and writes the snapshot.
	Discover(ctx context.Context, progress func(stage string)) (*inventory.Inventory, error)
	// Readiness evaluates the inventory as the readiness command does
	// (action.Readiness).
	Readiness(inv *inventory.Inventory) readiness.Report
	// Generate makes the NodePools and EC2NodeClasses of the included
	// node groups; with write false it only previews the tree against what
	// is on disk.
	Generate(ctx context.Context, inv *inventory.Inventory, c GenerateChoice, write bool) (*GenerateResult, error)
	// IAMPlan compares what Karpenter needs in the account with what exists.
	IAMPlan(ctx context.Context, inv *inventory.Inventory, c IAMChoice) (*iam.Plan, error)
	// IAMApply applies the plan, journalled as `iam apply` does.
	IAMApply(ctx context.Context, p *iam.Plan, onStep func(iam.Item)) error
	// Karpenter reads what the runbook's Karpenter step would do with the
	// release the plan would record for c (action.KarpenterCheck).
	Karpenter(ctx context.Context, inv *inventory.Inventory, c PlanChoice) (*KarpenterResult, error)
	// Plan plans the rollout (plan.MakePlan) and writes plan.yaml and
	// the environment's config.
	Plan(ctx context.Context, inv *inventory.Inventory, c PlanChoice) (*PlanResult, error)
	// Apply runs the plan as `apply --yes` does; Rollback as `rollback`.
	// Both report runner events and cluster views to sink until they
	// return, and return the runner's error.
	Apply(ctx context.Context, p *plan.Plan, c RunChoice, sink func(Update)) error
	Rollback(ctx context.Context, p *plan.Plan, sink func(Update)) error
}

// Connection is what the connect screen asks for.
type Connection struct {
	Context     string
	Cluster     string
	Profile     string
	Region      string
	Environment string
}

// ConnectInfo is what Connect found.
type ConnectInfo struct {
	// Server describes the Kubernetes API server (version).
	Server string
	// Cluster describes the EKS cluster (name, version, account, region).
	Cluster string
}

// Defaults are the connection values detected before the first screen,
// with the choices offered for completion.
type Defaults struct {
	Connection
	Contexts []string
	Profiles []string
}

// GenerateChoice is the generate screen's form.
type GenerateChoice struct {
	Strategy    generate.Strategy
	Flexibility generate.Flexibility
	Envs        []string
}

// FilePreview is one file of a previewed tree.
type FilePreview = action.FilePreview

// GenerateResult is a preview or a write.
type GenerateResult struct {
	Dir string
	// Pools summarise the NodePools.
	Pools []generate.PoolSummary
	Files []FilePreview
	// Written is set after a write.
	Written  *generate.TreeReport
	Warnings []string
}

// IAMChoice is the IAM screen's choices.
type IAMChoice struct {
	// Identity is irsa or pod-identity; empty picks by the cluster.
	Identity desired.Identity
	// CreateOIDCProvider creates the cluster's IAM OIDC provider for IRSA.
	CreateOIDCProvider bool
}

// PlanChoice is the plan screen's adjustable budget and what the earlier
// screens decided.
type PlanChoice struct {
	Environment string
	// WaveSize is a node count ("3") or a percentage of legacy nodes ("20%").
	WaveSize    string
	Concurrency int
	// PrepareAhead is rollout.prepareAhead: the waves whose capacity is
	// prepared as an earlier one starts.
	PrepareAhead int
	Generate     GenerateChoice
	IAM          IAMChoice
	// Exclude are node groups left out of the waves: their nodes stay.
	Exclude []string
	// AllowEmptyDir and ForceEvict are the environment config's
	// rollout.allowEmptyDir and rollout.forceEvict.
	AllowEmptyDir bool
	ForceEvict    bool
	// Acknowledged are readiness finding IDs the user accepted.
	Acknowledged []string
	// SkipKarpenter leaves installing Karpenter to the user: the plan has
	// no step 07 (plan --skip-karpenter).
	SkipKarpenter bool
}

// RunChoice are the options of a run the user chose on the plan screen.
type RunChoice struct {
	// AckBlockers lets preflight pass with blocker findings in the plan
	// (apply --ack-blockers).
	AckBlockers bool
}

// FleetLine is one instance type of a predicted fleet.
type FleetLine struct {
	InstanceType string
	CapacityType string
	Count        int
}

// PlanResult is a written plan with the fleet it predicts.
type PlanResult struct {
	Plan       *plan.Plan
	PlanFile   string
	ConfigFile string
	// AfterMigration is the union of the waves' predicted nodes;
	// AfterConsolidation is the plan's steady state (what Karpenter's
	// consolidation is expected to make of it, disruption.Settle).
	AfterMigration     []FleetLine
	AfterConsolidation []FleetLine
	// MigratedCostPerHour and ConsolidatedCostPerHour are their $/h, as
	// the engine computed them (the steady state's, when the plan has one).
	MigratedCostPerHour     float64
	ConsolidatedCostPerHour float64
	// Repacked is false when the steady state starts no command:
	// consolidation then leaves the fleet after migration as it is.
	Repacked bool
	// Before is the legacy fleet.
	Before []FleetLine
}

// Update is one report from a running Apply or Rollback: a runner event,
// or a fresh view of the cluster.
type Update struct {
	Event *rollout.Event
	View  *ClusterView
}

// WorkloadView is one workload's pods during the rollout.
type WorkloadView = action.WorkloadView

// ClusterView is the cluster as the rollout screen shows it.
type ClusterView = action.ClusterView
