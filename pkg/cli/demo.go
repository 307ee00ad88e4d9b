package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

type demoOptions struct {
	g            *GlobalOptions
	seed         uint64
	out          string
	snapshot     string
	rollback     bool
	controlPlane bool
	env          string
}

func newDemoCmd(g *GlobalOptions) *cobra.Command {
	o := &demoOptions{g: g}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a full migration of an embedded sandbox cluster, in seconds, with no AWS account",
		Long: `demo runs every stage — discover, readiness, generate, IAM plan/apply, plan, apply in
PDB-safe waves, final state — against an in-memory EKS account and cluster whose
controllers, scheduler and Karpenter stand-in run on a simulated clock. It writes the
snapshot, the generated kustomize tree, the IAM plan and the plan into --out.

With --snapshot it replays a cluster captured by "discover --snapshot", so you can
rehearse your own migration; with --rollback it continues with a full rollback and
checks every recorded node-group size comes back. Ctrl-C stops it at the step it is in
(exit code 130); the sandbox is in memory, so nothing outside it changes.

With --control-plane the same account and cluster run on real parts instead: etcd,
kube-apiserver, kube-scheduler, kube-controller-manager and kwok nodes, with the real
Karpenter v1.14.1 (its kwok provider) launching and consolidating nodes from the same
catalogue and prices, and the AWS fake on loopback. It needs the binaries "make
demo-real" builds (once, into ~/.cache/karpenter-migrate), takes minutes of wall time
rather than seconds, and applies the dev overlay by default (consolidateAfter 30s; prod
waits 15 minutes and disrupts nothing in business hours). The summary is the same, and
says which engine launched the nodes.`,
		Example: `  # The whole migration of the seeded demo account
  karpenter-migrate demo

  # Reproducible, keeping the outputs, as JSON
  karpenter-migrate demo --seed 7 --out ./demo-out -o json

  # Rehearse your own cluster, then its rollback
  karpenter-migrate demo --snapshot snapshot.json --rollback

  # The same migration on a real control plane and the real Karpenter (make demo-real)
  karpenter-migrate demo --control-plane --rollback -o json`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE:        func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.Uint64Var(&o.seed, "seed", 1, "seed for names, instance IDs and choices; the same seed gives the same run")
	f.StringVar(&o.out, "out", "", "directory for the outputs (default: a new temporary directory, printed)")
	f.StringVar(&o.snapshot, "snapshot", "", "replay this snapshot (written by discover --snapshot) instead of the demo account")
	f.BoolVar(&o.rollback, "rollback", false, "after the migration, roll it back and check the recorded sizes come back")
	f.BoolVar(&o.controlPlane, "control-plane", false, "run on a real control plane with the real Karpenter (kwok provider) instead of the sandbox; needs the binaries \"make demo-real\" builds")
	f.StringVar(&o.env, "env", "", "the overlay to generate, plan and apply: dev, staging or prod (default prod; dev with --control-plane)")
	return cmd
}

func (o *demoOptions) run(cmd *cobra.Command) error {
	io := o.g.IO
	opts := demo.Options{Seed: o.seed, OutDir: o.out, Rollback: o.rollback, ControlPlane: o.controlPlane, Environment: o.env}
	if o.snapshot != "" {
		snap, err := inventory.ReadSnapshotFile(o.snapshot)
		if err != nil {
			return fmt.Errorf("--snapshot: %w", err)
		}
		opts.Snapshot = snap
	}
	if err := opts.Complete(); err != nil {
		return usageError(err)
	}
	if opts.OutDir == "" {
		dir, err := os.MkdirTemp("", "karpenter-migrate-demo-")
		if err != nil {
			return fmt.Errorf("create a temporary output directory (or pass --out): %w", err)
		}
		opts.OutDir = dir
		// A run that failed before writing anything leaves no empty
		// directory behind.
		defer func() {
			if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
				os.Remove(dir)
			}
		}()
	}
	table := o.g.Output == "table"
	ctx, in, stop := o.g.interruptible(cmd.Context(), "stopping the demo")
	defer stop()
	var sum *demo.Summary
	var err error
	if table && io.IsStdoutTTY() {
		fmt.Fprintf(io.Out, "Writing outputs to %s\n", opts.OutDir)
		err = progress.Show(ctx, io.In, io.Out, func(ctx context.Context, send func(progress.Event)) error {
			opts.Events = func(e demo.Event) {
				send(progress.Event{Step: e.Step, Status: progress.Status(e.Status), Message: e.Message, Progress: e.Progress})
			}
			var err error
			sum, err = demo.Run(ctx, opts)
			return err
		})
	} else {
		progressTo := io.ErrOut
		if table {
			progressTo = io.Out
			fmt.Fprintf(io.Out, "Writing outputs to %s\n", opts.OutDir)
		}
		opts.Events = demo.PlainProgress(progressTo)
		sum, err = demo.Run(ctx, opts)
	}
	if sum != nil {
		if ok, perr := printStructured(io.Out, o.g.Output, sum); ok {
			if perr != nil {
				return perr
			}
		} else if perr := demo.WriteTable(io.Out, sum); perr != nil {
			return perr
		}
	}
	if err != nil && (in.signal() != nil || errors.Is(err, progress.ErrInterrupted)) {
		return o.interrupted(in, sum, opts.OutDir, err)
	}
	return err
}

// interrupted says which step Ctrl-C stopped, that nothing outside the
// sandbox changed, where the outputs so far are, and how to run it again.
func (o *demoOptions) interrupted(in *interruption, sum *demo.Summary, outDir string, err error) error {
	by := "Ctrl-C"
	if sig := in.signal(); sig != nil {
		by = signalName(sig)
	}
	where := "before its first step"
	if sum != nil {
		for _, st := range sum.Steps {
			if st.Status == demo.StatusFailed {
				where = "at step " + st.ID
			}
		}
	}
	again := []string{"karpenter-migrate", "demo", "--seed", fmt.Sprint(o.seed)}
	if o.snapshot != "" {
		again = append(again, "--snapshot", o.snapshot)
	}
	if o.rollback {
		again = append(again, "--rollback")
	}
	lives := "its cluster and AWS account live in memory"
	if o.controlPlane {
		again = append(again, "--control-plane")
		lives = "its control plane and AWS fake were local and are stopped"
	}
	if o.env != "" {
		again = append(again, "--env", o.env)
	}
	msg := fmt.Sprintf("demo interrupted (%s) %s: %s, so nothing outside them changed and there is nothing to resume or roll back; "+
		"what it wrote so far is in %s (summary.json lists the steps). Run it again: %s",
		by, where, lives, outDir, strings.Join(again, " "))
	return interruptedError(msg, err)
}
