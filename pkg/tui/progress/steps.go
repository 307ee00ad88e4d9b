// Package progress is the one presentation of a run's progress, shared by
// the CLI (discover, demo) and the wizard: Steps lists a run's steps, each
// with a spinner while it runs, a mark once it ends and a bar where its
// progress is measured; Show runs it on a terminal beside the work; Counter
// is the bar of a run's steps done; Waves is a plan's waves as a table.
// Off a terminal the commands print plain lines instead.
package progress

import (
	"fmt"
	"strings"
	"text/tabwriter"

	bar "github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// Status is where a step is.
type Status string

// Step statuses.
const (
	Running Status = "running"
	Done    Status = "done"
	Failed  Status = "failed"
	Skipped Status = "skipped"
)

// Event reports a step: the first one for a step adds it to the list, the
// next ones move it on.
type Event struct {
	Step   string
	Status Status
	// Message, when not empty, replaces the step's detail.
	Message string
	// Progress is 0..1 where measured (a wave's evictions), negative where
	// not; a step measured once while running shows a bar.
	Progress float64
}

var (
	styleDone   = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleFailed = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	styleDim    = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
)

// NewSpinner is the spinner of a step that runs.
func NewSpinner() spinner.Model { return spinner.New(spinner.WithSpinner(spinner.Dot)) }

// NewBar is the bar of a measured step and of Counter.
func NewBar() bar.Model {
	return bar.New(bar.WithWidth(30), bar.WithoutPercentage(), bar.WithSolidFill("12"))
}

type step struct {
	id       string
	status   Status
	msg      string
	progress float64
	measured bool
}

// Steps is a bubbletea component: the steps reported so far, in the order
// they started. Send it Events and the spinner's ticks (Init starts them).
type Steps struct {
	steps []*step
	index map[string]*step
	spin  spinner.Model
	bar   bar.Model
}

// NewSteps is an empty list.
func NewSteps() *Steps {
	return &Steps{index: map[string]*step{}, spin: NewSpinner(), bar: NewBar()}
}

// Init starts the spinner.
func (s *Steps) Init() tea.Cmd { return s.spin.Tick }

// Update takes an Event or a spinner tick.
func (s *Steps) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case Event:
		s.Set(msg)
	case spinner.TickMsg:
		var cmd tea.Cmd
		s.spin, cmd = s.spin.Update(msg)
		return cmd
	}
	return nil
}

// Set records e.
func (s *Steps) Set(e Event) {
	st, ok := s.index[e.Step]
	if !ok {
		st = &step{id: e.Step}
		s.index[e.Step] = st
		s.steps = append(s.steps, st)
	}
	st.status = e.Status
	if e.Message != "" {
		st.msg = e.Message
	}
	if e.Progress >= 0 {
		st.progress = e.Progress
		st.measured = st.measured || e.Status == Running
	}
}

// Finish marks the steps still running done, or failed when the run
// failed: the display's last frame says how the run ended.
func (s *Steps) Finish(failed bool) {
	for _, st := range s.steps {
		if st.status == Running {
			st.status = Done
			if failed {
				st.status = Failed
			}
		}
	}
}

// View is one line per step: its mark (spinner, ✓, ✗ or –), its name,
// its bar where measured, and its detail.
func (s *Steps) View() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, st := range s.steps {
		mark := s.spin.View()
		switch st.status {
		case Done:
			mark = styleDone.Render("✓")
		case Failed:
			mark = styleFailed.Render("✗")
		case Skipped:
			mark = styleDim.Render("–")
		}
		extra := styleDim.Render(st.msg)
		if st.measured {
			extra = s.bar.ViewAs(st.progress) + "  " + extra
		}
		fmt.Fprintf(tw, "%s %s\t%s\n", mark, st.id, extra)
	}
	_ = tw.Flush()
	return b.String()
}

// Stages turns a run that only says which stage starts (discover's) into
// Events on send: a stage starts, the one before it is done.
func Stages(send func(Event)) func(stage string) {
	prev := ""
	return func(stage string) {
		if prev != "" {
			send(Event{Step: prev, Status: Done, Progress: -1})
		}
		prev = stage
		send(Event{Step: stage, Status: Running, Progress: -1})
	}
}

// Counter is the line of a run's steps: the current one, a bar of those
// done, and done/total.
func Counter(b bar.Model, current string, done, total int) string {
	pct := 0.0
	if total > 0 {
		pct = float64(done) / float64(total)
	}
	return fmt.Sprintf("Step %-24s %s %d/%d", current, b.ViewAs(pct), done, total)
}
