package demo

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Parity tolerances: how far the sandbox may be from the real control plane
// and the real Karpenter for the same account, cluster and runbook.
const (
	// parityNodes and parityCost bound the final fleet (after Karpenter
	// settled): node count ±20 %, $/h ±15 %.
	parityNodes = 0.20
	parityCost  = 0.15
	// parityMoves bounds the pods that had to move, the moves and the
	// evictions apply made: ±20 % (the real scheduler places the evicted
	// pods on its own, so a later wave may find more or fewer of them).
	parityMoves = 0.20
	// maxWait bounds every pod's wait for a node (creation → bound) on
	// both sides: what pre-provisioning is for. parityWait bounds how far
	// the two measures may be apart, in seconds: one tick of the sandbox.
	// The sandbox binds a pod in the pass that created it whenever room
	// is there, so it reads 0 or a whole number of 5s ticks; the control
	// plane reads whole seconds of kube-scheduler's real latency — a
	// scheduling cycle after a preempted victim is gone (about a second),
	// the API server's truncated timestamps (up to 1s), and a pod
	// re-created after kube-scheduler preempted it (two or three
	// Preempted events a run, on new Karpenter nodes, none in the
	// sandbox, whose DaemonSet pods take whatever room is left): 1s and
	// 4s measured for seed 1, dev, where the sandbox reads 0. A difference
	// of a tick or more is one the sandbox could have shown, and is not
	// allowed.
	maxWait    = 5.0
	parityWait = 5.0
)

// TestParityWithControlPlane migrates the demo account and cluster (seed 1,
// the dev overlay) twice with the same runbook and a rollback: in the
// sandbox, then on the real control plane with the real Karpenter's kwok
// provider given the same catalogue and prices and the AWS fake. The seed
// is stateful: redis's StatefulSet runs on zonal volumes (one per zone),
// and both sides must end with every such pod in its volume's zone. Both
// sides' figures are printed; they must agree within the tolerances above
// (every pod's wait for a node under maxWait on both sides),
// with no PDB violation on either side (each watched by the demo's own
// watcher), every legacy group at zero but the controller's, and the
// rollback restoring every recorded size on both.
func TestParityWithControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the control-plane migration takes minutes")
	}
	if os.Getenv("KM_SKIP_E2E") == "1" {
		t.Skip("KM_SKIP_E2E=1: skipping a test that needs the control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	run := func(controlPlane bool) *Summary {
		t.Helper()
		if !controlPlane {
			// The sandbox's run is TestDemoFiguresAgree's too.
			sum, events, _ := sharedRun(t, 1, DevEnv, true)
			checkFigures(t, "parity: sandbox", sum, events)
			return sum
		}
		began := time.Now()
		out := t.TempDir()
		var events []Event
		sum, err := Run(ctx, Options{Seed: 1, OutDir: out, Rollback: true, ControlPlane: controlPlane, Environment: DevEnv,
			Events: func(e Event) { events = append(events, e) }})
		if err != nil {
			if sum != nil {
				for _, s := range sum.Steps {
					t.Logf("%s %s: %s", s.ID, s.Status, s.Detail)
				}
			}
			if logs, rerr := os.ReadFile(filepath.Join(out, ControlPlaneLogs)); rerr == nil {
				t.Logf("%s:\n%s", ControlPlaneLogs, logs)
			}
			t.Fatalf("demo (control plane %t): %v", controlPlane, err)
		}
		t.Logf("%s: %s wall", sum.Engine, time.Since(began).Round(time.Second))
		checkFigures(t, "parity: control plane", sum, events)
		return sum
	}
	sb := run(false)
	cp := run(true)
	if sb.Engine != EngineSandbox || cp.Engine != EngineControlPlane {
		t.Errorf("engines %q and %q, want %q and %q", sb.Engine, cp.Engine, EngineSandbox, EngineControlPlane)
	}

	rows := []struct {
		name   string
		sb, cp float64
		tol    float64 // relative; -1: must be equal
	}{
		{"nodes before", float64(sb.NodesBefore), float64(cp.NodesBefore), -1},
		{"$/h before", sb.CostPerHourBefore, cp.CostPerHourBefore, -1},
		{"pods to move", float64(sb.PodsToMove), float64(cp.PodsToMove), parityMoves},
		{"moves", float64(sb.Moves), float64(cp.Moves), parityMoves},
		{"evictions", float64(sb.Evictions), float64(cp.Evictions), parityMoves},
		{"PDB violations", float64(sb.PDBViolations), float64(cp.PDBViolations), -1},
		{"nodes after the waves", float64(sb.Consolidation.NodesAfterMigration), float64(cp.Consolidation.NodesAfterMigration), parityNodes},
		{"$/h after the waves", sb.Consolidation.CostPerHourAfterMigration, cp.Consolidation.CostPerHourAfterMigration, parityCost},
		{"nodes after consolidation", float64(sb.NodesAfter), float64(cp.NodesAfter), parityNodes},
		{"$/h after consolidation", sb.CostPerHourAfter, cp.CostPerHourAfter, parityCost},
		{"legacy pods left", float64(sb.LegacyPodsLeft), float64(cp.LegacyPodsLeft), -1},
		{"pods pinned by volumes", float64(sb.PinnedPods), float64(cp.PinnedPods), -1},
		{"  not where their volume is", float64(len(sb.PinnedPodsMisplaced)), float64(len(cp.PinnedPodsMisplaced)), -1},
		{"rollback: pods moved back", float64(sb.Rollback.PodsMoved), float64(cp.Rollback.PodsMoved), parityMoves},
		{"rollback: nodes", float64(sb.Rollback.NodesAfter), float64(cp.Rollback.NodesAfter), -1},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %14s %14s  %s\n", "seed 1, overlay dev", "sandbox", "control plane", "tolerance")
	for _, r := range rows {
		tol := "equal"
		if r.tol >= 0 {
			tol = fmt.Sprintf("±%.0f %%", r.tol*100)
		}
		fmt.Fprintf(&b, "%-28s %14.4g %14.4g  %s\n", r.name, r.sb, r.cp, tol)
		switch {
		case r.tol < 0 && r.sb != r.cp:
			t.Errorf("%s: sandbox %v, control plane %v; want equal", r.name, r.sb, r.cp)
		case r.tol >= 0 && math.Abs(r.sb-r.cp) > r.tol*r.cp:
			t.Errorf("%s: sandbox %v, control plane %v; want within ±%.0f %% of the control plane", r.name, r.sb, r.cp, r.tol*100)
		}
	}
	fmt.Fprintf(&b, "%-28s %14.4g %14.4g  < %.0fs apart, each < %.0fs\n", "longest wait for a node (s)", sb.LongestWaitSeconds, cp.LongestWaitSeconds, parityWait, maxWait)
	t.Logf("parity:\n%s", b.String())
	for _, s := range []*Summary{sb, cp} {
		t.Logf("%s: longest wait for a node %.0fs: %s", s.Engine, s.LongestWaitSeconds, s.LongestWaitPod)
		if s.LongestWaitSeconds >= maxWait {
			t.Errorf("%s: a pod waited %.0fs for a node (%s); want under %.0fs", s.Engine, s.LongestWaitSeconds, s.LongestWaitPod, maxWait)
		}
	}
	if d := math.Abs(sb.LongestWaitSeconds - cp.LongestWaitSeconds); d >= parityWait {
		t.Errorf("longest wait for a node: sandbox %.0fs (%s), control plane %.0fs (%s); want less than %.0fs apart", sb.LongestWaitSeconds, sb.LongestWaitPod, cp.LongestWaitSeconds, cp.LongestWaitPod, parityWait)
	}
	for _, s := range []*Summary{sb, cp} {
		if s.PDBViolations != 0 {
			t.Errorf("%s: PDB violations %v", s.Engine, s.PDBViolationDetails)
		}
		if len(s.Sandbox.PreemptedPods) != 0 {
			t.Logf("%s: %d pods preempted: %v", s.Engine, s.Sandbox.Preempted, s.Sandbox.PreemptedPods)
		}
		if s.PinnedPods == 0 || len(s.PinnedPodsMisplaced) != 0 {
			t.Errorf("%s: %d pods pinned by their volumes' zones, misplaced: %v; want redis's, each in its volume's zone", s.Engine, s.PinnedPods, s.PinnedPodsMisplaced)
		}
		if len(s.Sandbox.LostPods) != 0 {
			t.Errorf("%s: pods lost with a terminated node (never evicted): %v", s.Engine, s.Sandbox.LostPods)
		}
		if !s.GroupsScaled {
			t.Errorf("%s: the legacy groups are not at zero (but the controller's)", s.Engine)
		}
		if !s.Rollback.Restored {
			t.Errorf("%s: rollback did not restore every size: %v", s.Engine, s.Rollback.Problems)
		}
	}
	for i, g := range cp.Rollback.Groups {
		if g.Desired != g.Recorded || g.ReadyNodes != int(g.Recorded) {
			t.Errorf("control plane: group %s after rollback: %+v, want its recorded size with Ready nodes", g.Name, g)
		}
		if i < len(sb.Rollback.Groups) && sb.Rollback.Groups[i] != g {
			t.Logf("group %s after rollback: sandbox %+v, control plane %+v", g.Name, sb.Rollback.Groups[i], g)
		}
	}
}
