package cli

import (
	"context"
	"fmt"
	"log/slog"
)

// Event kinds of the notes and progress lines the commands write on stderr
// (the "event" attribute of each JSON line with --log-format json, as the
// rollout's events carry theirs).
const (
	eventDiscoverStep   = "DiscoverStep"
	eventDiscoverDone   = "DiscoverDone"
	eventNote           = "Note"
	eventWarning        = "Warning"
	eventWrote          = "Wrote"
	eventIAMStep        = "IAMStep"
	eventIAMDone        = "IAMDone"
	eventReplanned      = "Replanned"
	eventPlanProgress   = "PlanProgress"
	eventAcknowledgment = "ReadinessAcknowledgment"
	eventInterrupted    = "Interrupted"
	eventError          = "Error"
)

// jsonLogger is the command's logger when --log-format json asks for one
// JSON event per stderr line, nil otherwise.
func (g *GlobalOptions) jsonLogger() *slog.Logger {
	if g.LogFormat != "json" {
		return nil
	}
	return g.Logger
}

// say writes one progress line or note on stderr: prefix+msg as plain
// text, or with --log-format json one slog event (time, level, msg, the
// event kind and attrs) through the command's logger, so that a pipeline
// reads stderr as JSON lines only.
func (g *GlobalOptions) say(level slog.Level, event, prefix, msg string, attrs ...slog.Attr) {
	if l := g.jsonLogger(); l != nil {
		l.LogAttrs(context.Background(), level, msg, append([]slog.Attr{slog.String("event", event)}, attrs...)...)
		return
	}
	fmt.Fprintln(g.IO.ErrOut, prefix+msg)
}
