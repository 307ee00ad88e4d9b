package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/utils/clock"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// The primitives the runbook's steps (migrations/) are written against:
// report, record, wait, drain, read a node group.

// Emit reports a progress event to the run's Observer. A wave's phase
// events also time the wave in the journal (WaveRecord.StartedAt,
// FinishedAt), which the step saves as it records the phase; the event of
// its end says how long it took against the plan's prediction.
func (s *Session) Emit(e Event) {
	if e.Kind == EventWavePhase && e.Wave > 0 && !s.Options.DryRun {
		s.timeWave(&e)
	}
	s.em.emit(e)
}

// timeWave stamps the wave's start (its first phase) and end (PhaseDone)
// on its journal record; a resumed wave keeps its first start.
func (s *Session) timeWave(e *Event) {
	rec := s.Journal.Wave(e.Wave)
	now := s.Clock.Now().UTC()
	if rec.StartedAt.IsZero() {
		rec.StartedAt = now
		if e.Wave <= len(s.Plan.Waves) {
			rec.PredictedSeconds = s.Plan.Waves[e.Wave-1].PredictedSeconds
		}
	}
	if e.Phase != PhaseDone {
		return
	}
	rec.FinishedAt = now
	e.Message = fmt.Sprintf("done in %s", rec.Elapsed(now).Round(time.Second))
	if rec.PredictedSeconds > 0 {
		e.Message += fmt.Sprintf(", predicted %s", plan.Seconds(rec.PredictedSeconds))
	}
}

// Change reports one change made (or, in a dry run, that would be made)
// in the current step and wave.
func (s *Session) Change(format string, args ...any) {
	s.Emit(Event{Kind: EventChange, Step: s.Journal.Current.Step, Wave: s.Journal.Current.Wave, Message: fmt.Sprintf(format, args...)})
}

// Record stores raw under key in the journal's recorded values, unless a
// value is already there; it returns the value kept.
func (s *Session) Record(ctx context.Context, key string, raw []byte) ([]byte, error) {
	if s.Journal.Recorded.Extra == nil {
		s.Journal.Recorded.Extra = map[string]json.RawMessage{}
	}
	if v, ok := s.Journal.Recorded.Extra[key]; ok {
		return v, nil
	}
	s.Journal.Recorded.Extra[key] = raw
	return raw, s.Save(ctx)
}

// Save writes the journal (not in dry-run). It survives cancellation of
// ctx so an interrupted run still records where it stopped.
func (s *Session) Save(ctx context.Context) error {
	if s.Options.DryRun {
		return nil
	}
	s.Journal.UpdatedAt = s.Clock.Now().UTC()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return s.store.Save(ctx, s.Journal)
}

// Waiting records what the run waits for (status shows it).
func (s *Session) Waiting(ctx context.Context, what string, done, total int) {
	s.Emit(Event{Kind: EventWaiting, Step: s.Journal.Current.Step, Wave: s.Journal.Current.Wave, Phase: s.Journal.Current.Phase, Message: what, Done: done, Total: total})
	if s.Journal.Current.WaitingFor != what {
		s.Journal.Current.WaitingFor = what
		_ = s.Save(ctx) // best effort: status is informational
	}
}

// Poll calls cond every PollInterval on the session clock until it
// reports done, fails, or timeout passes (then it returns ErrTimeout).
func (s *Session) Poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := s.Clock.Now().Add(timeout)
	for {
		done, err := cond()
		if err != nil || done {
			return err
		}
		if timeout > 0 && !s.Clock.Now().Before(deadline) {
			return ErrTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Clock.After(s.Options.PollInterval):
		}
	}
}

// ErrTimeout is what Poll returns when its timeout passes.
var ErrTimeout = errors.New("timed out")

// DrainOptions are the evictions' settings for this run: the runner's
// options and the plan's budget over kube.DefaultDrainOptions.
func (s *Session) DrainOptions() kube.DrainOptions {
	o := kube.DefaultDrainOptions()
	if s.Options.Drain != nil {
		o = *s.Options.Drain
	}
	o.ForceEvict = o.ForceEvict || s.Options.ForceEvict || s.Plan.Budget.ForceEvict
	o.DeleteEmptyDirData = o.DeleteEmptyDirData || s.Plan.Budget.AllowEmptyDir
	if o.Timeout == 0 {
		o.Timeout = s.Plan.Budget.Gates.PDBWaitTimeout.Duration
	}
	// On the wall clock, follow PDBs and pods through watches (evict as
	// soon as a budget allows, know at once that a pod is gone); a
	// simulated clock (the sandbox) keeps the timers only, so a seed
	// still gives one run.
	if _, wall := s.Clock.(clock.RealClock); wall {
		o.Watch = true
	}
	return o
}

// DescribeGroup reads one Auto Scaling group.
func (s *Session) DescribeGroup(ctx context.Context, asg string) (*astypes.AutoScalingGroup, error) {
	out, err := s.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asg}})
	if err != nil {
		return nil, fmt.Errorf("describe ASG %s: %w", asg, err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return nil, fmt.Errorf("describe ASG %s: not found", asg)
	}
	return &out.AutoScalingGroups[0], nil
}
