package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func newStatusCmd(g *GlobalOptions) *cobra.Command {
	var env string
	cmd := &cobra.Command{
		Use:         "status --env ENV",
		Annotations: writes("table", "yaml", "json"),
		Short:       "Show an environment's rollout journal: steps, current wave, what it waits for",
		Example: `  # Where is prod's rollout?
  karpenter-migrate status --env prod

  # The full journal as JSON
  karpenter-migrate status --env prod -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc, err := g.RESTConfig()
			if err != nil {
				return err
			}
			c, err := g.configure(cmd.Context(), action.Live{REST: rc})
			if err != nil {
				return err
			}
			c.Namespace = g.Namespace
			j, err := c.Status(cmd.Context(), env)
			if err != nil {
				return err
			}
			if done, err := printStructured(g.IO.Out, g.Output, j); done {
				return err
			}
			printJournal(g, j)
			return nil
		},
	}
	cmd.Flags().StringVar(&env, "env", "", "environment name")
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

func printJournal(g *GlobalOptions, j *rollout.Journal) {
	w := g.IO.Out
	fmt.Fprintf(w, "Environment %s (cluster %s): %s\n", j.Environment, j.Cluster, j.State)
	fmt.Fprintf(w, "Plan %s, by %s with %s, started %s, updated %s\n", j.PlanHash, j.Operator, j.ToolVersion, j.StartedAt.Format("2006-01-02 15:04:05Z07:00"), j.UpdatedAt.Format("2006-01-02 15:04:05Z07:00"))
	if j.Message != "" {
		fmt.Fprintf(w, "Message: %s\n", j.Message)
	}
	if c := j.Current; c.Step != "" {
		fmt.Fprintf(w, "Current: %s", c.Step)
		if c.Wave > 0 {
			fmt.Fprintf(w, " wave %d (%s)", c.Wave, c.Phase)
		}
		if c.WaitingFor != "" {
			fmt.Fprintf(w, ", waiting for %s", c.WaitingFor)
		}
		fmt.Fprintln(w)
	}
	// As of the journal's last update: a paused run's clock stops there.
	if t := j.WavesTiming(j.UpdatedAt); t != "" {
		fmt.Fprintf(w, "Duration: %s\n", t)
	}
	fmt.Fprintln(w)
	t := newTable(w)
	fmt.Fprintln(t, "STEP\tSTATE\tFINISHED\tNOTE")
	for _, s := range j.Steps {
		fin := ""
		if !s.FinishedAt.IsZero() {
			fin = s.FinishedAt.Format("15:04:05")
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", s.ID, s.State, fin, s.Message)
	}
	_ = t.Flush()
	if len(j.Waves) > 0 {
		fmt.Fprintln(w)
		t = newTable(w)
		fmt.Fprintln(t, "WAVE\tPHASE\tEVICTED\tREMOVED\tLEFT IN PLACE\tELAPSED\tPREDICTED\tDRAINED WITH")
		for _, wv := range j.Waves {
			// The other waves of its drain group (rollout.drainTogether).
			var with []string
			for _, o := range j.Waves {
				if wv.DrainGroup != 0 && o.DrainGroup == wv.DrainGroup && o.Index != wv.Index {
					with = append(with, strconv.Itoa(o.Index))
				}
			}
			elapsed, predicted := "-", "-"
			if !wv.StartedAt.IsZero() {
				elapsed = wv.Elapsed(j.UpdatedAt).Round(time.Second).String()
			}
			if wv.PredictedSeconds > 0 {
				predicted = plan.Seconds(wv.PredictedSeconds)
			}
			phase := wv.Phase
			if phase == "" && !wv.PreparedAt.IsZero() {
				// Its placeholders exist (rollout.prepareAhead); it has not started.
				phase = "prepared ahead at " + wv.PreparedAt.Format("15:04:05")
			}
			fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", wv.Index, phase, wv.Evicted, len(wv.Removed), len(wv.Skipped), elapsed, predicted, dash(strings.Join(with, ", ")))
		}
		_ = t.Flush()
	}
	if r := j.Recorded; r.ClusterAutoscaler != nil || len(r.NodeGroups) > 0 {
		fmt.Fprintln(w, "\nRecorded before change (rollback restores these):")
		if ca := r.ClusterAutoscaler; ca != nil {
			fmt.Fprintf(w, "  Cluster Autoscaler %s/%s replicas %d\n", ca.Namespace, ca.Name, ca.Replicas)
		}
		for _, gr := range r.NodeGroups {
			fmt.Fprintf(w, "  %s group %s (ASG %s) min/max/desired %d/%d/%d, suspended %v\n", gr.Kind, gr.Name, gr.ASGName, gr.Min, gr.Max, gr.Desired, gr.SuspendedProcesses)
		}
	}
}
