package tui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// The sandbox's clock is the runner's Advancer.
var _ Advancer = (*sandbox.Clock)(nil)

// Sandbox is the embedded cluster the wizard runs against with --sandbox:
// internal/sandbox loaded with the demo account or a snapshot's inventory,
// reached through the clients internal/sandbox gives programs written against a
// real cluster (sandbox.Clients), as the demo does.
type Sandbox struct {
	SB *sandbox.Sandbox

	mu sync.Mutex
	// cancels release the clients Dial handed out.
	cancels []context.CancelFunc
}

// NewSandbox builds the sandbox and loads inv into it (nil: the demo
// account). Close it when done.
func NewSandbox(ctx context.Context, seed uint64, inv *inventory.Inventory) (*Sandbox, error) {
	// Karpenter appears when the rollout's step 07 installs it, as in the demo.
	sb, err := sandbox.New(sandbox.Options{Seed: seed, DeferKarpenter: true})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	what := "the demo account"
	load := sandbox.DemoInventory()
	if inv != nil {
		what, load = "the snapshot of "+inv.Cluster.Name, *inv
	}
	if err := sb.Load(ctx, load); err != nil {
		sb.Close()
		return nil, fmt.Errorf("sandbox: load %s: %w", what, err)
	}
	sb.StartTracking()
	return &Sandbox{SB: sb}, nil
}

// Close releases the clients Dial handed out and stops the sandbox's AWS
// endpoint.
func (s *Sandbox) Close() {
	s.mu.Lock()
	for _, cancel := range s.cancels {
		cancel()
	}
	s.cancels = nil
	s.mu.Unlock()
	s.SB.Close()
}

// Defaults are the sandbox's connection values.
func (s *Sandbox) Defaults() Defaults {
	c := s.SB.Cloud().Cluster
	return Defaults{
		Connection: Connection{Context: "sandbox", Cluster: c.Name, Profile: "sandbox", Region: c.Region, Environment: "prod"},
		Contexts:   []string{"sandbox"}, Profiles: []string{"sandbox"},
	}
}

// Dial implements Dialer: every connection reaches the sandbox; a cluster
// name other than the sandbox's is refused as EKS would. The clients are
// the sandbox's for a run under ctx: their clock steps the simulation when
// the runner waits on it (an Advancer whose Err is the simulation's
// failure), and drains evict one pod of a node at a time, as the demo's,
// so that a seed gives one run.
func (s *Sandbox) Dial(ctx context.Context, c Connection) (*Clients, error) {
	if c.Context != "sandbox" {
		return nil, fmt.Errorf("context %q: the sandbox's kubeconfig has only the context \"sandbox\"", c.Context)
	}
	// The derived context is not needed: Ops.run stops the runner on the
	// clock's Err.
	cl, _, cancel := s.SB.Clients(ctx)
	s.mu.Lock()
	s.cancels = append(s.cancels, cancel)
	s.mu.Unlock()
	settle := func(ctx context.Context, rollback bool) error {
		if rollback {
			if err := s.SB.Settle(ctx, 30*time.Minute); err != nil {
				return fmt.Errorf("after the rollback: %w", err)
			}
			return nil
		}
		if err := s.SB.Settle(ctx, 30*time.Minute); err != nil {
			return fmt.Errorf("after the waves: %w", err)
		}
		if err := s.SB.SettleConsolidation(ctx, 4*time.Hour); err != nil {
			return fmt.Errorf("consolidation: %w", err)
		}
		return nil
	}
	return &Clients{Config: action.ForSandbox(cl, "", "", ""), Settle: settle}, nil
}
