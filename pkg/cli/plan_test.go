package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// planDir holds a three-node group whose pods each get their own m5.large
// wave by wave, and a NodePool (overlays/prod) that also allows c5.xlarge:
// after the waves Karpenter folds the three into one.
var planDir = filepath.Join("testdata", "plan")

func planArgs(t *testing.T, extra ...string) ([]string, string) {
	out := filepath.Join(t.TempDir(), "plan.yaml")
	return append([]string{"plan", "--env", "prod", "--snapshot", filepath.Join(planDir, "snapshot.json"),
		"--dir", filepath.Join(planDir, "karpenter"), "--config", filepath.Join(planDir, "prod.yaml"), "--skip-iam", "-f", out}, extra...), out
}

func TestPlanCommandTable(t *testing.T) {
	args, file := planArgs(t)
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	// The hash stays: the same inputs must give the same plan.
	got := strings.ReplaceAll(out, file, "PLAN.yaml")
	path := filepath.Join(planDir, "table.golden")
	if *update {
		if err := atomicfile.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/cli -run PlanCommand -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (re-run with -update if intended):\n%s", path, got)
	}
}

func TestPlanCommandJSON(t *testing.T) {
	args, file := planArgs(t, "-o", "json")
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	ss := p.SteadyState
	// Both fleets count the two nodes kept for the controller.
	if ss == nil || ss.Kept == nil || ss.Kept.Nodes != 2 || ss.AfterMigration.Nodes != 3+2 || ss.AfterConsolidation.Nodes != 1+2 || len(ss.Commands) != 1 {
		t.Fatalf("steady state = %+v, want 3 Karpenter nodes after the waves, 1 after one command, and the 2 kept in both", ss)
	}
	// The same figure to the 1/100 cent, not rounded to cents (#32).
	if ss.AfterMigration.PricePerHour != p.Cost.AfterPerHour {
		t.Errorf("after the waves: steady state $%v/h, cost $%v/h; want one figure", ss.AfterMigration.PricePerHour, p.Cost.AfterPerHour)
	}
	if c := ss.Commands[0]; c.Action != "Replace" || len(c.Nodes) != 3 || c.Replacement == nil || c.Replacement.InstanceType != "c5.xlarge" ||
		ss.AfterConsolidation.PricePerHour >= ss.AfterMigration.PricePerHour {
		t.Errorf("command %+v, $%v/h -> $%v/h; want the three replaced by a c5.xlarge for less", c, ss.AfterMigration.PricePerHour, ss.AfterConsolidation.PricePerHour)
	}
	// The plan file says the same, and its hash still verifies.
	written, err := plan.ReadPlanFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if written.Hash != p.Hash || written.SteadyState == nil || len(written.SteadyState.Commands) != 1 {
		t.Errorf("plan file %s: hash %s steady state %+v; want %s and the command", file, written.Hash, written.SteadyState, p.Hash)
	}
}

// A plan says where it is once it has taken planProgressEvery (here at
// once): each wave as its prediction starts, then each forecast pass, as
// lines or PlanProgress events; a plan quicker than that says nothing.
// Both intervals are set here: a loaded CI machine once took 1.2 s over
// a plan well under a second idle, past the default.
func TestPlanProgress(t *testing.T) {
	defer func(every time.Duration) { planProgressEvery = every }(planProgressEvery)
	planProgressEvery = time.Hour
	args, _ := planArgs(t)
	_, errOut, err := runCLI(t, args...)
	if err != nil || strings.Contains(errOut, "plan: ") {
		t.Fatalf("plan: %v; a plan quicker than planProgressEvery wrote progress:\n%s", err, errOut)
	}
	planProgressEvery = 0
	args, file := planArgs(t)
	_, errOut, err = runCLI(t, args...)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	p, err := plan.ReadPlanFile(file)
	if err != nil {
		t.Fatal(err)
	}
	waves := len(p.Waves)
	for i := 1; i <= waves; i++ {
		if want := fmt.Sprintf("predicting wave %d of %d (", i, waves); !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(errOut, "forecasting consolidation: pass 1 on 3 nodes") {
		t.Errorf("stderr lacks the forecast's first pass on the 3 predicted nodes:\n%s", errOut)
	}

	args, _ = planArgs(t, "--log-format", "json")
	_, errOut, err = runCLI(t, args...)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	passes := 0
	for _, e := range jsonEvents(t, errOut) {
		if e["event"] != eventPlanProgress {
			continue
		}
		if e["waves"] != float64(waves) && e["settlePass"] == float64(0) {
			t.Errorf("event %v: want waves %d", e, waves)
		}
		if e["settlePass"].(float64) > 0 {
			passes++
		}
	}
	if got := countEvents(jsonEvents(t, errOut), eventPlanProgress, "INFO"); got != waves+passes || passes == 0 {
		t.Errorf("%d PlanProgress events, %d of them forecast passes; want one per wave (%d) and at least one pass:\n%s", got, passes, waves, errOut)
	}
}

// --timeout stops a plan that takes longer, says so and what to do, and
// writes no plan.
func TestPlanTimeout(t *testing.T) {
	args, file := planArgs(t, "--timeout", "1ns")
	_, errOut, err := runCLI(t, args...)
	if err == nil || !strings.Contains(err.Error(), "plan did not finish within --timeout 1ns: plan stopped before predicting wave 1 of") ||
		!strings.Contains(err.Error(), "raise --timeout") {
		t.Fatalf("plan --timeout 1ns: %v, want it stopped before the first wave\n%s", err, errOut)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("plan --timeout 1ns wrote %s (%v)", file, err)
	}
}

// TestPlanControllerNodeGroup: --controller-nodegroup decides where the
// Karpenter controller lives (the plan records it); a group that does not
// exist is refused, naming the flag and the groups.
func TestPlanControllerNodeGroup(t *testing.T) {
	args, file := planArgs(t, "--controller-nodegroup", "web")
	if _, errOut, err := runCLI(t, args...); err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	p, err := plan.ReadPlanFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if h := p.Controller; h == nil || h.Source != plan.ControllerFromFlag || h.NodeGroup != "web" || !h.Kept {
		t.Errorf("controller home %+v; want web, from the flag", h)
	}
	args, _ = planArgs(t, "--controller-nodegroup", "nope")
	_, _, err = runCLI(t, args...)
	if err == nil || !strings.Contains(err.Error(), `--controller-nodegroup "nope": no such node group; known groups are web`) {
		t.Errorf("plan with an unknown group: %v", err)
	}
}
