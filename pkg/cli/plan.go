package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

type planOptions struct {
	env      string
	snapshot string
	config   string
	out      string
	pools    map[string]string
}

func newPlanCmd(g *GlobalOptions) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan --env ENV --snapshot FILE",
		Short: "Plan the rollout of one environment: steps, waves, pre-provisioning, findings, cost",
		Long: `plan cuts the legacy nodes into waves (by node group, zones interleaved, wave size
from the environment's config), predicts the Karpenter nodes each wave needs and the
placeholder pods that pre-provision them, lists readiness findings and the cost before
and after, and writes plan.yaml with a content hash that apply verifies.`,
		Example: `  # Plan prod from a snapshot, with its migration config
  karpenter-migrate plan --env prod --snapshot snapshot.json --config migrations/prod.yaml -f plan.yaml

  # Print the plan as JSON instead of a summary
  karpenter-migrate plan --env dev --snapshot snapshot.json -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error { return planRun(g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.env, "env", "", "environment name (dev, staging, prod, ...)")
	f.StringVar(&o.snapshot, "snapshot", "", "inventory snapshot written by discover --snapshot")
	f.StringVar(&o.config, "config", "", "environment migration config (default: built-in defaults for --env)")
	f.StringVarP(&o.out, "file", "f", "plan.yaml", "where to write the plan")
	f.StringToStringVar(&o.pools, "pool-for-group", nil, "NodePool replacing a node group, GROUP=POOL (default: the group's name, as generate's multiple strategy names them)")
	_ = cmd.MarkFlagRequired("env")
	_ = cmd.MarkFlagRequired("snapshot")
	return cmd
}

func planRun(g *GlobalOptions, o *planOptions) error {
	snap, err := inventory.ReadSnapshotFile(o.snapshot)
	if err != nil {
		return err
	}
	cfg := config.Default(o.env)
	if o.config != "" {
		c, err := config.Load(o.config)
		if err != nil {
			return err
		}
		cfg = *c
	}
	p, err := rollout.BuildPlan(&snap.Inventory, rollout.PlanOptions{
		Environment: o.env, Config: cfg, Steps: migrations.Planned(), PoolForGroup: o.pools, Now: time.Now(),
	})
	if err != nil {
		return err
	}
	if err := p.WriteFile(o.out); err != nil {
		return err
	}
	if done, err := printStructured(g.IO.Out, g.Output, p); done {
		return err
	}
	w := g.IO.Out
	fmt.Fprintf(w, "Plan %s for %s (cluster %s) written to %s\n\n", p.Hash, p.Environment, p.Cluster, o.out)
	t := newTable(w)
	fmt.Fprintln(t, "WAVE\tNODES\tGROUPS\tPODS\tNODEPOOLS\tPREDICTED NODES\tPLACEHOLDERS")
	for _, wv := range p.Waves {
		groups := map[string]bool{}
		for _, n := range wv.Nodes {
			groups[n.NodeGroup] = true
		}
		fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%v\t%d\t%d\n", wv.Index, len(wv.Nodes), len(groups), wv.Pods, wv.NodePools, len(wv.PredictedNodes), len(wv.PreProvision))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nBudget: %d nodes per wave, %d drained at once; gates: node ready %s, pod pending %s, PDB wait %s\n",
		p.Budget.WaveSize, p.Budget.Concurrency, p.Budget.Gates.NodeReadyTimeout, p.Budget.Gates.MaxPodPending, p.Budget.Gates.PDBWaitTimeout)
	if p.Cost.Complete {
		fmt.Fprintf(w, "Cost: $%.2f/h before, $%.2f/h after\n", p.Cost.BeforePerHour, p.Cost.AfterPerHour)
	} else {
		fmt.Fprintln(w, "Cost: not estimated (no prices for some instance types)")
	}
	for _, f := range p.Findings {
		fmt.Fprintf(w, "%s: %s: %s\n", f.Severity, f.Object, f.Message)
	}
	fmt.Fprintf(w, "\nReview it, then: karpenter-migrate apply --plan %s\n", o.out)
	return nil
}
