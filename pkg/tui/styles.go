package tui

import (
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
)

// styles are the wizard's lipgloss styles. Colours come from the default
// renderer, whose profile Run sets to plain ASCII for NO_COLOR, TERM=dumb
// and --no-color, so every style degrades to text.
type styles struct {
	title, step, dim, ok, warn, bad, sel, key lipgloss.Style
}

func newStyles() styles {
	return styles{
		title: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		step:  lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		dim:   lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		ok:    lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		warn:  lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		bad:   lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		sel:   lipgloss.NewStyle().Bold(true).Reverse(true),
		key:   lipgloss.NewStyle().Bold(true),
	}
}

// Key bindings shared by the screens; each screen lists the ones it uses
// in its help.
var (
	keyQuit     = key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit"))
	keyQuitAny  = key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit"))
	keyQ        = key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit"))
	keyNext     = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "continue"))
	keyUp       = key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/↓", "move"))
	keyDown     = key.NewBinding(key.WithKeys("down", "j"))
	keyToggle   = key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "in/exclude"))
	keyAll      = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "include all"))
	keyExpand   = key.NewBinding(key.WithKeys("right", "l", "tab"), key.WithHelp("→", "expand"))
	keyAck      = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "acknowledge"))
	keyField    = key.NewBinding(key.WithKeys("tab", "down"), key.WithHelp("tab/↓", "next"))
	keyPrev     = key.NewBinding(key.WithKeys("shift+tab", "up"), key.WithHelp("↑", "previous"))
	keyAccept   = key.NewBinding(key.WithKeys("right", "ctrl+e"), key.WithHelp("→", "complete"))
	keyConnect  = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "connect"))
	keyLeft     = key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/→", "change"))
	keyRight    = key.NewBinding(key.WithKeys("right", "l"))
	keyWrite    = key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "write tree"))
	keyFile     = key.NewBinding(key.WithKeys("]", "n"), key.WithHelp("]/[", "next/prev file"))
	keyFilePrev = key.NewBinding(key.WithKeys("[", "N"))
	keyScroll   = key.NewBinding(key.WithKeys("pgdown", "pgup"), key.WithHelp("pgup/pgdn", "scroll"))
	keyBack     = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back"))
	keyApply    = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "apply"))
	keySkip     = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "skip"))
	keyView     = key.NewBinding(key.WithKeys("enter", "v"), key.WithHelp("enter", "document"))
	keyYes      = key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "yes"))
	keyNo       = key.NewBinding(key.WithKeys("n", "esc", "enter"), key.WithHelp("n/enter", "no"))
	keyWaveUp   = key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+/-", "wave"))
	keyWaveDown = key.NewBinding(key.WithKeys("-", "_"))
	keyConcUp   = key.NewBinding(key.WithKeys(">", "."), key.WithHelp(">/<", "parallel"))
	keyConcDown = key.NewBinding(key.WithKeys("<", ","))
	keyStart    = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "start"))
	keyPause    = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause"))
	keyResume   = key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "resume"))
	keyRollback = key.NewBinding(key.WithKeys("b"), key.WithHelp("b", "roll back"))
)
