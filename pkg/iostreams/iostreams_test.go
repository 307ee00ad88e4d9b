package iostreams

import (
	"errors"
	"strings"
	"testing"
)

func TestConfirmRefusesWithoutTTY(t *testing.T) {
	s, _, _, _ := Test()
	_, err := s.Confirm("Drain?", "--yes")
	if !errors.Is(err, ErrNoPrompt) || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("err = %v, want ErrNoPrompt naming --yes", err)
	}
}

func TestConfirmReadsAnswer(t *testing.T) {
	for answer, want := range map[string]bool{"y\n": true, "YES\n": true, "n\n": false, "\n": false, "": false} {
		s, in, out, _ := Test()
		s.SetTTY(true)
		in.WriteString(answer)
		got, err := s.Confirm("Drain?", "--yes")
		if err != nil || got != want {
			t.Errorf("answer %q: got %v, %v; want %v", answer, got, err, want)
		}
		if !strings.Contains(out.String(), "Drain? [y/N]") {
			t.Errorf("prompt not printed: %q", out.String())
		}
	}
}

func TestNeverPromptAndColor(t *testing.T) {
	s, _, _, _ := Test()
	s.SetTTY(true)
	if !s.CanPrompt() {
		t.Fatal("tty streams cannot prompt")
	}
	s.SetNeverPrompt(true)
	if s.CanPrompt() {
		t.Fatal("--yes still prompts")
	}
	s.SetColorEnabled(true)
	if !s.ColorEnabled() {
		t.Fatal("colour off on a tty with colour forced on")
	}
	s.SetTTY(false)
	if s.ColorEnabled() {
		t.Fatal("colour on for a pipe")
	}
}
