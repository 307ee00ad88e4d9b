// Package demo runs a whole Cluster Autoscaler → Karpenter migration
// against the embedded sandbox (internal/sandbox), or the same account and
// cluster on a real control plane with the real Karpenter's kwok provider
// (ControlPlane): discover, readiness, generate, IAM plan/apply, plan, apply
// in PDB-safe waves, and optionally a full rollback, reporting progress as
// events and ending with a Summary.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Options configure a demo run.
type Options struct {
	// Seed makes the run reproducible.
	Seed uint64
	// OutDir receives snapshot.json, readiness.json, karpenter/ (the
	// kustomize tree), iam-plan.json, plan.yaml and summary.json.
	OutDir string
	// Snapshot, when set, replays this inventory instead of the demo account.
	Snapshot *inventory.Snapshot
	// Rollback continues with a full rollback after the migration.
	Rollback bool
	// Events receives progress; it is called from Run's goroutine.
	Events func(Event)
	// Now is the wall clock, for the time-taken figure (default time.Now).
	Now func() time.Time
	// Environment is the overlay generated, planned and applied (default
	// Env, prod; ControlPlane's default DevEnv).
	Environment string
	// ControlPlane runs on real parts instead of the sandbox: etcd,
	// kube-apiserver, scheduler, controller-manager and kwok from `make
	// controlplane`, the real Karpenter's kwok provider given the sandbox's
	// catalogue, and the AWS fake seeded with the same account.
	ControlPlane bool
}

// Step statuses.
const (
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
)

// Event is one progress report.
type Event struct {
	// SimTime is the sandbox's simulated time.
	SimTime time.Time `json:"simTime"`
	Step    string    `json:"step"`
	Status  string    `json:"status"`
	Message string    `json:"message,omitempty"`
	// Progress is 0..1 within a wave step, -1 when not measured.
	Progress float64 `json:"progress"`
}

// StepResult is a finished step in the summary.
type StepResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Summary is what the demo reports at the end.
type Summary struct {
	Cluster string `json:"cluster"`
	Seed    uint64 `json:"seed"`
	OutDir  string `json:"outDir"`
	// Engine is what launched the Karpenter nodes: EngineSandbox or
	// EngineControlPlane; Environment the overlay applied.
	Engine      string `json:"engine"`
	Environment string `json:"environment"`

	NodesBefore       int            `json:"nodesBefore"`
	NodesAfter        int            `json:"nodesAfter"`
	NodesBeforeByType map[string]int `json:"nodesBeforeByType"`
	NodesAfterByType  map[string]int `json:"nodesAfterByType"`
	CostPerHourBefore float64        `json:"costPerHourBefore"`
	CostPerHourAfter  float64        `json:"costPerHourAfter"`
	// PlannedCostPerHour is the plan's forecast of CostPerHourAfter: the
	// steady state after consolidation, every node the cluster runs (the
	// controller's kept nodes included), as plan and the wizard show it.
	PlannedCostPerHour float64 `json:"plannedCostPerHour"`
	// PredictedSeconds and BoundSeconds are the plan's duration of the
	// waves and its lower bound (plan.Timing); MakespanSeconds is what the
	// waves took, from the first one's start to the last one's end, as
	// the runner's journal recorded them (simulated time in the sandbox).
	PredictedSeconds float64 `json:"predictedSeconds"`
	BoundSeconds     float64 `json:"boundSeconds"`
	MakespanSeconds  float64 `json:"makespanSeconds"`

	// Moves counts the moves apply made (evictions, and the pods of
	// Deployments restarted with surge) for the PodsToMove pods that had
	// to leave a legacy node; MovesPerPod is their ratio (1 when no pod
	// moved twice). The table says "moves" and "pods to move" too.
	Moves       int     `json:"moves"`
	PodsToMove  int     `json:"podsToMove"`
	MovesPerPod float64 `json:"movesPerPod"`
	// APIRequests are the Kubernetes API requests apply's runner sent, by
	// verb and resource ("create pods/eviction"); RequestsPerPod their
	// total per pod to move.
	APIRequests    kube.RequestCounts `json:"apiRequests,omitempty"`
	RequestsPerPod float64            `json:"requestsPerPod"`
	// PodsStopped are the pods that left a legacy node without moving:
	// Cluster Autoscaler's, which the runbook scales to zero.
	PodsStopped int `json:"podsStopped"`
	// Waves are the waves apply ran, as it measured them; their Moves
	// and ControllerRoomEvictions add up to Moves.
	Waves []WaveSummary `json:"waves,omitempty"`
	// Evictions are the evictions apply made (the API allowed them);
	// ControllerRoomEvictions those that made room for the Karpenter
	// controller on its kept nodes before the waves (their pods move
	// again in their wave).
	Evictions               int `json:"evictions"`
	ControllerRoomEvictions int `json:"controllerRoomEvictions,omitempty"`
	// PlannedControllerRoomEvictions are those the plan predicted
	// (plan.PlanKarpenter.Room).
	PlannedControllerRoomEvictions int `json:"plannedControllerRoomEvictions,omitempty"`
	// Sandbox are the simulation's own counters (evictions, 429s,
	// launches, preemptions, engine fallbacks) until the migration ended
	// (a rollback's are its own); on a control plane only LostPods.
	Sandbox sandbox.Stats `json:"sandbox"`
	// PDBViolations counts PodDisruptionBudgets going from satisfied to
	// fewer healthy pods than they require, as the demo watched them on
	// every pass of the sandbox's controllers or every poll of a control plane
	// (independently of the runner); the details say which.
	PDBViolations       int      `json:"pdbViolations"`
	PDBViolationDetails []string `json:"pdbViolationDetails,omitempty"`
	PDBRejections       int      `json:"pdbRejections"`
	// LongestWaitSeconds is the longest a pod created during the migration
	// waited for a node: from its creation to its binding (PodScheduled),
	// placeholders not counted; LongestWaitPod says which pod and when.
	// Measured the same way on both engines (waitWatcher).
	LongestWaitSeconds float64 `json:"longestWaitForNodeSeconds"`
	LongestWaitPod     string  `json:"longestWaitForNodePod,omitempty"`
	// ApplyLongestWaitSeconds and ApplyLongestWaitPod are the same as
	// apply ended: the waits the waves caused, without those of
	// Karpenter's consolidation afterwards.
	ApplyLongestWaitSeconds float64  `json:"applyLongestWaitForNodeSeconds"`
	ApplyLongestWaitPod     string   `json:"applyLongestWaitForNodePod,omitempty"`
	Findings                []string `json:"findings"`

	// LegacyPodsLeft counts non-DaemonSet pods not on a Karpenter node
	// (but those the rollout leaves on the controller's kept nodes).
	LegacyPodsLeft int `json:"legacyPodsLeft"`
	// PinnedPods counts the pods, once the migration ended, whose claims
	// are bound to a volume that pins their node (a PersistentVolume's
	// required node affinity: an EBS volume's zone); PinnedPodsMisplaced
	// names those on a node it does not admit (none, if every pod came
	// back where its volume is).
	PinnedPods          int      `json:"pinnedPods"`
	PinnedPodsMisplaced []string `json:"pinnedPodsMisplaced,omitempty"`
	// GroupsScaled is true when every node group is at zero but the one
	// kept for the Karpenter controller, at its size.
	GroupsScaled bool `json:"groupsScaled"`
	// Controller is where the Karpenter controller lives and ran.
	Controller *ControllerSummary `json:"controller,omitempty"`
	// ClusterAutoscalerReplicas is CA's replicas after the migration.
	ClusterAutoscalerReplicas int32 `json:"clusterAutoscalerReplicas"`

	// Consolidation is what the sandbox's Karpenter stand-in did on its
	// own: the commands its disruption controller executed (during the
	// waves and after them) and what they saved. NodesAfter and
	// CostPerHourAfter are the fleet once it has nothing left to do.
	Consolidation *ConsolidationSummary `json:"consolidation,omitempty"`

	Rollback *RollbackSummary `json:"rollback,omitempty"`

	// Interrupted is true when Ctrl-C (or the caller's context) stopped
	// the run: the figures of the steps it did not finish are not in
	// the summary (nor in its JSON), only what it measured.
	Interrupted bool `json:"interrupted,omitempty"`

	SimulatedSeconds float64      `json:"simulatedSeconds"`
	WallSeconds      float64      `json:"wallSeconds"`
	Steps            []StepResult `json:"steps"`
}

// WaveSummary is one wave of apply, as the demo measured it.
type WaveSummary struct {
	ID string `json:"id"`
	// PlannedNodes and PlannedPods are the plan's: the wave's nodes, and
	// the pods on them when it was made.
	PlannedNodes int `json:"plannedNodes"`
	PlannedPods  int `json:"plannedPods"`
	// PodsToMove are the pods its drain moved off its nodes, counted as
	// the drain started: the pods that came to them since the plan
	// included, those that stay on a node kept for the Karpenter
	// controller not.
	PodsToMove int `json:"podsToMove"`
	// Evicted, Replaced (by a surge restart of their Deployment) and Gone
	// (not on their node when the drain reached it: moved by someone
	// else) are the pods that left its nodes, at most PodsToMove, all of
	// them once it is done.
	Evicted  int `json:"evicted"`
	Replaced int `json:"replaced"`
	Gone     int `json:"gone"`
	// Moves are its evictions and every pod of the Deployments it
	// restarted with surge (wherever they ran).
	Moves int  `json:"moves"`
	Done  bool `json:"done"`
	// PredictedSeconds is the plan's duration of the wave, Seconds what
	// it took (the journal's start to end).
	PredictedSeconds float64 `json:"predictedSeconds"`
	Seconds          float64 `json:"seconds"`
	// DrainGroup is the plan's: the first wave of the waves drained with
	// it, which share its time (0: drained alone).
	DrainGroup int `json:"drainGroup,omitempty"`
}

// ConsolidationSummary reports Karpenter's consolidation in the sandbox.
type ConsolidationSummary struct {
	// NodesAfterMigration, NodesAfterMigrationByType and
	// CostPerHourAfterMigration are the fleet right after the last wave,
	// before Karpenter settles it.
	NodesAfterMigration       int            `json:"nodesAfterMigration"`
	NodesAfterMigrationByType map[string]int `json:"nodesAfterMigrationByType"`
	CostPerHourAfterMigration float64        `json:"costPerHourAfterMigration"`
	// Commands counts the disruption commands executed and SavingsPerHour
	// the $/h they saved; Skipped counts the commands dropped as invalid
	// or aborted.
	Commands       int     `json:"commands"`
	SavingsPerHour float64 `json:"savingsPerHour"`
	Skipped        int     `json:"skipped"`
	// PodsMoved counts the evictions of the commands' drains.
	PodsMoved int `json:"podsMoved"`
	// SettleSeconds is the simulated time from the end of apply until
	// Karpenter had nothing left to do.
	SettleSeconds float64 `json:"settleSeconds"`
	// Log is every command the stand-in decided, in order, with its outcome.
	Log []sandbox.ConsolidationCommand `json:"log,omitempty"`
}

// RollbackSummary reports the state after `--rollback`.
type RollbackSummary struct {
	// Restored is true when every group is back at its recorded size with
	// Ready nodes, CA is back, no NodePool is left and every pod is on a
	// legacy node.
	Restored         bool           `json:"restored"`
	Groups           []GroupSize    `json:"groups"`
	NodesAfter       int            `json:"nodesAfter"`
	NodesAfterByType map[string]int `json:"nodesAfterByType"`
	CostPerHour      float64        `json:"costPerHour"`
	// CostPerHourBefore is the fleet's before the migration; TypesChanged
	// lists the instance types whose count differs from then ("m5.xlarge
	// 4 → 2"): a mixed-instances group may come back with other types at
	// its recorded size, and so another cost.
	CostPerHourBefore float64  `json:"costPerHourBefore"`
	TypesChanged      []string `json:"typesChanged,omitempty"`
	// PodsMoved counts the pods on Karpenter's nodes as rollback started
	// (not DaemonSets' nor finished): it verifies every one ends on a
	// node-group node. Until its drain started, PodsLeftBeforeDrain of
	// them left those nodes (Karpenter consolidating them while the
	// groups came back) and PodsArrivedBeforeDrain came onto them:
	// PodsMoved - PodsLeftBeforeDrain + PodsArrivedBeforeDrain = PodsToMove.
	PodsMoved              int `json:"podsMoved"`
	PodsLeftBeforeDrain    int `json:"podsLeftBeforeDrain"`
	PodsArrivedBeforeDrain int `json:"podsArrivedBeforeDrain"`
	// PodsToMove are the pods its drain set out to move off the Karpenter
	// nodes; Evictions (the evictions it made), Replaced (by surge
	// restarts) and Gone (not on their node when the drain reached it:
	// Karpenter had moved them) add up to it.
	PodsToMove int `json:"podsToMove"`
	Evictions  int `json:"evictions"`
	Replaced   int `json:"replaced"`
	Gone       int `json:"gone"`
	// KarpenterNodesAtStart are the Karpenter nodes as rollback started,
	// KarpenterNodesLaunched those launched while it ran; each is either
	// drained by it (NodesDrained) or removed by Karpenter before its
	// drain (NodesRemovedBeforeDrain). Of the drained, Karpenter removed
	// NodesRemovedDuringDrain itself before the NodePools were deleted;
	// the rest, NodesRemovedWithNodePools, went with their NodePools:
	// their NodeClaims (NodeClaimsRemoved, counted apart: a NodeClaim
	// still launching has no node) are waited for before Karpenter is
	// uninstalled. KarpenterNodes are those left after.
	KarpenterNodesAtStart     int `json:"karpenterNodesAtStart"`
	KarpenterNodesLaunched    int `json:"karpenterNodesLaunched"`
	NodesDrained              int `json:"nodesDrained"`
	NodesRemovedBeforeDrain   int `json:"nodesRemovedBeforeDrain"`
	NodesRemovedDuringDrain   int `json:"nodesRemovedDuringDrain"`
	NodesRemovedWithNodePools int `json:"nodesRemovedWithNodePools"`
	NodeClaimsRemoved         int `json:"nodeClaimsRemoved"`
	KarpenterNodes            int `json:"karpenterNodes"`
	// Consolidation is what the sandbox's Karpenter stand-in did while
	// the rollback ran (nil on a control plane, whose Karpenter does not
	// report it): the nodes it removed, why, are its.
	Consolidation *RollbackConsolidation `json:"consolidation,omitempty"`
	Problems      []string               `json:"problems,omitempty"`
	// PDBRejections and PDBViolations are the rollback's own (429s, and
	// budgets going short while it ran), apart from the migration's.
	PDBRejections int `json:"pdbRejections"`
	PDBViolations int `json:"pdbViolations"`
}

// RollbackConsolidation is the Karpenter stand-in's consolidation during
// a rollback: the commands it executed, the nodes they removed and the
// evictions their drains made.
type RollbackConsolidation struct {
	Commands  int `json:"commands"`
	Nodes     int `json:"nodes"`
	Evictions int `json:"evictions"`
}

// GroupSize is a node group's recorded and current size.
type GroupSize struct {
	Name          string `json:"name"`
	Recorded      int32  `json:"recorded"`
	RecordedMin   int32  `json:"recordedMin"`
	RecordedMax   int32  `json:"recordedMax"`
	Desired       int32  `json:"desired"`
	ReadyNodes    int    `json:"readyNodes"`
	InstanceCount int    `json:"instanceCount"`
}

// runner carries one run's state between steps.
type runner struct {
	opts Options
	env  environment
	// cfg is the actions' configuration on the environment's clients: they
	// reach it as a real cluster and account would be reached; every step
	// after loading it uses them.
	cfg    *action.Configuration
	runCtx context.Context
	cancel context.CancelFunc
	sum    *Summary
	// cluster is the name of the cluster loaded.
	cluster string
	inv     inventory.Inventory
	plan    *plan.Plan
	// journal is the runner's journal after apply (then rollback).
	journal *rollout.Journal
	pdbs    *pdbWatcher
	// waits measures every pod's wait for a node from the load on.
	waits *waitWatcher

	iam     *action.IAM
	iamPlan *iam.Plan

	// migrated are the counters as the migration ended, kept when a
	// rollback follows (its own are the difference).
	migrated *migrationCounters
}

// migrationCounters are the run's counters as the migration ended.
type migrationCounters struct {
	stats      sandbox.Stats
	violations int
	details    []string
	// longestWait and waitPod are the waits for a node so far.
	longestWait time.Duration
	waitPod     string
}

// Complete fills in the default environment and checks the options, so a
// caller can refuse them before it creates anything (Run calls it too).
func (o *Options) Complete() error {
	if o.Environment == "" {
		o.Environment = Env
		if o.ControlPlane {
			o.Environment = DevEnv
		}
	}
	if !slices.Contains([]string{"dev", "staging", "prod"}, o.Environment) {
		return fmt.Errorf("demo: environment %q: want dev, staging or prod (the overlays generate writes)", o.Environment)
	}
	return nil
}

// Run performs the demo and returns its summary. On a step failure it
// returns the summary so far (with the failed step) and the error.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.OutDir == "" {
		return nil, fmt.Errorf("demo: no output directory; pass --out DIR")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Events == nil {
		opts.Events = func(Event) {}
	}
	if err := opts.Complete(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("demo: create output directory: %w", err)
	}
	wallStart := opts.Now()
	var env environment
	if opts.ControlPlane {
		env = newControlPlane(opts.Seed)
	} else {
		sb, err := newSandboxEnv(opts.Seed)
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		env = sb
	}
	defer env.Close()
	r := &runner{opts: opts, env: env, sum: &Summary{Seed: opts.Seed, OutDir: opts.OutDir, Engine: env.Engine(), Environment: opts.Environment}, pdbs: &pdbWatcher{}}
	defer func() {
		if r.cancel != nil {
			r.cancel()
		}
	}()
	simStart := env.Now()
	steps := []struct {
		id string
		fn func(context.Context) (string, error)
	}{
		{"sandbox", r.stepSandbox},
		{"discover", r.stepDiscover},
		{"readiness", r.stepReadiness},
		{"generate", r.stepGenerate},
		{"iam-plan", r.stepIAMPlan},
		{"iam-apply", r.stepIAMApply},
		{"plan", r.stepPlan},
		{"apply", r.stepApply},
		{"final-state", r.stepFinal},
	}
	if opts.ControlPlane {
		// The runbook's step 07 installs Karpenter in the sandbox; on the
		// control plane the demo installs the official chart itself (see
		// stepKarpenter), after generate wrote its values.
		steps = slices.Insert(steps, 4, struct {
			id string
			fn func(context.Context) (string, error)
		}{"karpenter", r.stepKarpenter})
	}
	if opts.Rollback {
		steps = append(steps, struct {
			id string
			fn func(context.Context) (string, error)
		}{"rollback", r.stepRollback})
	}
	var runErr error
	for _, st := range steps {
		if runErr != nil {
			r.sum.Steps = append(r.sum.Steps, StepResult{ID: st.id, Status: StatusSkipped})
			continue
		}
		r.emit(st.id, StatusRunning, "", -1)
		stepCtx := ctx
		if r.runCtx != nil {
			stepCtx = r.runCtx
		}
		detail, err := st.fn(stepCtx)
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			// Interrupted mid-call: the AWS SDK may report the connection
			// it lost (retries exhausted on a closed connection) instead of
			// the cancellation that closed it.
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		if err != nil {
			runErr = fmt.Errorf("demo step %s: %w", st.id, err)
			r.emit(st.id, StatusFailed, err.Error(), -1)
			r.sum.Steps = append(r.sum.Steps, StepResult{ID: st.id, Status: StatusFailed, Detail: err.Error()})
			continue
		}
		r.emit(st.id, StatusDone, detail, 1)
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: st.id, Status: StatusDone, Detail: detail})
	}
	if lt, ok := env.(interface{ LogTails(int) string }); ok && runErr != nil {
		// Kept before Close removes the control plane's run directory.
		logs := filepath.Join(opts.OutDir, ControlPlaneLogs)
		if err := os.WriteFile(logs, []byte(lt.LogTails(200)), 0o644); err == nil {
			runErr = fmt.Errorf("%w (the end of the control plane's and Karpenter's logs: %s)", runErr, logs)
		}
	}
	r.sum.Interrupted = ctx.Err() != nil
	st := env.Stats()
	violations, details := r.pdbs.count, r.pdbs.violations
	var wait time.Duration
	var waitPod string
	if r.waits != nil {
		wait, waitPod = r.waits.result(env.Now())
	}
	if m := r.migrated; m != nil {
		st, violations, details, wait, waitPod = m.stats, m.violations, m.details, m.longestWait, m.waitPod
	}
	r.sum.Sandbox = st
	r.sum.PDBViolations, r.sum.PDBViolationDetails = violations, details
	r.sum.PDBRejections = st.Rejected
	r.sum.LongestWaitSeconds, r.sum.LongestWaitPod = wait.Seconds(), waitPod
	r.sum.SimulatedSeconds = env.Now().Sub(simStart).Seconds()
	r.sum.WallSeconds = opts.Now().Sub(wallStart).Seconds()
	if err := writeJSON(filepath.Join(opts.OutDir, "summary.json"), r.sum); err != nil && runErr == nil {
		runErr = err
	}
	return r.sum, runErr
}

func (r *runner) emit(step, status, msg string, progress float64) {
	r.pdbs.observed(strings.TrimSuffix(step+" "+status+": "+msg, ": "))
	r.opts.Events(Event{SimTime: r.env.Now(), Step: step, Status: status, Message: msg, Progress: progress})
}

func (r *runner) stepSandbox(ctx context.Context) (string, error) {
	inv := sandbox.DemoInventory()
	what := "seeded demo account"
	if r.opts.Snapshot != nil {
		inv = r.opts.Snapshot.Inventory
		what = "snapshot of " + inv.Cluster.Name
	}
	// From here on, every step reaches the environment through its
	// clients, and runs under a context that its failure cancels.
	r.cluster = inv.Cluster.Name
	var err error
	if r.cfg, r.runCtx, r.cancel, err = r.env.Load(ctx, inv, Namespace, r.opts.OutDir); err != nil {
		return "", err
	}
	// PDB violations are measured here, on every pass (or poll) of the
	// whole run, not taken from what the runner reports.
	r.env.Watch(r.pdbs.observe)
	r.waits = newWaitWatcher(r.env.Now())
	if err := r.env.WatchWaits(ctx, r.waits); err != nil {
		return "", err
	}
	nodes, pods, err := r.counts(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: %d node groups, %d nodes, %d pods (%s)", what, len(inv.NodeGroups), nodes, pods, r.env.Engine()), nil
}

func (r *runner) counts(ctx context.Context) (nodes, pods int, err error) {
	nl, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("list nodes: %w", err)
	}
	pl, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("list pods: %w", err)
	}
	return len(nl.Items), len(pl.Items), nil
}

// fleet returns nodes by instance type and the fleet's cost per hour, at
// the catalogue's prices (the ones both environments launch with).
func (r *runner) fleet(ctx context.Context) (int, map[string]int, float64, error) {
	instances, err := r.env.Instances(ctx)
	if err != nil {
		return 0, nil, 0, err
	}
	byType := map[string]int{}
	cost := 0.0
	for _, in := range instances {
		byType[in.InstanceType]++
		p, _ := catalog.Default().Price(in.InstanceType, in.CapacityType, in.Zone)
		cost += p
	}
	return len(instances), byType, round4(cost), nil
}

func round4(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }

// stepFinal lets the cluster settle — the Karpenter stand-in consolidates
// what the waves left on its polling period, each node once its
// NodePool's consolidateAfter has passed, until it has nothing left to do
// — and reports the fleet the migration ends with.
func (r *runner) stepFinal(ctx context.Context) (string, error) {
	// The fleet right after the waves: the instances the last wave
	// terminated gone, every pod Ready.
	if err := r.env.Settle(ctx); err != nil {
		return "", fmt.Errorf("after the waves: %w", err)
	}
	cs := &ConsolidationSummary{}
	var err error
	if cs.NodesAfterMigration, cs.NodesAfterMigrationByType, cs.CostPerHourAfterMigration, err = r.fleet(ctx); err != nil {
		return "", err
	}
	start := r.env.Now()
	if err := r.env.SettleConsolidation(ctx); err != nil {
		return "", fmt.Errorf("consolidation: %w", err)
	}
	cs.SettleSeconds = r.env.Now().Sub(start).Seconds()
	st := r.env.Stats()
	cs.Commands, cs.SavingsPerHour, cs.PodsMoved = st.Consolidations, round4(st.ConsolidationSavings), st.ConsolidationEvictions
	cs.Skipped = st.ConsolidationsInvalid + st.ConsolidationsAborted
	cs.Log = r.env.Consolidations()
	r.sum.Consolidation = cs
	n, byType, cost, err := r.fleet(ctx)
	if err != nil {
		return "", err
	}
	r.sum.NodesAfter, r.sum.NodesAfterByType, r.sum.CostPerHourAfter = n, byType, cost
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	karpenter := map[string]bool{}
	for _, nd := range nodes.Items {
		if nd.Labels[apisv1.NodePoolLabelKey] != "" {
			karpenter[nd.Name] = true
		}
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if kube.IsDaemonSetPod(p) || p.Status.Phase == corev1.PodSucceeded || r.staysOnKeptNode(p) {
			continue
		}
		if !karpenter[p.Spec.NodeName] {
			left++
		}
	}
	r.sum.LegacyPodsLeft = left
	if r.sum.PinnedPods, r.sum.PinnedPodsMisplaced, err = volumePlacement(ctx, r.cfg.Kube, pods.Items, nodes.Items); err != nil {
		return "", err
	}
	r.sum.GroupsScaled = true
	groups, err := r.env.Groups(ctx)
	if err != nil {
		return "", err
	}
	for _, g := range groups {
		if want := keptSize(r.plan, g.Name); g.DesiredSize != want || len(g.Instances) != int(want) {
			r.sum.GroupsScaled = false
		}
	}
	if c := r.sum.Controller; c != nil {
		c.Home, c.KeptGroup, c.Size = r.plan.Controller.String(), r.plan.Controller.NodeGroup, r.plan.Controller.Size
		if c.After, err = r.controllerPlacement(ctx); err != nil {
			return "", err
		}
	}
	r.sum.ClusterAutoscalerReplicas, err = r.caReplicas(ctx)
	if err != nil {
		return "", err
	}
	if left > 0 {
		return "", fmt.Errorf("%d pods are still on legacy nodes", left)
	}
	return fmt.Sprintf("%d nodes ($%.4f/h) → %d nodes ($%.4f/h) after the waves → %d nodes ($%.4f/h) once Karpenter consolidated (%d commands, $%.4f/h saved); legacy groups scaled: %t; Karpenter controller %s",
		r.sum.NodesBefore, r.sum.CostPerHourBefore, cs.NodesAfterMigration, cs.CostPerHourAfterMigration, n, cost, cs.Commands, cs.SavingsPerHour, r.sum.GroupsScaled, r.plan.Controller), nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// measuredBy names the summary's figures by the step that measures them:
// a run stopped before that step finished has not measured them, and its
// JSON leaves them out rather than show their zero values.
var measuredBy = map[string][]string{
	"discover":    {"nodesBefore", "nodesBeforeByType", "costPerHourBefore"},
	"plan":        {"plannedCostPerHour", "predictedSeconds", "boundSeconds"},
	"apply":       {"podsToMove", "movesPerPod", "podsStopped", "makespanSeconds"},
	"final-state": {"nodesAfter", "nodesAfterByType", "costPerHourAfter", "legacyPodsLeft", "pinnedPods", "groupsScaled", "clusterAutoscalerReplicas"},
}

// Done reports whether the step with this id finished.
func (s *Summary) Done(id string) bool {
	return slices.ContainsFunc(s.Steps, func(st StepResult) bool { return st.ID == id && st.Status == StatusDone })
}

// MarshalJSON writes the summary without the figures of the steps that
// did not finish (see measuredBy).
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	b, err := json.Marshal(plain(s))
	if err != nil {
		return nil, err
	}
	var drop []string
	for _, id := range slices.Sorted(maps.Keys(measuredBy)) {
		if !s.Done(id) {
			drop = append(drop, measuredBy[id]...)
		}
	}
	if len(drop) == 0 {
		return b, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for _, k := range drop {
		delete(fields, k)
	}
	return json.Marshal(fields)
}
