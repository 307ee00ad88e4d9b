package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/table"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// planScreen plans the rollout: the waves, the fleet after migration and
// after consolidation, $/h before and after; wave size and concurrency
// can be adjusted, which plans again.
type planScreen struct {
	s       *state
	spin    spinner.Model
	busy    bool
	err     error
	table   table.Model
	confirm bool
	// shown is the choice the plan on screen was made with; stale says
	// the choice changed while it was being made.
	shown PlanChoice
	stale bool
	warn  string
	size  tea.WindowSizeMsg
}

type plannedMsg struct {
	res    *PlanResult
	choice PlanChoice
	err    error
}

func newPlan(s *state) screen {
	s.choice = planChoice(s)
	return &planScreen{s: s, spin: progress.NewSpinner()}
}

// planChoice is the plan's starting choice: the config's defaults and
// what the earlier screens decided.
func planChoice(s *state) PlanChoice {
	def := config.Default(s.conn.Environment)
	var exclude, acked []string
	for name, ex := range s.exclude {
		if ex {
			exclude = append(exclude, name)
		}
	}
	for id, ok := range s.acked {
		if ok {
			acked = append(acked, id)
		}
	}
	sort.Strings(exclude)
	sort.Strings(acked)
	return PlanChoice{
		Environment: s.conn.Environment, WaveSize: def.Rollout.WaveSize, Concurrency: max(1, def.Rollout.Concurrency), PrepareAhead: def.Rollout.PrepareAhead,
		Generate: s.gen, IAM: s.iamOpts, Exclude: exclude, Acknowledged: acked, SkipKarpenter: s.skipKarpenter,
	}
}

func (p *planScreen) title() string { return "Plan" }
func (p *planScreen) init() tea.Cmd { return p.replan() }

func (p *planScreen) help() []key.Binding {
	if p.confirm {
		return []key.Binding{keyYes, keyNo}
	}
	return []key.Binding{keyWaveUp, keyConcUp, keyEmptyDir, keyForce, keyAckPlan, keyStart}
}

// replan plans with the current choice; a change while a plan is being
// made is planned when it returns.
func (p *planScreen) replan() tea.Cmd {
	if p.busy {
		p.stale = true
		return nil
	}
	p.busy, p.err, p.stale = true, nil, false
	be, ctx, inv, c := p.s.be, p.s.ctx, p.s.inv, p.s.choice
	return tea.Batch(p.spin.Tick, func() tea.Msg {
		res, err := be.Plan(ctx, inv, c)
		return plannedMsg{res: res, choice: c, err: err}
	})
}

var (
	keyEmptyDir = key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "emptyDir"))
	keyForce    = key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "force"))
	keyAckPlan  = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "ack"))
)

func (p *planScreen) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.size = msg
		p.resize()
	case plannedMsg:
		p.busy = false
		if p.stale {
			return p.replan()
		}
		if msg.err != nil {
			p.err = msg.err
			return nil
		}
		p.s.plan, p.shown = msg.res, msg.choice
		p.table = progress.Waves(msg.res.Plan)
		p.resize()
	case spinner.TickMsg:
		if !p.busy {
			return nil
		}
		var cmd tea.Cmd
		p.spin, cmd = p.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		c := &p.s.choice
		p.warn = ""
		switch {
		case p.busy && (key.Matches(msg, keyStart) || key.Matches(msg, keyAckPlan) || p.confirm):
			// wait for the plan on screen to be the one chosen
		case p.confirm:
			if key.Matches(msg, keyYes) {
				return next
			}
			if key.Matches(msg, keyNo) {
				p.confirm = false
			}
		case key.Matches(msg, keyWaveUp):
			c.WaveSize = stepWaveSize(c.WaveSize, 1)
			return p.replan()
		case key.Matches(msg, keyWaveDown):
			c.WaveSize = stepWaveSize(c.WaveSize, -1)
			return p.replan()
		case key.Matches(msg, keyConcUp):
			c.Concurrency++
			return p.replan()
		case key.Matches(msg, keyConcDown) && c.Concurrency > 1:
			c.Concurrency--
			return p.replan()
		case key.Matches(msg, keyEmptyDir):
			c.AllowEmptyDir = !c.AllowEmptyDir
			return p.replan()
		case key.Matches(msg, keyForce):
			c.ForceEvict = !c.ForceEvict
			return p.replan()
		case key.Matches(msg, keyAckPlan):
			p.s.run.AckBlockers = !p.s.run.AckBlockers
		case key.Matches(msg, keyStart) && p.s.plan != nil && p.err == nil:
			if n := len(blockerChecks(p.s.plan.Plan.Blockers())); n > 0 && !p.s.run.AckBlockers {
				p.warn = fmt.Sprintf("%d blocker(s) open: e accepts emptyDir data loss, f evicts pods that refuse it, a acknowledges the rest", n)
				return nil
			}
			p.confirm = true
		}
	}
	return nil
}

func (p *planScreen) resize() {
	rows := 0
	if p.s.plan != nil {
		rows = len(p.s.plan.Plan.Waves)
	}
	p.table.SetHeight(max(2, min(rows+2, p.size.Height-14)))
}

// stepWaveSize changes a wave size by one node, or by 10 points when it
// is a percentage; it never goes below 1.
func stepWaveSize(v string, d int) string {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil {
			return "10%"
		}
		return fmt.Sprintf("%d%%", min(100, max(10, (n/10+d)*10)))
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return "1"
	}
	return strconv.Itoa(max(1, n+d))
}

func fleetSummary(lines []FleetLine, show int) (int, string) {
	total := 0
	var parts []string
	for i, l := range lines {
		total += l.Count
		if i < show {
			parts = append(parts, fmt.Sprintf("%d×%s", l.Count, l.InstanceType))
		}
	}
	if len(lines) > show {
		parts = append(parts, "…")
	}
	return total, strings.Join(parts, " ")
}

func (p *planScreen) view(width, _ int) string {
	st := p.s.st
	var b strings.Builder
	c := p.shown
	if res := p.s.plan; res != nil {
		pl := res.Plan
		fmt.Fprintf(&b, "Plan %s for %s → %s\n", shortHash(pl.Hash), pl.Environment, res.PlanFile)
		fmt.Fprintf(&b, "Wave size %s · %d drained at once · pre-provision %t · %d waves\n\n", c.WaveSize, c.Concurrency, pl.Budget.PreProvision, len(pl.Waves))
		b.WriteString(p.table.View() + "\n")
		fmt.Fprintf(&b, "Waves predicted to take %s, drain groups in turn; lower bound %s\n\n", plan.Seconds(pl.Timing.PredictedSeconds), plan.Seconds(pl.Timing.BoundSeconds))
		nb, before := fleetSummary(res.Before, 3)
		na, after := fleetSummary(res.AfterMigration, 3)
		nc, cons := fleetSummary(res.AfterConsolidation, 3)
		fmt.Fprintf(&b, "%-20s %3d nodes  %s\n", "Fleet before", nb, before)
		fmt.Fprintf(&b, "%-20s %3d nodes  %s\n", "after migration", na, after)
		if !res.Repacked {
			cons = "no cheaper packing: consolidation keeps it"
		}
		fmt.Fprintf(&b, "%-20s %3d nodes  %s\n", "after consolidation", nc, cons)
		if pl.Cost.Complete {
			fmt.Fprintf(&b, "$/h  %s → %s → %s\n", perHour(pl.Cost.BeforePerHour), perHour(res.MigratedCostPerHour), st.ok.Render(perHour(res.ConsolidatedCostPerHour)))
		} else {
			b.WriteString("$/h  not estimated (no prices for some instance types)\n")
		}
		fmt.Fprintf(&b, "emptyDir data loss %s · force evictions %s · blockers acknowledged %s\n", onOff(c.AllowEmptyDir), onOff(c.ForceEvict), onOff(p.s.run.AckBlockers))
		b.WriteString(truncate("Karpenter controller "+pl.Controller.String(), width) + "\n")
		if checks := blockerChecks(pl.Blockers()); len(checks) > 0 {
			sty := st.bad
			if p.s.run.AckBlockers {
				sty = st.warn
			}
			for i, c := range checks {
				if i == 2 && len(checks) > 3 {
					b.WriteString(sty.Render(truncate(fmt.Sprintf("  and %d more blocker(s)", len(checks)-i), width)) + "\n")
					break
				}
				b.WriteString(sty.Render(truncate(fmt.Sprintf("blocker %d/%d: %s", i+1, len(checks), c), width)) + "\n")
			}
		} else if n := len(pl.Findings); n > 0 {
			b.WriteString(truncate(fmt.Sprintf("%d finding(s), e.g. %s", n, pl.Findings[0].Message), width) + "\n")
		}
	}
	switch {
	case p.busy:
		fmt.Fprintf(&b, "%s planning with the embedded scheduler…\n", p.spin.View())
	case p.confirm:
		drained, kept := waveNodes(p.s.plan)
		keeps := ""
		if h := p.s.plan.Plan.Controller; kept > 0 && h != nil {
			keeps = fmt.Sprintf(" and keeps %d of group %s for the Karpenter controller", kept, h.NodeGroup)
			if k := p.s.plan.Plan.Karpenter; k != nil && len(k.Room) > 0 {
				keeps += fmt.Sprintf(", evicting %d pod(s) there first to make room for it", len(k.Room))
			}
		}
		b.WriteString(st.warn.Width(width).Render(fmt.Sprintf("Start the rollout of %s? It cordons and drains %d legacy nodes in %d waves%s; pause, resume or roll back at any time. [y/N]",
			c.Environment, drained, len(p.s.plan.Plan.Waves), keeps)) + "\n")
	}
	if p.warn != "" {
		b.WriteString(st.warn.Width(width).Render(p.warn) + "\n")
	}
	if p.err != nil {
		b.WriteString(st.bad.Width(width).Render("✗ "+p.err.Error()) + "\n")
	}
	return b.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// waveNodes are the legacy nodes the waves cordon and drain, and the ones
// they keep for the Karpenter controller.
func waveNodes(res *PlanResult) (drained, kept int) {
	for _, w := range res.Plan.Waves {
		d := drainedNodes(w)
		drained += d
		kept += len(w.Nodes) - d
	}
	return drained, kept
}

// perHour renders a $/h figure as the demo's summary does (4 decimals),
// so one figure reads the same on every screen and surface.
func perHour(v float64) string { return fmt.Sprintf("%.4f", v) }

func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// blockerCheck is the plan's blockers of one kind: readiness's
// definition of a finding (one check, the objects it names), so the plan
// screen counts blockers as the readiness screen does, whereas the plan
// lists pod-level ones once per pod.
type blockerCheck struct {
	what, unit, remedy string
	objects            int
}

func (c blockerCheck) String() string {
	return fmt.Sprintf("%s (%d %s) · %s", c.what, c.objects, c.unit, c.remedy)
}

// blockerChecks groups the plan's blockers by check, in the plan's order.
func blockerChecks(blockers []plan.Finding) []blockerCheck {
	var out []blockerCheck
	index := map[string]int{}
	for _, f := range blockers {
		c, objects := checkOf(f)
		i, ok := index[c.what]
		if !ok {
			i = len(out)
			index[c.what] = i
			out = append(out, c)
		}
		out[i].objects += objects
	}
	return out
}

// checkOf names the check behind one of the plan's blockers (the plan's
// own pod checks, or a readiness finding carried as "Title (ID): ..."), the
// key of this screen that resolves it, and how many objects it names.
func checkOf(f plan.Finding) (blockerCheck, int) {
	pods := func(what, remedy string) (blockerCheck, int) {
		return blockerCheck{what: what, unit: "pods", remedy: remedy}, 1
	}
	switch {
	case strings.Contains(f.Message, "rollout.allowEmptyDir"):
		return pods("emptyDir data lost on eviction", "e accepts the loss")
	case strings.Contains(f.Message, "--force-evict"):
		return pods("eviction refused by annotation", "f evicts anyway")
	case strings.HasPrefix(f.Message, "has no controller"):
		return pods("no controller: eviction deletes them", "a acknowledges")
	case strings.Contains(f.Message, "fits no NodePool"):
		return pods("fit no NodePool: would stay Pending", "a acknowledges")
	}
	what, _, _ := strings.Cut(f.Message, ": ")
	return blockerCheck{what: what, unit: "objects", remedy: "a acknowledges"}, max(1, len(strings.Split(f.Object, ", ")))
}
