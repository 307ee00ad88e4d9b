package tui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/table"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// discoverScreen reads AWS and the cluster showing each stage as the
// discover command does (progress.Steps), then lists the node groups to
// include or exclude.
type discoverScreen struct {
	s      *state
	steps  *progress.Steps
	stage  func(string)
	ch     <-chan tea.Msg
	err    error
	table  table.Model
	size   tea.WindowSizeMsg
	groups []groupRow
	warn   string
}

// groupRow is one node group in the table.
type groupRow struct {
	name, kind, types, zones, capacity string
	nodes, pods                        int
	cost                               float64
}

type discoverStageMsg string

type discoveredMsg struct {
	inv *inventory.Inventory
	err error
}

func newDiscover(s *state) screen {
	steps := progress.NewSteps()
	return &discoverScreen{s: s, steps: steps, stage: progress.Stages(steps.Set)}
}

func (d *discoverScreen) title() string { return "Discover" }

func (d *discoverScreen) init() tea.Cmd {
	be, ctx := d.s.be, d.s.ctx
	ch, cmd := stream(func(send func(tea.Msg)) tea.Msg {
		inv, err := be.Discover(ctx, func(stage string) { send(discoverStageMsg(stage)) })
		return discoveredMsg{inv: inv, err: err}
	})
	d.ch = ch
	return tea.Batch(d.steps.Init(), cmd)
}

func (d *discoverScreen) help() []key.Binding {
	if d.s.inv == nil {
		return nil
	}
	return []key.Binding{keyUp, keyToggle, keyAll, keyNext}
}

func (d *discoverScreen) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case discoverStageMsg:
		d.stage(string(msg))
		return listen(d.ch)
	case discoveredMsg:
		if msg.err != nil {
			d.err = msg.err
			return nil
		}
		d.s.inv = msg.inv
		d.groups = groupRows(msg.inv, catalog.Default())
		d.s.discoveredCost = 0
		for _, g := range d.groups {
			d.s.discoveredCost += g.cost
		}
		d.table = table.New(table.WithColumns(groupColumns), table.WithFocused(true))
		d.resize()
		d.refresh()
		return nil
	case tea.WindowSizeMsg:
		d.size = msg
		d.resize()
		return nil
	case spinner.TickMsg:
		if d.s.inv != nil || d.err != nil {
			return nil
		}
		return d.steps.Update(msg)
	case tea.KeyMsg:
		if d.s.inv == nil {
			return nil
		}
		switch {
		case key.Matches(msg, keyToggle):
			if row := d.table.Cursor(); row >= 0 && row < len(d.groups) {
				name := d.groups[row].name
				d.s.exclude[name] = !d.s.exclude[name]
				d.refresh()
			}
			return nil
		case key.Matches(msg, keyAll):
			d.s.exclude = map[string]bool{}
			d.refresh()
			return nil
		case key.Matches(msg, keyNext):
			if len(d.excluded()) == len(d.groups) {
				d.warn = "include at least one node group"
				return nil
			}
			return next
		}
		var cmd tea.Cmd
		d.table, cmd = d.table.Update(msg)
		return cmd
	}
	return nil
}

func (d *discoverScreen) resize() {
	d.table.SetHeight(max(3, min(len(d.groups)+1, d.size.Height-6)))
	d.table.SetWidth(min(d.size.Width, 80))
}

func (d *discoverScreen) excluded() []string {
	var out []string
	for _, g := range d.groups {
		if d.s.exclude[g.name] {
			out = append(out, g.name)
		}
	}
	return out
}

var groupColumns = []table.Column{
	{Title: "", Width: 1}, {Title: "NODE GROUP", Width: 12}, {Title: "KIND", Width: 7}, {Title: "NODES", Width: 5},
	{Title: "TYPES", Width: 14}, {Title: "ZONES", Width: 5}, {Title: "CAPACITY", Width: 9}, {Title: "PODS", Width: 4}, {Title: "$/H", Width: 5},
}

func (d *discoverScreen) refresh() {
	d.warn = ""
	rows := make([]table.Row, len(d.groups))
	for i, g := range d.groups {
		mark := "✓"
		if d.s.exclude[g.name] {
			mark = "✗"
		}
		rows[i] = table.Row{mark, g.name, g.kind, fmt.Sprint(g.nodes), g.types, g.zones, g.capacity, fmt.Sprint(g.pods), fmt.Sprintf("%.2f", g.cost)}
	}
	d.table.SetRows(rows)
}

// groupRows summarises each node group as the discover command's table does.
func groupRows(inv *inventory.Inventory, cat *catalog.Catalog) []groupRow {
	rows := make([]groupRow, 0, len(inv.NodeGroups))
	for _, ng := range inv.NodeGroups {
		nodes := inv.NodesOf(ng.Name)
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		kind := string(ng.Kind)
		if ng.Kind != inventory.Managed {
			kind = "self"
		}
		r := groupRow{name: ng.Name, kind: kind, types: strings.Join(ng.InstanceTypes, ","), capacity: ng.CapacityType, nodes: len(nodes), pods: len(inv.PodsOn(names...))}
		zones := append([]string(nil), ng.Zones...)
		sort.Strings(zones)
		r.zones = fmt.Sprint(len(zones))
		for _, n := range nodes {
			if p, ok := cat.Price(n.InstanceType, n.CapacityType, n.Zone); ok {
				r.cost += p
			}
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	return rows
}

func (d *discoverScreen) view(width, _ int) string {
	st := d.s.st
	var b strings.Builder
	if d.err != nil {
		b.WriteString(st.bad.Width(width).Render("✗ discovery failed: "+d.err.Error()) + "\n\n")
		b.WriteString("Check the connection and press ctrl+c; `karpenter-migrate discover --cluster " + d.s.conn.Cluster + "` shows the same error.\n")
		return b.String()
	}
	if d.s.inv == nil {
		b.WriteString("Reading AWS and the cluster…\n\n")
		b.WriteString(lipgloss.NewStyle().PaddingLeft(2).Render(d.steps.View()))
		return b.String()
	}
	inv := d.s.inv
	total := 0.0
	for _, g := range d.groups {
		total += g.cost
	}
	fmt.Fprintf(&b, "%d node groups, %d nodes, %d pods, %d PDBs; $%s/h. Snapshot written.\n", len(inv.NodeGroups), len(inv.Nodes), len(inv.Pods), len(inv.PDBs), perHour(total))
	b.WriteString(st.dim.Render("Space excludes a group from the migration: its nodes stay, no wave drains them.") + "\n\n")
	b.WriteString(d.table.View() + "\n")
	if ex := d.excluded(); len(ex) > 0 {
		b.WriteString("\nExcluded: " + strings.Join(ex, ", ") + "\n")
	}
	if d.warn != "" {
		b.WriteString(st.bad.Render(d.warn) + "\n")
	}
	return b.String()
}
