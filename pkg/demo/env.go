package demo

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// Engines that launch Karpenter's nodes, as the summary names them.
const (
	EngineSandbox      = "sandbox stand-in"
	EngineControlPlane = "Karpenter v1.14.1 (kwok)"
)

// environment is where the demo runs: the sandbox (in memory, simulated
// clock, a Karpenter stand-in) or a real control plane with the real
// Karpenter's kwok provider (controlPlane). The demo's steps are the same
// on both; only what they run against differs.
type environment interface {
	// Engine names what launches Karpenter's nodes.
	Engine() string
	// Load builds the account and the cluster inv describes and returns
	// the actions' configuration on them, and a context that a failure of
	// the environment cancels (run the steps under it).
	Load(ctx context.Context, inv inventory.Inventory, namespace, outDir string) (*action.Configuration, context.Context, context.CancelFunc, error)
	// CountedKube is a client of the cluster Load built whose requests
	// are counted in req (apply's runner's, apart from the demo's own).
	CountedKube(req *kube.Requests) (kubernetes.Interface, error)
	// Now is the environment's time (simulated in the sandbox).
	Now() time.Time
	// Settle waits until every pod is Ready and no instance is launching.
	Settle(ctx context.Context) error
	// SettleConsolidation waits, after Settle, until Karpenter has nothing
	// left to consolidate.
	SettleConsolidation(ctx context.Context) error
	// Instances are the running instances, node groups' and Karpenter's.
	Instances(ctx context.Context) ([]sandbox.Instance, error)
	// Groups are the node groups as the account has them (sizes, instances).
	Groups(ctx context.Context) ([]inventory.NodeGroup, error)
	// Stats are the environment's own counters (zero where it has none).
	Stats() sandbox.Stats
	// Consolidations is what the Karpenter stand-in decided (none on real parts).
	Consolidations() []sandbox.ConsolidationCommand
	// Watch runs f on every state of the cluster the environment can show
	// (every pass of the sandbox's controllers that follows a write to
	// the cluster, a poll of the control plane), with the client it must
	// read the cluster with there; f reads the cluster's objects alone.
	// written says whether an object of the namespace may have been
	// written since f last ran (always, on a control plane).
	Watch(f func(ctx context.Context, kube kubernetes.Interface, written func(namespace string) bool) error)
	// WatchWaits feeds w the pods as the environment sees them: after
	// every pass of the sandbox's controllers, a pod informer's events on
	// a control plane.
	WatchWaits(ctx context.Context, w *waitWatcher) error
	// PrepareTree adapts the tree generate wrote to the environment before
	// it is planned and applied; it returns what it changed ("" for nothing).
	PrepareTree(dir, env string) (string, error)
	Close()
}

// Simulated-time budgets of the sandbox.
const (
	settleTimeout = 30 * time.Minute
	// consolidationTimeout bounds how long Karpenter may take to settle
	// the fleet after the waves (several rounds of consolidateAfter).
	consolidationTimeout = 4 * time.Hour
)

// sandboxEnv is the embedded sandbox.
type sandboxEnv struct {
	sb      *sandbox.Sandbox
	clients *sandbox.Clients // Load's
}

func newSandboxEnv(seed uint64) (*sandboxEnv, error) {
	sb, err := sandbox.New(sandbox.Options{Seed: seed, DeferKarpenter: true})
	if err != nil {
		return nil, err
	}
	return &sandboxEnv{sb: sb}, nil
}

func (e *sandboxEnv) Engine() string { return EngineSandbox }

func (e *sandboxEnv) Load(ctx context.Context, inv inventory.Inventory, namespace, outDir string) (*action.Configuration, context.Context, context.CancelFunc, error) {
	if err := e.sb.Load(ctx, inv); err != nil {
		return nil, nil, nil, err
	}
	e.sb.StartTracking()
	clients, runCtx, cancel := e.sb.Clients(ctx)
	e.clients = clients
	return action.ForSandbox(clients, namespace, outDir, "demo"), runCtx, cancel, nil
}

func (e *sandboxEnv) CountedKube(req *kube.Requests) (kubernetes.Interface, error) {
	return e.clients.Counted(req), nil
}

func (e *sandboxEnv) Now() time.Time { return e.sb.Now() }

func (e *sandboxEnv) Settle(ctx context.Context) error { return e.sb.Settle(ctx, settleTimeout) }

func (e *sandboxEnv) SettleConsolidation(ctx context.Context) error {
	return e.sb.SettleConsolidation(ctx, consolidationTimeout)
}

func (e *sandboxEnv) Instances(context.Context) ([]sandbox.Instance, error) {
	return e.sb.Cloud().Instances(), nil
}

func (e *sandboxEnv) Groups(context.Context) ([]inventory.NodeGroup, error) {
	return e.sb.Cloud().Groups(), nil
}

func (e *sandboxEnv) Stats() sandbox.Stats { return e.sb.Stats() }

func (e *sandboxEnv) Consolidations() []sandbox.ConsolidationCommand { return e.sb.Consolidations() }

// Watch runs f under the simulation's lock, so with its own client (the
// clients Load returned wait for that lock).
func (e *sandboxEnv) Watch(f func(context.Context, kubernetes.Interface, func(string) bool) error) {
	e.sb.OnWrite(func(ctx context.Context, written func(string) bool) error { return f(ctx, e.sb.Kube(), written) })
}

// WatchWaits reads the pods after every pass of the controllers (a
// tick's, and one reacting at the instant of a write; the sandbox's own
// pods, not a copy of each): it sees every state a pod passes through but
// a pod created and deleted between two passes.
func (e *sandboxEnv) WatchWaits(_ context.Context, w *waitWatcher) error {
	e.sb.OnTick(func(context.Context) error {
		w.observe(e.sb.Pods(), e.sb.Now())
		return nil
	})
	return nil
}

func (e *sandboxEnv) PrepareTree(string, string) (string, error) { return "", nil }

func (e *sandboxEnv) Close() { e.sb.Close() }
