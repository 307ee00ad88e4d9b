package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// connectScreen asks for the kubeconfig context, the cluster, the AWS
// profile and region, and the environment name, with detected defaults,
// and checks them live before moving on.
type connectScreen struct {
	s       *state
	inputs  []textinput.Model
	focus   int
	spin    spinner.Model
	busy    bool
	err     error
	checked bool
}

var connectLabels = []string{"Kubeconfig context", "EKS cluster", "AWS profile", "AWS region", "Environment"}

type connectedMsg struct {
	info ConnectInfo
	err  error
}

func newConnect(s *state) screen {
	d := s.opts.Defaults
	values := []string{d.Context, d.Cluster, d.Profile, d.Region, d.Environment}
	hints := []string{"current context", "cluster name", "default", "from the profile", "dev, staging or prod"}
	c := &connectScreen{s: s, spin: spinner.New(spinner.WithSpinner(spinner.Line))}
	for i, v := range values {
		in := textinput.New()
		in.Prompt = ""
		in.Placeholder = hints[i]
		in.CharLimit = 256
		in.Width = 40
		in.SetValue(v)
		in.ShowSuggestions = true
		in.KeyMap.AcceptSuggestion = keyAccept
		switch i {
		case 0:
			in.SetSuggestions(d.Contexts)
		case 2:
			in.SetSuggestions(d.Profiles)
		case 4:
			in.SetSuggestions([]string{"dev", "staging", "prod"})
		}
		c.inputs = append(c.inputs, in)
	}
	c.inputs[0].Focus()
	return c
}

func (c *connectScreen) title() string { return "Connect" }
func (c *connectScreen) typing() bool  { return true }
func (c *connectScreen) init() tea.Cmd { return textinput.Blink }

func (c *connectScreen) help() []key.Binding {
	return []key.Binding{keyField, keyPrev, keyAccept, keyConnect}
}

func (c *connectScreen) connection() Connection {
	v := func(i int) string { return strings.TrimSpace(c.inputs[i].Value()) }
	return Connection{Context: v(0), Cluster: v(1), Profile: v(2), Region: v(3), Environment: v(4)}
}

func (c *connectScreen) setFocus(i int) tea.Cmd {
	c.inputs[c.focus].Blur()
	c.focus = (i + len(c.inputs)) % len(c.inputs)
	return c.inputs[c.focus].Focus()
}

func (c *connectScreen) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case connectedMsg:
		c.busy = false
		c.err = msg.err
		if msg.err != nil {
			return nil
		}
		c.s.info, c.checked = msg.info, true
		return next
	case spinner.TickMsg:
		if !c.busy {
			return nil
		}
		var cmd tea.Cmd
		c.spin, cmd = c.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		if c.busy {
			return nil
		}
		switch {
		case key.Matches(msg, keyConnect):
			if c.focus < len(c.inputs)-1 && c.inputs[c.focus].Value() != "" {
				return c.setFocus(c.focus + 1)
			}
			conn := c.connection()
			c.s.conn = conn
			c.busy, c.err = true, nil
			be, ctx := c.s.be, c.s.ctx
			return tea.Batch(c.spin.Tick, func() tea.Msg {
				info, err := be.Connect(ctx, conn)
				return connectedMsg{info: info, err: err}
			})
		case key.Matches(msg, keyField):
			return c.setFocus(c.focus + 1)
		case key.Matches(msg, keyPrev):
			return c.setFocus(c.focus - 1)
		}
	}
	var cmd tea.Cmd
	c.inputs[c.focus], cmd = c.inputs[c.focus].Update(msg)
	return cmd
}

func (c *connectScreen) view(width, _ int) string {
	st := c.s.st
	var b strings.Builder
	b.WriteString("Which cluster and account? Defaults were detected;\nthe connection is checked live when you press enter on the last field.\n\n")
	for i, in := range c.inputs {
		label := fmt.Sprintf("%-20s", connectLabels[i])
		if i == c.focus {
			label = st.key.Render("> " + label)
		} else {
			label = "  " + label
		}
		fmt.Fprintf(&b, "%s %s\n", label, in.View())
	}
	b.WriteString("\n")
	switch {
	case c.busy:
		fmt.Fprintf(&b, "%s checking the API server and the EKS cluster…\n", c.spin.View())
	case c.err != nil:
		b.WriteString(st.bad.Width(width).Render("✗ "+c.err.Error()) + "\n")
		b.WriteString(st.dim.Render("Fix a field and press enter on the last one to retry.") + "\n")
	}
	b.WriteString("\n" + st.dim.Width(width).Render("Everything the wizard does is a plain command too; it prints them at the end."))
	return b.String()
}
