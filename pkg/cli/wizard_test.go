package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui"
)

func TestWizardRefusals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no terminal", []string{"wizard", "--sandbox"}, []string{"needs an interactive terminal", "karpenter-migrate discover --cluster", "karpenter-migrate apply --plan plan.yaml", "karpenter-migrate demo"}},
		{"no terminal, live", []string{"wizard", "--context", "prod"}, []string{"needs an interactive terminal"}},
		{"snapshot without sandbox", []string{"wizard", "--snapshot", "snapshot.json"}, []string{"--snapshot needs --sandbox"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := run(t, tc.args...)
			if code == 0 {
				t.Fatal("the wizard started without a terminal")
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestWizardHelpHasExamples(t *testing.T) {
	out, _, code := run(t, "wizard", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "wizard --sandbox") {
		t.Errorf("help (exit %d):\n%s", code, out)
	}
}

// TestWizardCommandsReplay: the commands the wizard prints carry every
// choice made on its screens. The wizard runs on a sandbox to its plan
// (the OIDC provider switched on and applied, emptyDir and forced
// evictions accepted, one node at a time, blockers acknowledged), then its
// commands run through the cobra root on a fresh sandbox: each succeeds
// (iam apply creates the OIDC provider instead of refusing, apply's
// preflight, as --dry-run, passes) and the plan they write is the
// wizard's.
func TestWizardCommandsReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the wizard and its commands on two sandboxes; skipped with -short")
	}
	ctx := context.Background()
	wsb, err := tui.NewSandbox(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wsb.Close)
	dir := t.TempDir()
	ops := &tui.Ops{Dial: wsb.Dial, OutDir: dir, Namespace: "karpenter-migrate", Operator: "test"}
	m := tui.New(ctx, tui.Options{Backend: ops, Defaults: wsb.Defaults(), OutDir: dir, Namespace: "karpenter-migrate", Sandbox: true, Width: 100, Height: 30})
	// A program on no terminal: the keys are sent, the frames it renders
	// are read as they come.
	var out syncBuffer
	p := tea.NewProgram(m, tea.WithInput(nil), tea.WithOutput(&out), tea.WithoutSignalHandler())
	finished := make(chan tea.Model, 1)
	go func() {
		fm, err := p.Run()
		if err != nil {
			t.Errorf("wizard: %v", err)
		}
		finished <- fm
	}()
	p.Send(tea.WindowSizeMsg{Width: 100, Height: 30})
	see := func(s string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !out.has(s) {
			if time.Now().After(deadline) {
				p.Kill()
				t.Fatalf("the wizard never showed %q; last output:\n%s", s, out.tail(2000))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	keys := func(ks ...string) {
		for _, k := range ks {
			msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
			switch k {
			case "enter":
				msg = tea.KeyMsg{Type: tea.KeyEnter}
			case "down":
				msg = tea.KeyMsg{Type: tea.KeyDown}
			}
			p.Send(msg)
		}
	}
	see("Kubeconfig context")
	keys("enter", "enter", "enter", "enter", "enter")
	see("Snapshot written")
	keys("enter")
	see("Readiness")
	snap, err := inventory.ReadSnapshotFile(filepath.Join(dir, tui.SnapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ops.Readiness(&snap.Inventory).Findings {
		if f.Severity == "blocker" {
			keys("a")
		}
		keys("down")
	}
	keys("enter")
	see("How should the node groups become NodePools")
	keys("enter")
	see("files:")
	keys("w")
	see("Every overlay built")
	keys("enter")
	see("to change")
	keys("o")
	see("create OIDC provider")
	keys("a")
	see("[y/N]")
	keys("y")
	see("journal karpenter-migrate-iam-demo")
	keys("c")
	see("Karpenter is not installed")
	keys("c")
	see("after consolidation")
	keys("e")
	see("emptyDir data loss on")
	keys("f")
	see("force evictions on")
	keys("<")
	see("1 drained at once")
	keys("a")
	see("blockers acknowledged on")
	keys("q")
	var res tui.Result
	select {
	case fm := <-finished:
		res = fm.(*tui.Model).Result()
	case <-time.After(time.Minute):
		p.Kill()
		t.Fatal("the wizard did not quit on q")
	}
	if res.Err != nil || len(res.Commands) == 0 {
		t.Fatalf("the wizard ended with %v and no commands: %+v", res.Err, res)
	}
	wizardPlan, err := plan.ReadPlanFile(filepath.Join(dir, tui.PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	wizardYAML, err := wizardPlan.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	// The commands on a fresh sandbox (they rewrite the wizard's files).
	sb, err := tui.NewSandbox(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	cl, _, cancel := sb.SB.Clients(ctx)
	t.Cleanup(cancel)
	c := action.ForSandbox(cl, "karpenter-migrate", dir, "test")
	configure := func(action.Live) (*action.Configuration, error) { return c, nil }
	for _, line := range res.Commands {
		line, _, _ = strings.Cut(line, "#")
		args := strings.Fields(line)
		if len(args) < 2 || args[0] != "karpenter-migrate" {
			t.Fatalf("not a command: %q", line)
		}
		args = args[1:]
		if args[0] == "apply" {
			args = append(args, "--dry-run")
		}
		if r := runInjected(t, configure, args...); r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", line, r.code, r.out, r.errOut)
		}
	}
	replayed, err := plan.ReadPlanFile(filepath.Join(dir, tui.PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	if replayed.Hash != wizardPlan.Hash {
		replayedYAML, err := replayed.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var diff []string
		w, r := strings.Split(string(wizardYAML), "\n"), strings.Split(string(replayedYAML), "\n")
		for i := 0; i < max(len(w), len(r)) && len(diff) < 20; i++ {
			wl, rl := "", ""
			if i < len(w) {
				wl = w[i]
			}
			if i < len(r) {
				rl = r[i]
			}
			if wl != rl {
				diff = append(diff, fmt.Sprintf("line %d: wizard %q, commands %q", i+1, wl, rl))
			}
		}
		t.Errorf("the commands planned %s, the wizard %s:\n%s", replayed.Hash, wizardPlan.Hash, strings.Join(diff, "\n"))
	}
}

// TestWizardExitCodes: the wizard exits as the commands it stands for:
// Ctrl-C 130 (whatever the run did), a rollout left paused 4 (by a gate
// or the user), a failed one 1, anything finished 0.
func TestWizardExitCodes(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		res  tui.Result
		err  error
		want int
	}{
		{"completed", tui.Result{Outcome: tui.OutcomeCompleted}, nil, 0},
		{"rolled back", tui.Result{Outcome: tui.OutcomeRolledBack}, nil, 0},
		{"quit before the rollout", tui.Result{Outcome: tui.OutcomeQuit}, nil, 0},
		{"Ctrl-C mid-rollout", tui.Result{Outcome: tui.OutcomePaused, Interrupted: true}, nil, ExitInterrupted},
		{"Ctrl-C on a screen", tui.Result{Outcome: tui.OutcomeQuit, Interrupted: true}, nil, ExitInterrupted},
		{"SIGINT", tui.Result{Outcome: tui.OutcomeQuit, Interrupted: true}, errors.New("wizard: program was interrupted"), ExitInterrupted},
		{"paused by the user", tui.Result{Outcome: tui.OutcomePaused}, nil, ExitPaused},
		{"paused by a gate", tui.Result{Outcome: tui.OutcomePaused, RunErr: &rollout.PausedError{Step: "10_drain_waves", Reason: "gate"}}, nil, ExitPaused},
		{"failed", tui.Result{Outcome: tui.OutcomePaused, RunErr: boom}, nil, 1},
		{"the wizard failed", tui.Result{Outcome: tui.OutcomeQuit}, boom, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, _, _ := iostreams.Test()
			g := &GlobalOptions{IO: streams}
			if got := g.exit(wizardExit(tc.res, tc.err)); got != tc.want {
				t.Errorf("exit %d, want %d", got, tc.want)
			}
		})
	}
}

// syncBuffer is a program's output, read while it writes: has reports
// whether s was written since the last time it was found.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	from int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := bytes.Index(b.b.Bytes()[b.from:], []byte(s))
	if i < 0 {
		return false
	}
	b.from += i + len(s)
	return true
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := b.b.Bytes()
	return string(all[max(0, len(all)-n):])
}
