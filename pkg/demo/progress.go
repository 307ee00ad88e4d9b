package demo

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
)

// PlainProgress returns an event sink that writes one timestamped line per
// step change (simulated time), and wave progress at each quarter: the
// demo's progress off a terminal (on one, the CLI shows its Events with
// pkg/tui/progress).
func PlainProgress(w io.Writer) func(Event) {
	var mu sync.Mutex
	lastQuarter := map[string]int{}
	return func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Status == StatusRunning && e.Progress >= 0 {
			q := int(e.Progress * 4)
			if q == lastQuarter[e.Step] && e.Progress > 0 {
				return
			}
			lastQuarter[e.Step] = q
		}
		line := fmt.Sprintf("%s  %-14s %-8s %s", e.SimTime.Format("15:04:05"), e.Step, e.Status, e.Message)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// WriteTable renders the summary for people: the same figures as its
// JSON, and only those the run measured (an interrupted run's after-state
// shows as "-").
func WriteTable(w io.Writer, s *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nMigration of cluster %s (seed %d): %.1fs wall, %s simulated\n", s.Cluster, s.Seed, s.WallSeconds, fmtSeconds(s.SimulatedSeconds))
	if s.Engine != "" {
		fmt.Fprintf(tw, "Karpenter's nodes launched by the %s; overlay %s\n", s.Engine, s.Environment)
	}
	if s.Interrupted {
		fmt.Fprintf(tw, "INTERRUPTED %s: below is only what it measured until then (\"-\": not measured)\n", interruptedAt(s))
	}
	measured := func(step, format string, v any) string {
		if !s.Done(step) {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	final := s.Done("final-state")
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "\tBEFORE\tAFTER")
	fmt.Fprintf(tw, "nodes\t%s\t%s\n", measured("discover", "%d", s.NodesBefore), measured("final-state", "%d", s.NodesAfter))
	fmt.Fprintf(tw, "$/hour\t%s\t%s\t(plan predicted %s)\n", measured("discover", "%.4f", s.CostPerHourBefore), measured("final-state", "%.4f", s.CostPerHourAfter), measured("plan", "%.4f", s.PlannedCostPerHour))
	if s.Done("apply") {
		fmt.Fprintf(tw, "pods to move\t\t%d\t(the pods on node groups that left them; besides, %d stopped: Cluster Autoscaler, scaled to zero)\n", s.PodsToMove, s.PodsStopped)
	}
	moves := fmt.Sprintf("%d evictions", s.Evictions)
	if s.ControllerRoomEvictions > 0 {
		moves += fmt.Sprintf(", %d of them made room for the Karpenter controller (plan predicted %d)", s.ControllerRoomEvictions, s.PlannedControllerRoomEvictions)
	}
	if r := s.Moves - s.Evictions; r > 0 {
		moves += fmt.Sprintf("; %d by surge restart", r)
	}
	if s.Done("apply") {
		moves += fmt.Sprintf("; %.3f per pod to move", s.MovesPerPod)
	}
	fmt.Fprintf(tw, "moves\t\t%d\t(%s)\n", s.Moves, moves)
	fmt.Fprintf(tw, "PDB violations\t\t%d\t(%d evictions refused with 429 and retried)\n", s.PDBViolations, s.PDBRejections)
	if lost := s.Sandbox.LostPods; len(lost) > 0 {
		fmt.Fprintf(tw, "pods lost with a node\t\t%d\t(never evicted: %s)\n", len(lost), strings.Join(lost, ", "))
	}
	wait := "no pod created"
	if s.LongestWaitPod != "" {
		wait = s.LongestWaitPod
	}
	fmt.Fprintf(tw, "longest wait for a node\t\t%s\t(pod creation → bound, placeholders not counted; %s)\n", fmtSeconds(s.LongestWaitSeconds), wait)
	fmt.Fprintf(tw, "waves' makespan\t\t%s\t(plan predicted %s, lower bound %s)\n", measured("apply", "%s", fmtSeconds(s.MakespanSeconds)), measured("plan", "%s", fmtSeconds(s.PredictedSeconds)), measured("plan", "%s", fmtSeconds(s.BoundSeconds)))
	if final {
		groups := "at zero"
		if c := s.Controller; c != nil && c.Size > 0 {
			groups = fmt.Sprintf("at zero but %s, kept at %d for the Karpenter controller", c.KeptGroup, c.Size)
		}
		fmt.Fprintf(tw, "node groups\t\t%s: %t\n", groups, s.GroupsScaled)
		fmt.Fprintf(tw, "Cluster Autoscaler replicas\t\t%d\n", s.ClusterAutoscalerReplicas)
	}
	if c := s.Consolidation; c != nil {
		fmt.Fprintf(tw, "right after the waves\t\t%d nodes, $%.4f/h\n", c.NodesAfterMigration, c.CostPerHourAfterMigration)
		fmt.Fprintf(tw, "Karpenter consolidation\t\t$%.4f/h saved\t(commands: %d executed, %d skipped; %d pods evicted; settled %s after apply)\n",
			c.SavingsPerHour, c.Commands, c.Skipped, c.PodsMoved, fmtSeconds(c.SettleSeconds))
	}
	if c := s.Controller; c != nil {
		fmt.Fprintf(tw, "Karpenter controller\t\t%s\n", c.Home)
		for i := range max(len(c.Before), len(c.After)) {
			fmt.Fprintf(tw, "  replica %d\t\t%s → %s\n", i+1, at(c.Before, i), at(c.After, i))
		}
	}
	fmt.Fprintln(tw, "\nINSTANCE TYPE\tBEFORE\tAFTER")
	types := map[string]bool{}
	for t := range s.NodesBeforeByType {
		types[t] = true
	}
	for t := range s.NodesAfterByType {
		types[t] = true
	}
	for _, t := range sortedKeys(types) {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t, s.NodesBeforeByType[t], measured("final-state", "%d", s.NodesAfterByType[t]))
	}
	if len(s.Waves) > 0 {
		fmt.Fprintln(tw, "\nWAVE\tNODES\tPODS PLANNED\tPODS TO MOVE\tMOVED OFF\tMOVES\tTOOK\tPREDICTED")
		for _, wv := range s.Waves {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", wv.ID, wv.PlannedNodes, wv.PlannedPods, wv.PodsToMove, wv.Evicted+wv.Replaced+wv.Gone, wv.Moves, fmtSeconds(wv.Seconds), fmtSeconds(wv.PredictedSeconds))
		}
	}
	if c := s.Consolidation; c != nil && len(c.Log) > 0 {
		fmt.Fprintln(tw, "\nCONSOLIDATION\tACTION\tNODES\tREPLACEMENT\tSAVES $/H\tSTATUS")
		for _, cmd := range c.Log {
			var nodes []string
			for _, n := range cmd.Nodes {
				nodes = append(nodes, fmt.Sprintf("%s (%s %s)", n.Name, n.CapacityType, n.InstanceType))
			}
			repl := "-"
			if r := cmd.Replacement; r != nil {
				repl = r.CapacityType + " " + r.InstanceType
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%.4f\t%s\n", cmd.DecidedAt.Format("15:04:05"), cmd.Method, cmd.Action, strings.Join(nodes, ", "), repl, cmd.Savings, cmd.Status)
		}
	}
	if rb := s.Rollback; rb != nil {
		fmt.Fprintf(tw, "\nROLLBACK\trestored: %t\t%d nodes, $%.4f/h (before the migration $%.4f/h)\n", rb.Restored, rb.NodesAfter, rb.CostPerHour, rb.CostPerHourBefore)
		if len(rb.TypesChanged) > 0 {
			fmt.Fprintf(tw, "instance types\tnot as before\t%s (the groups came back at their recorded sizes with other types: mixed instances)\n", strings.Join(rb.TypesChanged, ", "))
		}
		launched := ""
		if rb.KarpenterNodesLaunched > 0 {
			launched = fmt.Sprintf(" (+%d launched meanwhile)", rb.KarpenterNodesLaunched)
		}
		fmt.Fprintf(tw, "Karpenter nodes\t%d%s → %d\t%d drained by the rollback; removed: %d with their NodePools (%d NodeClaims), %d by Karpenter itself before the NodePools were deleted (%d before the drain, %d during it)\n",
			rb.KarpenterNodesAtStart, launched, rb.KarpenterNodes, rb.NodesDrained, rb.NodesRemovedWithNodePools, rb.NodeClaimsRemoved,
			rb.NodesRemovedBeforeDrain+rb.NodesRemovedDuringDrain, rb.NodesRemovedBeforeDrain, rb.NodesRemovedDuringDrain)
		back := ""
		if rb.Restored {
			back = "; all back on node-group nodes"
		}
		fmt.Fprintf(tw, "pods on them\t%d → %d\tat the start → as the drain started (%d left them before it, %d came onto them)%s\n",
			rb.PodsMoved, rb.PodsMoved-rb.PodsLeftBeforeDrain+rb.PodsArrivedBeforeDrain, rb.PodsLeftBeforeDrain, rb.PodsArrivedBeforeDrain, back)
		fmt.Fprintf(tw, "pods to move\t%d\tby the rollback's drain: %d evicted, %d replaced by surge restart, %d gone before the drain reached their node\n", rb.PodsToMove, rb.Evictions, rb.Replaced, rb.Gone)
		if c := rb.Consolidation; c != nil {
			fmt.Fprintf(tw, "Karpenter consolidation\t%d nodes\tremoved during the rollback (commands: %d executed; %d pods evicted)\n", c.Nodes, c.Commands, c.Evictions)
		}
		fmt.Fprintf(tw, "PDB violations\t%d\t(%d evictions refused with 429 and retried, during the rollback)\n", rb.PDBViolations, rb.PDBRejections)
		fmt.Fprintln(tw, "GROUP\tRECORDED\tDESIRED\tREADY NODES")
		for _, g := range rb.Groups {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", g.Name, g.Recorded, g.Desired, g.ReadyNodes)
		}
		for _, p := range rb.Problems {
			fmt.Fprintf(tw, "problem:\t%s\n", p)
		}
	}
	fmt.Fprintln(tw, "\nSTEP\tSTATUS\tDETAIL")
	for _, st := range s.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", st.ID, st.Status, st.Detail)
	}
	fmt.Fprintf(tw, "\nFiles: %s (snapshot.json, readiness.json, karpenter/, iam-plan.json, iam-journal.json, prod.yaml, plan.yaml, journal.json, summary.json)\n", s.OutDir)
	return tw.Flush()
}

// interruptedAt names the step an interrupted run stopped at.
func interruptedAt(s *Summary) string {
	for _, st := range s.Steps {
		if st.Status == StatusFailed {
			return "at step " + st.ID
		}
	}
	return "before its first step"
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "-"
}

func fmtSeconds(s float64) string {
	if s >= 120 {
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	}
	return fmt.Sprintf("%.0fs", s)
}
