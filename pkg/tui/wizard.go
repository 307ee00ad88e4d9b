package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// Options configure a wizard.
type Options struct {
	Backend  Backend
	Defaults Defaults
	// OutDir is where the backend writes; the done screen's commands use it.
	OutDir string
	// Namespace is the tool's namespace, for the commands shown.
	Namespace string
	// Sandbox says the backend is the embedded sandbox (shown in the
	// header): it ends with the wizard, so no command resumes a rollout
	// stopped in it.
	Sandbox bool
	// Again is the command line that starts this wizard again, offered
	// instead of resuming when the sandbox ended part-way.
	Again string
	// KarpenterChart is the chart step 07 installs (the backend's), for
	// the commands shown; empty: the official chart.
	KarpenterChart string
	// Color false renders plain text (NO_COLOR, TERM=dumb, --no-color).
	Color bool
	// Width and Height are the initial size until the terminal reports
	// its own (tests fix them).
	Width, Height int
}

// Outcome is how a wizard run ended.
type Outcome string

// Outcomes.
const (
	OutcomeQuit       Outcome = "quit"
	OutcomePaused     Outcome = "paused"
	OutcomeCompleted  Outcome = "completed"
	OutcomeRolledBack Outcome = "rolled-back"
)

// Result is what the wizard did, for the command to print after the
// terminal is restored.
type Result struct {
	Outcome Outcome
	// Screen is the title of the screen the user left on.
	Screen string
	// Commands are the commands that continue or repeat the migration.
	Commands []string
	// Interrupted says Ctrl-C, SIGINT or SIGTERM ended the wizard (a
	// running rollout first stopped after the evictions in flight, as
	// apply's does); Signal names it.
	Interrupted bool
	Signal      string
	// RunErr is what stopped the rollout when it ended paused: a
	// *rollout.PausedError (a gate or a wait), another failure, or nil
	// when the user paused it.
	RunErr error
	// Err is a failure that ended the wizard.
	Err error
}

// state is what the screens decide and share, in screen order.
type state struct {
	ctx  context.Context
	be   Backend
	st   styles
	opts Options
	conn Connection
	info ConnectInfo
	inv  *inventory.Inventory
	// discoveredCost is the $/h of the discovered nodes, the "before" of
	// the Done screen.
	discoveredCost float64
	exclude        map[string]bool
	report         readiness.Report
	acked          map[string]bool
	gen            GenerateChoice
	genRes         *GenerateResult
	iamPlan        *iam.Plan
	iamOpts        IAMChoice
	iamDone        bool
	// karpenter is what the Karpenter step will find; skipKarpenter
	// leaves installing Karpenter to the user (plan --skip-karpenter).
	karpenter     *KarpenterResult
	skipKarpenter bool
	choice        PlanChoice
	run           RunChoice
	plan          *PlanResult
	outcome       Outcome
	// runErr is what stopped the last run, nil when it completed or the
	// user stopped it.
	runErr   error
	runStats rolloutStats
}

// screen is one stage of the wizard. Screens mutate themselves in update
// and render in view; long work runs in the commands they return.
type screen interface {
	title() string
	init() tea.Cmd
	update(msg tea.Msg) tea.Cmd
	view(width, height int) string
	help() []key.Binding
}

// typing screens take printable keys as text, so q does not quit.
type typing interface{ typing() bool }

// stopper screens have work that must stop cleanly before the program
// exits (a running rollout): stop starts stopping and reports whether the
// program may quit at once.
type stopper interface {
	stop() (quitNow bool, cmd tea.Cmd)
}

// nextMsg moves the wizard to the next screen.
type nextMsg struct{}

// crashMsg reports a panic in background work: the wizard restores the
// terminal and exits with it rather than dying with the screen garbled.
type crashMsg struct{ err error }

// quitMsg ends the program after a stopper has stopped.
type quitMsg struct{}

func next() tea.Msg { return nextMsg{} }

// Model is the wizard's root bubbletea model: a header, the current
// screen, and the key help.
type Model struct {
	s       *state
	screens []func(*state) screen
	index   int
	cur     screen
	help    help.Model
	width   int
	height  int
	result  Result
}

// New builds the wizard model. Run uses it; tests drive it directly.
func New(ctx context.Context, opts Options) *Model {
	if opts.Width == 0 {
		opts.Width, opts.Height = 80, 24
	}
	s := &state{ctx: ctx, be: opts.Backend, st: newStyles(), opts: opts, exclude: map[string]bool{}, acked: map[string]bool{}, conn: opts.Defaults.Connection}
	m := &Model{
		s: s,
		screens: []func(*state) screen{
			newConnect, newDiscover, newReadiness, newGenerate, newIAM, newKarpenter, newPlan, newRollout, newDone,
		},
		help:   newHelp(opts.Width),
		width:  opts.Width,
		height: opts.Height,
		result: Result{Outcome: OutcomeQuit},
	}
	m.cur = m.screens[0](s)
	m.cur.update(m.bodySize())
	return m
}

func newHelp(width int) help.Model {
	h := help.New()
	h.Width = width
	return h
}

// bodySize is the room a screen has: the terminal less the header (two
// lines) and the key help (one line).
func (m *Model) bodySize() tea.WindowSizeMsg {
	return tea.WindowSizeMsg{Width: m.width, Height: max(1, m.height-3)}
}

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd { return m.cur.init() }

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width
		return m, m.cur.update(m.bodySize())
	case nextMsg:
		if m.index+1 >= len(m.screens) {
			return m, m.quit()
		}
		m.index++
		m.cur = m.screens[m.index](m.s)
		return m, tea.Batch(m.cur.update(m.bodySize()), m.cur.init())
	case quitMsg:
		return m, m.quit()
	case crashMsg:
		m.result.Err = msg.err
		return m, m.quit()
	case signalMsg:
		m.result.Interrupted, m.result.Signal = true, msg.name
		return m, m.stop()
	case tea.KeyMsg:
		t, isTyping := m.cur.(typing)
		if key.Matches(msg, keyQuit) || (key.Matches(msg, keyQ) && !(isTyping && t.typing())) {
			if key.Matches(msg, keyQuit) && !m.result.Interrupted {
				m.result.Interrupted, m.result.Signal = true, "Ctrl-C"
			}
			return m, m.stop()
		}
	}
	return m, m.cur.update(msg)
}

// signalMsg is SIGINT or SIGTERM from outside the terminal: the same as
// Ctrl-C pressed in it.
type signalMsg struct{ name string }

// stop quits, after stopping a running rollout (the screen quits once it
// has stopped).
func (m *Model) stop() tea.Cmd {
	if st, ok := m.cur.(stopper); ok {
		if quitNow, cmd := st.stop(); !quitNow {
			return cmd
		}
	}
	return m.quit()
}

func (m *Model) quit() tea.Cmd {
	m.result.Screen = m.cur.title()
	if m.s.outcome != "" {
		m.result.Outcome = m.s.outcome
	}
	m.result.Commands, m.result.RunErr = commands(m.s), m.s.runErr
	return tea.Quit
}

// Result is how the run ended; valid after the program returns.
func (m *Model) Result() Result { return m.result }

// View implements tea.Model.
func (m *Model) View() string {
	st := m.s.st
	left := st.title.Render("karpenter-migrate wizard") + st.step.Render(fmt.Sprintf("  %d/%d ", m.index+1, len(m.screens))) + st.key.Render(m.cur.title())
	right := ""
	if m.s.info.Cluster != "" {
		right = st.dim.Render(m.s.conn.Cluster + " · " + m.s.conn.Environment)
		if m.s.opts.Sandbox {
			right += st.warn.Render(" · sandbox")
		}
	}
	gap := max(1, m.width-lipgloss.Width(left)-lipgloss.Width(right))
	header := left + strings.Repeat(" ", gap) + right
	quit := keyQuitAny
	if t, ok := m.cur.(typing); ok && t.typing() {
		quit = keyQuit
	}
	bindings := append(m.cur.help(), quit)
	helpView := m.help.ShortHelpView(bindings)
	bodyHeight := max(1, m.height-2-lipgloss.Height(helpView))
	body := m.cur.view(m.width, bodyHeight)
	body = lipgloss.NewStyle().MaxWidth(m.width).MaxHeight(bodyHeight).Render(body)
	if pad := bodyHeight - lipgloss.Height(body); pad > 0 {
		body += strings.Repeat("\n", pad)
	}
	return lipgloss.NewStyle().MaxWidth(m.width).Render(header) + "\n\n" + body + "\n" + helpView
}

// Run runs the wizard on a terminal until the user finishes or quits.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) (Result, error) {
	if !opts.Color {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	m := New(ctx, opts)
	// Bubble Tea's own handler quits at once on SIGTERM (exit 0, a
	// rollout left running) and on SIGINT; ours stops the rollout first,
	// as Ctrl-C in the terminal does, and a second signal quits at once.
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(out), tea.WithContext(ctx), tea.WithAltScreen(), tea.WithoutSignalHandler())
	sigs, done := make(chan os.Signal, 2), make(chan struct{})
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer func() { signal.Stop(sigs); close(done) }()
	go func() {
		for n := 0; ; n++ {
			select {
			case s := <-sigs:
				if n > 0 {
					p.Kill()
					return
				}
				name := "SIGTERM"
				if s == os.Interrupt {
					name = "SIGINT"
				}
				p.Send(signalMsg{name: name})
			case <-done:
				return
			}
		}
	}()
	if _, err := p.Run(); err != nil {
		res := m.Result()
		res.Interrupted = res.Interrupted || errors.Is(err, tea.ErrInterrupted) || errors.Is(err, tea.ErrProgramKilled)
		return res, fmt.Errorf("wizard: %w", err)
	}
	return m.Result(), m.Result().Err
}

// stream runs work on its own goroutine; what it sends, then what it
// returns, reach Update in order through one channel (each message is
// read by a listen command the screen re-issues after every message).
func stream(work func(send func(tea.Msg)) tea.Msg) (<-chan tea.Msg, tea.Cmd) {
	ch := make(chan tea.Msg, 64)
	go func() {
		defer close(ch)
		defer func() {
			if r := recover(); r != nil {
				ch <- crashMsg{fmt.Errorf("internal error: %v\n%s", r, debug.Stack())}
			}
		}()
		ch <- work(func(m tea.Msg) { ch <- m })
	}()
	return ch, listen(ch)
}

func listen(ch <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg {
		m, ok := <-ch
		if !ok {
			return nil
		}
		return m
	}
}
