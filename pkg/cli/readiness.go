package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

type readinessOptions struct {
	snapshot string
	failOn   string
	// failOnFrom names where failOn came from, for the exit message:
	// "--fail-on" or the config file's readiness.failOn.
	failOnFrom string
	// acknowledge are finding IDs reviewed and accepted (the config's
	// readiness.acknowledge).
	acknowledge []string
	// config is --config (nil: none given).
	config *config.Config
}

func newReadinessCmd(g *GlobalOptions) *cobra.Command {
	o := &readinessOptions{failOnFrom: "--fail-on"}
	var configPath string
	cmd := &cobra.Command{
		Use:   "readiness --snapshot FILE [--fail-on warning|blocker] [--config migrations/ENV.yaml]",
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
severity exists, for CI. --config reads an environment's migration config: its
readiness.failOn applies unless --fail-on is given (never: no threshold), and the
finding IDs in readiness.acknowledge are listed as acknowledged and do not count
toward the exit code; an acknowledged ID that matches no finding is warned about.`,
		Example: `  # Review a snapshot
  karpenter-migrate readiness --snapshot snapshot.json

  # Gate a pipeline on blockers
  karpenter-migrate readiness --snapshot snapshot.json --fail-on blocker -o json

  # The threshold and acknowledgements of an environment's migration config
  karpenter-migrate readiness --snapshot snapshot.json --config migrations/prod.yaml`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := readinessConfig(cmd, o, configPath); err != nil {
				return err
			}
			return runReadiness(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.snapshot, "snapshot", "", "inventory snapshot to evaluate (written by discover)")
	cmd.Flags().StringVar(&o.failOn, "fail-on", "", "exit with code 3 when a finding of this severity or worse exists: warning|blocker")
	cmd.Flags().StringVar(&configPath, "config", "", "environment migration config: its readiness.failOn (unless --fail-on is given) and readiness.acknowledge")
	return cmd
}

func runReadiness(_ context.Context, g *GlobalOptions, o *readinessOptions) error {
	if o.snapshot == "" {
		return usageError(errors.New("--snapshot is required; write one with `karpenter-migrate discover --snapshot FILE`"))
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
	// Readiness sizes instance types; it prices nothing, so no price warning.
	cat, err := catalog.ForInventory(&snap.Inventory)
	if err != nil {
		return err
	}
	report := acknowledgeFindings(g, readinessReport(g, &snap.Inventory, cat, o.config), o.acknowledge)
	if done, err := printStructured(g.IO.Out, g.Output, report); done {
		if err != nil {
			return err
		}
	} else {
		printReadiness(g.IO.Out, report)
	}
	return readinessGate(report, o.failOn, o.failOnFrom)
}

// readinessResult is a readiness report with the acknowledgements of a
// migration config applied: acknowledged findings move out of Findings and
// its counts into Acknowledged, so no threshold counts them.
type readinessResult struct {
	readiness.Report
	Acknowledged []readiness.Finding `json:"acknowledged,omitempty"`
}

// acknowledgeFindings moves the findings whose ID is in ids to
// Acknowledged, and warns on stderr about each ID that matches no finding
// (a typo, or a problem since fixed).
func acknowledgeFindings(g *GlobalOptions, r readiness.Report, ids []string) readinessResult {
	var res readinessResult
	matched := map[string]bool{}
	var found []string
	for _, f := range r.Findings {
		found = append(found, f.ID)
		if slices.Contains(ids, f.ID) {
			matched[f.ID] = true
			res.Acknowledged = append(res.Acknowledged, f)
			continue
		}
		res.Findings = append(res.Findings, f)
		switch f.Severity {
		case readiness.Blocker:
			res.Blockers++
		case readiness.Warning:
			res.Warnings++
		}
	}
	for _, id := range ids {
		if !matched[id] {
			g.say(slog.LevelWarn, eventAcknowledgment, "warning: ",
				fmt.Sprintf("readiness.acknowledge lists %q, which matches no finding of this inventory (findings: %s): correct the ID, or remove it if the problem is fixed", id, orNone(found)),
				slog.String("id", id))
		}
	}
	return res
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// readinessGate returns the readiness exit code when a finding not
// acknowledged is at or above failOn ("": no threshold); from names the
// flag or file the threshold came from.
func readinessGate(r readinessResult, failOn, from string) error {
	if failOn == "" || r.Worst() == "" || !r.Worst().AtLeast(readiness.Severity(failOn)) {
		return nil
	}
	return &ExitError{Code: ExitReadiness, Err: fmt.Errorf("readiness: %d blocker(s), %d warning(s) at or above %s %s (%d acknowledged)",
		r.Blockers, r.Warnings, from, failOn, len(r.Acknowledged))}
}

// readinessReport is the readiness action's report for cfg's environment
// (nil: the defaults); its notes go to stderr.
func readinessReport(g *GlobalOptions, inv *inventory.Inventory, cat *catalog.Catalog, cfg *config.Config) readiness.Report {
	r := (&action.Readiness{Catalog: cat, Config: cfg}).Run(inv)
	for _, n := range r.Notes {
		g.say(slog.LevelInfo, eventNote, "note: ", n)
	}
	return r.Report
}
