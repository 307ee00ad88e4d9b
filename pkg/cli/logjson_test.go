package cli

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

// jsonEvents parses stderr as slog JSON lines, failing on any other line
// or one without time, level, msg and event.
func jsonEvents(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var events []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Errorf("stderr line is not one JSON event: %v: %q", err, sc.Text())
			continue
		}
		ts, _ := e["time"].(string)
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || e["level"] == nil || e["msg"] == "" || e["event"] == nil {
			t.Errorf("event lacks time, level, msg or event: %s", sc.Text())
		}
		events = append(events, e)
	}
	return events
}

func countEvents(events []map[string]any, event, level string) int {
	n := 0
	for _, e := range events {
		if e["event"] == event && e["level"] == level {
			n++
		}
	}
	return n
}

func TestLogFormatJSONStderr(t *testing.T) {
	srv, _ := iamFixture(t)
	snapOut := filepath.Join(t.TempDir(), "snapshot.json")
	for _, tc := range []struct {
		name    string
		args    []string
		stdout  string         // human output, unchanged
		events  map[string]int // "event level" -> at least this many
		wantErr bool
	}{
		{"generate notes and warnings", []string{"generate", "--snapshot", generateFixture, "--out", t.TempDir(), "--envs", "dev", "--strategy", "weighted"},
			"NODEPOOL", map[string]int{"Warning WARN": 1}, false},
		{"discover progress", []string{"discover", "--cluster", "prod", "--region", "us-west-2", "--endpoint-url", srv.URL(), "--skip-kubernetes", "--snapshot", snapOut},
			"NODE GROUP", map[string]int{"DiscoverStep INFO": 2, "DiscoverDone INFO": 1, "Wrote INFO": 1}, false},
		{"readiness acknowledgement warning", []string{"readiness", "--snapshot", blockerSnapshot(t), "--config", writeConfig(t, "readiness: {acknowledge: [no-such-finding]}\n")},
			"Readiness: 1 blocker(s)", map[string]int{"ReadinessAcknowledgment WARN": 1, "Error ERROR": 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, format := range []string{"json", "text"} {
				streams, _, out, errOut := iostreams.Test()
				cmd, g := newRoot(streams)
				cmd.SetArgs(append(tc.args, "--log-format", format))
				if code := g.exit(cmd.Execute()); (code != 0) != tc.wantErr {
					t.Fatalf("--log-format %s: exit %d\n%s", format, code, errOut)
				}
				if !strings.Contains(out.String(), tc.stdout) || strings.HasPrefix(out.String(), "{") {
					t.Errorf("--log-format %s: stdout lacks the table %q:\n%s", format, tc.stdout, out)
				}
				if format == "text" {
					if strings.Contains(errOut.String(), `{"time"`) || errOut.Len() == 0 {
						t.Errorf("text stderr:\n%s", errOut)
					}
					continue
				}
				events := jsonEvents(t, errOut.String())
				for k, n := range tc.events {
					ev, lvl, _ := strings.Cut(k, " ")
					if got := countEvents(events, ev, lvl); got < n {
						t.Errorf("%d %s events, want at least %d:\n%s", got, k, n, errOut)
					}
				}
			}
		})
	}
}

func TestExitErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantMsg  string
	}{
		{[]string{"readiness"}, ExitUsage, "--snapshot is required"},
		{[]string{"readiness", "--snapshot", "x", "--log-level", "loud"}, ExitUsage, `--log-level "loud"`},
		{[]string{"readiness", "--snapshot", "x", "--nosuchflag"}, ExitUsage, "unknown flag"},
		{[]string{"readiness", "--snapshot", "x"}, 1, "x"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			streams, _, _, errOut := iostreams.Test()
			cmd, g := newRoot(streams)
			cmd.SetArgs(append([]string{"--log-format", "json"}, tc.args...))
			if code := g.exit(cmd.Execute()); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			events := jsonEvents(t, errOut.String())
			if len(events) != 1 || events[0]["level"] != "ERROR" || !strings.Contains(events[0]["msg"].(string), tc.wantMsg) || events[0]["exitCode"] != float64(tc.wantCode) {
				t.Errorf("stderr %s, want one ERROR event with %q", errOut, tc.wantMsg)
			}
		})
	}
}
