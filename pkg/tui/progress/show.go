package progress

import (
	"context"
	"errors"
	"fmt"
	"io"

	tea "github.com/charmbracelet/bubbletea"
)

// ErrInterrupted is the cause Show cancels the work with when the user
// presses Ctrl-C in the display.
var ErrInterrupted = errors.New("interrupted")

// Show runs work while a Steps program shows the events it sends on out,
// reading keys from in (nil: none; Ctrl-C then arrives as SIGINT). Ctrl-C
// cancels work's context with ErrInterrupted as its cause, and the work
// does not outlive the display: Show returns once work has, with work's
// error (wrapping ErrInterrupted when the user stopped it) or the
// display's.
func Show(ctx context.Context, in io.Reader, out io.Writer, work func(ctx context.Context, send func(Event)) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p := tea.NewProgram(&program{steps: NewSteps()}, tea.WithInput(in), tea.WithOutput(out), tea.WithContext(ctx))
	var workErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		workErr = work(ctx, func(e Event) { p.Send(e) })
		p.Send(finishedMsg{failed: workErr != nil})
	}()
	_, displayErr := p.Run()
	if errors.Is(displayErr, tea.ErrInterrupted) {
		cancel(ErrInterrupted)
	}
	// stopped is nil unless Ctrl-C or the caller stopped the work.
	stopped := context.Cause(ctx)
	cancel(errors.New("the progress display ended"))
	<-finished
	switch {
	case errors.Is(stopped, ErrInterrupted) && workErr != nil:
		return fmt.Errorf("%w: %w", ErrInterrupted, workErr)
	case errors.Is(stopped, ErrInterrupted):
		return ErrInterrupted
	case displayErr != nil && stopped == nil:
		return fmt.Errorf("progress display: %w", displayErr)
	}
	return workErr
}

type finishedMsg struct{ failed bool }

// program is Steps as a whole program: it ends when the work does, or on
// Ctrl-C.
type program struct{ steps *Steps }

func (m *program) Init() tea.Cmd { return m.steps.Init() }

func (m *program) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case finishedMsg:
		m.steps.Finish(msg.failed)
		return m, tea.Quit
	case tea.KeyMsg:
		if msg.String() == "ctrl+c" {
			return m, tea.Interrupt
		}
		return m, nil
	}
	return m, m.steps.Update(msg)
}

func (m *program) View() string { return m.steps.View() }
