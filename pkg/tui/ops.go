package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Clients are one connection's collaborators: the actions' configuration
// (clients, clock, poll interval, pod concurrency) and how the connection
// settles.
type Clients struct {
	// Config's Clock, when it also implements Advancer, moves the cluster
	// itself (the sandbox's), and the cluster is sampled each time it
	// advances.
	Config *action.Configuration
	// Settle, when set, waits after a completed apply or rollback for the
	// cluster's steady state (the sandbox: its cloud catches up and, after
	// an apply, Karpenter's consolidation settles, as the demo's steps
	// do), so the last view is the fleet the run ends with, not one
	// part-way.
	Settle func(ctx context.Context, rollback bool) error
}

// Advancer is a clock that moves the cluster when the runner waits on it,
// as *sandbox.Clock does. OnAdvance sets the function called after every
// advance (nil clears it); Err is the error that stopped the cluster from
// moving, if one did.
type Advancer interface {
	OnAdvance(func())
	Err() error
}

// Dialer builds the clients of a connection.
type Dialer func(ctx context.Context, c Connection) (*Clients, error)

// Ops is the Backend of the real commands: it runs pkg/action's actions
// (discover, readiness, generate, IAM, plan, apply, rollback) on the
// clients Dial returns, and writes the files the commands write into
// OutDir.
type Ops struct {
	Dial Dialer
	// OutDir receives snapshot.json, karpenter/ (the tree), the IAM journal,
	// <env>.yaml (the environment config) and plan.yaml.
	OutDir string
	// Namespace is the tool's namespace (journal, lock, aws-auth backup).
	Namespace string
	// Operator names the person in the journal (default $USER).
	Operator string
	// Catalog prices instance types; nil picks the region's.
	Catalog *catalog.Catalog
	// KarpenterChart is the chart the Karpenter step installs (plan
	// --karpenter-chart); empty: the official chart.
	KarpenterChart string

	mu   sync.Mutex
	conn Connection
	c    *Clients
	cat  *catalog.Catalog
	iam  *action.IAM
}

// File names Ops writes under OutDir.
const (
	SnapshotFile = "snapshot.json"
	TreeDir      = "karpenter"
	PlanFile     = "plan.yaml"
)

// ConfigFile is the environment config the wizard writes for CI.
func ConfigFile(env string) string { return env + ".yaml" }

func (o *Ops) path(name string) string { return filepath.Join(o.OutDir, name) }

func (o *Ops) clients() (*Clients, Connection, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c == nil {
		return nil, Connection{}, errors.New("not connected: finish the connect screen first")
	}
	return o.c, o.conn, nil
}

// Connect implements Backend.
func (o *Ops) Connect(ctx context.Context, c Connection) (ConnectInfo, error) {
	if c.Cluster == "" {
		return ConnectInfo{}, errors.New("cluster: give the EKS cluster name")
	}
	if c.Environment == "" {
		return ConnectInfo{}, errors.New("environment: give a name such as dev, staging or prod")
	}
	cl, err := o.Dial(ctx, c)
	if err != nil {
		return ConnectInfo{}, err
	}
	r, err := cl.Config.Ping(ctx, c.Cluster)
	info := ConnectInfo{Server: r.Server, Cluster: r.Cluster}
	if err != nil {
		return info, fmt.Errorf("context %q, profile %q: %w", c.Context, c.Profile, err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return info, fmt.Errorf("create output directory %s: %w", o.OutDir, err)
	}
	cat := o.Catalog
	if cat == nil {
		cat = catalog.Default()
		if r := cl.Config.AWS.Region; r != "" && r != cat.Region() {
			if cat, err = catalog.New(catalog.Options{Region: r}); err != nil {
				return info, fmt.Errorf("instance-type catalogue for region %s: %w", r, err)
			}
		}
	}
	o.mu.Lock()
	o.conn, o.c, o.cat, o.iam = c, cl, cat, nil
	o.mu.Unlock()
	return info, nil
}

// Discover implements Backend: discover.Run as `discover --snapshot` does.
func (o *Ops) Discover(ctx context.Context, progress func(string)) (*inventory.Inventory, error) {
	cl, conn, err := o.clients()
	if err != nil {
		return nil, err
	}
	inv, err := o.config(cl).Discover(ctx, action.Discover{Cluster: conn.Cluster, Progress: progress, Snapshot: o.path(SnapshotFile)})
	if err != nil {
		return nil, fmt.Errorf("discover cluster %s: %w", conn.Cluster, err)
	}
	return inv, nil
}

// Readiness implements Backend: the readiness action, as the command runs
// it.
func (o *Ops) Readiness(inv *inventory.Inventory) readiness.Report {
	return (&action.Readiness{}).Run(inv).Report
}

func (o *Ops) generate(c GenerateChoice) *action.Generate {
	a := &action.Generate{Options: generate.DefaultOptions(), Tree: generate.TreeOptions{Dir: o.path(TreeDir), Envs: c.Envs}}
	a.Options.Strategy, a.Options.Flexibility, a.Options.Namespace = c.Strategy, c.Flexibility, o.Namespace
	return a
}

// Generate implements Backend: the generate action writes the tree, as the
// command does, or previews it against the one on disk.
func (o *Ops) Generate(ctx context.Context, inv *inventory.Inventory, c GenerateChoice, write bool) (*GenerateResult, error) {
	a := o.generate(c)
	res := &GenerateResult{Dir: a.Tree.Dir}
	var warnings []generate.Finding
	if write {
		rep, err := a.Run(ctx, inv)
		if err != nil {
			return nil, err
		}
		res.Pools, res.Written, warnings = rep.Pools, rep.Tree, append(rep.Warnings, rep.Tree.Warnings...)
		for _, f := range rep.Tree.Files {
			res.Files = append(res.Files, FilePreview{Path: f.Path, Action: f.Action})
		}
	} else {
		pre, err := a.Preview(ctx, inv)
		if err != nil {
			return nil, err
		}
		res.Pools, res.Files, warnings = pre.Pools, pre.Files, pre.Warnings
	}
	for _, w := range warnings {
		res.Warnings = append(res.Warnings, fmt.Sprint(w))
	}
	return res, nil
}

// IAMPlan implements Backend as `iam plan --snapshot` does, with the
// journal in OutDir.
func (o *Ops) IAMPlan(ctx context.Context, inv *inventory.Inventory, c IAMChoice) (*iam.Plan, error) {
	cl, _, err := o.clients()
	if err != nil {
		return nil, err
	}
	a, err := o.config(cl).IAM(inv, desired.Options{Identity: c.Identity, CreateOIDCProvider: c.CreateOIDCProvider}, "")
	if err != nil {
		return nil, err
	}
	a.Journal = o.path(a.Journal)
	plan, err := a.Plan(ctx, nil)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.iam = a
	o.mu.Unlock()
	return plan, nil
}

// config is the action configuration of the connected clients, with the
// wizard's namespace, output directory and operator.
func (o *Ops) config(cl *Clients) *action.Configuration {
	c := *cl.Config
	operator := o.Operator
	if operator == "" {
		operator = os.Getenv("USER")
	}
	host, _ := os.Hostname()
	c.Namespace, c.OutDir = o.Namespace, o.OutDir
	c.Operator, c.Identity = operator, fmt.Sprintf("%s@%s wizard pid %d", operator, host, os.Getpid())
	return &c
}

// IAMApply implements Backend as `iam apply --yes` does.
func (o *Ops) IAMApply(ctx context.Context, p *iam.Plan, onStep func(iam.Item)) error {
	o.mu.Lock()
	a := o.iam
	o.mu.Unlock()
	if a == nil {
		return errors.New("no IAM plan to apply")
	}
	if _, err := a.Apply(ctx, p, onStep); err != nil {
		return fmt.Errorf("%w; the journal %s lists what was done: run `karpenter-migrate iam apply --journal %s` to finish", err, a.Journal, a.Journal)
	}
	return nil
}

// EnvConfig is the environment config the plan screen's choices make.
func EnvConfig(conn Connection, c PlanChoice) config.Config {
	cfg := config.Default(c.Environment)
	cfg.Cluster, cfg.Region, cfg.Profile = conn.Cluster, conn.Region, conn.Profile
	cfg.Rollout.WaveSize, cfg.Rollout.Concurrency, cfg.Rollout.PrepareAhead = c.WaveSize, c.Concurrency, c.PrepareAhead
	cfg.Rollout.AllowEmptyDir, cfg.Rollout.ForceEvict = c.AllowEmptyDir, c.ForceEvict
	cfg.Generate.Strategy, cfg.Generate.Flexibility = string(c.Generate.Strategy), string(c.Generate.Flexibility)
	cfg.NodeGroups.Exclude = append([]string(nil), c.Exclude...)
	cfg.Readiness.Acknowledge = append([]string(nil), c.Acknowledged...)
	return cfg
}

// Karpenter implements Backend: the Karpenter step's Check of the release
// the plan would record (action.KarpenterCheck), as apply will run it.
func (o *Ops) Karpenter(ctx context.Context, inv *inventory.Inventory, c PlanChoice) (*KarpenterResult, error) {
	cl, conn, err := o.clients()
	if err != nil {
		return nil, err
	}
	rel, st, err := o.config(cl).KarpenterCheck(ctx, action.KarpenterCheck{
		Environment: c.Environment, Config: EnvConfig(conn, c), Inventory: inv, Dir: o.path(TreeDir),
		KarpenterChart: o.KarpenterChart, KarpenterVersion: desired.DefaultKarpenterVersion,
	})
	if err != nil {
		return nil, err
	}
	return &KarpenterResult{Release: rel, State: st}, nil
}

// Plan implements Backend: the plan action on the discovered inventory and
// the written tree, as `plan --snapshot --dir --config` does.
func (o *Ops) Plan(ctx context.Context, inv *inventory.Inventory, c PlanChoice) (*PlanResult, error) {
	cl, conn, err := o.clients()
	if err != nil {
		return nil, err
	}
	cfg := EnvConfig(conn, c)
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render the environment config: %w", err)
	}
	if _, err := config.Parse(b); err != nil {
		return nil, fmt.Errorf("environment config: %w", err)
	}
	cfgPath := o.path(ConfigFile(c.Environment))
	if err := atomicfile.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", cfgPath, err)
	}
	planPath := o.path(PlanFile)
	p, err := o.config(cl).Plan(ctx, action.Plan{
		Environment: c.Environment, Config: cfg, Inventory: action.Inventory(inv), Dir: o.path(TreeDir), File: planPath,
		IAM:            &plan.IAMOptions{KarpenterVersion: desired.DefaultKarpenterVersion, Identity: string(c.IAM.Identity), CreateOIDCProvider: c.IAM.CreateOIDCProvider},
		KarpenterChart: o.KarpenterChart, SkipKarpenter: c.SkipKarpenter,
	})
	if err != nil {
		return nil, err
	}
	res := &PlanResult{Plan: p, PlanFile: planPath, ConfigFile: cfgPath}
	res.Before, res.AfterMigration = fleets(inv, p)
	// After the waves and after consolidation are the plan's steady state
	// (every node the cluster runs, the controller's kept ones included),
	// the forecast plan and the demo show.
	res.AfterConsolidation, res.MigratedCostPerHour, res.ConsolidatedCostPerHour = res.AfterMigration, p.Cost.AfterPerHour, p.Cost.AfterPerHour
	if ss := p.SteadyState; ss != nil {
		// The forecast fleets' nodes by instance and capacity type.
		after, settled := map[FleetLine]int{}, map[FleetLine]int{}
		for _, t := range ss.AfterMigration.Types {
			after[FleetLine{InstanceType: t.InstanceType, CapacityType: t.CapacityType}] += t.Nodes
		}
		for _, t := range ss.AfterConsolidation.Types {
			settled[FleetLine{InstanceType: t.InstanceType, CapacityType: t.CapacityType}] += t.Nodes
		}
		res.AfterMigration, res.AfterConsolidation = fleetLines(after), fleetLines(settled)
		res.MigratedCostPerHour, res.ConsolidatedCostPerHour, res.Repacked = ss.AfterMigration.PricePerHour, ss.AfterConsolidation.PricePerHour, len(ss.Commands) > 0
	}
	return res, nil
}

// fleets are the legacy nodes the waves drain and the nodes they predict.
func fleets(inv *inventory.Inventory, p *plan.Plan) (before, after []FleetLine) {
	nodes := map[string]inventory.Node{}
	for _, n := range inv.Nodes {
		nodes[n.Name] = n
	}
	b, a := map[FleetLine]int{}, map[FleetLine]int{}
	for _, w := range p.Waves {
		for _, wn := range w.Nodes {
			n := nodes[wn.Name]
			b[FleetLine{InstanceType: n.InstanceType, CapacityType: n.CapacityType}]++
		}
		for _, pn := range w.PredictedNodes {
			a[FleetLine{InstanceType: pn.InstanceType, CapacityType: pn.CapacityType}]++
		}
	}
	return fleetLines(b), fleetLines(a)
}

func fleetLines(m map[FleetLine]int) []FleetLine {
	out := make([]FleetLine, 0, len(m))
	for k, n := range m {
		k.Count = n
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].CapacityType < out[j].CapacityType
	})
	return out
}

// Runner builds the rollout runner for p as `apply --yes --dir` does.
func (o *Ops) Runner(p *plan.Plan, obs rollout.Observer) (*rollout.Runner, error) {
	cl, _, err := o.clients()
	if err != nil {
		return nil, err
	}
	c := o.config(cl)
	c.Observer = obs
	return c.Runner(p, action.Run{Dir: o.path(TreeDir)})
}

// Apply implements Backend.
func (o *Ops) Apply(ctx context.Context, p *plan.Plan, c RunChoice, sink func(Update)) error {
	return o.run(ctx, p, sink, func(ctx context.Context, r *rollout.Runner) error {
		r.Options.AckBlockers = c.AckBlockers
		if err := r.Apply(ctx); err != nil {
			return err
		}
		return o.settle(ctx, false)
	})
}

// settle waits for the connection's steady state after a run, if it has one.
func (o *Ops) settle(ctx context.Context, rollback bool) error {
	if cl, _, err := o.clients(); err == nil && cl.Settle != nil {
		return cl.Settle(ctx, rollback)
	}
	return nil
}

// Rollback implements Backend: every applied step, IAM kept, as
// `rollback --yes` does.
func (o *Ops) Rollback(ctx context.Context, p *plan.Plan, sink func(Update)) error {
	return o.run(ctx, p, sink, func(ctx context.Context, r *rollout.Runner) error {
		if err := r.Rollback(ctx, ""); err != nil {
			return err
		}
		return o.settle(ctx, true)
	})
}

func (o *Ops) run(ctx context.Context, p *plan.Plan, sink func(Update), fn func(context.Context, *rollout.Runner) error) error {
	r, err := o.Runner(p, func(e rollout.Event) { sink(Update{Event: &e}) })
	if err != nil {
		return err
	}
	cl, _, _ := o.clients()
	clk := cl.Config.Clock
	view := func() {
		if v, err := o.View(ctx); err == nil {
			sink(Update{View: v})
		}
	}
	view()
	if adv, ok := clk.(Advancer); ok {
		// The cluster only moves when the runner waits (on several
		// goroutines): look after a move, at most every 10s of its time,
		// and stop the runner once the cluster cannot move any more.
		ctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		var mu sync.Mutex
		var last time.Time
		adv.OnAdvance(func() {
			if err := adv.Err(); err != nil {
				stop(err)
				return
			}
			mu.Lock()
			now := clk.Now()
			due := now.Sub(last) >= 10*time.Second
			if due {
				last = now
			}
			mu.Unlock()
			if due {
				view()
			}
		})
		defer adv.OnAdvance(nil)
		err = fn(ctx, r)
		view()
		if simErr := adv.Err(); err != nil && simErr != nil {
			return fmt.Errorf("%w (the sandbox's simulation failed: %v)", err, simErr)
		}
		return err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.Options.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				view()
			}
		}
	}()
	err = fn(ctx, r)
	close(done)
	wg.Wait()
	view()
	return err
}

// View reads the nodes and pods for the rollout screen (the view action,
// priced with the connected region's catalogue).
func (o *Ops) View(ctx context.Context) (*ClusterView, error) {
	cl, _, err := o.clients()
	if err != nil {
		return nil, err
	}
	c := o.config(cl)
	o.mu.Lock()
	c.Catalog = o.cat
	o.mu.Unlock()
	return c.View(ctx)
}
