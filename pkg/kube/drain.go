package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// DrainOptions are the policies of a drain, set from the plan.
type DrainOptions struct {
	// ForceEvict evicts pods annotated karpenter.sh/do-not-disrupt=true or
	// cluster-autoscaler.kubernetes.io/safe-to-evict=false; without it they
	// are reported and left in place.
	ForceEvict bool
	// DeleteEmptyDirData allows evicting pods with emptyDir volumes (their
	// data is lost); without it such pods block the node.
	DeleteEmptyDirData bool
	// EvictUnreplicated evicts pods no controller owns, which nothing
	// recreates (kubectl drain --force; Karpenter's termination evicts
	// them too), and DaemonSet pods whose DaemonSet is gone; without it
	// they are reported and left in place.
	EvictUnreplicated bool
	// GracePeriodSeconds overrides the pods' terminationGracePeriodSeconds
	// when >= 0; -1 honours each pod's own.
	GracePeriodSeconds int
	// Timeout bounds the drain of one node; 0 means no bound.
	Timeout time.Duration
	// RetryInitial and RetryMax bound the exponential backoff after an
	// eviction refused with 429 (a PDB at its minimum).
	RetryInitial, RetryMax time.Duration
	// PollInterval is how often an evicted pod is checked for deletion.
	PollInterval time.Duration
	// PodConcurrency bounds how many of a node's pods are evicted at once;
	// 0 evicts them all at once. 1 makes a drain's requests happen in a
	// fixed order (the embedded sandbox's reproducible runs use it).
	PodConcurrency int
	// Watch follows the PodDisruptionBudgets and the drained nodes' pods
	// through watches: an eviction waits for its budget to allow one more
	// disruption instead of being refused (429) and retried on a timer, and
	// an evicted pod is known gone as soon as it is, without polling. The
	// timers remain as fallbacks. It is for the wall clock: a simulated
	// clock that only moves when the drain waits on it would see watch
	// events arrive in goroutine order, not in simulated time.
	Watch bool
	// Stay, when set, names pods that stay on their node: neither evicted
	// nor reported as left (a reserved node's controller and critical
	// add-ons), whatever the other filters say of them.
	Stay func(*corev1.Pod) bool
}

// DefaultDrainOptions honours grace periods, retries 429 from 250ms up to
// 2s (Karpenter's terminator uses 100ms..10s; a PDB frees a disruption as
// soon as a replacement is Ready, and a long backoff leaves a wave idle
// after that) and polls for a pod's deletion every 500ms.
func DefaultDrainOptions() DrainOptions {
	return DrainOptions{GracePeriodSeconds: -1, RetryInitial: 250 * time.Millisecond, RetryMax: 2 * time.Second, PollInterval: 500 * time.Millisecond}
}

// DrainEventType says what happened to a pod during a drain.
type DrainEventType string

// Drain event types.
const (
	// DrainEvicting: an eviction was requested.
	DrainEvicting DrainEventType = "Evicting"
	// DrainBlocked: the eviction was refused with 429; PDB names the budget.
	DrainBlocked DrainEventType = "Blocked"
	// DrainEvicted: the pod is gone from the node.
	DrainEvicted DrainEventType = "Evicted"
	// DrainSkipped: the pod stays (do-not-disrupt, emptyDir, no controller).
	DrainSkipped DrainEventType = "Skipped"
)

// DrainEvent is one pod-level step of a drain.
type DrainEvent struct {
	Type    DrainEventType
	Node    string
	Pod     string // namespace/name
	PDB     string // namespace/name, for DrainBlocked when it could be found
	Attempt int
	Message string
}

// SkippedPod is a pod a drain left on its node, and why.
type SkippedPod struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// DrainResult is what a drain of one node did.
type DrainResult struct {
	Node    string       `json:"node"`
	Evicted []string     `json:"evicted,omitempty"`
	Skipped []SkippedPod `json:"skipped,omitempty"`
}

// Complete reports whether nothing but DaemonSet and mirror pods is left.
func (r DrainResult) Complete() bool { return len(r.Skipped) == 0 }

// Drainer evicts the pods of nodes through the Eviction API. Pod selection
// is kubectl's (drain.Helper.GetPodsForDeletion with its DaemonSet, mirror,
// local-storage and unreplicated filters, plus ours for do-not-disrupt);
// the eviction carries the pod's UID (evictPod). The retry and wait loop is
// ours because kubectl's sleeps on the wall clock with a fixed delay and
// abandons evictions in flight on cancellation; this one backs off
// exponentially on the injected clock and, when ctx is cancelled, starts no
// new eviction but waits for the evicted pods to go.
type Drainer struct {
	Client  kubernetes.Interface
	Clock   clock.WithTicker
	Options DrainOptions
	// OnEvent, when set, is called for every pod event; it may be called
	// from several goroutines at once and must not block.
	OnEvent func(DrainEvent)

	// daemonSets are the DaemonSets kubectl's filter found, by
	// "namespace/name": it asks for the DaemonSet of every DaemonSet pod
	// it lists, the same few on every node, each time a node's pods are
	// listed.
	daemonSets sync.Map
}

func (d *Drainer) emit(e DrainEvent) {
	if d.OnEvent != nil {
		d.OnEvent(e)
	}
}

// Pods returns the pods a drain of nodeName would evict and the pods it
// would leave, without changing anything (for --dry-run and plans).
func (d *Drainer) Pods(ctx context.Context, nodeName string) ([]corev1.Pod, []SkippedPod, error) {
	var mu sync.Mutex
	var skipped []SkippedPod
	listed := &podListRecorder{Interface: d.Client, daemonSets: &d.daemonSets}
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              listed,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  d.Options.DeleteEmptyDirData,
		Force:               d.Options.EvictUnreplicated,
		GracePeriodSeconds:  d.Options.GracePeriodSeconds,
		Out:                 io.Discard,
		ErrOut:              io.Discard,
		AdditionalFilters: []drain.PodFilter{func(p corev1.Pod) drain.PodDeleteStatus {
			if reason := inventory.DisruptionBlocked(p.Annotations); reason != "" && !d.Options.ForceEvict {
				mu.Lock()
				skipped = append(skipped, SkippedPod{Pod: p.Namespace + "/" + p.Name, Reason: reason + " (pass --force-evict to evict it anyway)"})
				mu.Unlock()
				return drain.MakePodDeleteStatusSkip()
			}
			return drain.MakePodDeleteStatusOkay()
		}},
	}
	list, errs := h.GetPodsForDeletion(nodeName)
	if list == nil {
		return nil, nil, fmt.Errorf("list pods on node %s: %w", nodeName, errors.Join(errs...))
	}
	// Not every client honours the spec.nodeName field selector kubectl
	// lists with (client-go's fake does not), so check the node of each
	// pod kubectl listed.
	onNode := make(map[string]*corev1.Pod, len(listed.pods))
	for i := range listed.pods {
		if p := &listed.pods[i]; p.Spec.NodeName == nodeName && (d.Options.Stay == nil || !d.Options.Stay(p)) {
			onNode[p.Namespace+"/"+p.Name] = p
		}
	}
	for _, err := range errs {
		// kubectl aggregates the pods it refuses to delete as
		// "cannot delete <why>: ns/a, ns/b".
		why, pods, ok := strings.Cut(err.Error(), ": ")
		if !ok {
			return nil, nil, fmt.Errorf("list pods on node %s: %w", nodeName, err)
		}
		for _, p := range strings.Split(pods, ", ") {
			if onNode[p] != nil {
				skipped = append(skipped, SkippedPod{Pod: p, Reason: strings.TrimPrefix(why, "cannot delete ")})
			}
		}
	}
	kept := skipped[:0]
	for _, s := range skipped {
		if onNode[s.Pod] != nil {
			kept = append(kept, s)
		}
	}
	skipped = kept
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Pod < skipped[j].Pod })
	var evict []corev1.Pod
	for _, p := range list.Pods() {
		if onNode[p.Namespace+"/"+p.Name] != nil {
			evict = append(evict, p)
		}
	}
	return evict, skipped, nil
}

// podListRecorder is the Drainer's client as drain.Helper sees it: the
// pods it lists are kept, so that Pods reads them again without a second
// list (kubectl's PodDeleteList names the pods it refuses, not their node),
// and a DaemonSet found once is not asked for again.
type podListRecorder struct {
	kubernetes.Interface
	pods       []corev1.Pod
	daemonSets *sync.Map
}

func (r *podListRecorder) AppsV1() appsv1client.AppsV1Interface {
	return knownDaemonSetsApps{AppsV1Interface: r.Interface.AppsV1(), known: r.daemonSets}
}

type knownDaemonSetsApps struct {
	appsv1client.AppsV1Interface
	known *sync.Map
}

func (a knownDaemonSetsApps) DaemonSets(namespace string) appsv1client.DaemonSetInterface {
	return knownDaemonSets{DaemonSetInterface: a.AppsV1Interface.DaemonSets(namespace), namespace: namespace, known: a.known}
}

type knownDaemonSets struct {
	appsv1client.DaemonSetInterface
	namespace string
	known     *sync.Map
}

// Get answers from the DaemonSets found before; only one that exists is
// remembered, so a DaemonSet not found is asked for again.
func (d knownDaemonSets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.DaemonSet, error) {
	key := d.namespace + "/" + name
	if ds, ok := d.known.Load(key); ok {
		return ds.(*appsv1.DaemonSet), nil
	}
	ds, err := d.DaemonSetInterface.Get(ctx, name, opts)
	if err == nil {
		d.known.Store(key, ds)
	}
	return ds, err
}

func (r *podListRecorder) CoreV1() corev1client.CoreV1Interface {
	return recordingCoreV1{CoreV1Interface: r.Interface.CoreV1(), r: r}
}

type recordingCoreV1 struct {
	corev1client.CoreV1Interface
	r *podListRecorder
}

func (c recordingCoreV1) Pods(namespace string) corev1client.PodInterface {
	return recordingPods{PodInterface: c.CoreV1Interface.Pods(namespace), r: c.r}
}

type recordingPods struct {
	corev1client.PodInterface
	r *podListRecorder
}

// List lists as the client does and keeps the pods (every page of a
// chunked list).
func (p recordingPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	list, err := p.PodInterface.List(ctx, opts)
	if err == nil {
		p.r.pods = append(p.r.pods, list.Items...)
	}
	return list, err
}

// DrainNodes drains nodes, up to concurrency at a time, starting them in
// the order given, and returns one result per node in that order. Nodes
// must already be cordoned. On cancellation it returns the results so far
// with ctx's error.
func (d *Drainer) DrainNodes(ctx context.Context, nodes []string, concurrency int) ([]DrainResult, error) {
	if concurrency < 1 {
		concurrency = 1
	}
	results := make([]DrainResult, len(nodes))
	errs := make([]error, len(nodes))
	sem := make(chan struct{}, concurrency)
	var pdbs *follower
	if d.Options.Watch {
		pdbs = followPDBs(ctx, d.Client)
		defer pdbs.stop()
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = DrainResult{Node: n}
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = d.drain(ctx, n, pdbs)
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// Drain evicts every evictable pod of one node and waits for them to be gone.
func (d *Drainer) Drain(ctx context.Context, nodeName string) (DrainResult, error) {
	var pdbs *follower
	if d.Options.Watch {
		pdbs = followPDBs(ctx, d.Client)
		defer pdbs.stop()
	}
	return d.drain(ctx, nodeName, pdbs)
}

// podsToEvict is Pods with a Skipped event for each pod left on the node,
// the start of a drain and of an eviction pass alike.
func (d *Drainer) podsToEvict(ctx context.Context, nodeName string) ([]corev1.Pod, []SkippedPod, error) {
	pods, skipped, err := d.Pods(ctx, nodeName)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range skipped {
		d.emit(DrainEvent{Type: DrainSkipped, Node: nodeName, Pod: s.Pod, Message: s.Reason})
	}
	return pods, skipped, nil
}

// drain is Drain with DrainNodes' budget follower (nil: none).
func (d *Drainer) drain(ctx context.Context, nodeName string, pdbs *follower) (DrainResult, error) {
	res := DrainResult{Node: nodeName}
	if d.Options.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clockTimeout(ctx, d.Clock, d.Options.Timeout)
		defer cancel()
	}
	pods, skipped, err := d.podsToEvict(ctx, nodeName)
	if err != nil {
		return res, err
	}
	res.Skipped = skipped
	var podsF *follower
	if d.Options.Watch && len(pods) > 0 {
		// Waits for evicted pods outlive ctx (see evict): so does this.
		podsF = followPods(context.WithoutCancel(ctx), d.Client, nodeName)
		defer podsF.stop()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	limit := d.Options.PodConcurrency
	if limit <= 0 {
		limit = max(len(pods), 1)
	}
	sem := make(chan struct{}, limit)
	for i := range pods {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = d.evict(ctx, nodeName, pods[i], pdbs, podsF)
			if errs[i] == nil {
				mu.Lock()
				res.Evicted = append(res.Evicted, pods[i].Namespace+"/"+pods[i].Name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Strings(res.Evicted)
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("drain node %s: %w", nodeName, err)
	}
	return res, nil
}

// evict evicts one pod, retrying 429 with backoff, and waits until it is
// gone. Once the eviction is accepted the wait survives cancellation of ctx
// (bounded by the pod's grace period plus a minute), so an interrupted
// rollout leaves no pod half-evicted. With followers (Options.Watch), a
// Ready pod whose one budget allows no more disruptions than evictions
// already in flight waits for the budget to change before asking, a 429
// is retried as soon as the budget changes, and the pod is known gone from
// the watch; the timers are the fallback.
func (d *Drainer) evict(ctx context.Context, nodeName string, pod corev1.Pod, pdbs, pods *follower) error {
	name := pod.Namespace + "/" + pod.Name
	delay, attempt := d.Options.RetryInitial, 1
	if delay <= 0 {
		delay = 250 * time.Millisecond
	}
	backOff := func() {
		if delay *= 2; d.Options.RetryMax > 0 && delay > d.Options.RetryMax {
			delay = d.Options.RetryMax
		}
		attempt++
	}
	// A budget that the cache says is exhausted is asked anyway after this
	// long: the API server, not the cache, has the last word.
	held := 5 * max(d.Options.RetryMax, delay)
	var pdb string
	if ready(&pod) {
		pdb = pdbs.budgetOf(&pod)
	}
	gated := pdb != ""
	waiting := false
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("evict %s: not started: %w", name, context.Cause(ctx))
		}
		wake := pdbs.changed(pdb)
		release := func() {}
		if gated {
			var ok bool
			if release, ok = pdbs.admit(pdb); !ok {
				if !waiting {
					waiting = true
					d.emit(DrainEvent{Type: DrainBlocked, Node: nodeName, Pod: name, PDB: pdb, Attempt: attempt,
						Message: "PodDisruptionBudget " + pdb + " allows no more disruptions now; waiting for it to allow one"})
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("evict %s: waiting for PodDisruptionBudget %s: %w", name, pdb, context.Cause(ctx))
				case <-wake:
				case <-d.Clock.After(held):
					gated = false // ask the API server once
				}
				continue
			}
		}
		waiting = false
		d.emit(DrainEvent{Type: DrainEvicting, Node: nodeName, Pod: name, Attempt: attempt})
		err := d.evictPod(ctx, pod)
		release()
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			break // evicted, or gone or replaced under its name meanwhile
		}
		if ctx.Err() != nil {
			// ctx ended under the request: client-go reports that as
			// context.Canceled even when the drain's timeout ended it.
			return fmt.Errorf("evict %s: cut short (%v): %w", name, err, context.Cause(ctx))
		}
		if unanswered(err) {
			// The API server failed the request or it got no answer (it
			// is restarting: the eviction handler's own update of the
			// budget refused, or the connection lost). Send it again: an
			// eviction of a pod already terminating only deletes it
			// again, and one of a pod replaced under its name is refused
			// by the UID precondition.
			select {
			case <-ctx.Done():
				return fmt.Errorf("evict %s: waiting to ask again after %v (attempt %d): %w", name, err, attempt, context.Cause(ctx))
			case <-d.Clock.After(delay):
			}
			backOff()
			continue
		}
		if !apierrors.IsTooManyRequests(err) {
			return fmt.Errorf("evict %s: %w", name, err)
		}
		if pdb == "" && attempt == 1 { // look the budget up once: every lookup lists the namespace's PDBs
			pdb = d.blockingPDB(ctx, &pod)
		}
		d.emit(DrainEvent{Type: DrainBlocked, Node: nodeName, Pod: name, PDB: pdb, Attempt: attempt, Message: err.Error()})
		if wake == nil && !strings.Contains(pdb, ",") {
			wake = pdbs.changed(pdb) // the budget is known only now
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("evict %s: waiting after 429 (attempt %d): %w", name, attempt, context.Cause(ctx))
		case <-wake:
		case <-d.Clock.After(delay):
		}
		gated = ready(&pod) && pdbs.synced() && pdb != "" && !strings.Contains(pdb, ",")
		backOff()
	}
	grace := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if d.Options.GracePeriodSeconds >= 0 {
		grace = int64(d.Options.GracePeriodSeconds)
	}
	wctx, cancel := clockTimeout(context.WithoutCancel(ctx), d.Clock, time.Duration(grace)*time.Second+time.Minute)
	defer cancel()
	if err := d.waitGone(wctx, pod, pods); err != nil {
		return fmt.Errorf("evict %s: wait for it to terminate: %w", name, err)
	}
	d.emit(DrainEvent{Type: DrainEvicted, Node: nodeName, Pod: name})
	return nil
}

// unanswered reports an eviction the API server did not decide: it
// failed inside (500: the handler could not update the budget, as while
// it shuts down), was unavailable or timed out (503, 504), or no answer
// came (the connection refused, or lost under the request: outage.go). A
// refusal (429) or any other status is an answer.
func unanswered(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return unsent(err) || lost(err)
	}
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// evictPod asks the API server to evict pod, and only that pod: unlike
// drain.Helper.EvictPod, the request carries the pod's UID as a
// precondition (as Karpenter's own evictions do), so an eviction sent
// again, or after a wait on the budget, of a pod a StatefulSet replaced
// under the same name fails with 409 instead of moving the replacement.
func (d *Drainer) evictPod(ctx context.Context, pod corev1.Pod) error {
	opts := &metav1.DeleteOptions{}
	if pod.UID != "" {
		opts.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
	}
	if d.Options.GracePeriodSeconds >= 0 {
		opts.GracePeriodSeconds = ptr.To(int64(d.Options.GracePeriodSeconds))
	}
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, DeleteOptions: opts}
	return d.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, eviction)
}

// waitGone waits until pod is deleted (or replaced under its name). With a
// follower it reads the watch's cache, woken by the pod's events, and asks
// the API server only every tenth poll interval, in case the watch lags.
func (d *Drainer) waitGone(ctx context.Context, pod corev1.Pod, pods *follower) error {
	interval := d.Options.PollInterval
	if interval <= 0 {
		interval = time.Second
	}
	key := pod.Namespace + "/" + pod.Name
	ask := !pods.synced()
	for {
		wake := pods.changed(key)
		if gone, known := pods.gone(key, pod.UID); gone {
			return nil
		} else if !known {
			ask = true
		}
		if ask {
			p, err := d.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil && ctx.Err() == nil:
				// transient API errors: poll again
			case err != nil:
				return err
			case p.UID != pod.UID:
				return nil // a StatefulSet replaced it under the same name
			}
		}
		wait := interval
		if pods.synced() {
			wait = 10 * interval
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-wake:
			ask = false
		case <-d.Clock.After(wait):
			ask = true
		}
	}
}

// blockingPDB names the PodDisruptionBudget selecting pod, or "" if none
// can be found (the eviction message does not carry it reliably).
func (d *Drainer) blockingPDB(ctx context.Context, pod *corev1.Pod) string {
	list, err := d.Client.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var names []string
	for _, pdb := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			names = append(names, pdb.Namespace+"/"+pdb.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// clockTimeout is context.WithTimeout on an injected clock.
func clockTimeout(parent context.Context, c clock.WithTicker, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := c.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel(fmt.Errorf("timed out after %s: %w", d, context.DeadlineExceeded))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { t.Stop(); cancel(context.Canceled) }
}
