package tui

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// karpenterScreen shows what the runbook's Karpenter step will do with the
// release the plan records (action.KarpenterCheck, read as the step's
// Check reads it): install it, upgrade this tool's release, nothing (ours
// as planned, or someone else's that agrees with the plan: left alone), or
// refuse, listing each field of a foreign installation that contradicts
// the plan. Skip leaves Karpenter to the user (plan --skip-karpenter).
type karpenterScreen struct {
	s    *state
	spin spinner.Model
	busy bool
	err  error
	vp   viewport.Model
	doc  bool
}

// KarpenterResult is the release the plan would install and what the
// Karpenter step finds in the cluster for it.
type KarpenterResult struct {
	Release *plan.PlanKarpenter
	State   *migrations.KarpenterState
}

type karpenterCheckedMsg struct {
	res *KarpenterResult
	err error
}

func newKarpenter(s *state) screen {
	s.skipKarpenter = false
	return &karpenterScreen{s: s, spin: progress.NewSpinner(), vp: viewport.New(80, 10)}
}

func (m *karpenterScreen) title() string { return "Karpenter" }

func (m *karpenterScreen) init() tea.Cmd {
	m.busy, m.err = true, nil
	be, ctx, inv, c := m.s.be, m.s.ctx, m.s.inv, planChoice(m.s)
	return tea.Batch(m.spin.Tick, func() tea.Msg {
		res, err := be.Karpenter(ctx, inv, c)
		return karpenterCheckedMsg{res: res, err: err}
	})
}

var (
	keyValues     = key.NewBinding(key.WithKeys("v", "enter"), key.WithHelp("v", "values"))
	keyLeaveToMe  = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "skip: I install Karpenter"))
	keyKarpenterC = key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "continue"))
)

// proceeds says the step can run as planned: the rollout may go on.
func (m *karpenterScreen) proceeds() bool {
	r := m.s.karpenter
	return m.err == nil && r != nil && r.State != nil && len(r.State.Mismatches) == 0 && r.State.Problem == ""
}

func (m *karpenterScreen) help() []key.Binding {
	switch {
	case m.busy:
		return nil
	case m.doc:
		return []key.Binding{keyScroll, keyBack}
	case m.proceeds():
		return []key.Binding{keyValues, keyRecheck, keyLeaveToMe, keyKarpenterC}
	case m.s.karpenter != nil:
		return []key.Binding{keyValues, keyRecheck, keyLeaveToMe}
	}
	return []key.Binding{keyRecheck, keyLeaveToMe}
}

func (m *karpenterScreen) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.vp.Width, m.vp.Height = msg.Width, max(3, msg.Height-1)
	case karpenterCheckedMsg:
		m.busy, m.err = false, msg.err
		if msg.err == nil {
			m.s.karpenter = msg.res
		}
	case spinner.TickMsg:
		if !m.busy {
			return nil
		}
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		return m.key(msg)
	}
	return nil
}

func (m *karpenterScreen) key(msg tea.KeyMsg) tea.Cmd {
	if m.busy {
		return nil
	}
	switch {
	case m.doc:
		if key.Matches(msg, keyBack) {
			m.doc = false
			return nil
		}
		var cmd tea.Cmd
		m.vp, cmd = m.vp.Update(msg)
		return cmd
	case key.Matches(msg, keyRecheck):
		return m.init()
	case key.Matches(msg, keyLeaveToMe):
		m.s.skipKarpenter = true
		return next
	case key.Matches(msg, keyKarpenterC) && m.proceeds():
		return next
	case key.Matches(msg, keyValues) && m.s.karpenter != nil:
		m.showValues()
	}
	return nil
}

// showValues shows the planned values, and the diff against the
// installed release's when there is one.
func (m *karpenterScreen) showValues() {
	r := m.s.karpenter
	var b strings.Builder
	fmt.Fprintf(&b, "values of %s (%s)\n", r.Release, cmp.Or(r.Release.ValuesFrom, "generate's Helm values"))
	if rel := r.State.Release; rel != nil {
		if d := migrations.ValuesDiff(rel.Values, r.Release.Values); d != "" {
			b.WriteString(d)
		} else {
			b.WriteString("(the same as the installed release's)\n")
		}
	} else if y, err := yaml.Marshal(r.Release.Values); err == nil {
		b.Write(y)
	}
	m.vp.SetContent(b.String())
	m.vp.GotoTop()
	m.doc = true
}

func (m *karpenterScreen) view(width, _ int) string {
	st := m.s.st
	if m.doc {
		return m.vp.View()
	}
	var b strings.Builder
	r := m.s.karpenter
	switch {
	case m.busy:
		fmt.Fprintf(&b, "%s reading the Helm release and the running Karpenter controller…\n", m.spin.View())
	case m.err != nil:
		b.WriteString(st.bad.Width(width).Render("✗ "+m.err.Error()) + "\n")
		b.WriteString(st.dim.Width(width).Render("r checks again; s leaves installing Karpenter to you (the plan skips step 07).") + "\n")
		return b.String()
	}
	if r == nil || r.State == nil {
		return b.String()
	}
	k, ks := r.Release, r.State
	fmt.Fprintf(&b, "Helm release  %s/%s\nchart         %s %s\nvalues        %s\n\n", k.Namespace, k.Release, k.Chart, k.Version, cmp.Or(k.ValuesFrom, "generate's Helm values"))
	wrap := lipgloss.NewStyle().Width(width).Render
	switch ks.Verdict() {
	case "install":
		b.WriteString(st.ok.Render("✓ Karpenter is not installed") + "\n")
		b.WriteString(wrap("Step 07 installs it: helm upgrade --install (atomic: a failure is rolled back) and waits for the controller to be Ready. Rollback uninstalls it once its nodes are gone.") + "\n")
	case "upgrade":
		fmt.Fprintf(&b, "%s\n", st.warn.Render(fmt.Sprintf("↑ installed by this tool: chart %s %s, revision %d", ks.Release.Chart, ks.Release.Version, ks.Release.Revision)))
		b.WriteString(wrap("Step 07 upgrades it to the plan's version and values (v shows the diff).") + "\n")
	case "installed":
		fmt.Fprintf(&b, "%s\n", st.ok.Render(fmt.Sprintf("✓ already installed by this tool as planned (revision %d)", ks.Release.Revision)))
		b.WriteString(wrap("Step 07 has nothing to do.") + "\n")
	case "left alone":
		b.WriteString(st.ok.Render("✓ already installed by someone else, and it agrees with the plan") + "\n")
		b.WriteString(wrap(ks.Source+": step 07 and rollback leave it alone.") + "\n")
	case "mismatch":
		b.WriteString(st.bad.Render("✗ installed by someone else, and it contradicts the plan") + "\n")
		b.WriteString(wrap(ks.Source+":") + "\n")
		for _, f := range ks.Mismatches {
			// Each field a bullet, its wrapped lines indented under it.
			lines := strings.Split(st.bad.Width(max(10, width-4)).Render(f), "\n")
			b.WriteString("  • " + strings.Join(lines, "\n    ") + "\n")
		}
		b.WriteString(st.dim.Width(width).Render("Step 07 would stop the rollout here. Fix the installation (or the plan), then r checks again; or s leaves Karpenter to you.") + "\n")
	case "blocked":
		b.WriteString(st.bad.Width(width).Render("✗ "+ks.Problem) + "\n")
		b.WriteString(st.dim.Width(width).Render("r checks again once fixed; or s leaves Karpenter to you.") + "\n")
	}
	return b.String()
}
