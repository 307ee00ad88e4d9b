package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui/progress"
)

// discovery shows the stages of a discovery on w: the shared steps display
// (progress.Show) on a terminal, one plain line per stage otherwise, or one
// slog event per stage with --log-format json; then how long it took.
type discovery struct {
	w   io.Writer
	tty bool
	log *slog.Logger // set: JSON events instead of lines or the display
	// keys is the display's input; nil, as on the command line, leaves it
	// the terminal's signals (Ctrl-C is SIGINT).
	keys io.Reader
}

// discovery shows a discovery's stages on stderr as --log-format asks.
func (g *GlobalOptions) discovery() discovery {
	return discovery{w: g.IO.ErrOut, tty: g.IO.IsStdoutTTY(), log: g.jsonLogger()}
}

// run runs work, which reports each stage as it starts. Ctrl-C in the
// display stops the discovery: exit code 130, as without the display.
func (d discovery) run(ctx context.Context, work func(ctx context.Context, stage func(string)) error) error {
	start := time.Now()
	var err error
	switch {
	case d.log != nil:
		err = work(ctx, func(s string) { d.log.Info("reading "+s, "event", eventDiscoverStep, "source", s) })
	case !d.tty:
		err = work(ctx, func(s string) { fmt.Fprintf(d.w, "reading %s\n", s) })
	default:
		err = progress.Show(ctx, d.keys, d.w, func(ctx context.Context, send func(progress.Event)) error {
			return work(ctx, progress.Stages(send))
		})
	}
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case d.log != nil && err != nil:
		d.log.Error("discovery failed after "+took.String(), "event", eventDiscoverDone, "duration", took.String(), "error", err.Error())
	case d.log != nil:
		d.log.Info("discovery took "+took.String(), "event", eventDiscoverDone, "duration", took.String())
	default:
		fmt.Fprintf(d.w, "discovery took %s\n", took)
	}
	if errors.Is(err, progress.ErrInterrupted) {
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("discovery interrupted (Ctrl-C): %w", err)}
	}
	return err
}
