//go:build chaos

package cli

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// The chaos ladder's binary (pkg/rollout/e2e, `make chaos`) kills itself
// with SIGKILL at a named point of a run: KM_CHAOS_KILL_AT is a regular
// expression over chaosPoint's line of each progress event, and the
// KM_CHAOS_KILL_NTH-th event it matches (default 1) is printed, then the
// process is killed before the runner takes another step. Only a binary
// built with -tags chaos carries this.
func init() {
	expr := os.Getenv("KM_CHAOS_KILL_AT")
	if expr == "" {
		return
	}
	re := regexp.MustCompile(expr)
	nth := 1
	if n, err := strconv.Atoi(os.Getenv("KM_CHAOS_KILL_NTH")); err == nil && n > 0 {
		nth = n
	}
	chaosHook = func(o rollout.Observer) rollout.Observer {
		seen := 0
		return func(e rollout.Event) {
			o(e)
			line := chaosPoint(e)
			if !re.MatchString(line) {
				return
			}
			if seen++; seen == nth {
				fmt.Fprintf(os.Stderr, "chaos: SIGKILL at %q (match %d of %s)\n", line, nth, expr)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
}

// chaosPoint is the line KM_CHAOS_KILL_AT matches: kind, step, wave,
// phase and message ("WavePhase 09_drain_waves w1 drain ").
func chaosPoint(e rollout.Event) string {
	return fmt.Sprintf("%s %s w%d %s %s", e.Kind, e.Step, e.Wave, e.Phase, e.Message)
}
