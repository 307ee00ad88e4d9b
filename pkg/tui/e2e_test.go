package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// e2e is a wizard on a sandbox under teatest: a real tea.Program at 80×24
// reading keys and writing the terminal output.
type e2e struct {
	t   *testing.T
	sb  *Sandbox
	ops *Ops
	tm  *teatest.TestModel
	out bytes.Buffer
}

func startE2E(t *testing.T) *e2e {
	if testing.Short() {
		t.Skip("a whole migration on the sandbox; skipped with -short")
	}
	ctx := context.Background()
	sb, err := NewSandbox(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	dir := t.TempDir()
	e := &e2e{t: t, sb: sb, ops: &Ops{Dial: sb.Dial, OutDir: dir, Namespace: "karpenter-migrate", Operator: "e2e"}}
	m := New(ctx, Options{Backend: e.ops, Defaults: sb.Defaults(), OutDir: dir, Namespace: "karpenter-migrate", Sandbox: true, Width: 80, Height: 24})
	e.tm = teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	return e
}

// see waits until the terminal shows s.
func (e *e2e) see(s string, within time.Duration) {
	e.t.Helper()
	teatest.WaitFor(e.t, e.tm.Output(), func(b []byte) bool {
		e.out.Write(b)
		return bytes.Contains(e.out.Bytes(), []byte(s))
	}, teatest.WithDuration(within), teatest.WithCheckInterval(20*time.Millisecond))
	e.out.Reset()
}

func (e *e2e) keys(keys ...string) {
	for _, k := range keys {
		e.tm.Send(keyMsg(k))
	}
}

// toRollout walks connect, discover, readiness, generate, IAM and plan,
// choosing what a user would, and starts the rollout.
func (e *e2e) toRollout() {
	e.see("Kubeconfig context", 30*time.Second)
	e.keys("enter", "enter", "enter", "enter", "enter")
	e.see("Snapshot written", 30*time.Second)
	e.keys("enter")
	e.see("Readiness", 30*time.Second)
	for _, blocker := range e.blockers() {
		if blocker {
			e.keys("a")
		}
		e.keys("down")
	}
	e.keys("enter")
	e.see("How should the node groups become NodePools", 30*time.Second)
	e.keys("enter")
	e.see("files:", 30*time.Second)
	e.keys("w")
	e.see("Every overlay built", 60*time.Second)
	e.keys("enter")
	e.see("to change", 30*time.Second)
	e.keys("o")
	e.see("create OIDC provider", 30*time.Second)
	e.keys("a")
	e.see("[y/N]", 30*time.Second)
	// Enter takes the default, No: the screen's own keys come back and a
	// asks again (were Enter ignored or Yes, neither would show).
	e.keys("enter")
	e.see("a apply", 30*time.Second)
	e.keys("a")
	e.see("[y/N]", 30*time.Second)
	e.keys("y")
	e.see("journal karpenter-migrate-iam-demo", 60*time.Second)
	e.keys("c")
	// Karpenter: not installed yet, step 07 will install it.
	e.see("Karpenter is not installed", 30*time.Second)
	e.keys("c")
	e.see("after consolidation", 60*time.Second)
	e.keys("e")
	e.see("emptyDir data loss on", 60*time.Second)
	e.keys("f")
	e.see("force evictions on", 60*time.Second)
	// One node drained at a time, as the demo does: with the sandbox's
	// one-pod-at-a-time drains, the runner then waits on one goroutine
	// and the seed gives one run.
	e.keys("<")
	e.see("1 drained at once", 60*time.Second)
	e.keys("a", "enter")
	e.see("Start the rollout", 30*time.Second)
	e.keys("y")
	e.see("Rollout", 30*time.Second)
}

// checkWizardFigures holds the wizard's figures, as its Done and rollout
// screens show them at the end, to the demo's JSON summary of the same
// seed, as pkg/demo's checkFigures holds the demo's table to it (#32):
// the nodes and $/h before and after, the evictions, and the rollout's
// node counters at their totals, those totals being the waves' nodes less
// the controller's kept ones.
func checkWizardFigures(t *testing.T, s *state, sum *demo.Summary) {
	t.Helper()
	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	num := func(m map[string]any, key string) int { v, _ := m[key].(float64); return int(v) }
	done := regexp.MustCompile(`Nodes (\d+) → (\d+) \((\d+) legacy left\) · \$/h (\S+) → (\S+) · (\d+) pods evicted`).FindStringSubmatch(summary(s, 200))
	if done == nil {
		t.Fatalf("the Done screen has no figures line:\n%s", summary(s, 200))
	}
	kept := 0
	if c, ok := j["controller"].(map[string]any); ok {
		kept = num(c, "size")
	}
	for i, want := range []string{strconv.Itoa(num(j, "nodesBefore")), strconv.Itoa(num(j, "nodesAfter")), strconv.Itoa(kept),
		fmt.Sprintf("%.4f", j["costPerHourBefore"]), fmt.Sprintf("%.4f", j["costPerHourAfter"]), strconv.Itoa(num(j, "evictions"))} {
		if done[i+1] != want {
			t.Errorf("Done screen %q: figure %d is %s, the demo's JSON %s", done[0], i+1, done[i+1], want)
		}
	}
	planned := 0
	waves, _ := j["waves"].([]any)
	for _, w := range waves {
		planned += num(w.(map[string]any), "plannedNodes")
	}
	rs := s.runStats
	total, keptNodes := waveNodes(s.plan)
	if rs.cordoned != total || rs.drained != total || total+keptNodes != planned || keptNodes != kept {
		t.Errorf("rollout screen: cordoned %d/%d, drained %d/%d, kept %d; the demo's waves plan %d nodes, %d kept for the controller",
			rs.cordoned, total, rs.drained, total, keptNodes, planned, kept)
	}
}

// blockers says, for each finding of the readiness screen in order,
// whether it is a blocker, as the wizard evaluates the snapshot it wrote.
func (e *e2e) blockers() []bool {
	e.t.Helper()
	snap, err := inventory.ReadSnapshotFile(filepath.Join(e.ops.OutDir, SnapshotFile))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []bool
	for _, f := range e.ops.Readiness(&snap.Inventory).Findings {
		out = append(out, f.Severity == readiness.Blocker)
	}
	return out
}

func TestWizardMigratesTheSandbox(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	e.toRollout()
	e.see("migration complete", 5*time.Minute)
	e.keys("enter")
	e.see("The sandbox lived in this process only", 30*time.Second)
	e.keys("q")
	e.tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	res := e.tm.FinalModel(t).(*Model).Result()
	if res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s at %s (%v)", res.Outcome, res.Screen, res.Err)
	}
	// The Done screen's figures are the demo's summary for the same seed:
	// one pipeline, one answer.
	final := e.tm.FinalModel(t).(*Model)
	sum, err := demo.Run(context.Background(), demo.Options{Seed: 1, OutDir: t.TempDir()})
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	legacyLeft := 0 // the nodes of the group kept as the controller's home
	if c := sum.Controller; c != nil && c.KeptGroup != "" {
		legacyLeft = int(c.Size)
	}
	want := fmt.Sprintf("Nodes %d → %d (%d legacy left) · $/h %.4f → %.4f", sum.NodesBefore, sum.NodesAfter, legacyLeft, sum.CostPerHourBefore, sum.CostPerHourAfter)
	t.Logf("demo summary for seed 1: %s", want)
	if done := summary(final.s, 200); !strings.Contains(done, want) {
		t.Errorf("Done screen differs from the demo's summary for seed 1:\n want %s\n got  %s", want, strings.SplitN(done, "\n", 3)[1])
	}
	checkWizardFigures(t, final.s, sum)

	// The same files the commands write.
	for _, f := range []string{SnapshotFile, PlanFile, ConfigFile("prod"), action.IAMJournalFile("demo"), filepath.Join(TreeDir, "overlays", "prod", "kustomization.yaml")} {
		if _, err := os.Stat(filepath.Join(e.ops.OutDir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// The journal apply and status read, completed.
	ctx := context.Background()
	j, err := rollout.Status(ctx, e.sb.SB.Kube(), "karpenter-migrate", "prod")
	if err != nil || j == nil {
		t.Fatalf("journal: %v %v", j, err)
	}
	if j.State != rollout.StateCompleted {
		t.Errorf("journal state %s: %s", j.State, j.Message)
	}
	plan, err := plan.ReadPlanFile(filepath.Join(e.ops.OutDir, PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	// Step 07 installed Karpenter: the release is this tool's, as planned.
	cl, _, err := e.ops.clients()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Config.KarpenterStatus(ctx, plan); err != nil || st.Verdict() != "installed" {
		t.Errorf("Karpenter after the rollout: %+v %v, want this tool's release as planned", st, err)
	}
	// Let the simulated cloud catch up with the scaled-in groups, then:
	// every workload pod on a Karpenter node but the controller's own
	// replicas, which keep their home on the kept group (step 07 installed
	// them there), and every group at its size.
	if err := e.sb.SB.Settle(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	nodes, err := e.sb.SB.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	karpenter := map[string]bool{}
	for _, n := range nodes.Items {
		karpenter[n.Name] = n.Labels[apisv1.NodePoolLabelKey] != ""
	}
	pods, err := e.sb.SB.Kube().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if action.WorkloadOf(&p) == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if slices.Contains(j.Recorded.KeptNodes, p.Spec.NodeName) && labels.SelectorFromSet(generate.ControllerLabels).Matches(labels.Set(p.Labels)) {
			continue
		}
		if !karpenter[p.Spec.NodeName] {
			t.Errorf("pod %s/%s is on %q, not a Karpenter node", p.Namespace, p.Name, p.Spec.NodeName)
		}
	}
	// Every group at zero but the one the plan keeps for the Karpenter controller.
	for _, g := range e.sb.SB.Cloud().Groups() {
		want := int32(0)
		if h := plan.Controller; h.Kept && g.Name == h.NodeGroup {
			want = h.Size
		}
		if g.DesiredSize != want || len(g.Instances) != int(want) {
			t.Errorf("node group %s desired %d with %d instances, want %d", g.Name, g.DesiredSize, len(g.Instances), want)
		}
	}
	if !strings.Contains(strings.Join(res.Commands, "\n"), "karpenter-migrate plan --env prod --snapshot "+filepath.Join(e.ops.OutDir, SnapshotFile)) {
		t.Errorf("commands:\n%s", strings.Join(res.Commands, "\n"))
	}
}

func TestQuitMidRolloutLeavesAJournalApplyResumes(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	e.toRollout()
	// The event log's line, not the header: waves 2 and 3 drain together
	// (a drain group), and the header shows the group's last wave.
	e.see("wave 2/", 5*time.Minute)
	e.keys("q")
	e.tm.WaitFinished(t, teatest.WithFinalTimeout(time.Minute))
	res := e.tm.FinalModel(t).(*Model).Result()
	if res.Outcome != OutcomePaused {
		t.Fatalf("outcome %s, want paused", res.Outcome)
	}

	ctx := context.Background()
	j, err := rollout.Status(ctx, e.sb.SB.Kube(), "karpenter-migrate", "prod")
	if err != nil || j == nil {
		t.Fatalf("journal: %v %v", j, err)
	}
	if j.State != rollout.StateInterrupted || j.Current.Step != "10_drain_waves" {
		t.Fatalf("journal %s at %+v, want interrupted in 10_drain_waves", j.State, j.Current)
	}
	done := map[string]bool{}
	for _, s := range j.Steps {
		if s.State == rollout.StateDone || s.State == rollout.StateSkipped {
			done[s.ID] = true
		}
	}

	// What `apply --plan plan.yaml --dir karpenter --yes` does: read the
	// plan file the wizard wrote and run the runbook with the same runner.
	plan, err := plan.ReadPlanFile(filepath.Join(e.ops.OutDir, PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	r, err := e.ops.Runner(plan, func(ev rollout.Event) {
		if ev.Kind == rollout.EventStepSkipped && strings.HasPrefix(ev.Message, "already applied") {
			skipped = append(skipped, ev.Step)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Options.AckBlockers = true
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("apply after the wizard quit: %v", err)
	}
	for id := range done {
		if !slices.Contains(skipped, id) {
			t.Errorf("step %s was done before the quit but apply ran it again (skipped %v)", id, skipped)
		}
	}
	if j, _ = rollout.Status(ctx, e.sb.SB.Kube(), "karpenter-migrate", "prod"); j == nil || j.State != rollout.StateCompleted {
		t.Errorf("journal after apply: %+v", j)
	}
	if err := e.sb.SB.Settle(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Every group at zero but the one kept for the Karpenter controller.
	for _, g := range e.sb.SB.Cloud().Groups() {
		want := int32(0)
		if h := plan.Controller; h.Kept && g.Name == h.NodeGroup {
			want = h.Size
		}
		if g.DesiredSize != want || len(g.Instances) != int(want) {
			t.Errorf("node group %s desired %d with %d instances after the resumed apply, want %d", g.Name, g.DesiredSize, len(g.Instances), want)
		}
	}
}

var _ tea.Model = (*Model)(nil)
