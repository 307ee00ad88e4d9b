package tui

import (
	"context"
	"fmt"
	"sync"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

// SandboxPollInterval is how often the runner polls the sandbox, in
// simulated time.
const SandboxPollInterval = 5 * time.Second

// Sandbox is the embedded cluster the wizard runs against with --sandbox:
// pkg/sandbox loaded with the demo account (or a snapshot's inventory),
// reached through the same client interfaces as a real cluster.
type Sandbox struct {
	SB    *sandbox.Sandbox
	clock *sandboxClock
}

// NewSandbox builds and loads the sandbox. Close it when done.
func NewSandbox(ctx context.Context, seed uint64) (*Sandbox, error) {
	sb, err := sandbox.New(sandbox.Options{Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := sb.Load(ctx, sandbox.DemoInventory()); err != nil {
		sb.Close()
		return nil, fmt.Errorf("sandbox: load the demo account: %w", err)
	}
	sb.StartTracking()
	return &Sandbox{SB: sb, clock: &sandboxClock{FakeClock: sb.Clock(), sb: sb, ctx: ctx}}, nil
}

// Close stops the sandbox's AWS endpoint.
func (s *Sandbox) Close() { s.SB.Close() }

// Defaults are the sandbox's connection values.
func (s *Sandbox) Defaults() Defaults {
	c := s.SB.Cloud().Cluster
	return Defaults{
		Connection: Connection{Context: "sandbox", Cluster: c.Name, Profile: "sandbox", Region: c.Region, Environment: "prod"},
		Contexts:   []string{"sandbox"}, Profiles: []string{"sandbox"},
	}
}

// Dial implements Dialer: every connection reaches the sandbox; a cluster
// name other than the sandbox's is refused as EKS would.
func (s *Sandbox) Dial(_ context.Context, c Connection) (*Clients, error) {
	if c.Context != "sandbox" {
		return nil, fmt.Errorf("context %q: the sandbox's kubeconfig has only the context \"sandbox\"", c.Context)
	}
	return &Clients{Kube: s.SB.Kube(), Dynamic: s.SB.Dynamic(), AWS: s.SB.AWSConfig(), Clock: s.clock, PollInterval: SandboxPollInterval}, nil
}

// sandboxClock is the sandbox's simulated clock as the runner sees it: a
// wait (After, Sleep) steps the simulation by its duration, so the cluster
// moves exactly while the runner waits and everything else happens between
// steps, on the runner's goroutine. Timers and tickers fire as the
// simulation passes their time.
type sandboxClock struct {
	*clocktesting.FakeClock
	sb  *sandbox.Sandbox
	ctx context.Context

	mu      sync.Mutex
	advance func()
}

func (c *sandboxClock) OnAdvance(f func()) {
	c.mu.Lock()
	c.advance = f
	c.mu.Unlock()
}

func (c *sandboxClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	// A failed step (cancellation) shows up in the runner's own next call.
	_ = c.sb.Step(c.ctx, max(d, time.Nanosecond))
	c.mu.Lock()
	f := c.advance
	c.mu.Unlock()
	if f != nil {
		f()
	}
	ch <- c.Now()
	return ch
}

func (c *sandboxClock) Sleep(d time.Duration) { <-c.After(d) }
