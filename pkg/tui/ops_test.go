package tui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// steppingClock is an Advancer like the sandbox's: After advances the
// time, then reports the advance; from the failAt-th advance on (0:
// never), Err is the simulation's failure.
type steppingClock struct {
	*clocktesting.FakeClock
	failAt int

	mu       sync.Mutex
	advances int
	advance  func()
}

func (c *steppingClock) OnAdvance(f func()) {
	c.mu.Lock()
	c.advance = f
	c.mu.Unlock()
}

func (c *steppingClock) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failAt > 0 && c.advances >= c.failAt {
		return errors.New("controller exploded")
	}
	return nil
}

func (c *steppingClock) After(d time.Duration) <-chan time.Time {
	c.Step(d)
	c.mu.Lock()
	c.advances++
	f := c.advance
	c.mu.Unlock()
	if f != nil {
		f()
	}
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// TestRunOnAnAdvancingClock: the cluster is sampled as the runner's waits
// move it, and a run stops as soon as the simulation fails, naming why.
func TestRunOnAnAdvancingClock(t *testing.T) {
	tests := []struct {
		name      string
		failAt    int
		wantWaits int
		wantErr   string
		// wantViews: the one before, every 10s of simulated time, the one after.
		wantViews int
	}{
		{name: "runs to the end", wantWaits: 6, wantViews: 1 + 6 + 1},
		{name: "simulation fails", failAt: 3, wantWaits: 3, wantErr: "the sandbox's simulation failed: controller exploded", wantViews: 1 + 2 + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &steppingClock{FakeClock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), failAt: tc.failAt}
			o := &Ops{Namespace: "karpenter-migrate", OutDir: t.TempDir(), c: &Clients{Config: &action.Configuration{Kube: fake.NewClientset(), Clock: clk, PollInterval: 5 * time.Second}}}
			var views int
			sink := func(u Update) {
				if u.View != nil {
					views++
				}
			}
			waits := 0
			err := o.run(context.Background(), &plan.Plan{Environment: "prod"}, sink, func(ctx context.Context, r *rollout.Runner) error {
				for range 6 {
					if ctx.Err() != nil {
						return context.Cause(ctx)
					}
					<-r.Clock.After(10 * time.Second)
					waits++
				}
				return nil
			})
			if waits != tc.wantWaits {
				t.Errorf("the runner waited %d times, want %d", waits, tc.wantWaits)
			}
			if views != tc.wantViews {
				t.Errorf("%d views of the cluster, want %d", views, tc.wantViews)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("run: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("run: %v, want an error containing %q", err, tc.wantErr)
			}
			if clk.advance != nil {
				t.Error("run left its OnAdvance function on the clock")
			}
		})
	}
}

// TestViewPricesTheNodesAsDiscover: before anything moves, the rollout
// screen's $/h is the cost discover found, the Done screen's before. The
// self-managed groups' nodes carry no capacity-type label: priced by
// label alone, each cost its cheapest (spot) offering ($2.21 for the demo
// account's $3.06).
func TestViewPricesTheNodesAsDiscover(t *testing.T) {
	if testing.Short() {
		t.Skip("discovers the sandbox; skipped with -short")
	}
	ctx := context.Background()
	sb, err := NewSandbox(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	o := &Ops{Dial: sb.Dial, OutDir: t.TempDir(), Namespace: "karpenter-migrate", Operator: "test"}
	if _, err := o.Connect(ctx, sb.Defaults().Connection); err != nil {
		t.Fatal(err)
	}
	inv, err := o.Discover(ctx, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	discovered := 0.0
	for _, g := range groupRows(inv, catalog.Default()) {
		discovered += g.cost
	}
	v, err := o.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if perHour(v.CostPerHour) != perHour(discovered) {
		t.Errorf("the cluster view prices the discovered nodes at $%s/h, discover at $%s/h", perHour(v.CostPerHour), perHour(discovered))
	}
}
