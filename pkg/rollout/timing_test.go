package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// steppingClock is the wall clock whose Now moves a second at each call,
// so that every stamp the run takes differs from the one before.
type steppingClock struct {
	clock.RealClock
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

func (c *steppingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// apply times each wave in the journal (start, end, the plan's figure),
// says at each wave's end how long it took against the prediction, and at
// the end of the run the waves' makespan against the plan's total.
func TestApplyTimesTheWaves(t *testing.T) {
	sc := newScenario(t)
	ctx := context.Background()
	var mu sync.Mutex
	var events []rollout.Event
	r := sc.runner(func(e rollout.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
	r.Clock = &steppingClock{now: time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)}
	if sc.plan.Timing.PredictedSeconds <= 0 {
		t.Fatalf("the scenario's plan predicts %vs; want a duration", sc.plan.Timing.PredictedSeconds)
	}
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	j, err := rollout.Status(ctx, sc.kube, "karpenter-migrate", "dev")
	if err != nil || j == nil {
		t.Fatalf("Status: %v, %v", j, err)
	}
	if j.PredictedSeconds != sc.plan.Timing.PredictedSeconds || j.BoundSeconds != sc.plan.Timing.BoundSeconds {
		t.Errorf("journal predicted %vs bound %vs; the plan's are %vs, %vs", j.PredictedSeconds, j.BoundSeconds, sc.plan.Timing.PredictedSeconds, sc.plan.Timing.BoundSeconds)
	}
	done := map[int]string{}
	for _, e := range events {
		if e.Kind == rollout.EventWavePhase && e.Phase == rollout.PhaseDone {
			done[e.Wave] = e.Message
		}
	}
	if len(j.Waves) != len(sc.plan.Waves) {
		t.Fatalf("journal has %d waves, the plan %d", len(j.Waves), len(sc.plan.Waves))
	}
	for _, w := range j.Waves {
		pw := sc.plan.Waves[w.Index-1]
		if w.StartedAt.IsZero() || !w.FinishedAt.After(w.StartedAt) || w.PredictedSeconds != pw.PredictedSeconds {
			t.Errorf("wave %d: started %v finished %v predicted %vs; want a start before the end and the plan's %vs", w.Index, w.StartedAt, w.FinishedAt, w.PredictedSeconds, pw.PredictedSeconds)
		}
		if want := fmt.Sprintf("done in %s, predicted %s", w.FinishedAt.Sub(w.StartedAt), time.Duration(pw.PredictedSeconds)*time.Second); done[w.Index] != want {
			t.Errorf("wave %d's end says %q, want %q", w.Index, done[w.Index], want)
		}
	}
	elapsed, all := j.WavesElapsed(j.UpdatedAt)
	if want := j.Waves[len(j.Waves)-1].FinishedAt.Sub(j.Waves[0].StartedAt); !all || elapsed != want {
		t.Errorf("waves elapsed %s (all done: %t), want %s from the first start to the last end", elapsed, all, want)
	}
	last := events[len(events)-1]
	if want := "waves in all: " + elapsed.String() + " elapsed, predicted "; last.Kind != rollout.EventRunFinished || !strings.Contains(last.Message, want) {
		t.Errorf("the run's end says %q; want it to contain %q", last.Message, want)
	}
}

// The journal's timing line, worked by hand: two waves from 10:00:00 to
// 10:05:00 and 10:05:30 to 10:09:00 are 9 minutes in all, 1.5× a
// prediction of 6 minutes.
func TestWavesTiming(t *testing.T) {
	at := func(m, s int) time.Time { return time.Date(2026, 11, 29, 10, m, s, 0, time.UTC) }
	j := &rollout.Journal{PredictedSeconds: 360, BoundSeconds: 95, Waves: []rollout.WaveRecord{
		{Index: 1, StartedAt: at(0, 0), FinishedAt: at(5, 0)},
		{Index: 2, StartedAt: at(5, 30), FinishedAt: at(9, 0)},
	}}
	if got, want := j.WavesTiming(at(30, 0)), "waves in all: 9m0s elapsed, predicted 6m0s (1.50×), lower bound 1m35s"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	// While wave 2 runs, its time counts to now.
	j.Waves[1].FinishedAt = time.Time{}
	if got, want := j.WavesTiming(at(8, 0)), "waves so far: 8m0s elapsed, predicted 6m0s (1.33×), lower bound 1m35s"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := (&rollout.Journal{}).WavesTiming(at(0, 0)); got != "" {
		t.Errorf("no wave started: got %q, want nothing", got)
	}
}

// TestGateWaitsAPollAfterTheDrain: a wave's gate reads the controllers'
// status (a Deployment's ready replicas, here always 4/4), which may not
// count the drain's last evictions yet; a pass at the drain's end is
// checked again a poll later before the wave goes on. (In the sandbox the
// first two waves of the demo passed their gate in the instant their drain
// ended, before the last pods' replacements existed.)
func TestGateWaitsAPollAfterTheDrain(t *testing.T) {
	sc := newScenario(t)
	const poll = 30 * time.Millisecond
	var mu sync.Mutex
	lastEvicted := map[int]time.Time{}
	gates := map[int]int{}
	cleanup := map[int]time.Time{}
	r := sc.runner(func(e rollout.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == rollout.EventEviction && e.Message == "evicted":
			lastEvicted[e.Wave] = time.Now()
		case e.Kind == rollout.EventGate && e.Wave > 0:
			gates[e.Wave]++
		case e.Kind == rollout.EventWavePhase && e.Phase == rollout.PhaseCleanup:
			cleanup[e.Wave] = time.Now()
		}
	})
	r.Options.PollInterval = poll
	if err := r.Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(lastEvicted) == 0 {
		t.Fatal("no wave evicted a pod")
	}
	for w, at := range lastEvicted {
		// Passing a poll or more after it, however many evaluations that
		// took: on a loaded machine the first one may come that late.
		if d := cleanup[w].Sub(at); d < poll {
			t.Errorf("wave %d: gate evaluated %d times, passed %s after the last eviction; want a poll (%s) or more after it", w, gates[w], d, poll)
		}
	}
}
