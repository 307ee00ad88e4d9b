package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// interruption is Ctrl-C (SIGINT) or SIGTERM during a long command: the
// first cancels the command's context, so it stops cleanly (evictions in
// flight finish, the journal is written); a second one kills the process
// as the default handler does.
type interruption struct {
	mu  sync.Mutex
	sig os.Signal
}

// signal is the signal that interrupted the command, nil if none did.
func (in *interruption) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// signalName names a signal as the user sent it.
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "Ctrl-C"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// interruptedError is the error of an interrupted command: msg, and the
// command's own error when it is more than the cancellation.
func interruptedError(msg string, err error) error {
	if !errors.Is(err, context.Canceled) {
		msg = fmt.Sprintf("%s\n  it stopped with: %v", msg, err)
	}
	return &ExitError{Code: ExitInterrupted, Err: errors.New(msg)}
}

// interruptible returns ctx cancelled on the first SIGINT or SIGTERM, after
// telling the user what happens now (what); stop releases the signals.
func (g *GlobalOptions) interruptible(ctx context.Context, what string) (context.Context, *interruption, func()) {
	ctx, cancel := context.WithCancel(ctx)
	in := &interruption{}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch) // a second Ctrl-C quits at once
			in.mu.Lock()
			in.sig = s
			in.mu.Unlock()
			g.say(slog.LevelWarn, eventInterrupted, "", fmt.Sprintf("%s: %s (press Ctrl-C again to quit at once)", signalName(s), what), slog.String("signal", s.String()))
			cancel()
		case <-done:
		}
	}()
	return ctx, in, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// interruptedRollout says where a signal stopped apply or rollback, that
// the journal records it, and the commands that resume or roll back.
func interruptedRollout(g *GlobalOptions, f *runFlags, verb string, r *rollout.Runner, sig os.Signal, err error) error {
	p := r.Session.Plan
	where := "before it changed anything"
	if j := r.Session.Journal; j != nil && j.Current.Step != "" {
		where = "at step " + j.Current.Step
		if j.Current.Wave > 0 {
			where += fmt.Sprintf(" wave %d of %d", j.Current.Wave, len(p.Waves))
		}
		if j.Current.Phase != "" {
			where += " (" + j.Current.Phase + ")"
		}
	}
	var b strings.Builder
	if f.dryRun {
		fmt.Fprintf(&b, "%s --dry-run interrupted (%s) %s; nothing was changed", verb, signalName(sig), where)
	} else {
		fmt.Fprintf(&b, "%s of %s interrupted (%s) %s: the evictions in flight finished and the journal (ConfigMap %s/%s) records where it stopped\n",
			verb, p.Environment, signalName(sig), where, g.Namespace, rollout.JournalName(p.Environment))
		again := "resume"
		if verb == "rollback" {
			again = "continue the rollback"
		}
		fmt.Fprintf(&b, "  %s: %s\n", again, rolloutCommand(g, f, verb))
		if verb == "apply" {
			fmt.Fprintf(&b, "  or roll back: %s\n", rolloutCommand(g, f, "rollback"))
		}
		fmt.Fprintf(&b, "  see where it is: karpenter-migrate status --env %s%s", p.Environment, globalFlags(g))
	}
	return interruptedError(b.String(), err)
}

// rolloutCommand is the apply or rollback command line that picks up the
// same plan, tree and settings.
func rolloutCommand(g *GlobalOptions, f *runFlags, verb string) string {
	args := []string{"karpenter-migrate", verb, "--plan", f.plan}
	if f.dir != "" {
		args = append(args, "--dir", f.dir)
	}
	if f.config != "" && verb == "apply" {
		args = append(args, "--config", f.config)
	}
	if f.inCluster {
		args = append(args, "--in-cluster")
	}
	if f.yes {
		args = append(args, "--yes")
	}
	return strings.Join(args, " ") + globalFlags(g)
}

// globalFlags repeats the connection flags the command was given.
func globalFlags(g *GlobalOptions) string {
	var b strings.Builder
	for _, fl := range []struct{ name, value, def string }{
		{"--kubeconfig", g.Kubeconfig, ""}, {"--context", g.Context, ""}, {"--namespace", g.Namespace, "karpenter-migrate"},
		{"--region", g.Region, ""}, {"--profile", g.Profile, ""}, {"--endpoint-url", g.EndpointURL, ""},
	} {
		if fl.value != fl.def {
			fmt.Fprintf(&b, " %s %s", fl.name, fl.value)
		}
	}
	return b.String()
}
