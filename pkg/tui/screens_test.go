package tui

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// walk drives a fresh wizard on be to the screen titled stop.
func walk(t *testing.T, be *fakeBackend, stop string) *driver {
	t.Helper()
	return walkWith(t, Options{Backend: be, Defaults: testDefaults()}, stop)
}

// walkWith drives a fresh wizard with opts to the screen titled stop.
func walkWith(t *testing.T, opts Options, stop string) *driver {
	t.Helper()
	d := newDriver(t, opts)
	steps := []struct {
		screen string
		keys   []string
		ready  string
	}{
		{"Connect", []string{"enter", "enter", "enter", "enter", "enter"}, ""},
		{"Discover", []string{"enter"}, "Snapshot written"},
		{"Readiness", nil, ""},
		{"Generate", []string{"enter", "wait:files:", "w", "wait:Wrote", "enter"}, ""},
		{"IAM", []string{"o", "wait:create OIDC provider", "a", "wait:[y/N]", "y", "wait:applied", "c"}, "to change"},
		{"Karpenter", []string{"c"}, "Helm release"},
		{"Plan", []string{"e", "wait:emptyDir data loss on", "enter", "wait:[y/N]", "y"}, "Plan 0123"},
		{"Rollout", nil, ""},
	}
	for _, st := range steps {
		d.waitFor("screen "+st.screen, func() bool { return d.screen() == st.screen })
		if st.ready != "" {
			d.waitFor(st.ready, d.viewHas(st.ready))
		}
		if st.screen == stop {
			return d
		}
		if st.screen == "Readiness" {
			ackAll(d)
		}
		for _, k := range st.keys {
			if text, ok := strings.CutPrefix(k, "wait:"); ok {
				d.waitFor(text, d.viewHas(text))
				continue
			}
			d.press(k)
		}
	}
	t.Fatalf("no screen %q", stop)
	return nil
}

func TestConnectScreen(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{connectErr: errors.New(`context "sandbox": the API server did not answer: connection refused`)}
	d := newDriver(t, Options{Backend: be, Defaults: testDefaults()})
	d.golden("connect")

	// enter moves through the fields; on the last it connects.
	d.press("enter", "enter", "enter", "enter")
	if len(be.connected) != 0 {
		t.Fatalf("connected before the last field: %v", be.connected)
	}
	d.press("backspace", "backspace", "backspace", "backspace", "d", "e", "v", "enter")
	d.waitFor("the error", d.viewHas("connection refused"))
	if got := be.connected[0]; got.Environment != "dev" || got.Cluster != "demo" || got.Context != "sandbox" {
		t.Errorf("connected with %+v, want the defaults and environment dev", got)
	}
	if d.screen() != "Connect" {
		t.Fatalf("moved on to %s after a failed connection", d.screen())
	}
	d.golden("connect_error")

	// q is text here, not quit.
	d.press("q")
	if d.quit {
		t.Fatal("q quit while typing in a field")
	}
	be.connectErr = nil
	d.press("backspace", "enter")
	d.waitFor("discover", func() bool { return d.screen() == "Discover" })
}

func TestDiscoverScreen(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{}
	d := walk(t, be, "Discover")
	d.golden("discover")

	d.press("down", "space")
	if !d.m.s.exclude["demo-apps"] {
		t.Fatalf("space on the second row did not exclude demo-apps: %v", d.m.s.exclude)
	}
	d.golden("discover_excluded")
	d.press("a")
	if len(excludedNames(d.m.s.exclude)) != 0 {
		t.Fatalf("a did not include every group: %v", d.m.s.exclude)
	}
	// Excluding every group refuses to continue.
	d.press("up", "space", "down", "space", "down", "space", "down", "space", "enter")
	if d.screen() != "Discover" || !strings.Contains(d.m.View(), "include at least one node group") {
		t.Fatalf("continued with every group excluded:\n%s", d.m.View())
	}
	d.press("space", "enter")
	d.waitFor("readiness", func() bool { return d.screen() == "Readiness" })
}

// ackAll acknowledges every blocker (they come first) and moves on.
func ackAll(d *driver) {
	for range d.m.s.report.Blockers {
		d.press("a", "down")
	}
	d.press("enter")
}

func excludedNames(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	return out
}

func TestReadinessScreen(t *testing.T) {
	t.Parallel()
	d := walk(t, &fakeBackend{}, "Readiness")
	d.golden("readiness")
	blockers := d.m.s.report.Blockers
	if blockers == 0 {
		t.Fatal("the demo inventory has no blocker; the test needs one")
	}

	d.press("enter")
	if d.screen() != "Readiness" || !strings.Contains(d.m.View(), "resolve or acknowledge") {
		t.Fatalf("continued with open blockers:\n%s", d.m.View())
	}
	d.press("right")
	d.golden("readiness_expanded")
	d.press("a")
	if !strings.Contains(d.m.View(), "[acknowledged]") {
		t.Fatal("a did not acknowledge the blocker under the cursor")
	}
	// Warnings need no acknowledgement.
	for range blockers {
		d.press("down")
	}
	d.press("a")
	if !strings.Contains(d.m.View(), "only blockers need acknowledging") {
		t.Errorf("a on a warning: %s", d.m.View())
	}
	for range blockers {
		d.press("up")
	}
	for i := 1; i < blockers; i++ {
		d.press("down", "a")
	}
	d.press("enter")
	d.waitFor("generate", func() bool { return d.screen() == "Generate" })
	if len(d.m.s.acked) != blockers {
		t.Errorf("acknowledged %v, want %d blockers", d.m.s.acked, blockers)
	}
}

func TestGenerateScreen(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{}
	d := walk(t, be, "Generate")
	d.golden("generate")

	d.press("right", "down", "left", "enter")
	d.waitFor("preview", d.viewHas("files:"))
	got := be.generated[0]
	if got.Strategy != generate.StrategySingle || got.Flexibility != generate.FlexibilitySimilar || !slices.Equal(got.Envs, []string{"dev", "staging", "prod"}) {
		t.Errorf("previewed with %+v, want single, similar, dev/staging/prod", got)
	}
	if be.written {
		t.Fatal("a preview wrote the tree")
	}
	// The first file that changes is shown first, as a diff.
	d.golden("generate_preview")
	d.press("]")
	if !strings.Contains(d.m.View(), "[3/3] overlays/prod/kustomization.yaml") {
		t.Errorf("] did not move to the next file:\n%s", d.m.View())
	}
	d.press("w")
	d.waitFor("written", d.viewHas("Wrote"))
	if !be.written {
		t.Fatal("w did not write the tree")
	}
	d.golden("generate_written")
	if d.m.s.gen.Strategy != generate.StrategySingle {
		t.Errorf("the wizard kept %+v, want the written choice", d.m.s.gen)
	}
}

func TestGenerateScreenNeedsAnEnvironment(t *testing.T) {
	t.Parallel()
	d := walk(t, &fakeBackend{}, "Generate")
	d.press("down", "down")
	for range len("dev,staging,prod") {
		d.press("backspace")
	}
	d.press("enter")
	if !strings.Contains(d.m.View(), "give at least one") {
		t.Fatalf("previewed with no environment:\n%s", d.m.View())
	}
}

func TestIAMScreen(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{}
	d := walk(t, be, "IAM")
	d.golden("iam")
	// The header says what the OIDC provider's row says, and the way out
	// is this screen's keys, not the command's flags.
	if v := d.m.View(); !strings.Contains(v, "irsa · OIDC provider missing ·") || !strings.Contains(v, "o creates it, i switches to Pod Identity") || strings.Contains(v, "--create-oidc-provider") {
		t.Errorf("the IAM screen with a missing OIDC provider:\n%s", v)
	}

	d.press("a")
	if !strings.Contains(d.m.View(), "blocked") && !strings.Contains(d.m.View(), "missing") {
		t.Errorf("apply with a missing prerequisite was not refused:\n%s", d.m.View())
	}
	if be.iamApplied != 0 {
		t.Fatal("applied a blocked plan")
	}
	d.press("o")
	d.waitFor("replan", func() bool { n, _ := be.calls(); return n == 2 })
	d.waitFor("the new plan", d.viewHas("create OIDC provider"))
	if !be.iamChoices[1].CreateOIDCProvider {
		t.Errorf("o did not ask for the OIDC provider: %+v", be.iamChoices)
	}
	d.press("enter")
	if !strings.Contains(d.m.View(), "2012-10-17") {
		t.Errorf("enter did not show the document:\n%s", d.m.View())
	}
	d.press("esc", "a")
	d.golden("iam_confirm")
	d.press("n")
	if be.iamApplied != 0 {
		t.Fatal("n applied")
	}
	// Enter takes the default, No, as every CLI confirm does.
	d.press("a", "enter")
	if be.iamApplied != 0 || strings.Contains(d.m.View(), "[y/N]") {
		t.Fatalf("enter at [y/N] did not decline (applied %d):\n%s", be.iamApplied, d.m.View())
	}
	d.press("a", "y")
	d.waitFor("applied", d.viewHas("applied 2 change(s)"))
	if be.iamApplied != 1 {
		t.Fatalf("applied %d times", be.iamApplied)
	}
	d.press("c")
	d.waitFor("karpenter", func() bool { return d.screen() == "Karpenter" })
}

// TestKarpenterScreen: the Karpenter step's verdict before the plan —
// install (values viewable), a foreign installation contradicting the plan
// (each field listed, no way on but fixing it or skipping), fixed and
// checked again (left alone), an upgrade of our release (the values diff),
// and skip, which plans without the step.
func TestKarpenterScreen(t *testing.T) {
	t.Parallel()
	t.Run("install", func(t *testing.T) {
		be := &fakeBackend{}
		d := walk(t, be, "Karpenter")
		d.golden("karpenter")
		d.press("v")
		if v := d.m.View(); !strings.Contains(v, "clusterName: demo") || !strings.Contains(v, "interruptionQueue: demo") {
			t.Errorf("v did not show the planned values:\n%s", v)
		}
		d.press("esc", "c")
		d.waitFor("plan", func() bool { return d.screen() == "Plan" })
		d.waitFor("a plan", func() bool { _, n := be.calls(); return n > 0 })
		if c := be.planned[0]; c.SkipKarpenter || c.Environment != "prod" {
			t.Errorf("planned with %+v, want step 07 in the plan", c)
		}
	})
	t.Run("mismatch, fixed", func(t *testing.T) {
		be := &fakeBackend{karpenterState: &migrations.KarpenterState{Foreign: true, Source: "Deployment kube-system/karpenter, not a Helm release named karpenter in kube-system",
			Mismatches: []string{
				`settings.clusterName: Deployment kube-system/karpenter runs for cluster "old", the plan is for "demo"`,
				"affinity: Deployment kube-system/karpenter may run on nodes it manages: add required node affinity karpenter.sh/nodepool DoesNotExist",
			}}}
		d := walk(t, be, "Karpenter")
		d.waitFor("the mismatch", d.viewHas("contradicts the plan"))
		d.golden("karpenter_mismatch")
		d.press("c")
		if d.screen() != "Karpenter" {
			t.Fatalf("c continued past a contradicting installation to %s", d.screen())
		}
		be.mu.Lock()
		be.karpenterState = &migrations.KarpenterState{Foreign: true, Source: "Deployment kube-system/karpenter"}
		checks := len(be.karpenterChecks)
		be.mu.Unlock()
		d.press("r")
		d.waitFor("the recheck", d.viewHas("agrees with the plan"))
		if len(be.karpenterChecks) != checks+1 {
			t.Errorf("r checked %d times, want once", len(be.karpenterChecks)-checks)
		}
		d.press("c")
		d.waitFor("plan", func() bool { return d.screen() == "Plan" })
	})
	t.Run("upgrade", func(t *testing.T) {
		be := &fakeBackend{karpenterState: &migrations.KarpenterState{Release: &rollout.Release{Name: "karpenter", Namespace: "kube-system", Chart: "karpenter", Version: "1.13.0", Revision: 3, Status: rollout.ReleaseDeployed,
			Values: map[string]any{"settings": map[string]any{"clusterName": "demo"}, "replicas": 2}}}}
		d := walk(t, be, "Karpenter")
		d.waitFor("the upgrade", d.viewHas("chart karpenter 1.13.0, revision 3"))
		d.press("v")
		if v := d.m.View(); !strings.Contains(v, "+  interruptionQueue: demo") {
			t.Errorf("v did not show the values diff against the release:\n%s", v)
		}
	})
	t.Run("skip", func(t *testing.T) {
		be := &fakeBackend{karpenterState: &migrations.KarpenterState{Problem: "Helm release kube-system/karpenter is failed (revision 2): see `helm history karpenter -n kube-system`"}}
		d := walk(t, be, "Karpenter")
		d.waitFor("the problem", d.viewHas("is failed"))
		d.press("s")
		d.waitFor("plan", func() bool { _, n := be.calls(); return d.screen() == "Plan" && n > 0 })
		if !be.planned[0].SkipKarpenter {
			t.Errorf("s planned with %+v, want SkipKarpenter", be.planned[0])
		}
	})
}

func TestPlanScreen(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{}
	d := walk(t, be, "Plan")
	d.golden("plan")

	tests := []struct {
		key   string
		check func(PlanChoice) bool
	}{
		{"+", func(c PlanChoice) bool { return c.WaveSize == "30%" }},
		{"-", func(c PlanChoice) bool { return c.WaveSize == "20%" }},
		{">", func(c PlanChoice) bool { return c.Concurrency == 3 }},
		{"<", func(c PlanChoice) bool { return c.Concurrency == 2 }},
		{"f", func(c PlanChoice) bool { return c.ForceEvict }},
	}
	for _, tc := range tests {
		_, n := be.calls()
		d.press(tc.key)
		d.waitFor("replan after "+tc.key, func() bool { _, m := be.calls(); return m == n+1 && !d.m.cur.(*planScreen).busy })
		if c := be.planned[n]; !tc.check(c) {
			t.Errorf("after %s planned with %+v", tc.key, c)
		}
	}
	first := be.planned[0]
	var blockers []string
	for _, f := range d.m.s.report.Findings {
		if f.Severity == "blocker" {
			blockers = append(blockers, f.ID)
		}
	}
	if !slices.Equal(first.Acknowledged, blockers) || !first.IAM.CreateOIDCProvider || first.Environment != "prod" {
		t.Errorf("the plan did not carry the earlier choices: %+v", first)
	}
	// A blocker stops the start until accepted.
	d.press("enter")
	// One check (readiness's definition of a blocker) on two pods.
	if v := d.m.View(); !strings.Contains(v, "blocker 1/1: emptyDir data lost on eviction (2 pods) · e accepts the loss") || !strings.Contains(v, "1 blocker(s) open: e accepts") {
		t.Fatalf("started with a blocker:\n%s", d.m.View())
	}
	d.press("e")
	d.waitFor("replanned", d.viewHas("emptyDir data loss on"))
	d.press("enter", "enter")
	if d.screen() != "Plan" || strings.Contains(d.m.View(), "[y/N]") {
		t.Fatalf("enter at [y/N] did not decline the start (screen %s):\n%s", d.screen(), d.m.View())
	}
	d.press("enter")
	d.golden("plan_confirm")
	d.press("y")
	d.waitFor("rollout", func() bool { return d.screen() == "Rollout" })
}

func TestStepWaveSize(t *testing.T) {
	tests := []struct {
		in   string
		d    int
		want string
	}{
		{"20%", 1, "30%"}, {"20%", -1, "10%"}, {"10%", -1, "10%"}, {"100%", 1, "100%"}, {"25%", 1, "30%"},
		{"3", 1, "4"}, {"1", -1, "1"}, {"x", 1, "1"}, {"x%", 1, "10%"},
	}
	for _, tc := range tests {
		if got := stepWaveSize(tc.in, tc.d); got != tc.want {
			t.Errorf("stepWaveSize(%q, %d) = %q, want %q", tc.in, tc.d, got, tc.want)
		}
	}
}

// rolloutEvents are what a runner reports in a first wave.
func rolloutEvents() []Update {
	at := func(s int) time.Time { return simStart.Add(time.Duration(s) * time.Second) }
	ev := func(e rollout.Event) Update { return Update{Event: &e} }
	view := func(legacy, karp, ready, pending int) Update {
		return Update{View: &ClusterView{Time: at(0), LegacyNodes: legacy, KarpenterNodes: karp, CostPerHour: 0.1*float64(legacy) + 0.05*float64(karp),
			Workloads:   []WorkloadView{{Name: "api/deployment/web", Ready: ready, Pending: pending}, {Name: "cache/statefulset/redis", Ready: 3}},
			PodWorkload: map[string]string{"api/web-1": "api/deployment/web", "api/web-2": "api/deployment/web", "cache/redis-0": "cache/statefulset/redis"}}}
	}
	return []Update{
		view(5, 0, 4, 0),
		ev(rollout.Event{Time: at(0), Kind: rollout.EventRunStarted, Total: 12, Message: "apply plan 0123456789ab to prod"}),
		ev(rollout.Event{Time: at(1), Kind: rollout.EventStepSkipped, Step: "01_preflight", Done: 1, Total: 12, Message: "nothing blocks"}),
		ev(rollout.Event{Time: at(2), Kind: rollout.EventStepStarted, Step: "10_drain_waves", Done: 9, Total: 12, Message: "drain the waves"}),
		ev(rollout.Event{Time: at(3), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 1, Waves: 2, Phase: rollout.PhaseCordon}),
		ev(rollout.Event{Time: at(4), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 1, Waves: 2, Phase: rollout.PhaseDrain}),
		ev(rollout.Event{Time: at(5), Kind: rollout.EventEviction, Step: "10_drain_waves", Wave: 1, Pod: "api/web-1", Node: "n1", Message: "evicted"}),
		ev(rollout.Event{Time: at(6), Kind: rollout.EventEviction, Step: "10_drain_waves", Wave: 1, Pod: "api/web-2", Node: "n1", Message: "evicted"}),
		ev(rollout.Event{Time: at(7), Kind: rollout.EventPDBWait, Step: "10_drain_waves", Wave: 1, Pod: "cache/redis-0", Node: "n2", PDB: "cache/redis"}),
		ev(rollout.Event{Time: at(8), Kind: rollout.EventWaiting, Step: "10_drain_waves", Wave: 1, Message: "pods Ready", Done: 2, Total: 3}),
		view(5, 2, 2, 2),
	}
}

func TestRolloutScreen(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{applyEvents: rolloutEvents(), block: true}
	d := walk(t, be, "Rollout")
	d.waitFor("the events", d.viewHas("waits on PDB cache/redis"))
	d.golden("rollout_running")
	st := d.m.s.runStats
	if st.cordoned != 3 || st.drained != 0 || st.evicted["api/deployment/web"] != 2 || st.evictedTotal != 2 {
		t.Errorf("stats cordoned %d drained %d evicted %v", st.cordoned, st.drained, st.evicted)
	}
	if be.runChoice[0].AckBlockers {
		t.Error("blockers acknowledged in the run though the plan had none left")
	}

	// p pauses: the run's context is cancelled and the screen says so.
	d.press("p")
	d.waitFor("paused", d.viewHas("Paused"))
	if be.applyCtx.Err() == nil {
		t.Fatal("pause did not cancel the run")
	}
	d.golden("rollout_paused")
	if d.m.s.outcome != OutcomePaused {
		t.Errorf("outcome %s", d.m.s.outcome)
	}

	// r resumes with apply again; it completes.
	be.block = false
	d.press("r")
	d.waitFor("completed", d.viewHas("migration complete"))
	if !slices.Equal(be.runs, []string{"apply", "apply"}) {
		t.Errorf("runs %v, want apply twice", be.runs)
	}
	d.press("enter")
	d.waitFor("done", func() bool { return d.screen() == "Done" })
	d.golden("done")
	d.press("q")
	if !d.quit {
		t.Fatal("q did not quit on the done screen")
	}
	res := d.m.Result()
	if res.Outcome != OutcomeCompleted || len(res.Commands) == 0 || !strings.Contains(strings.Join(res.Commands, "\n"), "apply --plan /out/plan.yaml --dir /out/karpenter --yes") {
		t.Errorf("result %+v", res)
	}
}

func TestRolloutRollback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		running bool
	}{
		{"while running", true},
		{"after a failure", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := &fakeBackend{applyEvents: rolloutEvents(), block: tc.running, applyErr: &rollout.PausedError{Step: "10_drain_waves", Wave: 1, Reason: "gate: 2 pods pending"}}
			d := walk(t, be, "Rollout")
			want := "waits on PDB"
			if !tc.running {
				want = "gate: 2 pods pending"
			}
			d.waitFor(want, d.viewHas(want))
			d.press("b")
			if !strings.Contains(d.m.View(), "Roll back every applied step") {
				t.Fatalf("b did not ask:\n%s", d.m.View())
			}
			if !tc.running {
				d.press("enter")
				if strings.Contains(d.m.View(), "Roll back every applied step") || slices.Contains(be.runs, "rollback") {
					t.Fatalf("enter at [y/N] did not decline the rollback (runs %v):\n%s", be.runs, d.m.View())
				}
				d.press("b")
			}
			d.press("y")
			d.waitFor("rolled back", d.viewHas("rolled back"))
			if !slices.Equal(be.runs, []string{"apply", "rollback"}) {
				t.Errorf("runs %v", be.runs)
			}
			if be.applyCtx.Err() == nil && tc.running {
				t.Error("the apply was not stopped before the rollback")
			}
			if d.m.s.outcome != OutcomeRolledBack {
				t.Errorf("outcome %s", d.m.s.outcome)
			}
		})
	}
}

func TestQuitMidRolloutStopsTheRunFirst(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{applyEvents: rolloutEvents(), block: true}
	d := walk(t, be, "Rollout")
	d.waitFor("running", d.viewHas("waits on PDB"))
	d.press("q")
	d.waitFor("quit", func() bool { return d.quit })
	if be.applyCtx.Err() == nil {
		t.Fatal("quit without stopping the run")
	}
	res := d.m.Result()
	if res.Outcome != OutcomePaused || res.Screen != "Rollout" {
		t.Errorf("result %+v", res)
	}
	joined := strings.Join(res.Commands, "\n")
	if !strings.Contains(joined, "karpenter-migrate apply --plan /out/plan.yaml --dir /out/karpenter --yes --context sandbox --region us-east-1") {
		t.Errorf("the commands do not resume:\n%s", joined)
	}
}

func TestResize(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{applyEvents: rolloutEvents(), block: true}
	d := walk(t, be, "Rollout")
	d.waitFor("running", d.viewHas("waits on PDB"))
	for _, size := range []tea.WindowSizeMsg{{Width: 120, Height: 40}, {Width: 80, Height: 24}, {Width: 60, Height: 20}} {
		d.handle(size)
		d.settle()
		checkFits(t, d.m.View(), size.Width, size.Height)
	}
	d.press("q")
	d.waitFor("quit", func() bool { return d.quit })
}

func TestCommandsBeforeAPlan(t *testing.T) {
	if got := commands(&state{opts: Options{OutDir: "/o"}, outcome: OutcomeQuit}); got != nil {
		t.Errorf("commands before a plan: %v", got)
	}
}

// wavesDone are the events that finish the rollout rolloutEvents starts:
// wave 1 past its drain, wave 2 (one node drained, two kept for the
// controller) with a PDB refusing an eviction until the pod is evicted,
// a final view, the run finished.
func wavesDone() []Update {
	at := func(s int) time.Time { return simStart.Add(time.Duration(s) * time.Second) }
	ev := func(e rollout.Event) Update { return Update{Event: &e} }
	out := rolloutEvents()
	for _, e := range []rollout.Event{
		{Time: at(10), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 1, Waves: 2, Phase: rollout.PhaseDone},
		{Time: at(11), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 2, Waves: 2, Phase: rollout.PhaseCordon},
		{Time: at(12), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 2, Waves: 2, Phase: rollout.PhaseDrain},
		{Time: at(13), Kind: rollout.EventPDBWait, Step: "10_drain_waves", Wave: 2, Pod: "kube-system/coredns-1", Node: "n4", PDB: "kube-system/coredns"},
		{Time: at(14), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 2, Waves: 2, Phase: rollout.PhaseDone},
		{Time: at(15), Kind: rollout.EventStepFinished, Step: "12_cleanup", Done: 12, Total: 12},
		{Time: at(16), Kind: rollout.EventRunFinished, Message: "prod migrated"},
	} {
		out = append(out, ev(e))
	}
	return append(out, Update{View: &ClusterView{Time: at(16), LegacyNodes: 2, KarpenterNodes: 3, CostPerHour: 0.3456}})
}

// TestRolloutCountsWhatItDrains: the counters' total is the nodes the
// waves drain (the controller's kept nodes are not), $/h compares with
// what discover found (the Done screen's before), and a PDB wait is shown
// only while it lasts; the confirmation counts the same nodes, and the
// pods the plan expects step 07 to evict for the controller's room.
func TestRolloutCountsWhatItDrains(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{applyEvents: wavesDone()}
	d := walk(t, be, "Plan")
	d.press("e")
	d.waitFor("replanned", d.viewHas("emptyDir data loss on"))
	d.press("enter")
	if v := d.m.View(); !strings.Contains(strings.Join(strings.Fields(v), " "), "cordons and drains 4 legacy nodes in 2 waves and keeps 2 of group system for the Karpenter controller, evicting 1 pod(s) there first to make room for it") {
		t.Errorf("the confirmation does not count the nodes drained and kept, and the pods evicted for the controller's room:\n%s", v)
	}
	d.press("y")
	d.waitFor("completed", d.viewHas("migration complete"))
	v := d.m.View()
	for _, want := range []string{
		"Nodes cordoned 4/4 · drained 4/4 · kept 2 · pods evicted 2",
		"$/h now 0.3456 (before " + perHour(d.m.s.discoveredCost) + ")",
		"PDB: no eviction waiting",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("the rollout screen lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "PDB: kube-system/coredns-1") {
		t.Errorf("a PDB wait is shown after the run ended:\n%s", v)
	}
}

// TestRollbackAfterAPause: the header counts the steps the rollback
// undid (it reports no step counts: no apply counter is left over), and
// Done says the figures the rollback ended with, its evictions apart.
func TestRollbackAfterAPause(t *testing.T) {
	t.Parallel()
	be := &fakeBackend{applyEvents: rolloutEvents(), block: true}
	d := walk(t, be, "Rollout")
	d.waitFor("running", d.viewHas("waits on PDB"))
	d.press("p")
	d.waitFor("paused", d.viewHas("Paused"))
	d.press("b", "y")
	d.waitFor("rolled back", d.viewHas("✓ rolled back"))
	v := d.m.View()
	if !strings.Contains(v, "Rolled back: 2 step(s) undone") || strings.Contains(v, "9/12") {
		t.Errorf("the header after the rollback:\n%s", v)
	}
	d.press("enter")
	d.waitFor("done", func() bool { return d.screen() == "Done" })
	done := strings.Join(strings.Fields(d.m.View()), " ")
	if !strings.Contains(done, "$/h "+perHour(d.m.s.discoveredCost)+" → 0.6000 · 2 pods evicted by the migration, 0 by the rollback") {
		t.Errorf("Done after the rollback:\n%s", done)
	}
}

// TestCtrlCMidRolloutIsAnInterruption: Ctrl-C stops the run first, like
// q, and the result says it was an interruption (the command exits 130);
// so does SIGTERM from outside the terminal (kill, a CI runner timing
// out), which Bubble Tea's own handler answered by quitting at once with
// exit 0, the rollout left running.
func TestCtrlCMidRolloutIsAnInterruption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		signal    string
		interrupt func(d *driver)
	}{
		{"Ctrl-C", func(d *driver) { d.press("ctrl+c") }},
		{"SIGTERM", func(d *driver) { d.handle(signalMsg{name: "SIGTERM"}) }},
	} {
		t.Run(tc.signal, func(t *testing.T) {
			t.Parallel()
			be := &fakeBackend{applyEvents: rolloutEvents(), block: true}
			d := walk(t, be, "Rollout")
			d.waitFor("running", d.viewHas("waits on PDB"))
			tc.interrupt(d)
			d.waitFor("quit", func() bool { return d.quit })
			if be.applyCtx.Err() == nil {
				t.Fatalf("%s quit without stopping the run", tc.signal)
			}
			if res := d.m.Result(); !res.Interrupted || res.Signal != tc.signal || res.Outcome != OutcomePaused || res.RunErr != nil {
				t.Errorf("result %+v, want a %s interruption of a paused run", res, tc.signal)
			}
		})
	}
}

// TestSandboxCommandsAreTrue: the sandbox ends with the wizard, so after
// a rollout stopped in it no command reaches its cluster: the wizard is
// started again; the Done screen says the commands are for a real cluster.
func TestSandboxCommandsAreTrue(t *testing.T) {
	t.Parallel()
	again := "karpenter-migrate wizard --sandbox --seed 1"
	be := &fakeBackend{applyEvents: rolloutEvents(), block: true}
	d := walkWith(t, Options{Backend: be, Defaults: testDefaults(), Sandbox: true, Again: again}, "Rollout")
	d.waitFor("running", d.viewHas("waits on PDB"))
	d.press("p")
	d.waitFor("paused", d.viewHas("Paused"))
	if v := strings.Join(strings.Fields(d.m.View()), " "); !strings.Contains(v, "q quits: the sandbox, journal included, ends with the wizard") {
		t.Errorf("the paused sandbox rollout says the journal is kept:\n%s", v)
	}
	d.press("q")
	d.waitFor("quit", func() bool { return d.quit })
	joined := strings.Join(d.m.Result().Commands, "\n")
	if strings.Contains(joined, "status --env") || strings.Contains(joined, "apply --plan") || !strings.Contains(joined, again) {
		t.Errorf("commands after the sandbox's rollout stopped:\n%s", joined)
	}

	s := d.m.s
	s.outcome = OutcomeCompleted
	if done := summary(s, 200); !strings.Contains(done, "The sandbox lived in this process only") || strings.Contains(done, "Repeat it from CI") {
		t.Errorf("Done in the sandbox:\n%s", done)
	}
}

// TestCommandsCarryEveryChoice: each choice made on a screen is a flag of
// the commands the wizard prints (the config file carries the plan
// screen's budget, exclusions and acknowledgements).
func TestCommandsCarryEveryChoice(t *testing.T) {
	s := &state{opts: Options{OutDir: "/o", KarpenterChart: "./chart"}, outcome: OutcomeCompleted, plan: &PlanResult{Plan: testPlan()},
		conn:    Connection{Context: "prod-ctx", Cluster: "shop", Profile: "ops", Region: "eu-west-1", Environment: "prod"},
		gen:     GenerateChoice{Strategy: generate.StrategySingle, Flexibility: generate.FlexibilitySimilar, Envs: []string{"prod"}},
		iamOpts: IAMChoice{Identity: "irsa", CreateOIDCProvider: true}, iamDone: true, run: RunChoice{AckBlockers: true}}
	got := commands(s)
	want := map[string][]string{
		"discover":  {"--cluster shop", "--context prod-ctx", "--region eu-west-1", "--profile ops"},
		"generate":  {"--strategy single", "--flexibility similar", "--envs prod"},
		"iam apply": {"--identity irsa", "--create-oidc-provider", "--context prod-ctx"},
		"plan":      {"--env prod", "--config /o/prod.yaml", "--identity irsa", "--create-oidc-provider", "--karpenter-chart ./chart"},
		"apply":     {"--ack-blockers", "--context prod-ctx"},
	}
	for verb, flags := range want {
		i := slices.IndexFunc(got, func(c string) bool { return strings.HasPrefix(c, "karpenter-migrate "+verb+" ") })
		if i < 0 {
			t.Errorf("no %s command in:\n%s", verb, strings.Join(got, "\n"))
			continue
		}
		for _, f := range flags {
			if !strings.Contains(got[i]+" ", " "+f+" ") {
				t.Errorf("%s lacks %s: %s", verb, f, got[i])
			}
		}
	}
}
