package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

type consolidationOptions struct {
	snapshot      string
	nodePools     []string
	proposed      []string
	now           string
	spotToSpot    bool
	karpenterOnly bool
	settle        bool
}

func newConsolidationCmd(g *GlobalOptions) *cobra.Command {
	o := &consolidationOptions{}
	cmd := &cobra.Command{
		Use:         "consolidation --snapshot FILE --nodepools PATH",
		Annotations: writes("table", "yaml", "json"),
		Short:       "Dry-run Karpenter's disruption controller: what it removes or replaces next, and why each node is or is not a candidate",
		Long: `consolidation runs one pass of Karpenter's disruption methods (emptiness, drift,
multi-node and single-node consolidation, in Karpenter's order, within disruption budgets)
on a snapshot of a cluster that runs Karpenter, with the cluster's NodePools and
EC2NodeClasses, and prints the command Karpenter would start next, the $/h it saves, the
nodes drift would roll, and for every node why it is or is not a candidate.
--settle repeats passes until nothing acts and prints the fleet the cluster settles into.`,
		Example: `  # What would Karpenter consolidate next?
  karpenter-migrate consolidation --snapshot snapshot.json --nodepools nodepools.yaml

  # The NodePools from generate's tree, the steady state, as JSON
  karpenter-migrate consolidation --snapshot snapshot.json --nodepools out/base --settle -o json

  # Which nodes would a NodePool change roll (drift)?
  karpenter-migrate consolidation --snapshot snapshot.json --nodepools live.yaml --proposed new.yaml`,
		RunE: func(cmd *cobra.Command, _ []string) error { return consolidationRun(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.snapshot, "snapshot", "", "inventory snapshot written by discover --snapshot")
	f.StringSliceVar(&o.nodePools, "nodepools", nil, "files or directories with the cluster's v1 NodePools and EC2NodeClasses (e.g. what kubectl get nodepools,ec2nodeclasses -o yaml prints)")
	f.StringSliceVar(&o.proposed, "proposed", nil, "changed NodePools and EC2NodeClasses to report the nodes drift would roll")
	f.StringVar(&o.now, "now", "", "time of the pass, RFC 3339 (default: now); consolidateAfter and budget schedules are judged against it")
	f.BoolVar(&o.spotToSpot, "spot-to-spot", false, "as if Karpenter's SpotToSpotConsolidation feature gate were on")
	f.BoolVar(&o.karpenterOnly, "karpenter-only", false, "Karpenter's own scheduling only, without the engine's improved packing")
	f.BoolVar(&o.settle, "settle", false, "repeat passes until nothing acts and print the settled fleet")
	_ = cmd.MarkFlagRequired("snapshot")
	_ = cmd.MarkFlagRequired("nodepools")
	return cmd
}

func consolidationRun(ctx context.Context, g *GlobalOptions, o *consolidationOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var now time.Time
	if o.now != "" {
		t, err := time.Parse(time.RFC3339, o.now)
		if err != nil {
			return usageError(fmt.Errorf("--now %q: want RFC 3339 such as 2026-03-04T12:00:00Z", o.now))
		}
		now = t
	}
	snap, err := inventory.ReadSnapshotFile(o.snapshot)
	if err != nil {
		return err
	}
	cat, err := g.inventoryCatalog(&snap.Inventory)
	if err != nil {
		return err
	}
	rep, err := (&action.Configuration{Catalog: cat}).Consolidation(ctx, action.Consolidation{
		Inventory: &snap.Inventory, NodePools: o.nodePools, Proposed: o.proposed, Now: now,
		SpotToSpot: o.spotToSpot, KarpenterOnly: o.karpenterOnly, Settle: o.settle,
	})
	if err != nil {
		return err
	}
	if done, err := printStructured(g.IO.Out, g.Output, rep); done {
		return err
	}
	return printConsolidation(g, rep)
}

func printConsolidation(g *GlobalOptions, rep *action.ConsolidationReport) error {
	w := g.IO.Out
	d := rep.Decision
	if d.Method == "" {
		fmt.Fprintf(w, "Karpenter would disrupt nothing at %s.\n", d.Now.Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "Next: %s, saving $%.4f/h\n", d.Method, d.Savings)
		for i, c := range d.Commands {
			var names []string
			for _, n := range c.Nodes {
				names = append(names, n.Name)
			}
			fmt.Fprintf(w, "  %d. %s %s ($%.4f/h): %s\n", i+1, c.Action, strings.Join(names, ", "), c.Price, c.Why)
			if r := c.Replacement; r != nil {
				fmt.Fprintf(w, "     replacement: %s %s in %s at $%.4f/h (%d instance-type options)\n", r.CapacityType, r.InstanceType, r.Zone, r.Price, len(r.InstanceTypes))
			}
		}
	}
	fmt.Fprintln(w)
	t := newTable(w)
	fmt.Fprintln(t, "NODE\tNODEPOOL\tTYPE\tCAPACITY\t$/H\tCANDIDATE\tWHY")
	for _, c := range d.Nodes {
		why := c.Outcome
		if why == "" {
			why = strings.Join(c.Reasons, "; ")
		}
		cand := "no"
		if c.Candidate {
			cand = "yes"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%.4f\t%s\t%s\n", c.Node.Name, dash(c.Node.NodePool), c.Node.InstanceType, c.Node.CapacityType, c.Node.Price, cand, why)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(d.Drifted) > 0 {
		fmt.Fprintln(w, "\nDrift would roll:")
		for _, dn := range d.Drifted {
			line := fmt.Sprintf("  %s (%s): %s", dn.Node.Name, dn.Reason, dn.Detail)
			if dn.Blocked != "" {
				line += " — blocked: " + dn.Blocked
			}
			fmt.Fprintln(w, line)
		}
	}
	if s := rep.Settled; s != nil {
		// Every node of the snapshot is in both fleets, those of no NodePool
		// too (a group kept for the controller), as in plan's forecast.
		fmt.Fprintf(w, "\nSettled after %d passes: %d nodes at $%.4f/h, every node of the snapshot (from %d at $%.4f/h, saving $%.4f/h)\n",
			len(s.Passes), s.After.Nodes, s.After.PricePerHour, s.Before.Nodes, s.Before.PricePerHour, s.Savings)
		t := newTable(w)
		fmt.Fprintln(t, "TYPE\tCAPACITY\tNODES\t$/H")
		for _, tc := range s.After.Types {
			fmt.Fprintf(t, "%s\t%s\t%d\t%.4f\n", tc.InstanceType, tc.CapacityType, tc.Nodes, tc.PricePerHour)
		}
		return t.Flush()
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
