package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// PollInterval is how often a client of the sandbox (the rollout runner)
// should poll, in simulated time: the controllers move once a tick.
const PollInterval = 5 * time.Second

// Clients are what a program written against a real cluster and account
// needs to run against the sandbox unchanged — pkg/rollout's Runner
// (Session.Kube, Dynamic, Clock, Options.PollInterval) and the SDK clients
// built from AWS. Every call they make is serialised with the simulation's
// steps, so they may be used from several goroutines.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	AWS     awssdk.Config
	Clock   *Clock
	// PollInterval is PollInterval, for the runner's options.
	PollInterval time.Duration
	// Karpenter installs the Karpenter stand-in as the runbook's Karpenter
	// step asks (what Helm does on a live cluster).
	Karpenter rollout.KarpenterInstaller
}

// Clients returns clients bound to the sandbox for a run under ctx, and a
// context derived from ctx that is cancelled, with the simulation's error
// as its cause, when a step of the simulation fails: run the program under
// it. The server-side applies the fake clients cannot do are served as a
// create or a full update (the program is the only writer of what it
// applies), and the Deployment scale subresource is answered from the
// Deployment.
func (s *Sandbox) Clients(ctx context.Context) (*Clients, context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	kc, dc := s.externalKube(), s.externalDynamic()
	c := &Clock{FakeClock: s.clock, sb: s, ctx: ctx, fail: cancel, forget: []func(){kc.ClearActions, dc.ClearActions}}
	return &Clients{Kube: kc, Dynamic: dc, AWS: s.awsCfg, Clock: c, PollInterval: PollInterval, Karpenter: &installer{sb: s, kube: kc, clock: c}},
		ctx, func() { cancel(context.Canceled) }
}

// Counted is a clientset like Kube whose requests are counted in req, by
// verb and resource as the API server names them ("create pods/eviction"):
// what a program sends, apart from the other users of Kube.
func (c *Clients) Counted(req *kube.Requests) kubernetes.Interface {
	ext := c.Clock.sb.externalKube()
	count := func(a k8stesting.Action) {
		req.Add(a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
	}
	ext.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		count(a)
		return false, nil, nil
	})
	ext.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		count(a)
		return false, nil, nil
	})
	c.Clock.mu.Lock()
	c.Clock.forget = append(c.Clock.forget, ext.ClearActions)
	c.Clock.mu.Unlock()
	return ext
}

// Clock is the simulated clock as a program sees it: a wait (After, Sleep)
// steps the simulation by its duration — at least one tick — so the
// cluster moves exactly while the program waits; as the wait starts, the
// controllers react to what the program wrote since its last one, at the
// instant it was written (Sandbox.Step). Timers and tickers
// (NewTimer, NewTicker, AfterFunc) fire as the simulation passes their
// time. A program that waits on one goroutine at a time therefore runs
// reproducibly.
type Clock struct {
	*clocktesting.FakeClock
	sb   *Sandbox
	ctx  context.Context
	fail context.CancelCauseFunc

	mu sync.Mutex
	// forget clears the actions the fake clients record (outside the
	// simulation's lock: a client call holds its fake's lock while it
	// waits for the simulation's).
	forget  []func()
	advance func()
	err     error
}

// OnAdvance sets a function called (outside the simulation's lock) after
// every wait has stepped the simulation; nil clears it.
func (c *Clock) OnAdvance(f func()) {
	c.mu.Lock()
	c.advance = f
	c.mu.Unlock()
}

// Err is the simulation's error, if a step failed.
func (c *Clock) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// After steps the simulation by d and returns a channel that already
// holds the new time.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if err := c.sb.Step(c.ctx, max(d, time.Nanosecond)); err != nil && c.ctx.Err() == nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		c.fail(fmt.Errorf("sandbox simulation: %w", err))
	}
	c.mu.Lock()
	forget, f := c.forget, c.advance
	c.mu.Unlock()
	for _, clear := range forget {
		clear()
	}
	if f != nil {
		f()
	}
	ch <- c.Now()
	return ch
}

// Sleep steps the simulation by d.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// externalKube is a clientset whose every call is served by the sandbox's
// own under the simulation's lock.
func (s *Sandbox) externalKube() *fake.Clientset {
	ext := fake.NewClientset()
	ext.ReactionChain = nil
	ext.WatchReactionChain = nil
	ext.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		obj, err := s.kube.Invokes(a, nil)
		return true, obj, err
	})
	ext.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w, err := s.kube.InvokesWatch(a)
		return true, w, err
	})
	inner := s.kube.Discovery().(*fakediscovery.FakeDiscovery)
	d := ext.Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = inner.FakedServerVersion
	ext.Resources = s.kube.Resources
	return ext
}

// externalDynamic is the dynamic counterpart of externalKube, serving
// server-side apply as a create or an update.
func (s *Sandbox) externalDynamic() *dynamicfake.FakeDynamicClient {
	ext := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	ext.ReactionChain = nil
	ext.WatchReactionChain = nil
	ext.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetPatchType() == types.ApplyPatchType {
			obj, err := s.applyAsUpdate(pa)
			return true, obj, err
		}
		obj, err := s.dyn.Invokes(a, nil)
		return true, obj, err
	})
	ext.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w, err := s.dyn.InvokesWatch(a)
		return true, w, err
	})
	return ext
}

// applyAsUpdate serves a server-side apply: create the object when it does
// not exist, else replace it keeping its identity.
func (s *Sandbox) applyAsUpdate(pa k8stesting.PatchAction) (runtime.Object, error) {
	var obj unstructured.Unstructured
	if err := json.Unmarshal(pa.GetPatch(), &obj.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("apply %s %s: body is not an object: %v", pa.GetResource().Resource, pa.GetName(), err))
	}
	if obj.GetName() != pa.GetName() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("apply %s: the body names %q, the request %q", pa.GetResource().Resource, obj.GetName(), pa.GetName()))
	}
	if opts, ok := pa.(k8stesting.PatchActionImpl); ok && len(opts.PatchOptions.DryRun) > 0 {
		return &obj, nil
	}
	gvr, ns := pa.GetResource(), pa.GetNamespace()
	cur, err := s.dyn.Invokes(k8stesting.NewGetAction(gvr, ns, pa.GetName()), nil)
	if apierrors.IsNotFound(err) {
		return s.dyn.Invokes(k8stesting.NewCreateAction(gvr, ns, &obj), nil)
	}
	if err != nil {
		return nil, err
	}
	m, ok := cur.(metav1.Object)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("apply %s %s: stored object is %T", gvr.Resource, pa.GetName(), cur))
	}
	obj.SetResourceVersion(m.GetResourceVersion())
	obj.SetUID(m.GetUID())
	obj.SetCreationTimestamp(m.GetCreationTimestamp())
	return s.dyn.Invokes(k8stesting.NewUpdateAction(gvr, ns, &obj), nil)
}

// scaleReactor answers the Deployment scale subresource (GetScale,
// UpdateScale) from the Deployment itself, as the API server does.
func (s *Sandbox) scaleReactor(action k8stesting.Action) (bool, runtime.Object, error) {
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
		sc, ok := a.GetObject().(*autoscalingv1.Scale)
		if !ok {
			return true, nil, apierrors.NewBadRequest(fmt.Sprintf("scale update body is %T, want autoscaling/v1 Scale", a.GetObject()))
		}
		name, want = sc.Name, sc
	default:
		return true, nil, apierrors.NewMethodNotSupported(deploymentsGVR.GroupResource(), action.GetVerb()+" of the scale subresource")
	}
	obj, err := s.tracker.Get(deploymentsGVR, ns, name)
	if err != nil {
		return true, nil, err
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	if want != nil {
		d.Spec.Replicas = ptr(want.Spec.Replicas)
		if err := s.tracker.Update(deploymentsGVR, d, ns); err != nil {
			return true, nil, err
		}
	}
	return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, ResourceVersion: d.ResourceVersion, UID: d.UID},
		Spec: autoscalingv1.ScaleSpec{Replicas: replicasOrOne(d.Spec.Replicas)}, Status: autoscalingv1.ScaleStatus{Replicas: d.Status.Replicas}}, nil
}

// Settle lets the controllers react to what the program wrote since its
// last wait, at the current instant, without time passing (Sandbox.react;
// the OnTick and OnWrite hooks run after, as after every pass),
// as a cluster's controllers do within milliseconds of the writes: a
// program that decides on what they did (the replacements of the pods it
// just evicted, created and placed) settles first. A wait does as much as
// it starts.
func (c *Clock) Settle() {
	c.sb.mu.Lock()
	err := c.sb.reactNow(c.ctx)
	c.sb.mu.Unlock()
	if err != nil && c.ctx.Err() == nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		c.fail(fmt.Errorf("sandbox simulation: %w", err))
	}
}
