package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// readinessScreen lists the findings grouped by severity; each expands to
// its objects, why it matters and the fix. Every blocker must be resolved
// (fix it, then re-check) or acknowledged before moving on.
type readinessScreen struct {
	s        *state
	cursor   int
	expanded map[int]bool
	vp       viewport.Model
	ch       <-chan tea.Msg
	checking bool
	warn     string
}

type recheckedMsg discoveredMsg

func newReadiness(s *state) screen {
	r := &readinessScreen{s: s, expanded: map[int]bool{}, vp: viewport.New(80, 10)}
	r.evaluate()
	return r
}

var keyRecheck = key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "recheck"))

func (r *readinessScreen) title() string { return "Readiness" }
func (r *readinessScreen) init() tea.Cmd { return nil }

func (r *readinessScreen) help() []key.Binding {
	return []key.Binding{keyUp, keyExpand, keyAck, keyRecheck, keyNext}
}

func (r *readinessScreen) evaluate() {
	r.s.report = r.s.be.Readiness(r.s.inv)
	r.cursor = min(r.cursor, max(0, len(r.s.report.Findings)-1))
	r.render()
}

// open are the blockers neither resolved nor acknowledged.
func (r *readinessScreen) open() []string {
	var out []string
	for _, f := range r.s.report.Findings {
		if f.Severity == readiness.Blocker && !r.s.acked[f.ID] {
			out = append(out, f.ID)
		}
	}
	return out
}

func (r *readinessScreen) update(msg tea.Msg) tea.Cmd {
	findings := r.s.report.Findings
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		r.vp.Width, r.vp.Height = msg.Width, max(3, msg.Height-3)
		r.render()
	case discoverStageMsg:
		return listen(r.ch)
	case recheckedMsg:
		r.checking = false
		if msg.err != nil {
			r.warn = "re-discovery failed: " + msg.err.Error()
		} else {
			r.s.inv = msg.inv
			r.evaluate()
		}
	case tea.KeyMsg:
		if r.checking {
			return nil
		}
		r.warn = ""
		switch {
		case key.Matches(msg, keyUp):
			r.cursor = max(0, r.cursor-1)
		case key.Matches(msg, keyDown):
			r.cursor = min(len(findings)-1, r.cursor+1)
		case key.Matches(msg, keyExpand):
			r.expanded[r.cursor] = !r.expanded[r.cursor]
		case key.Matches(msg, keyAck):
			if r.cursor < len(findings) && findings[r.cursor].Severity == readiness.Blocker {
				id := findings[r.cursor].ID
				r.s.acked[id] = !r.s.acked[id]
			} else {
				r.warn = "only blockers need acknowledging"
			}
		case key.Matches(msg, keyRecheck):
			r.checking = true
			be, ctx := r.s.be, r.s.ctx
			var cmd tea.Cmd
			r.ch, cmd = stream(func(send func(tea.Msg)) tea.Msg {
				inv, err := be.Discover(ctx, func(s string) { send(discoverStageMsg(s)) })
				return recheckedMsg{inv: inv, err: err}
			})
			r.render()
			return cmd
		case key.Matches(msg, keyNext):
			if open := r.open(); len(open) > 0 {
				r.warn = fmt.Sprintf("resolve or acknowledge (a) the blockers first: %s", strings.Join(open, ", "))
				break
			}
			return next
		default:
			var cmd tea.Cmd
			r.vp, cmd = r.vp.Update(msg)
			return cmd
		}
		r.render()
	}
	return nil
}

// render lays the findings out in the viewport and keeps the cursor in view.
func (r *readinessScreen) render() {
	st := r.s.st
	var b strings.Builder
	line, cursorLine := 0, 0
	write := func(s string) {
		b.WriteString(s + "\n")
		line++
	}
	var last readiness.Severity
	for i, f := range r.s.report.Findings {
		if f.Severity != last {
			if last != "" {
				write("")
			}
			last = f.Severity
			write(st.key.Render(strings.ToUpper(string(f.Severity)) + "S"))
		}
		mark := "▸"
		if r.expanded[i] {
			mark = "▾"
		}
		// The status comes first so a long title cut at the screen's
		// width never hides it.
		status := ""
		switch {
		case f.Severity == readiness.Blocker && r.s.acked[f.ID]:
			status = st.warn.Render("[acknowledged] ")
		case f.Severity == readiness.Blocker:
			status = st.bad.Render("[open] ")
		}
		text := fmt.Sprintf("%s (%d)", f.Title, len(f.Objects))
		if i == r.cursor {
			cursorLine = line
			text = st.sel.Render(text)
		}
		write("  " + mark + " " + status + text)
		if r.expanded[i] {
			wrap := lipgloss.NewStyle().Width(max(20, r.vp.Width-6))
			for _, o := range f.Objects {
				write("      - " + o)
			}
			for _, l := range strings.Split(wrap.Render("why: "+f.Why), "\n") {
				write("      " + l)
			}
			for _, l := range strings.Split(wrap.Render("fix: "+f.Fix), "\n") {
				write("      " + l)
			}
			write(st.dim.Render("      id: " + f.ID))
		}
	}
	if len(r.s.report.Findings) == 0 {
		write(st.ok.Render("No findings: nothing blocks or endangers the move."))
	}
	r.vp.SetContent(b.String())
	if cursorLine < r.vp.YOffset {
		r.vp.SetYOffset(cursorLine)
	} else if cursorLine >= r.vp.YOffset+r.vp.Height {
		r.vp.SetYOffset(cursorLine - r.vp.Height + 1)
	}
}

func (r *readinessScreen) view(_, _ int) string {
	st := r.s.st
	rep := r.s.report
	open := r.open()
	head := fmt.Sprintf("%d blocker(s), %d warning(s) in %d findings", rep.Blockers, rep.Warnings, len(rep.Findings))
	if len(open) == 0 {
		head += st.ok.Render(" · nothing open")
	} else {
		head += st.bad.Render(fmt.Sprintf(" · %d open", len(open)))
	}
	foot := ""
	switch {
	case r.checking:
		foot = "re-discovering the cluster…"
	case r.warn != "":
		foot = st.bad.Render(r.warn)
	}
	return head + "\n\n" + r.vp.View() + "\n" + foot
}
