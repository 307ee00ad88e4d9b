package tui

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
)

// doneScreen sums the migration up and prints the commands that repeat it
// from CI for the next environment.
type doneScreen struct{ s *state }

func newDone(s *state) screen { return &doneScreen{s: s} }

func (d *doneScreen) title() string            { return "Done" }
func (d *doneScreen) init() tea.Cmd            { return nil }
func (d *doneScreen) help() []key.Binding      { return nil }
func (d *doneScreen) update(tea.Msg) tea.Cmd   { return nil }
func (d *doneScreen) view(width, _ int) string { return summary(d.s, width) }

func summary(s *state, width int) string {
	st := s.st
	rs := &s.runStats
	var b strings.Builder
	switch s.outcome {
	case OutcomeRolledBack:
		fmt.Fprintf(&b, "%s %s of %s rolled back: node groups and Cluster Autoscaler restored.\n", st.ok.Render("✓"), s.conn.Environment, s.conn.Cluster)
	default:
		fmt.Fprintf(&b, "%s %s of %s migrated to Karpenter.\n", st.ok.Render("✓"), s.conn.Environment, s.conn.Cluster)
	}
	if s.inv != nil && rs.view != nil {
		// Before is what discover found; after is the cluster once the run
		// ended (in the sandbox, settled as the demo's summary is).
		evicted := fmt.Sprintf("%d pods evicted", rs.evictedTotal)
		if s.outcome == OutcomeRolledBack {
			evicted = fmt.Sprintf("%d pods evicted by the migration, %d by the rollback", rs.evictedTotal, rs.rollbackEvicted)
		}
		b.WriteString(lipgloss.NewStyle().Width(width).Render(fmt.Sprintf("Nodes %d → %d (%d legacy left) · $/h %s → %s · %s",
			len(s.inv.Nodes), rs.view.LegacyNodes+rs.view.KarpenterNodes, rs.view.LegacyNodes, perHour(s.discoveredCost), perHour(rs.view.CostPerHour), evicted)) + "\n")
	}
	b.WriteString(lipgloss.NewStyle().Width(width).Render(fmt.Sprintf("Files in %s: %s, %s/, %s, %s, %s", s.opts.OutDir, SnapshotFile, TreeDir, action.IAMJournalFile(s.conn.Cluster), ConfigFile(s.conn.Environment), PlanFile)) + "\n\n")
	if s.opts.Sandbox {
		b.WriteString(lipgloss.NewStyle().Width(width).Render(st.key.Render("The sandbox lived in this process only")+": nothing outside it changed. The same choices on your cluster (its own --cluster, --env, config):") + "\n")
	} else {
		b.WriteString(st.key.Render("Repeat it from CI") + " (next environment: its own --cluster, --env, config):\n")
	}
	for _, c := range commands(s) {
		b.WriteString(st.dim.Render(shellWrap(c, width)) + "\n")
	}
	return b.String()
}

// commands are the plain commands that do what the wizard did, from the
// files it wrote, with every choice made on its screens; after a rollout
// stopped part-way they resume it instead (in the sandbox, which ends
// with the wizard, they start the wizard again).
func commands(s *state) []string {
	if s.plan == nil {
		return nil
	}
	out := s.opts.OutDir
	rel := func(name string) string { return filepath.Join(out, name) }
	global := ""
	if !s.opts.Sandbox {
		for _, f := range []struct{ flag, value string }{{"--context", s.conn.Context}, {"--region", s.conn.Region}, {"--profile", s.conn.Profile}} {
			if f.value != "" {
				global += " " + f.flag + " " + f.value
			}
		}
	}
	if s.opts.Namespace != "" && s.opts.Namespace != "karpenter-migrate" {
		global += " -n " + s.opts.Namespace
	}
	env := s.conn.Environment
	plan, tree := rel(PlanFile), rel(TreeDir)
	if s.outcome == OutcomePaused {
		if s.opts.Sandbox {
			if s.opts.Again == "" {
				return nil
			}
			return []string{s.opts.Again + "   # the sandbox and its journal ended with the wizard: start again"}
		}
		return []string{
			fmt.Sprintf("karpenter-migrate status --env %s%s", env, global),
			fmt.Sprintf("karpenter-migrate apply --plan %s --dir %s --yes%s%s   # resume", plan, tree, ackFlag(s), global),
			fmt.Sprintf("karpenter-migrate rollback --plan %s --dir %s --yes%s   # or undo", plan, tree, global),
		}
	}
	envs := s.gen.Envs
	if len(envs) == 0 {
		envs = []string{env}
	}
	gen := fmt.Sprintf("karpenter-migrate generate --snapshot %s --out %s --envs %s --strategy %s --flexibility %s",
		rel(SnapshotFile), tree, strings.Join(envs, ","), s.gen.Strategy, s.gen.Flexibility)
	// The IAM screen's choices: iam apply and plan (whose IAM steps create
	// what iam apply did not) take the same flags.
	iamFlags := ""
	if s.iamOpts.Identity != "" {
		iamFlags += " --identity " + string(s.iamOpts.Identity)
	}
	if s.iamOpts.CreateOIDCProvider {
		iamFlags += " --create-oidc-provider"
	}
	cmds := []string{
		// The wizard's discover reads no live prices (Ops.Discover): the
		// plan's $/h come from the embedded list, as with --offline.
		fmt.Sprintf("karpenter-migrate discover --cluster %s --snapshot %s --offline%s", s.conn.Cluster, rel(SnapshotFile), global),
		gen,
	}
	if s.iamDone {
		cmds = append(cmds, fmt.Sprintf("karpenter-migrate iam apply --snapshot %s --journal %s%s --yes%s", rel(SnapshotFile), rel(action.IAMJournalFile(s.conn.Cluster)), iamFlags, global))
	}
	karpenter := ""
	switch {
	case s.skipKarpenter:
		karpenter = " --skip-karpenter"
	case s.opts.KarpenterChart != "":
		karpenter = " --karpenter-chart " + s.opts.KarpenterChart
	}
	return append(cmds,
		fmt.Sprintf("karpenter-migrate plan --env %s --snapshot %s --dir %s --config %s -f %s%s%s%s", env, rel(SnapshotFile), tree, rel(ConfigFile(env)), plan, iamFlags, karpenter, global),
		fmt.Sprintf("karpenter-migrate apply --plan %s --dir %s --yes%s%s", plan, tree, ackFlag(s), global),
	)
}

// shellWrap breaks a command between its flags (a flag stays with its
// value) to fit width, with the shell's line continuation, so it can be
// pasted as it is.
func shellWrap(cmd string, width int) string {
	var units []string
	for _, w := range strings.Fields(cmd) {
		if n := len(units); n > 0 && (!strings.HasPrefix(w, "-") && strings.HasPrefix(units[n-1], "-") && !strings.Contains(units[n-1], " ") ||
			!strings.HasPrefix(w, "-") && !strings.HasPrefix(units[n-1], "-")) {
			units[n-1] += " " + w
			continue
		}
		units = append(units, w)
	}
	var lines []string
	line := ""
	for _, u := range units {
		switch {
		case line == "":
			line = u
		case len(line)+1+len(u)+2 > width:
			lines = append(lines, line+" \\")
			line = "    " + u
		default:
			line += " " + u
		}
	}
	return strings.Join(append(lines, line), "\n")
}

func ackFlag(s *state) string {
	if s.run.AckBlockers {
		return " --ack-blockers"
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
