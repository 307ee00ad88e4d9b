package cli

import (
	"context"
	"log/slog"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// eventLogger logs each rollout progress event through the command's
// logger, so --log-format json gives one slog JSON object per step, wave
// phase, eviction, PDB wait and gate, stamped with the event's own time.
func eventLogger(l *slog.Logger) rollout.Observer {
	return func(e rollout.Event) {
		level := slog.LevelInfo
		switch e.Kind {
		case rollout.EventStepFailed:
			level = slog.LevelError
		case rollout.EventPDBWait:
			level = slog.LevelWarn
		case rollout.EventGate:
			if e.Gate != nil && !e.Gate.Passed {
				level = slog.LevelWarn
			}
		}
		ctx := context.Background()
		if !l.Enabled(ctx, level) {
			return
		}
		msg := e.Message
		if msg == "" {
			msg = string(e.Kind)
		}
		r := slog.NewRecord(e.Time, level, msg, 0)
		r.AddAttrs(slog.String("event", string(e.Kind)))
		str := func(k, v string) {
			if v != "" {
				r.AddAttrs(slog.String(k, v))
			}
		}
		num := func(k string, v int) {
			if v != 0 {
				r.AddAttrs(slog.Int(k, v))
			}
		}
		str("step", e.Step)
		num("wave", e.Wave)
		num("waves", e.Waves)
		str("phase", e.Phase)
		str("node", e.Node)
		str("pod", e.Pod)
		str("pdb", e.PDB)
		num("done", e.Done)
		num("total", e.Total)
		if e.DryRun {
			r.AddAttrs(slog.Bool("dryRun", true))
		}
		if g := e.Gate; g != nil {
			r.AddAttrs(slog.Group("gate", slog.Bool("passed", g.Passed), slog.Any("notReady", g.NotReady), slog.Any("pending", g.Pending),
				slog.Any("pendingTooLong", g.PendingTooLong), slog.Any("pdbsBelowMin", g.PDBsBelowMin)))
		}
		_ = l.Handler().Handle(ctx, r)
	}
}
