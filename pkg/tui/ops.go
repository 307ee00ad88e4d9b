package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Clients are one connection's collaborators.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	AWS     awssdk.Config
	// Clock is the runner's clock; nil is real time. A clock that also
	// implements Advancer moves the cluster itself (the sandbox's), and
	// the cluster is sampled each time it advances.
	Clock clock.WithTicker
	// PollInterval is how often the runner's waits poll (default 2s).
	PollInterval time.Duration
	// PodConcurrency bounds how many of a drained node's pods are evicted
	// at once (kube.DrainOptions.PodConcurrency; 0: all at once).
	PodConcurrency int
	// Settle, when set, waits after a completed apply for the cluster's
	// steady state (the sandbox: its cloud catches up and Karpenter's
	// consolidation settles, as the demo's last step does), so the last
	// view is the fleet the migration ends with.
	Settle func(ctx context.Context) error
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

// Ops is the Backend of the real commands: it calls discover.Run,
// generate.Run, iam.BuildPlan/Apply, rollout.MakePlan and rollout.Runner
// with the clients Dial returns, and writes the files the commands write
// into OutDir.
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

	mu   sync.Mutex
	conn Connection
	c    *Clients
	cat  *catalog.Catalog
	iam  *iamState
}

type iamState struct {
	desired *iam.Desired
	clients iam.Clients
	cluster string
}

// File names Ops writes under OutDir.
const (
	SnapshotFile = "snapshot.json"
	TreeDir      = "karpenter"
	PlanFile     = "plan.yaml"
)

// IAMJournalFile is the IAM journal `iam apply` writes by default.
func IAMJournalFile(cluster string) string {
	return "karpenter-migrate-iam-" + cluster + ".journal.json"
}

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

func (o *Ops) now() time.Time {
	if c, _, err := o.clients(); err == nil && c.Clock != nil {
		return c.Clock.Now()
	}
	return time.Now()
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
	var info ConnectInfo
	v, err := cl.Kube.Discovery().ServerVersion()
	if err != nil {
		return info, fmt.Errorf("context %q: the API server did not answer: %w", c.Context, err)
	}
	info.Server = "Kubernetes " + v.GitVersion
	out, err := eks.NewFromConfig(cl.AWS).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String(c.Cluster)})
	if err != nil {
		return info, fmt.Errorf("EKS cluster %s in %s (profile %q): %w", c.Cluster, cl.AWS.Region, c.Profile, err)
	}
	info.Cluster = fmt.Sprintf("EKS %s %s, %s", c.Cluster, awssdk.ToString(out.Cluster.Version), cl.AWS.Region)
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return info, fmt.Errorf("create output directory %s: %w", o.OutDir, err)
	}
	cat := o.Catalog
	if cat == nil {
		cat = catalog.Default()
		if r := cl.AWS.Region; r != "" && r != cat.Region() {
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

// Readiness implements Backend: the readiness action over the connected
// region's catalogue.
func (o *Ops) Readiness(inv *inventory.Inventory) readiness.Report {
	o.mu.Lock()
	cat := o.cat
	o.mu.Unlock()
	return (&action.Readiness{Catalog: cat}).Run(inv).Report
}

func (o *Ops) generateOptions(c GenerateChoice) generate.Options {
	opts := generate.DefaultOptions()
	opts.Strategy, opts.Flexibility, opts.Namespace = c.Strategy, c.Flexibility, o.Namespace
	return opts
}

// Generate implements Backend. A write is generate.Run, as the command
// does; a preview writes the tree into a temporary directory and compares
// it file by file with the one on disk.
func (o *Ops) Generate(ctx context.Context, inv *inventory.Inventory, c GenerateChoice, write bool) (*GenerateResult, error) {
	dir := o.path(TreeDir)
	tree := generate.TreeOptions{Dir: dir, Envs: c.Envs}
	if write {
		rep, err := generate.Run(ctx, inv, o.generateOptions(c), tree)
		if err != nil {
			return nil, err
		}
		res := &GenerateResult{Dir: dir, Pools: rep.Pools, Written: rep.Tree}
		for _, f := range rep.Tree.Files {
			res.Files = append(res.Files, FilePreview{Path: f.Path, Action: f.Action})
		}
		for _, w := range append(rep.Warnings, rep.Tree.Warnings...) {
			res.Warnings = append(res.Warnings, fmt.Sprint(w))
		}
		return res, nil
	}
	gen, err := generate.Generate(inv, o.generateOptions(c))
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "karpenter-migrate-preview-")
	if err != nil {
		return nil, fmt.Errorf("preview directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	tree.Dir = tmp
	rep, err := generate.Write(ctx, gen, tree)
	if err != nil {
		return nil, err
	}
	res := &GenerateResult{Dir: dir, Pools: gen.Pools}
	for _, f := range rep.Files {
		fp, err := previewFile(tmp, dir, f.Path)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, fp)
	}
	for _, w := range append(gen.Warnings, rep.Warnings...) {
		res.Warnings = append(res.Warnings, fmt.Sprint(w))
	}
	return res, nil
}

// previewFile compares the file rel of the new tree with the one on disk.
func previewFile(newRoot, oldRoot, rel string) (FilePreview, error) {
	fp := FilePreview{Path: rel}
	next, err := os.ReadFile(filepath.Join(newRoot, filepath.FromSlash(rel)))
	if err != nil {
		return fp, fmt.Errorf("preview %s: %w", rel, err)
	}
	prev, err := os.ReadFile(filepath.Join(oldRoot, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, os.ErrNotExist):
		fp.Action = generate.FileCreated
	case err != nil:
		return fp, fmt.Errorf("read %s: %w", filepath.Join(oldRoot, rel), err)
	case string(prev) == string(next):
		fp.Action = generate.FileUnchanged
		return fp, nil
	case generate.Edited(prev):
		fp.Action = generate.FileKept
	default:
		fp.Action = generate.FileUpdated
	}
	fp.Diff, err = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(prev)), B: difflib.SplitLines(string(next)),
		FromFile: "a/" + rel, ToFile: "b/" + rel, Context: 3,
	})
	if err != nil {
		return fp, fmt.Errorf("diff %s: %w", rel, err)
	}
	return fp, nil
}

// IAMPlan implements Backend as `iam plan --snapshot` does.
func (o *Ops) IAMPlan(ctx context.Context, inv *inventory.Inventory, c IAMChoice) (*iam.Plan, error) {
	cl, _, err := o.clients()
	if err != nil {
		return nil, err
	}
	target, err := iam.TargetFromInventory(inv)
	if err != nil {
		return nil, err
	}
	desired, err := iam.Build(target, iam.Options{Identity: c.Identity, CreateOIDCProvider: c.CreateOIDCProvider})
	if err != nil {
		return nil, err
	}
	st := &iamState{desired: desired, clients: o.config(cl).IAMClients(desired), cluster: target.Cluster}
	plan, err := iam.BuildPlan(ctx, desired, st.clients, iam.PlanOptions{})
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.iam = st
	o.mu.Unlock()
	return plan, nil
}

// config is the action configuration of the connected clients.
func (o *Ops) config(cl *Clients) *action.Configuration {
	o.mu.Lock()
	cat := o.cat
	o.mu.Unlock()
	operator := o.Operator
	if operator == "" {
		operator = os.Getenv("USER")
	}
	host, _ := os.Hostname()
	return &action.Configuration{
		Kube: cl.Kube, Dynamic: cl.Dynamic, AWS: cl.AWS, Clock: cl.Clock, Catalog: cat,
		Namespace: o.Namespace, OutDir: o.OutDir, PollInterval: cl.PollInterval, PodConcurrency: cl.PodConcurrency,
		Operator: operator, Identity: fmt.Sprintf("%s@%s wizard pid %d", operator, host, os.Getpid()),
	}
}

// IAMApply implements Backend as `iam apply --yes` does, with the journal
// in OutDir.
func (o *Ops) IAMApply(ctx context.Context, p *iam.Plan, onStep func(iam.Item)) error {
	o.mu.Lock()
	st := o.iam
	o.mu.Unlock()
	if st == nil {
		return errors.New("no IAM plan to apply")
	}
	path := o.path(IAMJournalFile(st.cluster))
	j, err := iam.ReadJournal(path, st.cluster)
	if err != nil {
		return err
	}
	_, err = iam.Apply(ctx, p, st.clients, iam.ApplyOptions{
		Journal: j, Save: func(j *iam.Journal) error { return j.WriteFile(path) }, OnStep: onStep, Now: o.now,
	})
	if err != nil {
		return fmt.Errorf("%w; the journal %s lists what was done: run `karpenter-migrate iam apply --journal %s` to finish", err, path, path)
	}
	return nil
}

// EnvConfig is the environment config the plan screen's choices make.
func EnvConfig(conn Connection, c PlanChoice) config.Config {
	cfg := config.Default(c.Environment)
	cfg.Cluster, cfg.Region, cfg.Profile = conn.Cluster, conn.Region, conn.Profile
	cfg.Rollout.WaveSize, cfg.Rollout.Concurrency = c.WaveSize, c.Concurrency
	cfg.Rollout.AllowEmptyDir, cfg.Rollout.ForceEvict = c.AllowEmptyDir, c.ForceEvict
	cfg.Generate.Strategy, cfg.Generate.Flexibility = string(c.Generate.Strategy), string(c.Generate.Flexibility)
	cfg.NodeGroups.Exclude = append([]string(nil), c.Exclude...)
	cfg.Readiness.Acknowledge = append([]string(nil), c.Acknowledged...)
	return cfg
}

// Plan implements Backend: rollout.MakePlan on the discovered inventory and
// the written tree, as `plan --snapshot --dir --config` does.
func (o *Ops) Plan(ctx context.Context, inv *inventory.Inventory, c PlanChoice) (*PlanResult, error) {
	_, conn, err := o.clients()
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
	p, err := rollout.MakePlan(ctx, rollout.PlanRequest{
		Environment: c.Environment, Config: cfg, Steps: migrations.Planned(),
		Inventory: func(context.Context) (*inventory.Inventory, error) { return inv, nil },
		Dir:       o.path(TreeDir), IAM: &rollout.IAMOptions{KarpenterVersion: iam.DefaultKarpenterVersion, Identity: string(c.IAM.Identity), CreateOIDCProvider: c.IAM.CreateOIDCProvider},
		Catalog: o.cat, Now: o.now(),
	})
	if err != nil {
		return nil, err
	}
	planPath := o.path(PlanFile)
	if err := p.WriteFile(planPath); err != nil {
		return nil, err
	}
	res := &PlanResult{Plan: p, PlanFile: planPath, ConfigFile: cfgPath}
	res.Before, res.AfterMigration = fleets(inv, p)
	// After consolidation is the plan's steady state (disruption.Settle),
	// the forecast plan and the demo show.
	res.AfterConsolidation, res.ConsolidatedCostPerHour = res.AfterMigration, p.Cost.AfterPerHour
	if ss := p.SteadyState; ss != nil && len(ss.Commands) > 0 {
		counts := map[FleetLine]int{}
		for _, t := range ss.AfterConsolidation.Types {
			counts[FleetLine{InstanceType: t.InstanceType, CapacityType: t.CapacityType}] += t.Nodes
		}
		res.AfterConsolidation, res.ConsolidatedCostPerHour, res.Repacked = fleetLines(counts), ss.AfterConsolidation.PricePerHour, true
	}
	return res, nil
}

// fleets are the legacy nodes the waves drain and the nodes they predict.
func fleets(inv *inventory.Inventory, p *rollout.Plan) (before, after []FleetLine) {
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
func (o *Ops) Runner(p *rollout.Plan, obs rollout.Observer) (*rollout.Runner, error) {
	cl, _, err := o.clients()
	if err != nil {
		return nil, err
	}
	c := o.config(cl)
	c.Observer = obs
	return c.Runner(p, action.Run{Dir: o.path(TreeDir)})
}

// Apply implements Backend.
func (o *Ops) Apply(ctx context.Context, p *rollout.Plan, c RunChoice, sink func(Update)) error {
	return o.run(ctx, p, sink, func(ctx context.Context, r *rollout.Runner) error {
		r.Options.AckBlockers = c.AckBlockers
		if err := r.Apply(ctx); err != nil {
			return err
		}
		if cl, _, err := o.clients(); err == nil && cl.Settle != nil {
			return cl.Settle(ctx)
		}
		return nil
	})
}

// Rollback implements Backend: every applied step, IAM kept, as
// `rollback --yes` does.
func (o *Ops) Rollback(ctx context.Context, p *rollout.Plan, sink func(Update)) error {
	return o.run(ctx, p, sink, func(ctx context.Context, r *rollout.Runner) error { return r.Rollback(ctx, "") })
}

func (o *Ops) run(ctx context.Context, p *rollout.Plan, sink func(Update), fn func(context.Context, *rollout.Runner) error) error {
	r, err := o.Runner(p, func(e rollout.Event) { sink(Update{Event: &e}) })
	if err != nil {
		return err
	}
	cl, _, _ := o.clients()
	view := func() {
		if v, err := o.View(ctx); err == nil {
			sink(Update{View: v})
		}
	}
	view()
	if adv, ok := cl.Clock.(Advancer); ok {
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
			now := cl.Clock.Now()
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

// View reads the nodes and pods for the rollout screen: legacy and
// Karpenter nodes, what they cost now, and each workload's ready and
// pending pods (DaemonSets left out).
func (o *Ops) View(ctx context.Context) (*ClusterView, error) {
	cl, _, err := o.clients()
	if err != nil {
		return nil, err
	}
	nodes, err := cl.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	pods, err := cl.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	v := &ClusterView{Time: o.now(), PodWorkload: map[string]string{}}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Labels[apisv1.NodePoolLabelKey] != "" {
			v.KarpenterNodes++
		} else {
			v.LegacyNodes++
		}
		price, _ := o.cat.Price(n.Labels[corev1.LabelInstanceTypeStable], capacityTypeOf(n), n.Labels[corev1.LabelTopologyZone])
		v.CostPerHour += price
	}
	byName := map[string]*WorkloadView{}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := workloadOf(p)
		if name == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		v.PodWorkload[p.Namespace+"/"+p.Name] = name
		w := byName[name]
		if w == nil {
			w = &WorkloadView{Name: name}
			byName[name] = w
		}
		switch {
		case podReady(p):
			w.Ready++
		case p.Status.Phase == corev1.PodPending:
			w.Pending++
		}
	}
	for _, w := range byName {
		v.Workloads = append(v.Workloads, *w)
	}
	sort.Slice(v.Workloads, func(i, j int) bool { return v.Workloads[i].Name < v.Workloads[j].Name })
	return v, nil
}

func capacityTypeOf(n *corev1.Node) string {
	if ct := n.Labels[apisv1.CapacityTypeLabelKey]; ct != "" {
		return ct
	}
	switch n.Labels["eks.amazonaws.com/capacityType"] {
	case "SPOT":
		return inventory.CapacitySpot
	case "ON_DEMAND":
		return inventory.CapacityOnDemand
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// workloadOf names the pod's workload as namespace/kind/name (a
// ReplicaSet's Deployment by the ReplicaSet's name), "" for DaemonSet pods
// and the tool's own placeholders.
func workloadOf(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if p.Labels[kube.LabelComponent] == "placeholder" {
		return ""
	}
	if ref == nil {
		return p.Namespace + "/pod/" + p.Name
	}
	switch ref.Kind {
	case "DaemonSet":
		return ""
	case "ReplicaSet":
		if i := strings.LastIndex(ref.Name, "-"); i > 0 {
			return p.Namespace + "/deployment/" + ref.Name[:i]
		}
	}
	return p.Namespace + "/" + strings.ToLower(ref.Kind) + "/" + ref.Name
}
