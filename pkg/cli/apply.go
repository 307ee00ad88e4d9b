package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

type runFlags struct {
	plan          string
	dir           string
	config        string
	dryRun        bool
	yes           bool
	forceEvict    bool
	ackBlockers   bool
	leaseDuration time.Duration
	pollInterval  time.Duration
	inCluster     bool
}

func (f *runFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.plan, "plan", "plan.yaml", "plan file written by the plan command")
	fl.StringVar(&f.dir, "dir", "", "DIR: tree written by the generate command; its overlays/<env> holds the NodePools to apply")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would change; change nothing")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask before destructive steps (CI)")
	fl.BoolVar(&f.forceEvict, "force-evict", false, "also evict pods annotated do-not-disrupt / safe-to-evict=false")
	fl.BoolVar(&f.ackBlockers, "ack-blockers", false, "proceed although the plan lists blocker findings")
	fl.DurationVar(&f.leaseDuration, "lease-duration", time.Minute, "how long the lock outlives a run that died (kill -9) before another may take it")
	fl.DurationVar(&f.pollInterval, "poll-interval", 2*time.Second, "how often waits poll the cluster")
	fl.BoolVar(&f.inCluster, "in-cluster", false, "run in a pod: use its service account (and IRSA/Pod Identity for AWS) instead of a kubeconfig")
}

func newApplyCmd(g *GlobalOptions) *cobra.Command {
	f := &runFlags{}
	var replan bool
	cmd := &cobra.Command{
		Use:   "apply --plan plan.yaml",
		Short: "Apply a plan: run the migrations/ steps, resuming where a previous run stopped",
		Long: `apply runs the runbook steps of the plan's environment in order, recording each step and
every value it changes in a ConfigMap journal and holding a Lease so no other run interleaves.
Ctrl-C finishes the evictions in flight, writes the journal and prints the commands that
resume (apply again) or roll back (exit code 130); a second Ctrl-C quits at once.

--config applies the environment's region, profile and maintenance window (outside it,
apply changes nothing and exits 4). --in-cluster runs in a pod with its service account
(see generate --job); AWS credentials then come from IRSA or EKS Pod Identity.

Exit codes: 4 paused (a gate failed, a wait timed out, or outside the maintenance window),
5 the cluster changed since the plan, 130 interrupted (Ctrl-C or SIGTERM).`,
		Example: `  # See what would change
  karpenter-migrate apply --plan plan.yaml --dir karpenter --dry-run

  # Apply from CI without prompts
  karpenter-migrate apply --plan plan.yaml --dir karpenter --yes

  # From CI, with the environment's config and JSON progress events
  karpenter-migrate apply --plan plan.yaml --dir karpenter --config migrations/prod.yaml --yes --log-format json

  # Inside the cluster (the Job that generate --job writes)
  karpenter-migrate apply --in-cluster --plan /etc/karpenter-migrate/plan.yaml --dir /etc/karpenter-migrate/tree --yes`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfig(g, f, f.config, time.Now()); err != nil {
				return err
			}
			return runRollout(cmd.Context(), g, f, "apply", func(ctx context.Context, r *rollout.Runner) error {
				if replan {
					r.Replan = replanner(g, f, r.Plan)
				}
				return r.Apply(ctx)
			})
		},
	}
	f.bind(cmd)
	cmd.Flags().BoolVar(&replan, "replan", false, "when the cluster changed since the plan, discover it again and apply a new plan (written next to --plan) instead of refusing")
	cmd.Flags().StringVar(&f.config, "config", "", "environment migration config: its region, profile and maintenance window, and the settings of --replan (default: built-in defaults for the plan's environment)")
	return cmd
}

// runRollout loads the plan, builds the runner, runs verb (apply or
// rollback) until it ends or Ctrl-C stops it, and maps its errors to exit
// codes.
func runRollout(ctx context.Context, g *GlobalOptions, f *runFlags, verb string, run func(context.Context, *rollout.Runner) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	p, err := plan.ReadPlanFile(f.plan)
	if err != nil {
		return err
	}
	if !f.yes && !f.dryRun && !g.IO.CanPrompt() {
		return errors.New("this changes the cluster and cannot ask for confirmation here: pass --yes (or --dry-run to only look)")
	}
	r, err := newRunner(ctx, g, f, p)
	if err != nil {
		return err
	}
	ctx, in, stop := g.interruptible(ctx, "stopping "+verb+": the evictions in flight finish and the journal is written")
	defer stop()
	err = run(ctx, r)
	var drift *rollout.DriftError
	var paused *rollout.PausedError
	switch {
	case err != nil && in.signal() != nil:
		return interruptedRollout(g, f, verb, r, in.signal(), err)
	case errors.As(err, &drift):
		return &ExitError{Code: ExitDrifted, Err: err}
	case errors.As(err, &paused):
		return &ExitError{Code: ExitPaused, Err: err}
	}
	return err
}

func newRunner(ctx context.Context, g *GlobalOptions, f *runFlags, p *plan.Plan) (*rollout.Runner, error) {
	rc, err := f.restConfig(g)
	if err != nil {
		return nil, err
	}
	// The run rides out an AWS throttling storm, and an API server outage
	// as long as its Lease allows (kube.Lock gives up renewing after two
	// thirds of it).
	aws := g.awsOptions(p.Region)
	aws.RideOutThrottling = true
	c, err := g.configure(ctx, action.Live{REST: rc, AWS: aws, Outage: f.leaseDuration * 2 / 3})
	if err != nil {
		return nil, err
	}
	c.Namespace, c.PollInterval, c.Observer = g.Namespace, f.pollInterval, chaosHook(eventPrinter(g))
	if u, err := user.Current(); err == nil {
		c.Operator = u.Username
	}
	o := action.Run{Dir: f.dir, DryRun: f.dryRun, ForceEvict: f.forceEvict, AckBlockers: f.ackBlockers, LeaseDuration: f.leaseDuration}
	if !f.yes && !f.dryRun {
		o.Confirm = func(q string) (bool, error) { return g.IO.Confirm(q, "--yes") }
	}
	return c.Runner(p, o)
}

// replanner discovers the plan's cluster again and plans it as plan would,
// writing the new plan next to the old one so the user can read what ran.
func replanner(g *GlobalOptions, f *runFlags, old *plan.Plan) func(context.Context) (*plan.Plan, error) {
	return func(ctx context.Context) (*plan.Plan, error) {
		cfg, err := loadConfig(old.Environment, f.config)
		if err != nil {
			return nil, err
		}
		src, err := inventorySource(g, "", old.Cluster, firstNonEmpty(old.Region, cfg.Region), false)
		if err != nil {
			return nil, err
		}
		req := action.Plan{Environment: old.Environment, Config: cfg, Inventory: src, Dir: f.dir, Progress: g.planProgress(time.Now(), planProgressEvery)}
		if old.IAM != nil {
			o := old.IAM.Options
			req.IAM = &o
		}
		if k := old.Karpenter; k != nil {
			req.KarpenterChart, req.KarpenterVersion = k.Chart, k.Version
		} else {
			req.SkipKarpenter = true
		}
		p, err := (&action.Configuration{}).Plan(ctx, req)
		if err != nil {
			return nil, err
		}
		path := strings.TrimSuffix(f.plan, filepath.Ext(f.plan)) + ".replanned" + filepath.Ext(f.plan)
		if err := p.WriteFile(path); err != nil {
			return nil, err
		}
		g.say(slog.LevelWarn, eventReplanned, "", fmt.Sprintf("cluster changed since the plan; wrote the new plan %s to %s and applying it", p.Hash, path),
			slog.String("hash", p.Hash), slog.String("path", path))
		return p, nil
	}
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// eventPrinter renders progress events: one JSON object per line with
// --log-format json, else one readable line each on stderr.
func eventPrinter(g *GlobalOptions) rollout.Observer {
	w := g.IO.ErrOut
	if g.LogFormat == "json" {
		return eventLogger(g.Logger)
	}
	return func(e rollout.Event) {
		prefix := e.Time.Format("15:04:05")
		if e.DryRun {
			prefix += " [dry-run]"
		}
		where := e.Step
		if e.Wave > 0 {
			where += fmt.Sprintf(" wave %d", e.Wave)
			if e.Waves > 0 {
				where += fmt.Sprintf("/%d", e.Waves)
			}
		}
		switch e.Kind {
		case rollout.EventWavePhase:
			if e.Message != "" { // the wave's end: how long it took, against the plan
				fmt.Fprintf(w, "%s %s: %s: %s\n", prefix, where, e.Phase, e.Message)
			} else {
				fmt.Fprintf(w, "%s %s: %s\n", prefix, where, e.Phase)
			}
		case rollout.EventEviction:
			fmt.Fprintf(w, "%s %s: %s %s (node %s)\n", prefix, where, e.Message, e.Pod, e.Node)
		case rollout.EventPDBWait:
			fmt.Fprintf(w, "%s %s: %s waits on PDB %s\n", prefix, where, e.Pod, e.PDB)
		case rollout.EventWaiting:
			if e.Total > 0 {
				fmt.Fprintf(w, "%s %s: waiting for %s (%d/%d)\n", prefix, where, e.Message, e.Done, e.Total)
			} else {
				fmt.Fprintf(w, "%s %s: waiting for %s\n", prefix, where, e.Message)
			}
		default:
			fmt.Fprintf(w, "%s %s %s: %s\n", prefix, e.Kind, where, e.Message)
		}
	}
}
