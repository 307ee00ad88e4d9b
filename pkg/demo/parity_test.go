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
)

// TestParityWithControlPlane migrates the demo account and cluster (seed 1,
// the dev overlay) twice with the same runbook and a rollback: in the
// sandbox, then on the real control plane with the real Karpenter's kwok
// provider given the same catalogue and prices and the AWS fake. Both
// sides' figures are printed; they must agree within the tolerances above,
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
	t.Logf("parity:\n%s", b.String())
	for _, s := range []*Summary{sb, cp} {
		if s.PDBViolations != 0 {
			t.Errorf("%s: PDB violations %v", s.Engine, s.PDBViolationDetails)
		}
		if len(s.Sandbox.PreemptedPods) != 0 {
			t.Logf("%s: %d pods preempted: %v", s.Engine, s.Sandbox.Preempted, s.Sandbox.PreemptedPods)
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
