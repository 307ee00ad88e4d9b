package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// follower follows one kind of object through an informer so that a drain
// on the wall clock wakes as soon as what it waits on changes — a
// PodDisruptionBudget freeing a disruption, an evicted pod going — rather
// than on its next backoff or poll timer, and so that it need not ask the
// API server: on a large wave, per-pod polls and evictions retried into a
// PDB at its minimum are most of the drain's requests. The timers stay as
// the fallback, so a follower that cannot watch (RBAC without "watch", an
// API server that drops it) only loses the early wake-ups.
type follower struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	// failed is set when the API server refuses the list or watch: the
	// cache may hold a list that no watch will ever update.
	failed atomic.Bool

	mu sync.Mutex
	// next holds, per object key, a channel closed at the key's next event.
	next map[string]chan struct{}
	// sending counts, per PDB key, evictions sent and not yet answered.
	sending map[string]int32
}

func startFollower(ctx context.Context, inf cache.SharedIndexInformer) *follower {
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{inf: inf, cancel: cancel, next: map[string]chan struct{}{}, sending: map[string]int32{}}
	notify := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		f.mu.Lock()
		if ch, ok := f.next[key]; ok {
			close(ch)
			delete(f.next, key)
		}
		f.mu.Unlock()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	// Forbidden (no list or watch permission) will not heal: stop, and let
	// the drain poll. Other errors the reflector retries on its own.
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			f.failed.Store(true)
			cancel()
		}
	})
	go inf.RunWithContext(ctx)
	return f
}

// pdbSyncWait bounds how long a drain waits for its first list of
// PodDisruptionBudgets before it starts evicting without them.
const pdbSyncWait = 5 * time.Second

// followPDBs follows every PodDisruptionBudget of the cluster. It returns
// once they are listed (or pdbSyncWait has passed, or the list is refused),
// so the first evictions already wait on their budgets.
func followPDBs(ctx context.Context, c kubernetes.Interface) *follower {
	f := startFollower(ctx, policyinformers.NewPodDisruptionBudgetInformer(c, metav1.NamespaceAll, 0, cache.Indexers{}))
	wctx, cancel := context.WithTimeout(ctx, pdbSyncWait)
	defer cancel()
	cache.WaitForCacheSync(wctx.Done(), func() bool { return f.synced() || f.failed.Load() })
	return f
}

// followPods follows the pods bound to one node.
func followPods(ctx context.Context, c kubernetes.Interface, node string) *follower {
	return startFollower(ctx, coreinformers.NewFilteredPodInformer(c, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + node }))
}

func (f *follower) stop() {
	if f != nil {
		f.cancel()
	}
}

// changed returns a channel closed at the next event for key; a nil
// follower's, or an empty key's, never closes. Take it before reading the state it guards, so
// no event falls between the two.
func (f *follower) changed(key string) <-chan struct{} {
	if f == nil || key == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.next[key]
	if !ok {
		ch = make(chan struct{})
		f.next[key] = ch
	}
	return ch
}

// synced reports whether the follower's cache holds the full picture.
func (f *follower) synced() bool {
	return f != nil && !f.failed.Load() && f.inf.HasSynced()
}

// gone reports, from the cache, whether the pod with uid no longer exists
// under key; known is false when the cache cannot tell.
func (f *follower) gone(key string, uid types.UID) (gone, known bool) {
	if !f.synced() {
		return false, false
	}
	obj, exists, err := f.inf.GetStore().GetByKey(key)
	if err != nil {
		return false, false
	}
	if !exists {
		return true, true
	}
	p, ok := obj.(*corev1.Pod)
	return ok && p.UID != uid, ok
}

// budgetOf returns the key of the one PodDisruptionBudget selecting pod, or
// "" when the cache cannot tell or the pod has none or several (the
// eviction API refuses those with 500, not 429, and there is nothing to
// wait for).
func (f *follower) budgetOf(pod *corev1.Pod) string {
	if !f.synced() {
		return ""
	}
	var found string
	for _, obj := range f.inf.GetStore().List() {
		pdb, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok || pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if found != "" {
			return ""
		}
		found = pdb.Namespace + "/" + pdb.Name
	}
	return found
}

// admit reserves one eviction against the budget key when its cached status
// allows more disruptions than evictions already sent; release gives the
// slot back once the API server has answered. When the budget allows none,
// ok is false and nothing is reserved. A status not yet observed for the
// current spec is not trusted: the eviction is sent and the API decides.
func (f *follower) admit(key string) (release func(), ok bool) {
	obj, exists, err := f.inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return func() {}, true
	}
	pdb, isPDB := obj.(*policyv1.PodDisruptionBudget)
	if !isPDB || pdb.Status.ObservedGeneration < pdb.Generation {
		return func() {}, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if pdb.Status.DisruptionsAllowed-f.sending[key] <= 0 {
		return nil, false
	}
	f.sending[key]++
	return func() {
		f.mu.Lock()
		f.sending[key]--
		f.mu.Unlock()
	}, true
}

// ready reports whether a pod is Ready: the eviction API may evict a pod
// that is not even when its budget allows no disruption, so only Ready
// pods wait on the cached budget.
func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
