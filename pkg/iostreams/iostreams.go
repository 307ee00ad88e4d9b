// Package iostreams is the one place that decides whether output goes to a
// terminal, whether it is coloured and whether the user may be prompted.
// Plain commands, the wizard and the demo all print through it.
package iostreams

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// IOStreams holds the process's standard streams and what they are connected to.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY  bool
	stdoutTTY bool
	colorOff  bool
	neverAsk  bool
}

// ErrNoPrompt is returned by Confirm when the session cannot prompt.
var ErrNoPrompt = errors.New("cannot prompt: not an interactive terminal")

// System returns streams bound to the process's stdin, stdout and stderr,
// detecting terminals and honouring NO_COLOR and TERM=dumb.
func System() *IOStreams {
	s := &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stdinTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		stdoutTTY: term.IsTerminal(int(os.Stdout.Fd())),
	}
	if _, ok := os.LookupEnv("NO_COLOR"); ok || os.Getenv("TERM") == "dumb" {
		s.colorOff = true
	}
	return s
}

// Test returns streams backed by buffers, as in a non-interactive run.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, colorOff: true}, in, out, errOut
}

// SetTTY marks stdin and stdout as terminals (or not); tests use it.
func (s *IOStreams) SetTTY(tty bool) { s.stdinTTY, s.stdoutTTY = tty, tty }

// SetColorEnabled forces colour on or off (--no-color).
func (s *IOStreams) SetColorEnabled(on bool) { s.colorOff = !on }

// SetNeverPrompt disables prompting (--yes, CI).
func (s *IOStreams) SetNeverPrompt(never bool) { s.neverAsk = never }

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// ColorEnabled reports whether output may carry ANSI colour.
func (s *IOStreams) ColorEnabled() bool { return s.stdoutTTY && !s.colorOff }

// CanPrompt reports whether the user can be asked a question.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stdoutTTY && !s.neverAsk }

// Confirm asks a yes/no question; hint names the flag that answers it
// non-interactively, for the error when no prompt is possible.
func (s *IOStreams) Confirm(question, hint string) (bool, error) {
	if !s.CanPrompt() {
		return false, fmt.Errorf("%w; pass %s to proceed non-interactively", ErrNoPrompt, hint)
	}
	fmt.Fprintf(s.Out, "%s [y/N]: ", question)
	line, err := bufio.NewReader(s.In).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read answer: %w", err)
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
