package tui

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// generateScreen chooses the strategy, the instance-type flexibility and
// the environments, previews the tree as a diff against what is on disk,
// and writes it.
type generateScreen struct {
	s        *state
	row      int
	strategy int
	flex     int
	envs     textinput.Model
	spin     spinner.Model
	busy     string
	err      error
	preview  *GenerateResult
	file     int
	vp       viewport.Model
	size     tea.WindowSizeMsg
}

var (
	strategies    = []generate.Strategy{generate.StrategyMultiple, generate.StrategySingle, generate.StrategyWeighted}
	flexibilities = []generate.Flexibility{generate.FlexibilityExact, generate.FlexibilityFamily, generate.FlexibilitySimilar}
	strategyHelp  = map[generate.Strategy]string{
		generate.StrategyMultiple: "one NodePool per node group",
		generate.StrategySingle:   "merge the groups that can share a pool",
		generate.StrategyWeighted: "pools per capacity type, on-demand preferred",
	}
	flexHelp = map[generate.Flexibility]string{
		generate.FlexibilityExact:   "the groups' instance types",
		generate.FlexibilityFamily:  "their families, all sizes",
		generate.FlexibilitySimilar: "same category and arch, at least as large",
	}
)

type generatedMsg struct {
	res   *GenerateResult
	write bool
	err   error
}

func newGenerate(s *state) screen {
	in := textinput.New()
	in.Prompt = ""
	in.SetValue("dev,staging," + s.conn.Environment)
	if s.conn.Environment == "dev" || s.conn.Environment == "staging" || s.conn.Environment == "prod" {
		in.SetValue("dev,staging,prod")
	}
	return &generateScreen{s: s, envs: in, spin: progress.NewSpinner(), vp: viewport.New(80, 10)}
}

func (g *generateScreen) title() string { return "Generate" }
func (g *generateScreen) init() tea.Cmd { return nil }
func (g *generateScreen) typing() bool  { return g.preview == nil && g.row == 2 }

func (g *generateScreen) help() []key.Binding {
	switch {
	case g.s.genRes != nil:
		return []key.Binding{keyNext}
	case g.preview != nil:
		return []key.Binding{keyFile, keyScroll, keyWrite, keyBack}
	}
	return []key.Binding{keyUp, keyLeft, keyPreviewEnter}
}

var keyPreviewEnter = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "preview"))

func (g *generateScreen) choice() GenerateChoice {
	var envs []string
	for _, e := range strings.Split(g.envs.Value(), ",") {
		if e = strings.TrimSpace(e); e != "" {
			envs = append(envs, e)
		}
	}
	return GenerateChoice{Strategy: strategies[g.strategy], Flexibility: flexibilities[g.flex], Envs: envs}
}

func (g *generateScreen) run(write bool) tea.Cmd {
	c := g.choice()
	if len(c.Envs) == 0 {
		g.err = fmt.Errorf("environments: give at least one, e.g. %s", g.s.conn.Environment)
		return nil
	}
	g.err = nil
	g.busy = "previewing"
	if write {
		g.busy = "writing and building every overlay"
	}
	be, ctx, inv := g.s.be, g.s.ctx, g.s.inv
	return tea.Batch(g.spin.Tick, func() tea.Msg {
		res, err := be.Generate(ctx, inv, c, write)
		return generatedMsg{res: res, write: write, err: err}
	})
}

func (g *generateScreen) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		g.size = msg
		g.vp.Width, g.vp.Height = msg.Width, max(3, msg.Height-5)
	case generatedMsg:
		g.busy = ""
		if msg.err != nil {
			g.err = msg.err
			return nil
		}
		if msg.write {
			g.s.gen, g.s.genRes = g.choice(), msg.res
			return nil
		}
		g.preview, g.file = msg.res, firstChanged(msg.res.Files)
		g.showFile()
	case spinner.TickMsg:
		if g.busy == "" {
			return nil
		}
		var cmd tea.Cmd
		g.spin, cmd = g.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		if g.busy != "" {
			return nil
		}
		switch {
		case g.s.genRes != nil:
			if key.Matches(msg, keyNext) {
				return next
			}
		case g.preview != nil:
			return g.previewKey(msg)
		default:
			return g.formKey(msg)
		}
	}
	return nil
}

func (g *generateScreen) formKey(msg tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(msg, keyPreviewEnter):
		return g.run(false)
	case msg.Type == tea.KeyUp || msg.Type == tea.KeyShiftTab:
		g.row = (g.row + 2) % 3
	case msg.Type == tea.KeyDown || msg.Type == tea.KeyTab:
		g.row = (g.row + 1) % 3
	case g.row == 2:
		var cmd tea.Cmd
		g.envs, cmd = g.envs.Update(msg)
		return cmd
	case key.Matches(msg, keyLeft):
		g.change(-1)
	case key.Matches(msg, keyRight):
		g.change(1)
	}
	if g.row == 2 {
		return g.envs.Focus()
	}
	g.envs.Blur()
	return nil
}

func (g *generateScreen) change(d int) {
	switch g.row {
	case 0:
		g.strategy = (g.strategy + d + len(strategies)) % len(strategies)
	case 1:
		g.flex = (g.flex + d + len(flexibilities)) % len(flexibilities)
	}
}

func (g *generateScreen) previewKey(msg tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(msg, keyWrite):
		return g.run(true)
	case key.Matches(msg, keyBack):
		g.preview = nil
	case key.Matches(msg, keyFile):
		g.file = (g.file + 1) % len(g.preview.Files)
		g.showFile()
	case key.Matches(msg, keyFilePrev):
		g.file = (g.file + len(g.preview.Files) - 1) % len(g.preview.Files)
		g.showFile()
	default:
		var cmd tea.Cmd
		g.vp, cmd = g.vp.Update(msg)
		return cmd
	}
	return nil
}

// firstChanged is the first file writing would change, to show first.
func firstChanged(files []FilePreview) int {
	for i, f := range files {
		if f.Action == generate.FileCreated || f.Action == generate.FileUpdated {
			return i
		}
	}
	return 0
}

func (g *generateScreen) showFile() {
	if len(g.preview.Files) == 0 {
		g.vp.SetContent("(no files)")
		return
	}
	f := g.preview.Files[g.file]
	st := g.s.st
	var b strings.Builder
	switch {
	case f.Diff == "":
		b.WriteString(st.dim.Render("unchanged"))
	default:
		for _, l := range strings.Split(strings.TrimRight(f.Diff, "\n"), "\n") {
			switch {
			case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
				l = st.ok.Render(l)
			case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---"):
				l = st.bad.Render(l)
			case strings.HasPrefix(l, "@@"):
				l = st.dim.Render(l)
			}
			b.WriteString(l + "\n")
		}
	}
	g.vp.SetContent(b.String())
	g.vp.GotoTop()
}

func (g *generateScreen) view(width, _ int) string {
	st := g.s.st
	var b strings.Builder
	if res := g.s.genRes; res != nil {
		counts := map[generate.FileAction]int{}
		for _, f := range res.Files {
			counts[f.Action]++
		}
		fmt.Fprintf(&b, "%s Wrote %s\n  %d created, %d updated, %d unchanged, %d kept (you edited them)\n\n", st.ok.Render("✓"), res.Dir,
			counts[generate.FileCreated], counts[generate.FileUpdated]+counts[generate.FileOverwritten], counts[generate.FileUnchanged], counts[generate.FileKept])
		b.WriteString("NodePools:\n")
		for _, p := range res.Pools {
			fmt.Fprintf(&b, "  %-18s ← %s (%s, %d types)\n", p.Name, strings.Join(p.NodeGroups, ","), strings.Join(p.CapacityTypes, ","), p.InstanceTypes)
		}
		if res.Written != nil {
			b.WriteString("\n" + lipgloss.NewStyle().Width(width).Render("Every overlay built with kustomize: "+builtSummary(res.Written.Built)) + "\n")
		}
		for _, w := range res.Warnings {
			b.WriteString(st.warn.Width(width).Render("warning: "+w) + "\n")
		}
		return b.String()
	}
	c := g.choice()
	if g.preview != nil {
		counts := map[generate.FileAction]int{}
		for _, f := range g.preview.Files {
			counts[f.Action]++
		}
		fmt.Fprintf(&b, "%s · %s · envs %s → %s\n", c.Strategy, c.Flexibility, strings.Join(c.Envs, ","), g.preview.Dir)
		fmt.Fprintf(&b, "%d NodePools; %d files: %d new, %d changed, %d unchanged, %d kept\n", len(g.preview.Pools), len(g.preview.Files),
			counts[generate.FileCreated], counts[generate.FileUpdated], counts[generate.FileUnchanged], counts[generate.FileKept])
		if len(g.preview.Files) > 0 {
			f := g.preview.Files[g.file]
			b.WriteString(st.key.Render(fmt.Sprintf("[%d/%d] %s (%s)", g.file+1, len(g.preview.Files), f.Path, f.Action)) + "\n")
		}
		b.WriteString(g.vp.View() + "\n")
	} else {
		rows := []struct{ label, value, hint string }{
			{"Strategy", string(c.Strategy), strategyHelp[c.Strategy]},
			{"Flexibility", string(c.Flexibility), flexHelp[c.Flexibility]},
			{"Environments", g.envs.View(), "comma-separated overlay profiles"},
		}
		b.WriteString("How should the node groups become NodePools?\n\n")
		for i, r := range rows {
			label := fmt.Sprintf("  %-13s", r.label)
			value := r.value
			if i < 2 {
				value = "‹ " + value + " ›"
			}
			if i == g.row {
				label = st.key.Render("> " + fmt.Sprintf("%-13s", r.label))
			}
			fmt.Fprintf(&b, "%s %-22s %s\n", label, value, st.dim.Render(r.hint))
		}
		b.WriteString("\n" + lipgloss.NewStyle().Width(width).Render(fmt.Sprintf("The tree goes to %s (base + overlays/<env>), as `generate --out` writes it.", filepath.Join(g.s.opts.OutDir, TreeDir))) + "\n")
	}
	if g.busy != "" {
		fmt.Fprintf(&b, "%s %s…\n", g.spin.View(), g.busy)
	}
	if g.err != nil {
		b.WriteString(st.bad.Width(width).Render("✗ "+g.err.Error()) + "\n")
	}
	return b.String()
}

func builtSummary(built map[string]int) string {
	var parts []string
	for _, env := range sortedKeys(built) {
		parts = append(parts, fmt.Sprintf("%s (%d objects)", env, built[env]))
	}
	return strings.Join(parts, ", ")
}
