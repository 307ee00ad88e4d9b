package progress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

func init() { lipgloss.SetColorProfile(termenv.Ascii) }

// TestStepsView: a step runs with a spinner, ends with a mark, is skipped
// with a dash, and a step measured while it ran shows its bar; Finish says
// how the run ended on the steps still running.
func TestStepsView(t *testing.T) {
	s := NewSteps()
	stage := Stages(s.Set)
	stage("EKS")
	stage("pods")
	s.Set(Event{Step: "wave-1", Status: Running, Message: "3/6 pods evicted", Progress: 0.5})
	s.Set(Event{Step: "final", Status: Skipped, Progress: -1})
	lines := strings.Split(strings.TrimRight(s.View(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("view:\n%s", s.View())
	}
	for i, want := range []func(string) bool{
		func(l string) bool { return strings.HasPrefix(l, "✓ EKS") },
		func(l string) bool { return !strings.HasPrefix(l, "✓") && strings.Contains(l, "pods") },
		func(l string) bool {
			return strings.Contains(l, "wave-1") && strings.Contains(l, "█") && strings.Contains(l, "3/6 pods evicted")
		},
		func(l string) bool { return strings.HasPrefix(l, "– final") },
	} {
		if !want(lines[i]) {
			t.Errorf("line %d: %q\n%s", i, lines[i], s.View())
		}
	}
	s.Finish(true)
	if v := s.View(); !strings.Contains(v, "✗ pods") || !strings.Contains(v, "✗ wave-1") || !strings.Contains(v, "✓ EKS") {
		t.Errorf("after a failed run:\n%s", v)
	}
}

// TestShowInterrupted presses Ctrl-C in the display while the work runs:
// the work's context is cancelled with ErrInterrupted as its cause, it
// does not outlive the display, and Show returns its error wrapping
// ErrInterrupted.
func TestShowInterrupted(t *testing.T) {
	keys, press := io.Pipe()
	defer press.Close()
	var cause error
	err := Show(context.Background(), keys, io.Discard, func(ctx context.Context, send func(Event)) error {
		send(Event{Step: "apply", Status: Running, Progress: -1})
		go press.Write([]byte{0x03}) // Ctrl-C
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrInterrupted wrapping the work's error", err)
	}
	if !errors.Is(cause, ErrInterrupted) {
		t.Errorf("the work was cancelled by %v, want ErrInterrupted", cause)
	}
}

// TestShowRunsToTheEnd: the display ends with the work, its last frame the
// steps as they finished, and Show returns the work's own error.
func TestShowRunsToTheEnd(t *testing.T) {
	var out bytes.Buffer
	boom := errors.New("boom")
	err := Show(context.Background(), nil, &out, func(_ context.Context, send func(Event)) error {
		send(Event{Step: "discover", Status: Done, Message: "4 node groups", Progress: 1})
		send(Event{Step: "plan", Status: Running, Progress: -1})
		return boom
	})
	if err != boom {
		t.Fatalf("err = %v, want the work's", err)
	}
	if o := out.String(); !strings.Contains(o, "✓ discover") || !strings.Contains(o, "4 node groups") || !strings.Contains(o, "✗ plan") {
		t.Errorf("display:\n%s", o)
	}
}
