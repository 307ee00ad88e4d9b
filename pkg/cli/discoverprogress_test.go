package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
)

func TestDiscoverProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		tty  bool
		err  error
		want []string // in order
		not  []string
	}{
		{"plain lines", false, nil, []string{"reading EKS\n", "reading pods\n", "discovery took "}, []string{"✓", "\x1b["}},
		{"steps display, success", true, nil, []string{"✓ EKS", "✓ pods", "discovery took "}, []string{"✗"}},
		{"steps display, failure", true, errors.New("denied"), []string{"✓ EKS", "✗ pods", "discovery took "}, []string{"✓ pods"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := discovery{w: &out, tty: tc.tty}.run(context.Background(), func(_ context.Context, stage func(string)) error {
				stage("EKS")
				stage("pods")
				return tc.err
			})
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			got := regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`).ReplaceAllString(out.String(), "")
			if tc.tty && !strings.Contains(out.String(), "\x1b[") {
				t.Errorf("no terminal control sequences on a TTY: %q", out.String())
			}
			// The display's last frame is the one that stays on screen.
			last := got
			if i := strings.LastIndex(got, "EKS"); tc.tty && i >= 0 {
				last = got[max(0, strings.LastIndex(got[:i], "\n")):]
			}
			rest := last
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output %q lacks %q (in order)", got, w)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(last, n) {
					t.Errorf("output %q has %q", last, n)
				}
			}
		})
	}
}

// TestDiscoverProgressInterrupted: Ctrl-C in the display stops the
// discovery with exit code 130, as it would without the display.
func TestDiscoverProgressInterrupted(t *testing.T) {
	keys, press := io.Pipe()
	defer press.Close()
	d := discovery{w: io.Discard, tty: true, keys: keys}
	err := d.run(context.Background(), func(ctx context.Context, stage func(string)) error {
		stage("EKS")
		go press.Write([]byte{0x03}) // Ctrl-C
		<-ctx.Done()
		return ctx.Err()
	})
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitInterrupted || !strings.Contains(err.Error(), "discovery interrupted (Ctrl-C)") {
		t.Fatalf("err = %v, want exit %d saying the discovery was interrupted", err, ExitInterrupted)
	}
}
