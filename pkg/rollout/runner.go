// Package rollout runs the migrations/ runbook for one environment on a
// plan (pkg/plan): it applies the steps in order with a journal and a
// Lease in the cluster, moves pods in PDB-safe waves behind pre-provisioned
// Karpenter capacity, resumes after interruption and rolls back with each
// step's Down.
//
// Every collaborator is a value (clients, AWS interfaces, clock), so the
// sandbox runs the same runner against an in-memory cluster under
// simulated time.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Step is one runbook entry (see migrations/). Check says whether its work
// is already done; Up does it; Down undoes it. All three must be safe to
// re-run after an interruption at any point.
type Step struct {
	ID      string
	Purpose string
	// Destructive steps ask for confirmation (Options.Confirm).
	Destructive bool
	Check       func(ctx context.Context, s *Session) (done bool, why string, err error)
	Up          func(ctx context.Context, s *Session) error
	Down        func(ctx context.Context, s *Session) error
}

// Options tune a run.
type Options struct {
	// DryRun reports what would change and changes nothing (no lock, no
	// journal write).
	DryRun bool
	// ForceEvict evicts do-not-disrupt / safe-to-evict=false pods too.
	ForceEvict bool
	// RemoveIAM lets rollback delete the IAM and access objects.
	RemoveIAM bool
	// AckBlockers lets preflight pass with blocker findings in the plan.
	AckBlockers bool
	// Operator and ToolVersion are written to the journal.
	Operator    string
	ToolVersion string
	// PollInterval is how often waits poll (default 2s).
	PollInterval time.Duration
	// LeaseDuration is how long the lock survives a dead holder (default 60s).
	LeaseDuration time.Duration
	// Identity names this run in the Lease (default Operator).
	Identity string
	// Drain tunes evictions; zero means kube.DefaultDrainOptions.
	Drain *kube.DrainOptions
	// Confirm asks before a destructive step; nil means yes. It returns
	// false to stop the run.
	Confirm func(question string) (bool, error)
	// Observer receives progress events.
	Observer Observer
}

// Session is what a step works with: the clients, the plan, the journal.
type Session struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Mapper resolves kinds for server-side apply; nil uses kube.KarpenterMapper.
	Mapper meta.RESTMapper
	ASG    AutoScalingAPI
	// EKS is used for managed node groups; nil treats them as plain ASGs.
	EKS   EKSAPI
	Clock clock.WithTicker
	// Namespace is the tool's namespace (journal, lease, placeholders).
	Namespace string
	Plan      *plan.Plan
	Journal   *Journal
	Options   Options
	// Infra runs the IAM steps (IAMInfra over pkg/iam); nil skips them
	// with a note.
	Infra Infra
	// Overlay yields the environment's NodePools and node classes
	// (pkg/generate's built overlay); nil skips the NodePools step.
	Overlay Overlay
	// Karpenter installs the plan's Karpenter release (pkg/helm, or the
	// sandbox's stand-in); nil skips the Karpenter step with a note.
	Karpenter KarpenterInstaller

	store *Store
	em    *emitter
}

// Runner applies or rolls back the steps of one environment.
type Runner struct {
	Session
	Steps []Step
	// Replan, when set, is called when the cluster drifted from the plan
	// (apply --replan) and returns a fresh plan to apply instead.
	Replan func(ctx context.Context) (*plan.Plan, error)
	// Drift returns the material differences between the plan and the
	// cluster; nil uses DetectDrift.
	Drift func(ctx context.Context, s *Session) ([]string, error)
}

func (r *Runner) init() error {
	s := &r.Session
	if s.Kube == nil || s.Plan == nil {
		return errors.New("rollout: Kube and Plan are required")
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.Namespace == "" {
		s.Namespace = "karpenter-migrate"
	}
	if s.Mapper == nil {
		s.Mapper = kube.KarpenterMapper()
	}
	if s.Options.PollInterval <= 0 {
		s.Options.PollInterval = 2 * time.Second
	}
	if s.Options.LeaseDuration <= 0 {
		s.Options.LeaseDuration = time.Minute
	}
	if s.Options.Identity == "" {
		s.Options.Identity = s.Options.Operator
	}
	s.store = NewStore(s.Kube, s.Namespace, s.Plan.Environment)
	s.em = &emitter{obs: s.Options.Observer, now: s.Clock.Now, dryRun: s.Options.DryRun}
	if si, ok := s.Infra.(SessionInfra); ok {
		si.Bind(s)
	}
	return nil
}

// Apply runs every step not yet applied, in order. It returns *HeldError
// (kube) when another run holds the lock, *DriftError when the cluster
// changed since the plan, *PausedError when a wave stopped at a gate.
func (r *Runner) Apply(ctx context.Context) (err error) {
	if err := r.init(); err != nil {
		return err
	}
	s := &r.Session
	j, err := s.store.Load(ctx)
	if err != nil {
		return err
	}
	// The same plan again (resume, or a no-op re-run) skips the drift check:
	// the differences are our own changes.
	resuming := j != nil && j.PlanHash == s.Plan.Hash && j.State != StateRolledBack
	if j == nil || j.State == StateRolledBack {
		j = &Journal{Environment: s.Plan.Environment, Cluster: s.Plan.Cluster}
	}
	s.Journal = j

	if s.Options.DryRun {
		return r.dryRun(ctx)
	}
	held, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := held.Release(rctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	ctx = held.Context()

	if !resuming {
		if err := r.checkDrift(ctx); err != nil {
			return err
		}
		if j.PlanHash != s.Plan.Hash {
			j.Waves = nil // waves belong to the plan they were cut from
		}
	}
	now := s.Clock.Now().UTC()
	if j.StartedAt.IsZero() || !resuming {
		j.StartedAt = now
	}
	j.PlanHash, j.Operator, j.ToolVersion, j.State, j.Message = s.Plan.Hash, s.Options.Operator, s.Options.ToolVersion, StateRunning, ""
	j.PredictedSeconds, j.BoundSeconds = s.Plan.Timing.PredictedSeconds, s.Plan.Timing.BoundSeconds
	if err := s.Save(ctx); err != nil {
		return err
	}
	s.Emit(Event{Kind: EventRunStarted, Total: len(r.Steps), Message: fmt.Sprintf("apply plan %s to %s", shortHash(s.Plan.Hash), s.Plan.Environment)})
	defer func() { r.finish(ctx, err, StateCompleted) }()

	for i, st := range r.Steps {
		if err := r.applyStep(ctx, i, st); err != nil {
			return s.lockLost(ctx, err)
		}
	}
	j.Current = Progress{}
	return nil
}

// lockLost turns the error of a run whose Lease was lost (the API server
// unreachable for longer than the Lease allows) into a pause: nothing
// more was changed, and apply resumes from the journal.
func (s *Session) lockLost(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if ctx.Err() == nil || !errors.Is(cause, kube.ErrLockLost) {
		return err
	}
	return &PausedError{Step: s.Journal.Current.Step, Wave: s.Journal.Current.Wave,
		Reason: fmt.Sprintf("the API server could not be reached for longer than the lease allows (%v); nothing more was changed", cause)}
}

func (r *Runner) lock(ctx context.Context) (*kube.Held, error) {
	s := &r.Session
	l := &kube.Lock{Client: s.Kube, Namespace: s.Namespace, Name: JournalName(s.Plan.Environment), Identity: s.Options.Identity, Duration: s.Options.LeaseDuration, Clock: s.Clock}
	return l.Acquire(ctx)
}

func (r *Runner) checkDrift(ctx context.Context) error {
	s := &r.Session
	detect := r.Drift
	if detect == nil {
		detect = DetectDrift
	}
	changes, err := detect(ctx, s)
	if err != nil {
		return fmt.Errorf("compare the cluster with the plan: %w", err)
	}
	if len(changes) == 0 {
		return nil
	}
	if r.Replan == nil {
		return &DriftError{Plan: s.Plan.Hash, Changes: changes}
	}
	p, err := r.Replan(ctx)
	if err != nil {
		return fmt.Errorf("replan: %w", err)
	}
	s.Emit(Event{Kind: EventChange, Message: fmt.Sprintf("cluster drifted (%v); replanned as %s", changes, shortHash(p.Hash))})
	s.Plan = p
	return nil
}

// finish writes the run's final state to the journal.
func (r *Runner) finish(ctx context.Context, err error, okState string) {
	s := &r.Session
	var paused *PausedError
	switch {
	case err == nil:
		s.Journal.State = okState
	case errors.As(err, &paused):
		s.Journal.State, s.Journal.Message = StatePaused, paused.Error()
	case ctx.Err() != nil:
		s.Journal.State, s.Journal.Message = StateInterrupted, context.Cause(ctx).Error()
	default:
		s.Journal.State, s.Journal.Message = StateFailed, err.Error()
	}
	_ = s.Save(ctx)
	msg := s.Journal.State
	if s.Journal.Message != "" {
		msg += ": " + s.Journal.Message
	}
	if t := s.Journal.WavesTiming(s.Clock.Now()); t != "" && okState == StateCompleted {
		msg += "; " + t
	}
	s.Emit(Event{Kind: EventRunFinished, Message: msg})
}

func (r *Runner) applyStep(ctx context.Context, i int, st Step) error {
	s := &r.Session
	j := s.Journal
	rec := j.Step(st.ID)
	if rec != nil && (rec.State == StateDone || rec.State == StateSkipped) {
		s.Emit(Event{Kind: EventStepSkipped, Step: st.ID, Done: i + 1, Total: len(r.Steps), Message: "already applied " + rec.FinishedAt.Format(time.RFC3339)})
		return nil
	}
	if rec == nil {
		j.Steps = append(j.Steps, StepRecord{ID: st.ID})
		rec = &j.Steps[len(j.Steps)-1]
	}
	j.Current = Progress{Step: st.ID}
	rec.StartedAt, rec.State, rec.Message = s.Clock.Now().UTC(), StateRunning, ""
	s.Emit(Event{Kind: EventStepStarted, Step: st.ID, Done: i, Total: len(r.Steps), Message: st.Purpose})
	if st.Check != nil {
		done, why, err := st.Check(ctx, s)
		if err != nil {
			return r.stepFailed(ctx, rec, i, fmt.Errorf("%s: check: %w", st.ID, err))
		}
		if done {
			rec.State, rec.Message, rec.FinishedAt = StateSkipped, why, s.Clock.Now().UTC()
			s.Emit(Event{Kind: EventStepSkipped, Step: st.ID, Done: i + 1, Total: len(r.Steps), Message: why})
			return s.Save(ctx)
		}
	}
	if err := s.Save(ctx); err != nil {
		return err
	}
	if st.Destructive && s.Options.Confirm != nil {
		ok, err := s.Options.Confirm(fmt.Sprintf("Step %s: %s. Proceed?", st.ID, st.Purpose))
		if err != nil {
			return r.stepFailed(ctx, rec, i, err)
		}
		if !ok {
			return r.stepFailed(ctx, rec, i, fmt.Errorf("%s: declined; nothing after it ran", st.ID))
		}
	}
	if err := st.Up(ctx, s); err != nil {
		return r.stepFailed(ctx, rec, i, fmt.Errorf("%s: %w", st.ID, err))
	}
	rec = j.Step(st.ID) // Up may have grown j.Steps
	rec.State, rec.FinishedAt = StateDone, s.Clock.Now().UTC()
	s.Emit(Event{Kind: EventStepFinished, Step: st.ID, Done: i + 1, Total: len(r.Steps)})
	return s.Save(ctx)
}

func (r *Runner) stepFailed(ctx context.Context, rec *StepRecord, i int, err error) error {
	s := &r.Session
	rec = s.Journal.Step(rec.ID)
	var paused *PausedError
	switch {
	case errors.As(err, &paused):
		rec.State = StatePaused
	case ctx.Err() != nil:
		rec.State = StateInterrupted
	default:
		rec.State = StateFailed
	}
	rec.Message = err.Error()
	s.Emit(Event{Kind: EventStepFailed, Step: rec.ID, Done: i, Total: len(r.Steps), Message: err.Error()})
	_ = s.Save(ctx)
	return err
}

// dryRun reports, step by step, what apply would do.
func (r *Runner) dryRun(ctx context.Context) error {
	s := &r.Session
	s.Emit(Event{Kind: EventRunStarted, Total: len(r.Steps), Message: "dry run: nothing will change"})
	for i, st := range r.Steps {
		if rec := s.Journal.Step(st.ID); rec != nil && (rec.State == StateDone || rec.State == StateSkipped) && s.Journal.PlanHash == s.Plan.Hash {
			s.Emit(Event{Kind: EventStepSkipped, Step: st.ID, Done: i + 1, Total: len(r.Steps), Message: "already applied"})
			continue
		}
		s.Journal.Current = Progress{Step: st.ID}
		if st.Check != nil {
			done, why, err := st.Check(ctx, s)
			if err != nil {
				s.Emit(Event{Kind: EventStepFailed, Step: st.ID, Message: "check: " + err.Error()})
				continue
			}
			if done {
				s.Emit(Event{Kind: EventStepSkipped, Step: st.ID, Done: i + 1, Total: len(r.Steps), Message: why})
				continue
			}
		}
		s.Emit(Event{Kind: EventStepStarted, Step: st.ID, Done: i, Total: len(r.Steps), Message: st.Purpose})
		if err := st.Up(ctx, s); err != nil {
			s.Emit(Event{Kind: EventStepFailed, Step: st.ID, Message: err.Error()})
		}
	}
	s.Emit(Event{Kind: EventRunFinished, Message: "dry run finished: nothing changed"})
	return nil
}

// Rollback runs Down, in reverse order, for every step applied after to
// (every applied step when to is empty).
func (r *Runner) Rollback(ctx context.Context, to string) (err error) {
	if err := r.init(); err != nil {
		return err
	}
	s := &r.Session
	j, err := s.store.Load(ctx)
	if err != nil {
		return err
	}
	if j == nil {
		return fmt.Errorf("nothing to roll back: no journal for environment %s in namespace %s", s.Plan.Environment, s.Namespace)
	}
	s.Journal = j
	stop := -1
	if to != "" {
		stop = slices.IndexFunc(r.Steps, func(st Step) bool { return SameStep(st.ID, to) })
		if stop < 0 {
			ids := make([]string, len(r.Steps))
			for i, st := range r.Steps {
				ids[i] = st.ID
			}
			return fmt.Errorf("--to %q: no such step; steps are %v", to, ids)
		}
	}
	if !s.Options.DryRun {
		// err is the named result: the deferred finish must see the
		// rollback's outcome, not a shadowed variable.
		var held *kube.Held
		held, err = r.lock(ctx)
		if err != nil {
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if rerr := held.Release(rctx); rerr != nil && err == nil {
				err = rerr
			}
		}()
		ctx = held.Context()
		j.State = StateRunning
		if err = s.Save(ctx); err != nil {
			return err
		}
		final := StateRolledBack
		if stop >= 0 {
			final = StatePaused
		}
		defer func() {
			r.finish(ctx, err, final)
			if err == nil && stop >= 0 {
				s.Journal.Message = "rolled back to " + to
				_ = s.Save(ctx)
			}
		}()
	}
	s.Emit(Event{Kind: EventRunStarted, Message: "rollback of " + s.Plan.Environment})
	for i := len(r.Steps) - 1; i > stop; i-- {
		st := r.Steps[i]
		rec := j.Step(st.ID)
		if rec == nil || rec.State == StateSkipped || rec.State == StateRolledBack || st.Down == nil {
			continue
		}
		j.Current = Progress{Step: st.ID}
		s.Emit(Event{Kind: EventStepStarted, Step: st.ID, Message: "down: " + st.Purpose})
		if st.Destructive && s.Options.Confirm != nil && !s.Options.DryRun {
			ok, err := s.Options.Confirm(fmt.Sprintf("Undo step %s (%s)?", st.ID, st.Purpose))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s: declined; rollback stopped", st.ID)
			}
		}
		if err := st.Down(ctx, s); err != nil {
			s.Emit(Event{Kind: EventStepFailed, Step: st.ID, Message: err.Error()})
			return s.lockLost(ctx, fmt.Errorf("%s down: %w", st.ID, err))
		}
		if !s.Options.DryRun {
			rec = j.Step(st.ID)
			rec.State, rec.FinishedAt, rec.Message = StateRolledBack, s.Clock.Now().UTC(), ""
			if err := s.Save(ctx); err != nil {
				return err
			}
		}
		s.Emit(Event{Kind: EventStepFinished, Step: st.ID, Message: "rolled back"})
	}
	j.Current = Progress{}
	return nil
}

// Status returns the journal of the environment, or nil if never applied.
func Status(ctx context.Context, client kubernetes.Interface, namespace, env string) (*Journal, error) {
	return NewStore(client, namespace, env).Load(ctx)
}
