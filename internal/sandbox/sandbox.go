// Package sandbox is the embedded default environment: a simulated AWS
// account and an in-memory Kubernetes cluster behind client-go's interfaces,
// with controllers (ReplicaSets, StatefulSets, Jobs, DaemonSets, a scheduler,
// PDB-aware evictions, and a Karpenter stand-in) stepping on a simulated
// clock, so a whole migration runs in seconds and reproducibly.
//
// The Karpenter stand-in provisions nodes for pending pods with pkg/engine
// and, like Karpenter's disruption controller, consolidates on its polling
// period with pkg/engine/disruption: each command is validated, waits out
// the validation delay, is validated again and is executed as Karpenter
// does (disrupted taint, replacement Ready first, drain through the
// Eviction API, NodeClaim and instance removed once empty).
//
// The sandbox is single-threaded by design: nothing moves until the caller
// steps the clock (Step, Settle), so a run with the same seed and the same
// calls gives the same cluster, byte for byte.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/kubectl/pkg/util/podutils"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// Karpenter resources served by the sandbox's dynamic client.
var (
	NodePoolGVR     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaimGVR    = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	EC2NodeClassGVR = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
)

// listKinds are the list kinds of the resources the dynamic client serves.
var listKinds = map[schema.GroupVersionResource]string{
	NodePoolGVR:     "NodePoolList",
	NodeClaimGVR:    "NodeClaimList",
	EC2NodeClassGVR: "EC2NodeClassList",
}

// Options tune the simulation.
type Options struct {
	// Seed makes names, instance IDs and choices reproducible.
	Seed uint64
	// Start is the simulated wall-clock time at creation.
	Start time.Time
	// Tick is the controllers' resolution (default 5s).
	Tick time.Duration
	// LaunchDelay is how long an instance takes to become a Ready node (default 60s).
	LaunchDelay time.Duration
	// PodStartDelay is how long a bound pod takes to become Ready (default 5s).
	PodStartDelay time.Duration
	// Fitter is the scheduler's filter (default SimpleFitter).
	Fitter Fitter
	// PackNodes scores nodes MostAllocated (bin-packing) instead of
	// kube-scheduler's default LeastAllocated (spreading).
	PackNodes bool
	// Catalog is the cloud's instance types and prices (default
	// catalog.Default(): every type of pkg/catalog's embedded catalogue, so
	// any snapshot's node groups can be replayed).
	Catalog *catalog.Catalog
	// DeferKarpenter keeps the Karpenter stand-in (NodeClaims,
	// provisioning, consolidation) stopped until the runbook's Karpenter
	// step installs it through Clients.Karpenter, as the demo shows;
	// otherwise it runs from the start.
	DeferKarpenter bool
	// Logf, when set, receives the Karpenter stand-in's disruption log:
	// each command it starts, skips as invalid or aborts.
	Logf func(format string, args ...any)
}

func (o *Options) defaults() error {
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	}
	if o.Tick <= 0 {
		o.Tick = 5 * time.Second
	}
	if o.LaunchDelay <= 0 {
		o.LaunchDelay = 60 * time.Second
	}
	if o.PodStartDelay <= 0 {
		o.PodStartDelay = 5 * time.Second
	}
	if o.Fitter == nil {
		o.Fitter = SimpleFitter{}
	}
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	return nil
}

// Sandbox is one simulated account and cluster.
type Sandbox struct {
	// mu serialises the simulation's steps with the calls of Clients.
	mu    sync.Mutex
	opts  Options
	clock *clocktesting.FakeClock
	kube  *fake.Clientset
	// tracker is the clientset's store; reactors use it directly because
	// the fake holds its lock while a reactor runs.
	tracker k8stesting.ObjectTracker
	dyn     *dynamicfake.FakeDynamicClient
	cat     *catalog.Catalog
	rng     *rand.Rand
	// aws is the wire-level AWS fake on loopback; awsCfg points SDK clients at it.
	aws    *awsfake.Server
	awsCfg awssdk.Config
	cloud  *Cloud

	uidSeq int
	// dis is the Karpenter stand-in's disruption controller.
	dis disruptor
	// karpenterOff stops the stand-in until it is installed.
	karpenterOff bool
	// lists are the controllers' lists of DaemonSets and workloads
	// (cachedList).
	lists map[string]listed
	// templates remembers the Deployment controller's comparisons of
	// templates (sameTemplate).
	templates map[templateCheck]bool
	// claimsIdle is the cluster the NodeClaim controller last found
	// nothing to do on (reconcileNodeClaims), if it did.
	claimsIdle *claimsRun
	// nominated maps pod keys to the NodeClaim launched for them.
	nominated map[string]string
	pdbBroken map[string]bool
	stats     Stats
	// loading makes the scheduler spread pods whatever PackNodes says, as
	// the cluster the inventory describes grew under the default scheduler.
	loading    bool
	tracking   bool
	violations []string
	// pods is every pod of the tracker, kept current by its writes.
	pods *podCache
	// nodes is every node of the tracker, kept current by its writes.
	nodes nodeCache
	// changes counts the writes to the cluster (both clients'), for the
	// controllers to tell an unchanged cluster; idle is, by controller,
	// the cluster it last ran on without changing it.
	changes *changes
	idle    map[string]idleRun
	// reacted is the count of writes the controllers last reacted to
	// without writing more (react).
	reacted uint64
	// tickHooks run after every pass of the controllers (OnTick, OnWrite).
	tickHooks []tickHook
}

// Stats are what the sandbox observed, for the demo's summary.
type Stats struct {
	// Evictions counts evictions the API allowed; Rejected counts 429s.
	Evictions int `json:"evictions"`
	Rejected  int `json:"rejected"`
	// PDBViolations counts times a PDB went from satisfied to below its
	// desired healthy count.
	PDBViolations int `json:"pdbViolations"`
	// NodesLaunched and NodesTerminated count instances.
	NodesLaunched   int `json:"nodesLaunched"`
	NodesTerminated int `json:"nodesTerminated"`
	// Preempted counts pods the scheduler deleted to place higher-priority
	// ones; PreemptedPods names them, where and for which pod.
	Preempted     int      `json:"preempted"`
	PreemptedPods []string `json:"preemptedPods,omitempty"`
	// Consolidations counts the disruption commands the Karpenter stand-in
	// executed, ConsolidationSavings the $/h they saved and
	// ConsolidationEvictions the evictions their drains made;
	// ConsolidationsInvalid counts commands disruption.Validate rejected
	// and ConsolidationsAborted those whose replacement never became
	// Ready. Consolidations lists them.
	Consolidations         int     `json:"consolidations"`
	ConsolidationSavings   float64 `json:"consolidationSavings"`
	ConsolidationEvictions int     `json:"consolidationEvictions"`
	ConsolidationsInvalid  int     `json:"consolidationsInvalid"`
	ConsolidationsAborted  int     `json:"consolidationsAborted"`
	// LostPods are the pods (but DaemonSets' and finished ones) still on a
	// node when its instance was terminated: gone without an eviction,
	// whatever their PodDisruptionBudget said.
	LostPods []string `json:"lostPods,omitempty"`
}

// New builds a sandbox empty of workloads: load one with Load.
func New(opts Options) (*Sandbox, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	s := &Sandbox{
		opts:      opts,
		clock:     clocktesting.NewFakeClock(opts.Start),
		cat:       opts.Catalog,
		rng:       rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		dis:       newDisruptor(),
		nominated: map[string]string{},
		templates: map[templateCheck]bool{},
		lists:     map[string]listed{},
		pdbBroken: map[string]bool{},
		idle:      map[string]idleRun{},

		karpenterOff: opts.DeferKarpenter,
	}
	s.cloud = newCloud()
	s.pods, s.nodes, s.changes = newPodCache(), nodeCache{}, newChanges()
	s.kube, s.tracker = newFastClientset(s.pods, s.nodes, s.changes)
	s.installDiscovery()
	s.installReactors()
	s.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	s.dyn.PrependReactor("*", "*", dynamicWrites(s.changes))
	s.dyn.PrependReactor("create", "*", s.stampReactor(s.dyn.Tracker()))
	return s, nil
}

// Kube is the cluster's client, as a real clientset would be.
func (s *Sandbox) Kube() kubernetes.Interface { return s.kube }

// Dynamic is the client for NodePools, NodeClaims and EC2NodeClasses.
func (s *Sandbox) Dynamic() dynamic.Interface { return s.dyn }

// Clock is the simulated clock; only Step and Settle move it.
func (s *Sandbox) Clock() *clocktesting.FakeClock { return s.clock }

// Now is the simulated time.
func (s *Sandbox) Now() time.Time { return s.clock.Now() }

// Catalog is the cloud's instance types and prices.
func (s *Sandbox) Catalog() *catalog.Catalog { return s.cat }

// Cloud is the simulated AWS account.
func (s *Sandbox) Cloud() *Cloud { return s.cloud }

// Stats returns what the sandbox observed so far.
func (s *Sandbox) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.LostPods, st.PreemptedPods = slices.Clone(st.LostPods), slices.Clone(st.PreemptedPods)
	return st
}

// StartTracking resets Stats and starts counting PDB violations from now;
// call it once the cluster is loaded.
func (s *Sandbox) StartTracking() {
	s.stats = Stats{}
	s.violations = nil
	s.tracking = true
}

// Violations describes each PDB violation counted in Stats.
func (s *Sandbox) Violations() []string { return append([]string(nil), s.violations...) }

// Step advances simulated time by d, running every controller each tick.
// What was written since the controllers last ran (a program's evictions,
// deletes and creates through Clients) they react to first, at the
// instant it was written (react).
func (s *Sandbox) Step(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step(ctx, d)
}

func (s *Sandbox) step(ctx context.Context, d time.Duration) error {
	for elapsed := time.Duration(0); elapsed < d; elapsed += s.opts.Tick {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.reactNow(ctx); err != nil {
			return err
		}
		s.clock.Step(s.opts.Tick)
		if err := s.reconcile(ctx); err != nil {
			return err
		}
		if err := s.runHooks(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reactNow lets the controllers react to what was written since they last
// did (react), then runs the hooks if they ran: the state they left is one
// the cluster passes through.
func (s *Sandbox) reactNow(ctx context.Context) error {
	reacted, err := s.react(ctx)
	if err != nil || !reacted {
		return err
	}
	return s.runHooks(ctx)
}

// tickHook is a function OnTick or OnWrite registered; an OnWrite one
// (onWrite) is skipped while the cluster's writes are those it last saw
// (seen, valid once it ran).
type tickHook struct {
	f       func(ctx context.Context, written func(namespace string) bool) error
	onWrite bool
	ran     bool
	seen    uint64
}

// runHooks runs the OnTick hooks, and the OnWrite hooks that have not
// seen the cluster as it is.
func (s *Sandbox) runHooks(ctx context.Context) error {
	for i := range s.tickHooks {
		h := &s.tickHooks[i]
		if h.onWrite && h.ran && h.seen == s.changes.count {
			continue
		}
		ran, seen := h.ran, h.seen
		written := func(ns string) bool { return !ran || s.changes.inNS[ns] > seen }
		h.ran, h.seen = true, s.changes.count
		if err := h.f(ctx, written); err != nil {
			return fmt.Errorf("sandbox tick hook at %s: %w", s.Now().Format(time.RFC3339), err)
		}
	}
	return nil
}

// OnTick registers f to run after every pass of the controllers — each
// tick's, and the one reacting at the instant of a program's writes before
// the clock moves on — on the stepping goroutine with the simulation's
// lock held, so it sees every state the cluster passes through, at the
// same points in every run with the same seed. f must reach the cluster
// through Kube and Dynamic (not through Clients, which would wait for the
// lock it runs under).
func (s *Sandbox) OnTick(f func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickHooks = append(s.tickHooks, tickHook{f: func(ctx context.Context, _ func(string) bool) error { return f(ctx) }})
}

// OnWrite is OnTick for a hook that reads the cluster's objects alone
// (not the time): it runs after the passes that follow a write to the
// cluster (but the runner's ConfigMaps, Leases and Events), and not again
// while the cluster is as it last saw it. A PodDisruptionBudget watcher
// listing every budget's pods after each of a thousand-node cluster's
// ticks spent more than the controllers did. written says whether an
// object of the namespace was written through Kube since f last ran (every
// namespace, the first time), so that a hook reading a namespace's
// objects need not read them again where it says false.
func (s *Sandbox) OnWrite(f func(ctx context.Context, written func(namespace string) bool) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickHooks = append(s.tickHooks, tickHook{f: f, onWrite: true})
}

// ErrNotSettled is returned by Settle when pods are still pending at the deadline.
var ErrNotSettled = errors.New("cluster did not settle")

// Settle steps until every pod is Ready and no instance is launching, or
// max simulated time has passed.
func (s *Sandbox) Settle(ctx context.Context, max time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settle(ctx, max)
}

func (s *Sandbox) settle(ctx context.Context, max time.Duration) error {
	deadline := s.Now().Add(max)
	for {
		if err := s.reconcile(ctx); err != nil {
			return err
		}
		busy, why, err := s.busy(ctx)
		if err != nil {
			return err
		}
		if !busy {
			return nil
		}
		if !s.Now().Before(deadline) {
			return fmt.Errorf("%w after %s of simulated time: %s", ErrNotSettled, max, why)
		}
		if err := s.step(ctx, s.opts.Tick); err != nil {
			return err
		}
	}
}

func (s *Sandbox) busy(ctx context.Context) (bool, string, error) {
	pods := s.listPods()
	for i := range pods {
		p := pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if !podutils.IsPodReady(p) {
			return true, fmt.Sprintf("pod %s/%s is not Ready", p.Namespace, p.Name), nil
		}
	}
	for _, id := range s.cloud.instanceIDs() {
		in := s.cloud.instances[id]
		if in.NodeName == "" {
			return true, fmt.Sprintf("instance %s is launching", id), nil
		}
	}
	return false, "", nil
}

// controller is one of the sandbox's controllers, run in the order of
// controllers.
type controller struct {
	name string
	fn   func(context.Context) error
	// reacts marks the controllers a real cluster runs within milliseconds
	// of a write they watch (an informer's event), so react runs them at
	// the instant of the write; the others act on the time (the cloud's
	// launches, the kubelet's pod start, consolidation's polling period
	// and delays) and run once a tick.
	reacts bool
	// stateOnly marks the controllers whose every action follows from the
	// cluster's objects alone (not the time, the cloud or their own
	// memory).
	stateOnly bool
}

// controllers are the sandbox's controllers in the order a tick runs
// them, each seeing what the earlier ones did.
func (s *Sandbox) controllers() []controller {
	return []controller{
		{"cloud", s.reconcileCloud, false, false},
		{"daemonsets", s.reconcileDaemonSets, true, true},
		{"kubelet", s.reconcileKubelet, false, false},
		{"workloads", s.reconcileWorkloads, true, true},
		{"scheduler", s.schedule, true, true},
		{"karpenter provisioner", s.provision, true, false},
		{"karpenter nodeclaims", s.reconcileNodeClaims, true, false},
		{"karpenter consolidation", s.consolidate, false, false},
		{"disruption", s.reconcilePDBs, true, true},
	}
}

// reconcile runs every controller once, in a fixed order, then lets the
// ones that react to writes react to what that pass wrote (react).
func (s *Sandbox) reconcile(ctx context.Context) error {
	s.kube.ClearActions()
	s.dyn.ClearActions()
	if err := s.run(ctx, false); err != nil {
		return err
	}
	_, err := s.react(ctx)
	return err
}

// maxReactRounds bounds the rounds react runs at one instant: a chain of
// reactions (a Deployment's new ReplicaSet, its pods, their binding, a
// NodeClaim for those that fit nowhere) takes three or four; controllers
// that kept writing to each other would be left to the next tick.
const maxReactRounds = 8

// react runs the controllers that react to writes (controller.reacts) at
// the current instant, in their order, on what was written since they
// last reacted — a program's evictions, deletes and creates, or what the
// tick's other controllers did — and again while a round writes something,
// as a cluster's controllers react within milliseconds of each other. It
// reports whether it ran a round. It runs on the stepping goroutine at a
// defined point (as a tick ends, and before the clock moves on), so the
// writes it reacts to are those made before that point, whichever
// goroutine made them.
func (s *Sandbox) react(ctx context.Context) (bool, error) {
	ran := false
	for round := 0; s.changes.count != s.reacted; round++ {
		if round == maxReactRounds {
			s.reacted = s.changes.count
			break
		}
		from := s.changes.count
		if err := s.run(ctx, true); err != nil {
			return ran, err
		}
		ran = true
		if s.changes.count == from {
			s.reacted = from
		}
	}
	return ran, nil
}

// run runs the controllers once in order: those that react to writes
// alone when reacting, every one else. A controller that changed nothing
// in its last run is not run again while nothing was written since: one of
// the cluster's objects alone (stateOnly) whenever that was, another that
// reacts to writes when that was at this instant.
func (s *Sandbox) run(ctx context.Context, reacting bool) error {
	for _, c := range s.controllers() {
		if (reacting && !c.reacts) || (s.karpenterOff && strings.HasPrefix(c.name, "karpenter")) {
			continue
		}
		idle := idleRun{changes: s.changes.count, loading: s.loading}
		if !c.stateOnly {
			idle.at = s.Now()
		}
		if (c.stateOnly || c.reacts) && s.idle[c.name] == idle {
			continue
		}
		if err := c.fn(ctx); err != nil {
			return fmt.Errorf("sandbox %s controller at %s: %w", c.name, s.Now().Format(time.RFC3339), err)
		}
		if s.changes.count == idle.changes {
			s.idle[c.name] = idle
		} else {
			delete(s.idle, c.name)
		}
	}
	return nil
}

// idleRun is the cluster a controller last ran on without writing to it:
// the count of writes then, whether the sandbox was loading (the
// scheduler then spreads pods) and, for a controller that reads more than
// the cluster's objects, the time.
type idleRun struct {
	changes uint64
	loading bool
	at      time.Time
}

// newName returns prefix plus a 5-character suffix, as the API server's
// names.SimpleNameGenerator does (prefix cut to names.MaxGeneratedNameLength,
// the suffix from the same alphabet), drawn from the seeded source so that a
// seed names the same objects in every run.
func (s *Sandbox) newName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[s.rng.IntN(len(alphabet))]
	}
	return prefix[:min(len(prefix), names.MaxGeneratedNameLength)] + string(b)
}

// maxNameGenerationCreateAttempts is how many names the API server's store
// tries for an object created with generateName before it answers
// AlreadyExists (k8s.io/apiserver's registry, RetryGenerateName).
const maxNameGenerationCreateAttempts = 8

func (s *Sandbox) newUID() types.UID {
	s.uidSeq++
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", s.uidSeq))
}

// stampMeta fills in what the API server would on create: a name from
// generateName (another while taken reports the name exists, as the
// API server retries a generated name that is taken), a UID and the
// creation time.
func (s *Sandbox) stampMeta(m metav1.Object, taken func(name string) bool) {
	if m.GetName() == "" && m.GetGenerateName() != "" {
		for range maxNameGenerationCreateAttempts {
			m.SetName(s.newName(m.GetGenerateName()))
			if !taken(m.GetName()) {
				break
			}
		}
	}
	if m.GetUID() == "" {
		m.SetUID(s.newUID())
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(metav1.NewTime(s.Now()))
	}
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func sortPods(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return podKey(a) < podKey(b)
	})
}

// newFastClientset is fake.NewClientset with the plain object tracker of
// NewSimpleClientset: the field-managed tracker rebuilds a REST mapper on
// every write, which makes a 300-pod simulation twenty times slower.
// Server-side apply is therefore not supported; create and update are.
// The tracker keeps pods and nodes current in the caches it is given and
// counts its writes in changes.
func newFastClientset(pods *podCache, nodes nodeCache, changes *changes) (*fake.Clientset, k8stesting.ObjectTracker) {
	cs := fake.NewClientset()
	o := &podTracker{ObjectTracker: k8stesting.NewObjectTracker(clientgoscheme.Scheme, clientgoscheme.Codecs.UniversalDecoder()), pods: pods, nodes: nodes, changes: changes}
	cs.ReactionChain = nil
	cs.WatchReactionChain = nil
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(o))
	cs.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := o.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, w, nil
	})
	return cs, o
}
