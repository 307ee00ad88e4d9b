package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	bar "github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/table"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// rolloutMode is what the rollout screen is doing.
type rolloutMode int

const (
	modeRunning rolloutMode = iota
	modeStopping
	modePaused
	modeConfirmRollback
	modeRollingBack
	modeCompleted
	modeRolledBack
	modeFailed
)

// rolloutStats is the live state the runner's events and the cluster
// views build up; the done screen reads it too.
type rolloutStats struct {
	stepsDone, stepsTotal int
	step                  string
	wave, waves           int
	phase                 string
	waiting               string
	wavePhase             map[int]string
	cordoned, drained     int
	evicted               map[string]int
	// evictedTotal counts the migration's evictions, rollbackEvicted the
	// rollback's (which moves pods back to the node groups).
	evictedTotal, rollbackEvicted int
	// pdbWaits are the evictions a PDB refuses now, by pod (the last
	// three): one is dropped when its pod is evicted, all of them when
	// the wave moves on or the run ends.
	pdbWaits []pdbWait
	// rollingBack says the events are a rollback's (which carry no step
	// counts); undone counts the steps it has undone.
	rollingBack bool
	undone      int
	log         []string
	view        *ClusterView
	podWorkload map[string]string
	reason      string
}

// rolloutScreen runs the plan (rollout.Runner via the backend) and shows
// it live; p pauses (the runner stops after the evictions in flight and
// writes the journal), r resumes (apply again, as `apply` would), b rolls
// back, q quits leaving a journal `apply` resumes.
type rolloutScreen struct {
	s         *state
	mode      rolloutMode
	cancel    context.CancelFunc
	ch        <-chan tea.Msg
	rollback  bool
	thenBack  bool
	thenQuit  bool
	spin      spinner.Model
	bar       bar.Model
	workloads table.Model
	size      tea.WindowSizeMsg
}

type runUpdateMsg Update

type runDoneMsg struct {
	rollback bool
	err      error
}

func newRollout(s *state) screen {
	s.runStats = rolloutStats{wavePhase: map[int]string{}, evicted: map[string]int{}, podWorkload: map[string]string{}}
	r := &rolloutScreen{
		s: s, spin: progress.NewSpinner(), bar: progress.NewBar(),
		workloads: table.New(table.WithColumns(workloadColumns)),
	}
	return r
}

var workloadColumns = []table.Column{{Title: "WORKLOAD", Width: 40}, {Title: "EVICTED", Width: 7}, {Title: "PENDING", Width: 7}, {Title: "READY", Width: 5}}

func (r *rolloutScreen) title() string { return "Rollout" }
func (r *rolloutScreen) init() tea.Cmd { return r.start(false) }

func (r *rolloutScreen) help() []key.Binding {
	switch r.mode {
	case modeRunning:
		return []key.Binding{keyPause, keyRollback}
	case modePaused, modeFailed:
		return []key.Binding{keyResume, keyRollback}
	case modeConfirmRollback:
		return []key.Binding{keyYes, keyNo}
	case modeCompleted, modeRolledBack:
		return []key.Binding{keyNext}
	case modeRollingBack:
		return nil
	}
	return nil
}

// start runs Apply (or Rollback) of the plan on its own goroutine.
func (r *rolloutScreen) start(rollback bool) tea.Cmd {
	ctx, cancel := context.WithCancel(r.s.ctx)
	r.cancel, r.rollback = cancel, rollback
	r.mode = modeRunning
	if rollback {
		r.mode = modeRollingBack
	}
	st := &r.s.runStats
	st.reason, st.rollingBack = "", rollback
	if rollback {
		st.step, st.undone, st.wave, st.waiting, st.pdbWaits = "", 0, 0, "", nil
	}
	be, plan, run := r.s.be, r.s.plan.Plan, r.s.run
	var cmd tea.Cmd
	r.ch, cmd = stream(func(send func(tea.Msg)) tea.Msg {
		defer cancel()
		sink := func(u Update) { send(runUpdateMsg(u)) }
		if rollback {
			return runDoneMsg{rollback: true, err: be.Rollback(ctx, plan, sink)}
		}
		return runDoneMsg{err: be.Apply(ctx, plan, run, sink)}
	})
	return tea.Batch(r.spin.Tick, cmd)
}

// stop implements stopper: a running rollout is stopped (the journal is
// written) before the program exits.
func (r *rolloutScreen) stop() (bool, tea.Cmd) {
	if r.mode != modeRunning && r.mode != modeRollingBack && r.mode != modeStopping {
		return true, nil
	}
	r.thenQuit = true
	r.mode = modeStopping
	r.cancel()
	return false, nil
}

func (r *rolloutScreen) update(msg tea.Msg) tea.Cmd {
	st := &r.s.runStats
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		r.size = msg
		r.workloads.SetHeight(max(2, msg.Height-14))
		r.workloads.SetWidth(min(msg.Width, 70))
	case runUpdateMsg:
		if msg.Event != nil {
			st.apply(*msg.Event, r.s.plan.Plan)
		}
		if msg.View != nil {
			st.see(msg.View)
			r.workloads.SetRows(st.rows())
		}
		return listen(r.ch)
	case runDoneMsg:
		return r.done(msg)
	case spinner.TickMsg:
		if r.mode != modeRunning && r.mode != modeRollingBack && r.mode != modeStopping {
			return nil
		}
		var cmd tea.Cmd
		r.spin, cmd = r.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		switch r.mode {
		case modeRunning:
			switch {
			case key.Matches(msg, keyPause):
				r.mode = modeStopping
				r.cancel()
			case key.Matches(msg, keyRollback):
				r.mode = modeConfirmRollback
				r.thenBack = true
			}
		case modePaused, modeFailed:
			switch {
			case key.Matches(msg, keyResume):
				return r.start(false)
			case key.Matches(msg, keyRollback):
				r.mode = modeConfirmRollback
			}
		case modeConfirmRollback:
			switch {
			case key.Matches(msg, keyYes):
				if r.thenBack && r.cancel != nil && r.runningApply() {
					r.mode = modeStopping
					r.cancel()
					return nil
				}
				return r.start(true)
			case key.Matches(msg, keyNo):
				r.thenBack = false
				r.mode = modePaused
				if r.runningApply() {
					r.mode = modeRunning
				}
			}
		case modeCompleted, modeRolledBack:
			if key.Matches(msg, keyNext) {
				return next
			}
		}
	}
	return nil
}

// runningApply reports whether an Apply goroutine is still going.
func (r *rolloutScreen) runningApply() bool {
	return r.ch != nil && !r.rollback
}

func (r *rolloutScreen) done(msg runDoneMsg) tea.Cmd {
	st := &r.s.runStats
	r.ch = nil
	// Nothing waits once the run has stopped.
	st.waiting, st.pdbWaits = "", nil
	var paused *rollout.PausedError
	r.s.runErr = msg.err
	if errors.Is(msg.err, context.Canceled) {
		r.s.runErr = nil
	}
	switch {
	case msg.err == nil && msg.rollback:
		r.mode, r.s.outcome = modeRolledBack, OutcomeRolledBack
	case msg.err == nil:
		r.mode, r.s.outcome = modeCompleted, OutcomeCompleted
	case errors.As(msg.err, &paused):
		r.mode, r.s.outcome, st.reason = modePaused, OutcomePaused, paused.Error()
	case errors.Is(msg.err, context.Canceled):
		r.mode, r.s.outcome, st.reason = modePaused, OutcomePaused, "paused by you; the journal records where"
	default:
		r.mode, r.s.outcome, st.reason = modeFailed, OutcomePaused, msg.err.Error()
	}
	switch {
	case r.thenQuit:
		return func() tea.Msg { return quitMsg{} }
	case r.thenBack && r.mode != modeRolledBack && r.mode != modeCompleted:
		r.thenBack = false
		return r.start(true)
	}
	r.thenBack = false
	return nil
}

// apply folds one runner event into the stats.
func (st *rolloutStats) apply(e rollout.Event, plan *plan.Plan) {
	line := ""
	switch e.Kind {
	case rollout.EventRunStarted:
		if e.Total > 0 {
			st.stepsTotal = e.Total
		}
		line = e.Message
	case rollout.EventStepStarted:
		st.step, st.waiting = e.Step, ""
		if e.Total > 0 {
			st.stepsDone, st.stepsTotal = e.Done, e.Total
		}
		line = e.Step + ": " + e.Message
	case rollout.EventStepSkipped, rollout.EventStepFinished:
		if st.rollingBack && e.Kind == rollout.EventStepFinished {
			st.undone++
		}
		if e.Total > 0 {
			st.stepsDone, st.stepsTotal = e.Done, e.Total
		}
		line = fmt.Sprintf("%s %s", e.Step, strings.ToLower(strings.TrimPrefix(string(e.Kind), "Step")))
		if e.Message != "" {
			line += ": " + e.Message
		}
	case rollout.EventStepFailed:
		line = e.Step + " failed: " + e.Message
	case rollout.EventWavePhase:
		st.wave, st.waves, st.phase, st.waiting, st.pdbWaits = e.Wave, e.Waves, e.Phase, "", nil
		st.wavePhase[e.Wave] = e.Phase
		st.cordoned, st.drained = st.nodeCounts(plan)
		line = fmt.Sprintf("wave %d/%d: %s", e.Wave, e.Waves, e.Phase)
		if e.Message != "" { // its end: elapsed against predicted
			line += ": " + e.Message
		}
	case rollout.EventWaiting:
		st.waiting = e.Message
		if e.Total > 0 {
			st.waiting = fmt.Sprintf("%s (%d/%d)", e.Message, e.Done, e.Total)
		}
		return
	case rollout.EventEviction:
		if e.Message == "evicted" {
			if st.rollingBack {
				st.rollbackEvicted++
			} else {
				st.evictedTotal++
			}
			w := st.podWorkload[e.Pod]
			if w == "" {
				w = e.Pod
			}
			st.evicted[w]++
			st.pdbWaits = slices.DeleteFunc(st.pdbWaits, func(p pdbWait) bool { return p.pod == e.Pod })
		}
		if e.Message == "evicting" {
			return
		}
		line = fmt.Sprintf("%s %s (node %s)", e.Message, e.Pod, e.Node)
	case rollout.EventPDBWait:
		w := pdbWait{pod: e.Pod, text: fmt.Sprintf("%s waits on PDB %s", e.Pod, e.PDB)}
		st.pdbWaits = append(slices.DeleteFunc(st.pdbWaits, func(p pdbWait) bool { return p.pod == e.Pod }), w)
		if len(st.pdbWaits) > 3 {
			st.pdbWaits = st.pdbWaits[len(st.pdbWaits)-3:]
		}
		line = w.text
	case rollout.EventGate:
		line = "gate: " + e.Message
	case rollout.EventChange, rollout.EventRunFinished:
		line = e.Message
	}
	if line != "" {
		st.log = append(st.log, e.Time.Format("15:04:05")+" "+line)
		if len(st.log) > 50 {
			st.log = st.log[len(st.log)-50:]
		}
	}
}

// pdbWait is an eviction a PDB refuses, until its pod is evicted.
type pdbWait struct{ pod, text string }

// nodeCounts are the legacy nodes cordoned (their wave is past cordon)
// and drained (past drain), by the plan's waves; the nodes kept for the
// Karpenter controller are neither (drainedNodes).
func (st *rolloutStats) nodeCounts(plan *plan.Plan) (cordoned, drained int) {
	order := []string{rollout.PhasePreProvision, rollout.PhaseCordon, rollout.PhaseDrain, rollout.PhaseGate, rollout.PhaseCleanup, rollout.PhaseScaleIn, rollout.PhaseDone}
	for _, w := range plan.Waves {
		i := slices.Index(order, st.wavePhase[w.Index])
		if i > 1 {
			cordoned += drainedNodes(w)
		}
		if i > 2 {
			drained += drainedNodes(w)
		}
	}
	return cordoned, drained
}

// drainedNodes are the wave's legacy nodes it cordons and drains: all but
// the ones kept for the Karpenter controller, which are reserved instead.
func drainedNodes(w plan.Wave) int {
	n := 0
	for _, wn := range w.Nodes {
		if !wn.Keep {
			n++
		}
	}
	return n
}

func (st *rolloutStats) see(v *ClusterView) {
	st.view = v
	for k, w := range v.PodWorkload {
		st.podWorkload[k] = w
	}
}

// rows are the workloads with something happening first: pending pods,
// then evictions, then by name.
func (st *rolloutStats) rows() []table.Row {
	if st.view == nil {
		return nil
	}
	ws := append([]WorkloadView(nil), st.view.Workloads...)
	sort.SliceStable(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.Pending != b.Pending {
			return a.Pending > b.Pending
		}
		if ea, eb := st.evicted[a.Name], st.evicted[b.Name]; ea != eb {
			return ea > eb
		}
		return a.Name < b.Name
	})
	rows := make([]table.Row, len(ws))
	for i, w := range ws {
		rows[i] = table.Row{w.Name, fmt.Sprint(st.evicted[w.Name]), fmt.Sprint(w.Pending), fmt.Sprint(w.Ready)}
	}
	return rows
}

func (r *rolloutScreen) view(width, height int) string {
	s := r.s
	st := &s.runStats
	sty := s.st
	var b strings.Builder
	switch {
	case r.mode == modeRolledBack:
		fmt.Fprintf(&b, "Rolled back: %d step(s) undone, last first\n", st.undone)
	case st.rollingBack:
		fmt.Fprintf(&b, "Rollback %-24s %d step(s) undone\n", nonEmpty(st.step, "starting"), st.undone)
	default:
		b.WriteString(progress.Counter(r.bar, nonEmpty(st.step, "starting"), st.stepsDone, st.stepsTotal) + "\n")
	}
	if st.wave > 0 {
		fmt.Fprintf(&b, "Wave %d/%d · %s", st.wave, st.waves, st.phase)
	} else {
		fmt.Fprintf(&b, "Waves %d planned", len(s.plan.Plan.Waves))
	}
	if st.waiting != "" {
		fmt.Fprintf(&b, " · waiting for %s", st.waiting)
	}
	b.WriteString("\n")
	total, kept := waveNodes(s.plan)
	keptNote := ""
	if kept > 0 {
		// reserved for the Karpenter controller, as the confirmation said
		keptNote = fmt.Sprintf(" · kept %d", kept)
	}
	fmt.Fprintf(&b, "Nodes cordoned %d/%d · drained %d/%d%s · pods evicted %d\n", st.cordoned, total, st.drained, total, keptNote, st.evictedTotal)
	if v := st.view; v != nil {
		// Before is the cost discover found, as on the Done screen.
		fmt.Fprintf(&b, "Legacy nodes %d · Karpenter nodes %d · $/h now %s (before %s)\n", v.LegacyNodes, v.KarpenterNodes, perHour(v.CostPerHour), perHour(s.discoveredCost))
	}
	if n := len(st.pdbWaits); n > 0 {
		b.WriteString(sty.warn.Render("PDB: "+st.pdbWaits[n-1].text) + "\n")
	} else {
		b.WriteString(sty.dim.Render("PDB: no eviction waiting") + "\n")
	}
	b.WriteString(r.workloads.View() + "\n")
	status := r.status(width)
	logLines := max(0, height-lipgloss.Height(b.String())-lipgloss.Height(status)+1)
	from := max(0, len(st.log)-logLines)
	for _, l := range st.log[from:] {
		b.WriteString(sty.dim.Render(truncate(l, width)) + "\n")
	}
	b.WriteString(status)
	return b.String()
}

func (r *rolloutScreen) status(width int) string {
	sty := r.s.st
	st := &r.s.runStats
	switch r.mode {
	case modeRunning:
		return r.spin.View() + " running · p pauses after the evictions in flight"
	case modeStopping:
		return r.spin.View() + " stopping: finishing the evictions in flight, writing the journal…"
	case modeRollingBack:
		return r.spin.View() + " rolling back: undoing the applied steps, last first…"
	case modePaused:
		quits := "q quits; the journal is kept."
		if r.s.opts.Sandbox {
			quits = "q quits: the sandbox, journal included, ends with the wizard."
		}
		return sty.warn.Width(width).Render("Paused: "+st.reason) + "\n" + lipgloss.NewStyle().Width(width).Render("r resumes (as `apply` would), b rolls back, "+quits)
	case modeFailed:
		return sty.bad.Width(width).Render("Stopped: " + st.reason)
	case modeConfirmRollback:
		return sty.warn.Render("Roll back every applied step (groups, Cluster Autoscaler restored; NodePools removed)? [y/N]")
	case modeCompleted:
		return sty.ok.Render("✓ migration complete") + " · enter for the summary"
	case modeRolledBack:
		return sty.ok.Render("✓ rolled back") + " · enter for the summary"
	}
	return ""
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func truncate(s string, width int) string {
	r := []rune(s)
	if width > 1 && len(r) > width {
		return string(r[:width-1]) + "…"
	}
	return s
}
