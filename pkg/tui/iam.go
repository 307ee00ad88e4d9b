package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/table"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// iamScreen shows what Karpenter needs in the account (create, update or
// no-op per object, each document viewable) and applies it after
// confirmation, or leaves it to the rollout's IAM steps.
type iamScreen struct {
	s       *state
	spin    spinner.Model
	busy    string
	err     error
	table   table.Model
	vp      viewport.Model
	doc     bool
	confirm bool
	applied []string
	ch      <-chan tea.Msg
	size    tea.WindowSizeMsg
	// shown is the choice the plan on screen was made with.
	shown IAMChoice
}

type iamPlannedMsg struct {
	plan   *iam.Plan
	choice IAMChoice
	err    error
}

type iamStepMsg iam.Item

type iamAppliedMsg struct{ err error }

func newIAM(s *state) screen {
	return &iamScreen{s: s, spin: progress.NewSpinner(), vp: viewport.New(80, 10)}
}

func (m *iamScreen) title() string { return "IAM" }

func (m *iamScreen) init() tea.Cmd {
	m.err = nil
	m.busy = "reading IAM, SQS, EventBridge and node access"
	be, ctx, inv, c := m.s.be, m.s.ctx, m.s.inv, m.s.iamOpts
	return tea.Batch(m.spin.Tick, func() tea.Msg {
		p, err := be.IAMPlan(ctx, inv, c)
		return iamPlannedMsg{plan: p, choice: c, err: err}
	})
}

func (m *iamScreen) help() []key.Binding {
	switch {
	case m.confirm:
		return []key.Binding{keyYes, keyNo}
	case m.doc:
		return []key.Binding{keyScroll, keyBack}
	case m.s.iamPlan == nil || m.busy != "":
		return nil
	case m.s.iamDone || m.s.iamPlan.Changes() == 0:
		return []key.Binding{keyUp, keyView, keyContinue}
	}
	return []key.Binding{keyUp, keyView, keyOIDC, keyIdentity, keyApply, keySkip}
}

var (
	keyOIDC     = key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "oidc"))
	keyIdentity = key.NewBinding(key.WithKeys("i"), key.WithHelp("i", "identity"))
)

var keyContinue = key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "continue"))

var iamColumns = []table.Column{{Title: "ACTION", Width: 9}, {Title: "KIND", Width: 18}, {Title: "NAME", Width: 44}}

func (m *iamScreen) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.size = msg
		m.vp.Width, m.vp.Height = msg.Width, max(3, msg.Height-3)
		m.table.SetHeight(max(3, msg.Height-8))
	case iamPlannedMsg:
		m.busy = ""
		if msg.err != nil {
			m.err = msg.err
			return nil
		}
		m.s.iamPlan, m.shown = msg.plan, msg.choice
		rows := make([]table.Row, len(msg.plan.Items))
		for i, it := range msg.plan.Items {
			rows[i] = table.Row{string(it.Action), string(it.Kind), it.Name}
		}
		m.table = table.New(table.WithColumns(iamColumns), table.WithRows(rows), table.WithFocused(true), table.WithHeight(max(3, m.size.Height-8)))
	case iamStepMsg:
		m.applied = append(m.applied, fmt.Sprintf("%s %s", msg.Action.PastTense(), msg.Ref))
		return listen(m.ch)
	case iamAppliedMsg:
		m.busy = ""
		m.err = msg.err
		m.s.iamDone = msg.err == nil
	case spinner.TickMsg:
		if m.busy == "" {
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

func (m *iamScreen) key(msg tea.KeyMsg) tea.Cmd {
	p := m.s.iamPlan
	if p == nil || m.busy != "" {
		return nil
	}
	switch {
	case m.confirm:
		switch {
		case key.Matches(msg, keyYes):
			m.confirm = false
			m.busy, m.err = "applying", nil
			be, ctx := m.s.be, m.s.ctx
			var cmd tea.Cmd
			m.ch, cmd = stream(func(send func(tea.Msg)) tea.Msg {
				return iamAppliedMsg{err: be.IAMApply(ctx, p, func(it iam.Item) { send(iamStepMsg(it)) })}
			})
			return tea.Batch(m.spin.Tick, cmd)
		case key.Matches(msg, keyNo):
			m.confirm = false
		}
	case m.doc:
		if key.Matches(msg, keyBack) {
			m.doc = false
			return nil
		}
		var cmd tea.Cmd
		m.vp, cmd = m.vp.Update(msg)
		return cmd
	case key.Matches(msg, keyView):
		m.showDoc()
	case key.Matches(msg, keyOIDC) && !m.s.iamDone:
		m.s.iamOpts.CreateOIDCProvider = !m.s.iamOpts.CreateOIDCProvider
		return m.init()
	case key.Matches(msg, keyIdentity) && !m.s.iamDone:
		m.s.iamOpts.Identity = desired.IdentityIRSA
		if p.Identity == desired.IdentityIRSA {
			m.s.iamOpts.Identity = desired.IdentityPodIdentity
		}
		return m.init()
	case key.Matches(msg, keyApply) && !m.s.iamDone && p.Changes() > 0:
		if b := p.Blocked(); len(b) > 0 {
			m.err = fmt.Errorf("not applied: %d object(s) block the plan (listed above)", len(b))
			return nil
		}
		m.confirm = true
	case key.Matches(msg, keySkip) && !m.s.iamDone, key.Matches(msg, keyContinue) && (m.s.iamDone || p.Changes() == 0):
		return next
	default:
		var cmd tea.Cmd
		m.table, cmd = m.table.Update(msg)
		return cmd
	}
	return nil
}

func (m *iamScreen) showDoc() {
	i := m.table.Cursor()
	if i < 0 || i >= len(m.s.iamPlan.Items) {
		return
	}
	it := m.s.iamPlan.Items[i]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\n", it.Action, it.Kind, it.Name)
	if it.Reason != "" {
		b.WriteString(it.Reason + "\n")
	}
	for _, d := range it.Diff {
		b.WriteString(d + "\n")
	}
	if it.Document != nil {
		if doc, err := json.MarshalIndent(it.Document, "", "  "); err == nil {
			b.Write(doc)
		}
	} else {
		b.WriteString("(no document)")
	}
	m.vp.SetContent(b.String())
	m.vp.GotoTop()
	m.doc = true
}

func (m *iamScreen) view(width, _ int) string {
	st := m.s.st
	var b strings.Builder
	p := m.s.iamPlan
	if m.doc {
		return m.vp.View()
	}
	if p != nil {
		fmt.Fprintf(&b, "Karpenter %s · %s · %s · nodes join by %s\n%d to change, %d blocking\n", p.KarpenterVersion, p.Identity, oidcState(p), p.NodeAccess, p.Changes(), len(p.Blocked()))
		b.WriteString(m.table.View() + "\n")
		if !m.s.iamDone && m.busy == "" {
			for _, it := range p.Blocked() {
				b.WriteString(st.bad.Width(width).Render(fmt.Sprintf("✗ %s: %s", it.Ref, blockedHint(it))) + "\n")
			}
		}
	}
	switch {
	case m.busy != "":
		fmt.Fprintf(&b, "%s %s…\n", m.spin.View(), m.busy)
		if n := len(m.applied); n > 0 {
			b.WriteString(st.dim.Render(m.applied[n-1]) + "\n")
		}
	case m.confirm:
		b.WriteString(st.warn.Render(fmt.Sprintf("Apply %d change(s) to the account of cluster %s? [y/N]", p.Changes(), p.Cluster)) + "\n")
	case m.s.iamDone:
		fmt.Fprintf(&b, "%s applied %d change(s); journal %s\n", st.ok.Render("✓"), len(m.applied), action.IAMJournalFile(p.Cluster))
	case p != nil && p.Changes() == 0:
		b.WriteString(st.ok.Render("✓ nothing to change") + "\n")
	case p != nil:
		b.WriteString(st.dim.Render("Skip to let the rollout's IAM steps (02..06) create them instead.") + "\n")
	}
	if m.err != nil {
		b.WriteString(st.bad.Width(width).Render("✗ "+m.err.Error()) + "\n")
	}
	return b.String()
}

// oidcState says what the plan does with the cluster's IAM OIDC provider,
// as its row does.
func oidcState(p *iam.Plan) string {
	for _, it := range p.Items {
		if it.Kind != iam.KindOIDCProvider {
			continue
		}
		switch it.Action {
		case iam.ActionNoop:
			return "existing OIDC provider"
		case iam.ActionMissing:
			return "OIDC provider missing"
		}
		return string(it.Action) + " OIDC provider"
	}
	return "no OIDC provider needed"
}

// blockedHint is what resolves a blocked item, with this screen's keys
// where it has one (the plan's reasons name the command's flags).
func blockedHint(it iam.Item) string {
	switch {
	case it.Kind == iam.KindOIDCProvider && it.Action == iam.ActionMissing:
		return "it does not exist and IRSA needs it: o creates it, i switches to Pod Identity"
	case it.Action == iam.ActionConflict:
		return it.Reason + " (the wizard adopts nothing: `karpenter-migrate iam apply --adopt` does)"
	}
	return it.Reason
}
