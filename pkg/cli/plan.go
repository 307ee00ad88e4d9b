package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

type planOptions struct {
	env      string
	snapshot string
	cluster  string
	dir      string
	config   string
	out      string
	pools    map[string]string
	offline  bool
	timeout  time.Duration
	// controllerGroup is --controller-nodegroup.
	controllerGroup string
	iam             iamPlanFlags
	// karpenterChart is --karpenter-chart; skipKarpenter --skip-karpenter.
	karpenterChart string
	skipKarpenter  bool
}

// iamPlanFlags are the plan's choices for the IAM steps.
type iamPlanFlags struct {
	skip bool
	opts plan.IAMOptions
}

func (f *iamPlanFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.skip, "skip-iam", false, "leave the IAM steps (02..06) out: IAM is managed elsewhere or was made with the iam command")
	fl.StringVar(&f.opts.Identity, "identity", "", "controller credentials: irsa or pod-identity (default: pod-identity when the cluster runs the Pod Identity agent)")
	fl.StringVar(&f.opts.KarpenterVersion, "karpenter-version", desired.DefaultKarpenterVersion, "Karpenter version whose controller policies the IAM steps create")
	fl.BoolVar(&f.opts.CreateOIDCProvider, "create-oidc-provider", false, "let the IAM steps create the cluster's IAM OIDC provider when IRSA needs it")
	fl.BoolVar(&f.opts.Adopt, "adopt", false, "let the IAM steps take over matching objects not created by karpenter-migrate")
}

func (f *iamPlanFlags) options() (*plan.IAMOptions, error) {
	if f.skip {
		return nil, nil
	}
	if f.opts.Identity != "" {
		if err := oneOf("identity", f.opts.Identity, "irsa", "pod-identity"); err != nil {
			return nil, err
		}
	}
	o := f.opts
	return &o, nil
}

func newPlanCmd(g *GlobalOptions) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:         "plan --env ENV (--snapshot FILE | --cluster NAME) [--dir DIR]",
		Annotations: writes("table", "yaml", "json"),
		Short:       "Plan the rollout of one environment: steps, waves, pre-provisioning, findings, cost",
		Long: `plan cuts the legacy nodes into waves (by node group, zones interleaved, wave size
from the environment's config), predicts with the embedded Karpenter scheduler the nodes
each wave needs on the NodePools that replace its group (from the tree generate wrote,
--dir) and the placeholder pods that pre-provision them, lists readiness findings, what the
IAM steps create and the cost before and after, and writes plan.yaml with a content hash
that apply verifies.

It decides, once, where the Karpenter controller lives once the legacy groups are gone,
and records it in the plan: on Fargate when a Fargate profile selects its namespace (no
group is kept); else on the group --controller-nodegroup names, or controller.nodeGroup
in the config, or the one group the installed controller's required scheduling admits,
or the one generate's Helm values (DIR/helm/karpenter-values.yaml) pin it to. That group
is kept at controller.size nodes (default 2, never below the controller's replicas),
without its Cluster Autoscaler tags, its nodes reserved with CriticalAddonsOnly=true:
NoSchedule so workload pods move to Karpenter, and labelled
karpenter-migrate.io/karpenter-controller=true, which the release's values require of the
controller's nodes so that it runs on no other node of the group. A controller that could run on no node
once the plan's groups are removed is a blocker, named with its fix.

It also forecasts what Karpenter's consolidation does once the last wave is done: the
disruption commands it is expected to take on the predicted fleet (method, nodes removed,
replacement, $/h saved, within the NodePools' consolidateAfter and budgets) and the fleet
it settles into (nodes, types, $/h), next to the fleet right after the waves.

The cluster is read from a snapshot (discover --snapshot) or, with --cluster, live from
AWS and Kubernetes. Costs use the prices of the cluster's region that discover read
(recorded in the snapshot); without them (--offline, or an older snapshot) the embedded
us-east-1 list prices stand in, and the plan says so.

A plan that takes more than a second says on stderr which wave it is predicting or which
pass of the forecast it is in (PlanProgress events with --log-format json); --timeout
bounds the whole plan, discovery included.`,
		Example: `  # Plan prod from a snapshot and the generated tree, with its migration config
  karpenter-migrate plan --env prod --snapshot snapshot.json --dir karpenter --config migrations/prod.yaml -f plan.yaml

  # Plan dev live from the cluster, IAM managed elsewhere, as JSON
  karpenter-migrate plan --env dev --cluster dev-eks --dir karpenter --skip-iam -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error { return planRun(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.env, "env", "", "environment name (dev, staging, prod, ...)")
	f.StringVar(&o.snapshot, "snapshot", "", "inventory snapshot written by discover --snapshot")
	f.StringVar(&o.cluster, "cluster", "", "EKS cluster to discover live instead of --snapshot (default: the config's cluster)")
	f.StringVar(&o.dir, "dir", "", "DIR: tree written by generate; its overlays/<env> has the NodePools (default: generate them in memory)")
	f.StringVar(&o.config, "config", "", "environment migration config (default: built-in defaults for --env)")
	f.StringVarP(&o.out, "file", "f", "plan.yaml", "where to write the plan")
	f.BoolVar(&o.offline, "offline", false, "with --cluster, "+offlineUsage)
	f.StringVar(&o.karpenterChart, "karpenter-chart", "", "chart the Karpenter step installs: a local chart directory or tarball, or a URL (default "+plan.KarpenterChartOCI+" at --karpenter-version)")
	f.BoolVar(&o.skipKarpenter, "skip-karpenter", false, "leave installing Karpenter to you: the Karpenter step does not run and preflight asks for its CRDs")
	f.StringVar(&o.controllerGroup, "controller-nodegroup", "", "legacy node group kept for the Karpenter controller (default: controller.nodeGroup in --config, else where the installed controller or generate's Helm values pin it)")
	f.StringToStringVar(&o.pools, "pool-for-group", nil, "NodePool replacing a node group, GROUP=POOL (default: the pools whose karpenter-migrate.io/node-groups annotation names it)")
	f.DurationVar(&o.timeout, "timeout", 0, "give up when the plan, discovery included, takes longer (0: no limit)")
	o.iam.bind(cmd)
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

// loadConfig returns the environment's config file or the defaults.
func loadConfig(env, path string) (config.Config, error) {
	if path == "" {
		return config.Default(env), nil
	}
	c, err := config.Load(path)
	if err != nil {
		return config.Config{}, err
	}
	return *c, nil
}

// inventorySource reads a snapshot file or discovers the cluster live.
func inventorySource(g *GlobalOptions, snapshot, cluster, region string, offline bool) (func(context.Context) (*inventory.Inventory, error), error) {
	if snapshot != "" {
		if cluster != "" {
			return nil, usageError(errors.New("give one of --snapshot (read a snapshot) and --cluster (discover live), not both"))
		}
		return func(context.Context) (*inventory.Inventory, error) {
			snap, err := inventory.ReadSnapshotFile(snapshot)
			if err != nil {
				return nil, err
			}
			return &snap.Inventory, nil
		}, nil
	}
	if cluster == "" {
		return nil, errors.New("no cluster to plan: give --snapshot FILE, or --cluster NAME (or cluster: in --config) to discover it live")
	}
	return func(ctx context.Context) (*inventory.Inventory, error) {
		return discoverLive(ctx, g, cluster, firstNonEmpty(g.Region, region), false, offline)
	}, nil
}

func planRun(ctx context.Context, g *GlobalOptions, o *planOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := loadConfig(o.env, o.config)
	if err != nil {
		return err
	}
	cluster := o.cluster
	if o.snapshot == "" && cluster == "" {
		cluster = cfg.Cluster
	}
	src, err := inventorySource(g, o.snapshot, cluster, cfg.Region, o.offline)
	if err != nil {
		return err
	}
	iamOpts, err := o.iam.options()
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	// The inventory source reaches the cluster itself when it discovers
	// live: the plan needs no more than the zero configuration.
	p, err := (&action.Configuration{}).Plan(ctx, action.Plan{
		Environment: o.env, Config: cfg, Inventory: src, Dir: o.dir, File: o.out,
		PoolForGroup: o.pools, ControllerNodeGroup: o.controllerGroup, IAM: iamOpts, Progress: g.planProgress(time.Now(), planProgressEvery),
		KarpenterChart: o.karpenterChart, KarpenterVersion: o.iam.opts.KarpenterVersion, SkipKarpenter: o.skipKarpenter,
	})
	if err != nil {
		if o.timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("plan did not finish within --timeout %s: %w; raise --timeout, or plan fewer node groups at a time (nodeGroups.include in --config)", o.timeout, err)
		}
		return err
	}
	if done, err := printStructured(g.IO.Out, g.Output, p); done {
		return err
	}
	w := g.IO.Out
	fmt.Fprintf(w, "Plan %s for %s (cluster %s) written to %s\n\n", p.Hash, p.Environment, p.Cluster, o.out)
	t := newTable(w)
	fmt.Fprintln(t, "WAVE\tNODES\tGROUPS\tPODS\tNODEPOOLS\tPREDICTED NODES\tPLACEHOLDERS\tDRAINED WITH\tPREDICTED TIME\tBOUND BY")
	drainedWith := drainedWith(p)
	for i, wv := range p.Waves {
		groups := map[string]bool{}
		for _, n := range wv.Nodes {
			groups[n.NodeGroup] = true
		}
		by, took := "-", plan.Seconds(wv.PredictedSeconds)
		if wv.Timing != nil && wv.Timing.BoundBy != "" {
			by = wv.Timing.BoundBy
		}
		if wv.Timing != nil && wv.Timing.EarlySeconds > 0 {
			took += fmt.Sprintf(" (from %s before the group ahead ends)", plan.Seconds(wv.Timing.EarlySeconds))
		}
		fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%v\t%d\t%d\t%s\t%s\t%s\n", wv.Index, len(wv.Nodes), len(groups), wv.Pods, wv.NodePools, len(wv.PredictedNodes), len(wv.PreProvision), drainedWith[i], took, by)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "Duration: %s\n", p.Timing)
	fmt.Fprintf(w, "\nKarpenter controller: %s (%s)\n", p.Controller, dash(p.Controller.Why))
	if k := p.Karpenter; k != nil {
		fmt.Fprintf(w, "Karpenter install (step 07): helm upgrade --install %s %s --version %s -n %s -f %s (atomic, waits for the controller; an installation made by someone else is left alone)\n",
			k.Release, k.Chart, k.Version, k.Namespace, dash(k.ValuesFrom))
		if len(k.Room) > 0 {
			fmt.Fprintf(w, "  before it, room for the controller: %d pods evicted from the kept nodes, expected to land on other legacy nodes and move again in their wave (counted there): %s\n", len(k.Room), roomList(k.Room))
		}
	} else {
		fmt.Fprintln(w, "Karpenter install (step 07): not run; Karpenter must be installed before apply")
	}
	if p.IAM != nil && p.IAM.Error == "" {
		fmt.Fprintf(w, "\nIAM: node role %s, controller role %s (%s), queue %s, nodes join by %s\n", p.IAM.NodeRole, p.IAM.ControllerRole, p.IAM.Identity, p.IAM.Queue, p.IAM.NodeAccess)
	}
	together := "each wave drained alone"
	if p.Budget.DrainTogether {
		together = "waves whose PodDisruptionBudgets do not overlap drained together"
	}
	fmt.Fprintf(w, "\nBudget: %d nodes per wave, %d drained at once, capacity prepared %d waves ahead, %s; gates: node ready %s, pod pending %s, PDB wait %s\n",
		p.Budget.WaveSize, p.Budget.Concurrency, p.Budget.PrepareAhead, together, p.Budget.Gates.NodeReadyTimeout, p.Budget.Gates.MaxPodPending, p.Budget.Gates.PDBWaitTimeout)
	if p.Cost.Complete {
		fmt.Fprintf(w, "Cost: $%.4f/h before, $%.4f/h after%s\n", p.Cost.BeforePerHour, p.Cost.AfterPerHour, describePrices(p.Cost.Prices))
	} else {
		fmt.Fprintln(w, "Cost: not estimated (no prices for some instance types)")
	}
	if err := printSteadyState(w, p.SteadyState); err != nil {
		return err
	}
	for _, f := range p.Findings {
		fmt.Fprintf(w, "%s: %s: %s\n", f.Severity, f.Object, f.Message)
	}
	fmt.Fprintf(w, "\nReview it, then: karpenter-migrate apply --plan %s\n", o.out)
	return nil
}

// roomList says, for each pod the controller's room evicts, where from
// and where the plan expects it.
func roomList(room []plan.RoomEviction) string {
	out := make([]string, len(room))
	for i, r := range room {
		out[i] = fmt.Sprintf("%s (%s -> %s)", r.Pod, r.From, cmp.Or(r.To, "no node"))
	}
	return strings.Join(out, ", ")
}

// planProgressEvery is how often a long plan says where it is.
var planProgressEvery = time.Second

// planProgress says on stderr, at most once per every and only once the
// plan has taken that long, which wave is being predicted or which pass of
// the consolidation forecast runs: a plain line, or a PlanProgress event
// with --log-format json.
func (g *GlobalOptions) planProgress(start time.Time, every time.Duration) func(plan.PlanProgress) {
	last := start
	return func(pp plan.PlanProgress) {
		now := time.Now()
		if now.Sub(last) < every {
			return
		}
		last = now
		elapsed := now.Sub(start).Round(100 * time.Millisecond).String()
		g.say(slog.LevelInfo, eventPlanProgress, "plan: "+elapsed+": ", pp.String(), slog.Int("wave", pp.Wave), slog.Int("waves", pp.Waves),
			slog.Int("settlePass", pp.SettlePass), slog.Int("nodes", pp.Nodes), slog.Int("pods", pp.Pods), slog.String("elapsed", elapsed))
	}
}

// printSteadyState prints the fleet right after the waves next to the one
// Karpenter's consolidation settles into, and the commands on the way.
func printSteadyState(w io.Writer, ss *plan.SteadyState) error {
	if ss == nil {
		return nil
	}
	nodes := func(n int) string {
		if n == 1 {
			return "1 node"
		}
		return fmt.Sprintf("%d nodes", n)
	}
	kept := ""
	if k := ss.Kept; k != nil {
		kept = fmt.Sprintf(", %d of them kept for the Karpenter controller", k.Nodes)
	}
	fmt.Fprintf(w, "\nAfter consolidation: %s at $%.4f/h%s (right after the waves: %s at $%.4f/h; saves $%.4f/h)\n",
		nodes(ss.AfterConsolidation.Nodes), ss.AfterConsolidation.PricePerHour, kept, nodes(ss.AfterMigration.Nodes), ss.AfterMigration.PricePerHour, ss.SavingsPerHour)
	t := newTable(w)
	fmt.Fprintln(t, "TYPE\tCAPACITY\tAFTER WAVES\t$/H\tAFTER CONSOLIDATION\t$/H")
	type side struct {
		nodes int
		price float64
	}
	rows := map[[2]string]*[2]side{}
	var keys [][2]string
	add := func(i int, instanceType, capacityType string, s side) {
		k := [2]string{instanceType, capacityType}
		if rows[k] == nil {
			rows[k] = &[2]side{}
			keys = append(keys, k)
		}
		rows[k][i] = s
	}
	for _, tc := range ss.AfterMigration.Types {
		add(0, tc.InstanceType, tc.CapacityType, side{tc.Nodes, tc.PricePerHour})
	}
	for _, tc := range ss.AfterConsolidation.Types {
		add(1, tc.InstanceType, tc.CapacityType, side{tc.Nodes, tc.PricePerHour})
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range keys {
		r := rows[k]
		fmt.Fprintf(t, "%s\t%s\t%d\t%.4f\t%d\t%.4f\n", k[0], k[1], r[0].nodes, r[0].price, r[1].nodes, r[1].price)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(ss.Commands) == 0 {
		fmt.Fprintln(w, "Karpenter is not expected to disrupt any node after the waves.")
		return nil
	}
	fmt.Fprintln(w, "Karpenter is expected to:")
	t = newTable(w)
	fmt.Fprintln(t, "AFTER\tMETHOD\tACTION\tNODES REMOVED\tREPLACEMENT\tSAVES $/H")
	for _, c := range ss.Commands {
		var names []string
		for _, n := range c.Nodes {
			names = append(names, fmt.Sprintf("%s (%s)", dash(n.Name), n.InstanceType))
		}
		repl := "-"
		if r := c.Replacement; r != nil {
			repl = fmt.Sprintf("%s %s in %s", r.CapacityType, r.InstanceType, r.Zone)
			if r.Name != "" {
				repl = r.Name + ": " + repl
			}
		}
		fmt.Fprintf(t, "+%s\t%s\t%s\t%s\t%s\t%.4f\n", c.After, c.Method, c.Action, strings.Join(names, ", "), repl, c.SavingsPerHour)
	}
	return t.Flush()
}

// drainedWith names, for each wave of the plan, the other waves of its
// drain group ("3, 4"), or "-" for a wave drained alone.
func drainedWith(p *plan.Plan) []string {
	out := make([]string, len(p.Waves))
	for _, g := range p.DrainGroups() {
		for _, i := range g {
			var others []string
			for _, j := range g {
				if j != i {
					others = append(others, strconv.Itoa(p.Waves[j].Index))
				}
			}
			out[i] = dash(strings.Join(others, ", "))
		}
	}
	return out
}
