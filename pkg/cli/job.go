package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/version"
)

// jobFlags are generate's --job flags: write the in-cluster Job that
// applies a reviewed plan instead of the tree.
type jobFlags struct {
	enabled       bool
	plan          string
	file          string
	image         string
	roleARN       string
	backoffLimit  int32
	leaseDuration time.Duration
}

func (f *jobFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.enabled, "job", false, "write a Job + ServiceAccount + minimal RBAC that runs apply --in-cluster on --plan's environment (with --config's window), instead of the tree")
	fl.StringVar(&f.plan, "plan", "", "with --job: the reviewed plan the Job applies (packed with the environment's overlay of --out)")
	fl.StringVar(&f.file, "job-file", "", "with --job: file to write (default DIR/jobs/ENV.yaml)")
	fl.StringVar(&f.image, "image", defaultImage(), "with --job: karpenter-migrate container image")
	fl.StringVar(&f.roleARN, "role-arn", "", "with --job: IAM role for IRSA (annotates the ServiceAccount); leave empty with EKS Pod Identity")
	fl.Int32Var(&f.backoffLimit, "backoff-limit", 6, "with --job: pod retries; a retry resumes from the journal once the dead run's Lease expires")
	fl.DurationVar(&f.leaseDuration, "job-lease-duration", time.Minute, "with --job: apply --lease-duration, how soon a retried pod may take over from a dead one")
}

func defaultImage() string {
	v := version.Get().Version
	if v == "" || v == "(devel)" {
		v = "latest"
	}
	return "ghcr.io/karpenter-migrate/karpenter-migrate:" + v
}

func runGenerateJob(ctx context.Context, g *GlobalOptions, o *generateOptions) error {
	f := &o.job
	if f.plan == "" {
		return usageError(errors.New("--job needs --plan FILE: the Job applies a plan someone reviewed (write one with `karpenter-migrate plan`)"))
	}
	if o.snapshot != "" || o.cluster != "" {
		return usageError(errors.New("--job packs an existing tree and plan: drop --snapshot/--cluster (run generate without --job first)"))
	}
	raw, err := os.ReadFile(f.plan)
	if err != nil {
		return fmt.Errorf("--plan: %w", err)
	}
	p, err := plan.ParsePlan(raw)
	if err != nil {
		return fmt.Errorf("--plan %s: %w", f.plan, err)
	}
	opts := generate.JobOptions{
		Environment: p.Environment, Cluster: p.Cluster, Namespace: g.Namespace, Image: f.image,
		Region: firstNonEmpty(g.Region, p.Region), RoleARN: f.roleARN, Plan: raw, PlanHash: p.Hash,
		TreeDir: o.tree.Dir, BackoffLimit: f.backoffLimit, LeaseDuration: f.leaseDuration,
	}
	if o.config != "" {
		c, err := config.Load(o.config)
		if err != nil {
			return err
		}
		if c.Environment != p.Environment {
			return fmt.Errorf("--config %s is for environment %s, the plan for %s", o.config, c.Environment, p.Environment)
		}
		if opts.Config, err = os.ReadFile(o.config); err != nil {
			return err
		}
	}
	if ca := p.ClusterAutoscaler; ca != nil {
		opts.ClusterAutoscaler = &generate.NamespacedName{Namespace: ca.Namespace, Name: ca.Name}
	}
	if opts.Karpenter, err = action.KarpenterRelease(ctx, p); err != nil {
		return fmt.Errorf("generate --job: %w", err)
	}
	if k := opts.Karpenter; k != nil && k.Namespace == "kube-system" {
		fmt.Fprintf(g.IO.ErrOut, "note: the Karpenter release is in kube-system, so the Job may read its Secrets (Helm lists its release Secrets by label); set controller.namespace (e.g. karpenter) in the environment's config and plan again to keep them out of reach\n")
	}
	b, err := generate.Job(opts)
	if err != nil {
		return fmt.Errorf("generate --job: %w", err)
	}
	out := f.file
	if out == "" {
		out = filepath.Join(o.tree.Dir, "jobs", p.Environment+".yaml")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(g.IO.Out, "wrote %s: Job %s/%s applying plan %s to %s (ServiceAccount %s)\n", out, g.Namespace,
		generate.JobName(p.Environment, p.Hash), p.Hash, p.Environment, generate.JobServiceAccount(p.Environment))
	return nil
}
