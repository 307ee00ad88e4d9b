package demo

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestRunWithTUIInterrupted presses Ctrl-C in the progress display during
// the second wave: the demo stops there (it does not run on behind a
// closed display), and RunWithTUI returns its summary and ErrInterrupted.
func TestRunWithTUIInterrupted(t *testing.T) {
	keys, press := io.Pipe()
	defer press.Close()
	var once sync.Once
	opts := Options{Seed: 1, OutDir: t.TempDir(), Events: func(e Event) {
		if strings.HasPrefix(e.Step, "wave-2-") {
			once.Do(func() { go press.Write([]byte{0x03}) }) // Ctrl-C
		}
	}}
	sum, err := RunWithTUI(t.Context(), opts, keys, io.Discard)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if sum == nil {
		t.Fatal("no summary")
	}
	status := map[string]string{}
	for _, st := range sum.Steps {
		status[st.ID] = st.Status
	}
	if status["apply"] != StatusFailed || status["final-state"] != StatusSkipped {
		t.Errorf("steps %v: want apply stopped and final-state skipped", status)
	}
}
