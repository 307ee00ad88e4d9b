package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

type readinessOptions struct {
	snapshot string
	failOn   string
}

func newReadinessCmd(g *GlobalOptions) *cobra.Command {
	o := &readinessOptions{}
	cmd := &cobra.Command{
		Use:   "readiness --snapshot FILE [--fail-on warning|blocker]",
		Short: "Report what blocks or endangers a move to Karpenter",
		Long: `readiness evaluates an inventory snapshot (written by discover) and lists, for each
problem, the objects concerned, why it blocks or risks the migration and what to do:
PDBs allowing 0 disruptions, single replicas, pods with no controller, emptyDir/hostPath
data, safe-to-evict=false, node-group-pinned selectors, uncovered zonal volumes, pods no
instance type can hold, DaemonSets that will not tolerate the new taints, Cluster
Autoscaler still running, IaC-owned node groups, IMDS hop limit 2, and a Karpenter
controller able to run on its own nodes.

Taints, zones and instance sizes are checked against the NodePools generate would
write with its defaults (generated in memory): their taints, their zone requirements
and the room each allowed instance type leaves after kubelet reservations and the
DaemonSets that would run there. discover prints the same report.

With --fail-on, the command exits with code 3 when a finding at or above that
severity exists, for CI.`,
		Example: `  # Review a snapshot
  karpenter-migrate readiness --snapshot snapshot.json

  # Gate a pipeline on blockers
  karpenter-migrate readiness --snapshot snapshot.json --fail-on blocker -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReadiness(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.snapshot, "snapshot", "", "inventory snapshot to evaluate (written by discover)")
	cmd.Flags().StringVar(&o.failOn, "fail-on", "", "exit with code 3 when a finding of this severity or worse exists: warning|blocker")
	return cmd
}

func runReadiness(_ context.Context, g *GlobalOptions, o *readinessOptions) error {
	if o.snapshot == "" {
		return fmt.Errorf("--snapshot is required; write one with `karpenter-migrate discover --snapshot FILE`")
	}
	if o.failOn != "" {
		if err := oneOf("fail-on", o.failOn, string(readiness.Warning), string(readiness.Blocker)); err != nil {
			return err
		}
	}
	snap, err := inventory.ReadSnapshotFile(o.snapshot)
	if err != nil {
		return err
	}
	report := readinessReport(g.IO.ErrOut, &snap.Inventory, catalog.Default())
	if done, err := printStructured(g.IO.Out, g.Output, report); done {
		if err != nil {
			return err
		}
	} else {
		printReadiness(g.IO.Out, report)
	}
	if o.failOn != "" && report.Worst() != "" && report.Worst().AtLeast(readiness.Severity(o.failOn)) {
		return &ExitError{Code: ExitReadiness, Err: fmt.Errorf("readiness: %d blocker(s), %d warning(s) at or above --fail-on %s", report.Blockers, report.Warnings, o.failOn)}
	}
	return nil
}

// readinessReport evaluates inv against the NodePools generate would write
// with its defaults (generated in memory): their taints, zones and allowed
// instance types. When generate cannot map the inventory, the checks fall
// back on the current nodes, and a note on errOut says so.
func readinessReport(errOut io.Writer, inv *inventory.Inventory, cat *catalog.Catalog) readiness.Report {
	opts := generate.DefaultOptions()
	opts.Catalog = cat
	res, err := generate.Generate(inv, opts)
	if err != nil {
		fmt.Fprintf(errOut, "note: readiness checks taints, zones and instance sizes against the current nodes: no NodePools to compare with (%v)\n", err)
		return readiness.Evaluate(inv, readiness.Options{})
	}
	return readiness.Evaluate(inv, readiness.FromNodePools(inv, res.NodePools, res.NodeClasses, cat))
}
