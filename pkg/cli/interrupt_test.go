package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

// signalOn is an output that sends this process sig the first time what it
// has been written contains trigger, as a user pressing Ctrl-C on seeing it.
type signalOn struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	trigger string
	sig     syscall.Signal
	sent    bool
}

func (w *signalOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.sent && strings.Contains(w.buf.String(), w.trigger) {
		w.sent = true
		if err := syscall.Kill(os.Getpid(), w.sig); err != nil {
			return n, err
		}
	}
	return n, err
}

func (w *signalOn) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestDemoInterrupted sends the process a real SIGINT while the demo
// drains its third wave: the demo stops at that step, says so and how to
// run it again, exits 130, and leaves its summary on disk.
func TestDemoInterrupted(t *testing.T) {
	dir := t.TempDir()
	out := &signalOn{trigger: "wave-3-", sig: syscall.SIGINT}
	var errOut bytes.Buffer
	cmd, g := newRoot(&iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: &errOut})
	cmd.SetArgs([]string{"demo", "--seed", "2", "--out", dir})
	code := g.exit(cmd.Execute())
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitInterrupted, out, &errOut)
	}
	stderr := errOut.String()
	for _, want := range []string{
		"Ctrl-C: stopping the demo (press Ctrl-C again to quit at once)",
		"Error: demo interrupted (Ctrl-C) at step apply: its cluster and AWS account live in memory, so nothing outside them changed",
		"what it wrote so far is in " + dir,
		"Run it again: karpenter-migrate demo --seed 2",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "it stopped with") {
		t.Errorf("the cancellation itself is reported as a failure:\n%s", stderr)
	}
	status := summaryStatus(t, dir)
	if status["plan"] != demo.StatusDone || status["apply"] != demo.StatusFailed || status["final-state"] != demo.StatusSkipped {
		t.Errorf("summary steps %v: want plan done, apply stopped, final-state skipped", status)
	}
}

// keyOn is a terminal's output that presses key on its input the first
// time what was drawn contains trigger, as a user would on seeing it.
type keyOn struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	trigger string
	press   func()
}

func (w *keyOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.press != nil && strings.Contains(w.buf.String(), w.trigger) {
		go w.press()
		w.press = nil
	}
	return n, err
}

// TestDemoInterruptedOnTheDisplay presses Ctrl-C in the demo's progress
// display (pkg/tui/progress on a terminal) during the second wave: the demo
// stops there, as with SIGINT, and says so with exit code 130.
func TestDemoInterruptedOnTheDisplay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo to its second wave; skipped with -short")
	}
	dir := t.TempDir()
	keys, in := io.Pipe()
	defer in.Close()
	out := &keyOn{trigger: "wave-2-", press: func() { _, _ = in.Write([]byte{0x03}) }}
	var errOut bytes.Buffer
	streams := &iostreams.IOStreams{In: keys, Out: out, ErrOut: &errOut}
	streams.SetTTY(true)
	cmd, g := newRoot(streams)
	cmd.SetArgs([]string{"demo", "--seed", "1", "--out", dir})
	code := g.exit(cmd.Execute())
	if code != ExitInterrupted || !strings.Contains(errOut.String(), "demo interrupted (Ctrl-C) at step apply") {
		t.Fatalf("exit %d, want %d naming the step:\n%s", code, ExitInterrupted, &errOut)
	}
	status := summaryStatus(t, dir)
	if status["apply"] != demo.StatusFailed || status["final-state"] != demo.StatusSkipped {
		t.Errorf("steps %v: want apply stopped and final-state skipped", status)
	}
}

// summaryStatus is each step's status in the summary.json the demo wrote to dir.
func summaryStatus(t *testing.T, dir string) map[string]string {
	t.Helper()
	var sum demo.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, st := range sum.Steps {
		status[st.ID] = st.Status
	}
	return status
}
