package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func newRollbackCmd(g *GlobalOptions) *cobra.Command {
	f := &runFlags{}
	var to string
	var removeIAM bool
	cmd := &cobra.Command{
		Use:   "rollback --plan plan.yaml [--to STEP]",
		Short: "Undo applied steps in reverse: groups and Cluster Autoscaler restored, NodePools removed after their nodes drain",
		Long: `rollback runs Down for every applied step after --to (all of them by default), last
first: the node groups get their recorded sizes and processes back, legacy nodes are
uncordoned and waited for, Cluster Autoscaler gets its recorded replicas, our NodePools are
drained and then deleted. IAM and node-access objects are removed only with --remove-iam.

Steps: ` + action.StepIDs(),
		Example: `  # Undo everything after the NodePools were applied, keeping them
  karpenter-migrate rollback --plan plan.yaml --to 08_nodepools --yes

  # See what a full rollback would do
  karpenter-migrate rollback --plan plan.yaml --dry-run`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRollout(cmd.Context(), g, f, "rollback", func(ctx context.Context, r *rollout.Runner) error {
				r.Options.RemoveIAM = removeIAM
				return r.Rollback(ctx, to)
			})
		},
	}
	f.bind(cmd)
	cmd.Flags().StringVar(&to, "to", "", "roll back the steps after this one (it stays applied)")
	cmd.Flags().BoolVar(&removeIAM, "remove-iam", false, "also delete the IAM roles, queue and node access the tool created")
	return cmd
}
