package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// progress shows the steps of a discovery on w: a bubbles spinner beside
// the current step on a terminal, one plain line per step otherwise, or one
// slog event per step with --log-format json; then how long it took.
type progress struct {
	w      io.Writer
	tty    bool
	log    *slog.Logger // set: JSON events instead of lines or a spinner
	start  time.Time
	p      *tea.Program
	exited chan struct{}
	// interrupted runs when the user interrupts the spinner (Ctrl-C); by
	// default the process exits with 130, as it would without the spinner.
	interrupted func()
}

func newProgress(w io.Writer, tty bool) *progress {
	return &progress{w: w, tty: tty, start: time.Now(), interrupted: func() { os.Exit(130) }}
}

// newProgress shows a discovery's progress on stderr as --log-format asks:
// JSON events through the command's logger, else lines or a spinner.
func (g *GlobalOptions) newProgress() *progress {
	pr := newProgress(g.IO.ErrOut, g.IO.IsStdoutTTY())
	pr.log = g.jsonLogger()
	return pr
}

// cancelOnInterrupt makes Ctrl-C cancel the work instead of exiting. Call
// it before the first step.
func (pr *progress) cancelOnInterrupt(cancel context.CancelFunc) { pr.interrupted = cancel }

// step reports that a step started; on a terminal the first one starts the
// spinner.
func (pr *progress) step(s string) {
	if pr.log != nil {
		pr.log.Info("reading "+s, "event", eventDiscoverStep, "source", s)
		return
	}
	if !pr.tty {
		fmt.Fprintf(pr.w, "reading %s\n", s)
		return
	}
	if pr.p == nil {
		pr.p = tea.NewProgram(newStepsModel(), tea.WithInput(nil), tea.WithOutput(pr.w))
		pr.exited = make(chan struct{})
		interrupted := pr.interrupted
		go func() {
			defer close(pr.exited)
			if _, err := pr.p.Run(); errors.Is(err, tea.ErrInterrupted) {
				interrupted()
			}
		}()
	}
	pr.p.Send(stepMsg(s))
}

// finish ends the display (marking the current step failed when err is set)
// and prints how long the run took.
func (pr *progress) finish(err error) {
	if pr.p != nil {
		pr.p.Send(stepsDoneMsg{err: err})
		<-pr.exited
	}
	took := time.Since(pr.start).Round(time.Millisecond)
	if pr.log != nil {
		if err != nil {
			pr.log.Error("discovery failed after "+took.String(), "event", eventDiscoverDone, "duration", took.String(), "error", err.Error())
			return
		}
		pr.log.Info("discovery took "+took.String(), "event", eventDiscoverDone, "duration", took.String())
		return
	}
	fmt.Fprintf(pr.w, "discovery took %s\n", took)
}

type stepMsg string

type stepsDoneMsg struct{ err error }

// stepsModel lists the steps started so far: done ones ticked, the current
// one with a spinner.
type stepsModel struct {
	steps   []string
	spinner spinner.Model
	done    bool
	failed  bool
}

var (
	stepDoneStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	stepFailedStyle = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
)

func newStepsModel() *stepsModel {
	return &stepsModel{spinner: spinner.New(spinner.WithSpinner(spinner.Dot))}
}

func (m *stepsModel) Init() tea.Cmd { return m.spinner.Tick }

func (m *stepsModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case stepMsg:
		m.steps = append(m.steps, string(msg))
	case stepsDoneMsg:
		m.done, m.failed = true, msg.err != nil
		return m, tea.Quit
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spinner, cmd = m.spinner.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m *stepsModel) View() string {
	var b strings.Builder
	for i, s := range m.steps {
		switch {
		case i < len(m.steps)-1 || (m.done && !m.failed):
			fmt.Fprintf(&b, "%s read %s\n", stepDoneStyle.Render("✓"), s)
		case m.failed:
			fmt.Fprintf(&b, "%s reading %s failed\n", stepFailedStyle.Render("✗"), s)
		default:
			fmt.Fprintf(&b, "%s reading %s…\n", m.spinner.View(), s)
		}
	}
	return b.String()
}
