package cli

import (
	"cmp"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui"
)

type wizardOptions struct {
	sandbox  bool
	seed     uint64
	snapshot string
	out      string
	cluster  string
	env      string
	// karpenterChart is --karpenter-chart, as plan takes it.
	karpenterChart string
}

func newWizardCmd(g *GlobalOptions) *cobra.Command {
	o := &wizardOptions{}
	cmd := &cobra.Command{
		Use:   "wizard [--sandbox]",
		Short: "Walk through the whole migration of one cluster interactively, one screen per stage",
		Long: `wizard walks through the migration of one cluster: connect (context, AWS profile and region,
environment), discover (node groups to include), readiness (blockers resolved or
acknowledged), generate (strategy, flexibility, environments; a diff preview), IAM (plan,
confirm apply), Karpenter (what step 07 will do: install it with Helm, or an installation
found, agreeing or naming each field that contradicts the plan), plan (waves, fleet and $/h before and after; wave size and concurrency),
rollout (live, with pause, resume and rollback) and a summary with the commands that
repeat it from CI.

It calls the same functions as discover, generate, iam apply, plan and apply, writes the
same files into --out (snapshot.json, karpenter/, the IAM journal, <env>.yaml, plan.yaml)
and records the same journal in the cluster, so you can stop it and continue with
"apply", or the other way round. It needs an interactive terminal.

It exits as the commands do: 0 when it finished (or quit before the rollout), 4 when it
quit with the rollout paused, 1 when the rollout failed, 130 on Ctrl-C (a running rollout
stops after the evictions in flight first).

--sandbox runs it against the embedded sandbox cluster and account (as demo does); the
sandbox lives in the wizard's process only, so nothing resumes a rollout stopped in it.`,
		Example: `  # Try it on the embedded sandbox
  karpenter-migrate wizard --sandbox

  # Rehearse your own cluster's migration in the sandbox first
  karpenter-migrate wizard --sandbox --snapshot snapshot.json

  # A real cluster, files in ./migration
  karpenter-migrate wizard --context arn:aws:eks:eu-west-1:111122223333:cluster/prod --env prod --out migration`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWizard(cmd, g, o) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.sandbox, "sandbox", false, "run against the embedded sandbox cluster and account")
	f.Uint64Var(&o.seed, "seed", 1, "with --sandbox: seed of the sandbox")
	f.StringVar(&o.snapshot, "snapshot", "", "with --sandbox: load this snapshot (written by discover --snapshot) instead of the demo account, to rehearse your own cluster")
	f.StringVar(&o.out, "out", "", "directory for the files (default: the current directory; with --sandbox a new temporary one)")
	f.StringVar(&o.cluster, "cluster", "", "EKS cluster name (default: from an EKS kubeconfig context)")
	f.StringVar(&o.env, "env", "", "environment name (dev, staging, prod, ...)")
	f.StringVar(&o.karpenterChart, "karpenter-chart", "", "chart the Karpenter step installs, as plan --karpenter-chart (default: the official chart)")
	return cmd
}

func runWizard(cmd *cobra.Command, g *GlobalOptions, o *wizardOptions) error {
	io := g.IO
	if o.snapshot != "" && !o.sandbox {
		return usageError(errors.New("--snapshot needs --sandbox: a snapshot is rehearsed in the sandbox; a real cluster is discovered live"))
	}
	if !io.CanPrompt() {
		return errors.New(`the wizard needs an interactive terminal; the same steps as commands:
  karpenter-migrate discover --cluster NAME --snapshot snapshot.json
  karpenter-migrate generate --snapshot snapshot.json --out karpenter
  karpenter-migrate iam apply --snapshot snapshot.json --yes
  karpenter-migrate plan --env ENV --snapshot snapshot.json --dir karpenter -f plan.yaml
  karpenter-migrate apply --plan plan.yaml --dir karpenter --yes
or watch the whole migration non-interactively with: karpenter-migrate demo`)
	}
	ctx := cmd.Context()
	opts := tui.Options{OutDir: o.out, Namespace: g.Namespace, Sandbox: o.sandbox, Color: io.ColorEnabled(), KarpenterChart: o.karpenterChart}
	if o.sandbox {
		opts.Again = fmt.Sprintf("karpenter-migrate wizard --sandbox --seed %d", o.seed)
		if o.snapshot != "" {
			opts.Again += " --snapshot " + o.snapshot
		}
	}
	ops := &tui.Ops{Namespace: g.Namespace, KarpenterChart: o.karpenterChart}
	if o.sandbox {
		var inv *inventory.Inventory
		if o.snapshot != "" {
			snap, err := inventory.ReadSnapshotFile(o.snapshot)
			if err != nil {
				return fmt.Errorf("--snapshot: %w", err)
			}
			inv = &snap.Inventory
		}
		sb, err := tui.NewSandbox(ctx, o.seed, inv)
		if err != nil {
			return err
		}
		defer sb.Close()
		ops.Dial, opts.Defaults = sb.Dial, sb.Defaults()
		if opts.OutDir == "" {
			if opts.OutDir, err = os.MkdirTemp("", "karpenter-migrate-wizard-"); err != nil {
				return fmt.Errorf("create a temporary output directory (or pass --out): %w", err)
			}
		}
	} else {
		ops.Dial = tui.LiveDialer(g.Kubeconfig, g.EndpointURL)
		opts.Defaults = tui.DetectDefaults(g.Kubeconfig, tui.Connection{Context: g.Context, Cluster: o.cluster, Profile: g.Profile, Region: g.Region, Environment: o.env})
		if opts.OutDir == "" {
			opts.OutDir = "."
		}
	}
	ops.OutDir, opts.Backend = opts.OutDir, ops
	res, err := tui.Run(ctx, opts, io.In, io.Out)
	fmt.Fprintf(io.Out, "wizard: %s at %s; files in %s\n", res.Outcome, res.Screen, opts.OutDir)
	if o.sandbox {
		fmt.Fprintln(io.Out, "The sandbox lived in this process only: nothing outside it changed.")
	}
	for _, c := range res.Commands {
		fmt.Fprintln(io.Out, "  "+c)
	}
	return wizardExit(res, err)
}

// wizardExit is the wizard's exit code, as the commands it stands for
// exit: 130 for Ctrl-C (a running rollout stopped first, as apply's
// does), 4 for a rollout left paused (by a gate, a wait or the user), 1
// for a rollout that failed or a wizard that could not run.
func wizardExit(res tui.Result, err error) error {
	var paused *rollout.PausedError
	switch {
	case res.Interrupted:
		msg := fmt.Sprintf("wizard interrupted (%s) at %s", cmp.Or(res.Signal, "Ctrl-C"), res.Screen)
		if res.Outcome == tui.OutcomePaused {
			msg += ": the rollout stopped after the evictions in flight"
		}
		if err != nil {
			msg += fmt.Sprintf("\n  it stopped with: %v", err)
		}
		return &ExitError{Code: ExitInterrupted, Err: errors.New(msg)}
	case err != nil:
		return err
	case res.Outcome != tui.OutcomePaused:
		return nil
	case res.RunErr == nil || errors.As(res.RunErr, &paused):
		return &ExitError{Code: ExitPaused, Err: errors.New("wizard: the rollout is paused; the commands above resume or roll it back")}
	}
	return fmt.Errorf("wizard: the rollout stopped: %w", res.RunErr)
}
