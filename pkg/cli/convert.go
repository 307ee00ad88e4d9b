package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/convert"
)

type convertOptions struct {
	files           []string
	recursive       bool
	to              string
	ignoreDefaults  bool
	outputDir       string
	workloads       bool
	strict          bool
	continueOnError bool
}

func newConvertCmd(g *GlobalOptions) *cobra.Command {
	o := &convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert -f FILE|DIR|- [-f ...] [-R] [--to v1beta1|v1] [--ignore-defaults] [-o yaml|json] [--output-dir DIR]",
		Short: "Convert Karpenter v1alpha5/v1beta1 manifests to v1beta1 or v1",
		Long: `convert turns Provisioners (karpenter.sh/v1alpha5) and AWSNodeTemplates
(karpenter.k8s.aws/v1alpha1) into NodePools and EC2NodeClasses. --to v1beta1 prints
what aws/karpenter's karpenter-convert v0.32.x prints, byte for byte; --to v1 goes on to
the v1 API (and converts v1beta1 input), splitting EC2NodeClasses shared by NodePools
with different kubelet settings. Behaviour changes are reported on stderr, per object.
No cluster is needed.`,
		Example: `  # A Provisioner and its AWSNodeTemplate to v1beta1 (same bytes as karpenter-convert)
  karpenter-migrate convert -f provisioner.yaml -f nodetemplate.yaml

  # Everything under manifests/ to v1, one file per object
  karpenter-migrate convert -f manifests/ -R --to v1 --output-dir out/

  # From a live cluster, rewriting workloads that use the old keys too
  kubectl get provisioners,awsnodetemplates,deploy -A -o yaml | karpenter-migrate convert -f - --to v1 --workloads

  # Fill the node role placeholder
  karpenter-migrate convert -f nodetemplate.yaml | KARPENTER_NODE_ROLE=KarpenterNodeRole-prod envsubst`,
		Args:        cobra.NoArgs,
		Annotations: writes("yaml", "json"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConvert(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "file, directory or - (stdin) to convert; repeatable")
	f.BoolVarP(&o.recursive, "recursive", "R", false, "descend into subdirectories of -f directories")
	f.StringVar(&o.to, "to", convert.ToV1beta1, "target API version: v1beta1|v1")
	f.BoolVar(&o.ignoreDefaults, "ignore-defaults", false, "do not add the requirements v1alpha5 defaulted (os, arch, capacity-type, instance category/generation)")
	f.StringVar(&o.outputDir, "output-dir", "", "write one file per object into this directory (atomically) instead of stdout")
	f.BoolVar(&o.workloads, "workloads", false, "also rewrite Pods, Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs that use karpenter.sh/provisioner-name, do-not-evict or do-not-consolidate")
	f.BoolVar(&o.strict, "strict", false, "fail on documents of kinds that are not converted instead of skipping them")
	f.BoolVar(&o.continueOnError, "continue-on-error", false, "convert what can be converted, report every failure, and exit non-zero")
	return cmd
}

func runConvert(cmd *cobra.Command, g *GlobalOptions, o *convertOptions) error {
	ctx := cmd.Context()
	format := g.Output
	if len(o.files) == 0 {
		return usageError(errors.New("must specify -f FILE, -f DIR or -f - (stdin)"))
	}
	if err := oneOf("to", o.to, convert.ToV1beta1, convert.ToV1); err != nil {
		return err
	}
	docs, readErr := convert.Read(ctx, convert.ReadOptions{Filenames: o.files, Recursive: o.recursive, Stdin: g.IO.In})
	if readErr != nil && !o.continueOnError {
		return readErr
	}
	res, err := convert.Convert(ctx, docs, convert.Options{To: o.to, IgnoreDefaults: o.ignoreDefaults, Workloads: o.workloads, Strict: o.strict})
	if err != nil {
		if res != nil {
			for _, m := range res.Messages() {
				fmt.Fprintln(g.IO.ErrOut, m)
			}
		}
		if readErr != nil {
			return readErr
		}
		return err
	}
	for _, m := range res.Messages() {
		fmt.Fprintln(g.IO.ErrOut, m)
	}
	failures := res.Errors
	if readErr != nil {
		failures = append([]error{readErr}, failures...)
	}
	if len(failures) > 0 && !o.continueOnError {
		return fmt.Errorf("nothing written: %w (use --continue-on-error to write the rest)", errors.Join(failures...))
	}
	if o.outputDir != "" {
		paths, err := convert.WriteDir(ctx, o.outputDir, res.Objects, format)
		for _, p := range paths {
			fmt.Fprintln(g.IO.ErrOut, "wrote", p)
		}
		if err != nil {
			return err
		}
	} else {
		out, err := convert.Encode(res.Objects, format)
		if err != nil {
			return err
		}
		if _, err := g.IO.Out.Write(out); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(g.IO.ErrOut, "error:", f)
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("%d document(s) failed to convert", len(failures))}
	}
	return nil
}
