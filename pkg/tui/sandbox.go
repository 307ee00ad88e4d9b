package tui

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

// SandboxPollInterval is how often the runner polls the sandbox, in
// simulated time.
const SandboxPollInterval = 5 * time.Second

// Sandbox is the embedded cluster the wizard runs against with --sandbox:
// pkg/sandbox loaded with the demo account or a snapshot's inventory,
// reached through the same client interfaces as a real cluster.
type Sandbox struct {
	SB    *sandbox.Sandbox
	clock *sandboxClock
}

// NewSandbox builds the sandbox and loads inv into it (nil: the demo
// account). Close it when done.
func NewSandbox(ctx context.Context, seed uint64, inv *inventory.Inventory) (*Sandbox, error) {
	sb, err := sandbox.New(sandbox.Options{Seed: seed})
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
	if err := serveScale(sb.Kube()); err != nil {
		sb.Close()
		return nil, err
	}
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
	mu := &s.clock.step
	return &Clients{Kube: lockedKube{s.SB.Kube(), mu}, Dynamic: applyByUpdate{s.SB.Dynamic(), mu}, AWS: s.SB.AWSConfig(), Clock: s.clock, PollInterval: SandboxPollInterval}, nil
}

// serveScale answers the Deployment scale subresource (GetScale,
// UpdateScale), which the fake clientset does not, from the Deployment
// itself, as the API server does. The runner scales Cluster Autoscaler
// through it.
func serveScale(kc kubernetes.Interface) error {
	cs, ok := kc.(*fake.Clientset)
	if !ok {
		return fmt.Errorf("sandbox: client %T is not the fake clientset", kc)
	}
	tracker := cs.Tracker()
	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	cs.PrependReactor("*", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "scale" {
			return false, nil, nil
		}
		ns := action.GetNamespace()
		var name string
		var want *autoscalingv1.Scale
		switch a := action.(type) {
		case k8stesting.GetAction:
			name = a.GetName()
		case k8stesting.UpdateAction:
			s, ok := a.GetObject().(*autoscalingv1.Scale)
			if !ok {
				return true, nil, fmt.Errorf("scale update of %T", a.GetObject())
			}
			name, want = s.Name, s
		default:
			return false, nil, nil
		}
		obj, err := tracker.Get(deployments, ns, name)
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment).DeepCopy()
		if want != nil {
			d.Spec.Replicas = &want.Spec.Replicas
			if err := tracker.Update(deployments, d, ns); err != nil {
				return true, nil, err
			}
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, ResourceVersion: d.ResourceVersion},
			Spec: autoscalingv1.ScaleSpec{Replicas: replicas}, Status: autoscalingv1.ScaleStatus{Replicas: d.Status.Replicas}}, nil
	})
	return nil
}

// applyByUpdate serves server-side apply, which the sandbox's fake dynamic
// client does not implement, as a create or a full update: the tool is the
// only writer of the objects it applies there, so the result is the same.
// Creates are stamped by the sandbox, so they take the step lock.
type applyByUpdate struct {
	dynamic.Interface
	mu *sync.Mutex
}

func (a applyByUpdate) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return applyResource{a.Interface.Resource(gvr), a.mu}
}

type applyResource struct {
	dynamic.NamespaceableResourceInterface
	mu *sync.Mutex
}

func (r applyResource) Namespace(ns string) dynamic.ResourceInterface {
	return applyNamespaced{r.NamespaceableResourceInterface.Namespace(ns), r.mu}
}

func (r applyResource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, _ ...string) (*unstructured.Unstructured, error) {
	return locked(r.mu, func() (*unstructured.Unstructured, error) {
		return applyAsUpdate(ctx, r.NamespaceableResourceInterface, name, obj, opts)
	})
}

func (r applyResource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	return locked(r.mu, func() (*unstructured.Unstructured, error) {
		return r.NamespaceableResourceInterface.Create(ctx, obj, opts, sub...)
	})
}

type applyNamespaced struct {
	dynamic.ResourceInterface
	mu *sync.Mutex
}

func (r applyNamespaced) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, _ ...string) (*unstructured.Unstructured, error) {
	return locked(r.mu, func() (*unstructured.Unstructured, error) {
		return applyAsUpdate(ctx, r.ResourceInterface, name, obj, opts)
	})
}

func (r applyNamespaced) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	return locked(r.mu, func() (*unstructured.Unstructured, error) { return r.ResourceInterface.Create(ctx, obj, opts, sub...) })
}

func applyAsUpdate(ctx context.Context, ri dynamic.ResourceInterface, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	if len(opts.DryRun) > 0 {
		return obj, nil
	}
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: opts.FieldManager})
	}
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	obj.SetResourceVersion(cur.GetResourceVersion())
	obj.SetUID(cur.GetUID())
	obj.SetCreationTimestamp(cur.GetCreationTimestamp())
	return ri.Update(ctx, obj, metav1.UpdateOptions{FieldManager: opts.FieldManager})
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

	// step is held while the simulation steps, and by lockedKube around
	// the calls that reach the sandbox's own state.
	step    sync.Mutex
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
	c.step.Lock()
	_ = c.sb.Step(c.ctx, max(d, time.Nanosecond))
	c.step.Unlock()
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
