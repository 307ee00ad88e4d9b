package demo

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// waitWatcher measures every pod's wait for a node, the same way on both
// engines: from the pod's creation to its PodScheduled condition turning
// True (bound; the container start after it is not counted), for the pods
// created once the cluster was loaded. A pod deleted before it was bound
// waited until it was last seen; one still unbound at the end waited
// until then. Placeholder pods are not counted: they wait for Karpenter's
// launch so that the pods they hold room for do not.
//
// The sandbox feeds it every pass's pods (observe), a control plane a pod
// informer's events (seen, gone). Both read the times the cluster wrote
// (creation, the condition's transition), whole seconds on a real API
// server and the 5s ticks of the sandbox.
type waitWatcher struct {
	mu      sync.Mutex
	from    time.Time
	waiting map[types.UID]*corev1.Pod
	bound   map[types.UID]bool
	longest time.Duration
	// pod says which pod waited longest, and for what; key is its
	// namespace/name, which breaks ties so that a run is reproducible.
	pod, key string
}

func newWaitWatcher(from time.Time) *waitWatcher {
	return &waitWatcher{from: from.Truncate(time.Second), waiting: map[types.UID]*corev1.Pod{}, bound: map[types.UID]bool{}}
}

// counted reports whether p's wait is measured.
func (w *waitWatcher) counted(p *corev1.Pod) bool {
	return !p.CreationTimestamp.Time.Before(w.from) && p.Labels[kube.LabelComponent] != "placeholder"
}

// boundAt is when p was bound to its node, if it is.
func boundAt(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	if p.Spec.NodeName != "" {
		// Created bound (the sandbox's DaemonSet pods): no wait.
		return p.CreationTimestamp.Time, true
	}
	return time.Time{}, false
}

// seen records a state of p as of now.
func (w *waitWatcher) seen(p *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seenLocked(p, now)
}

func (w *waitWatcher) seenLocked(p *corev1.Pod, _ time.Time) {
	if w.bound[p.UID] || !w.counted(p) {
		return
	}
	at, ok := boundAt(p)
	if !ok {
		w.waiting[p.UID] = p.DeepCopy()
		return
	}
	delete(w.waiting, p.UID)
	w.bound[p.UID] = true
	w.record(p, at.Sub(p.CreationTimestamp.Time), fmt.Sprintf("bound to %s at %s", p.Spec.NodeName, at.Format("15:04:05")))
}

// gone records p's deletion, seen at now.
func (w *waitWatcher) gone(p *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.goneLocked(p.UID, now)
}

func (w *waitWatcher) goneLocked(uid types.UID, now time.Time) {
	p, ok := w.waiting[uid]
	if !ok {
		return
	}
	delete(w.waiting, uid)
	w.bound[uid] = true
	w.record(p, now.Sub(p.CreationTimestamp.Time), "deleted unbound by "+now.Format("15:04:05"))
}

// observe takes every pod as of now (read, not kept): each is seen, and a
// pod waiting at the last list that is not in this one is gone.
func (w *waitWatcher) observe(pods []*corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	present := map[types.UID]bool{}
	for _, p := range pods {
		w.seenLocked(p, now)
		if w.waiting[p.UID] != nil {
			present[p.UID] = true
		}
	}
	for uid := range w.waiting {
		if !present[uid] {
			w.goneLocked(uid, now)
		}
	}
}

func (w *waitWatcher) record(p *corev1.Pod, d time.Duration, what string) {
	d = max(d, 0)
	if key := p.Namespace + "/" + p.Name; longer(d, key, w.longest, w.key) {
		w.longest, w.key = d, key
		w.pod = fmt.Sprintf("%s: created %s, %s", key, p.CreationTimestamp.Format("15:04:05"), what)
	}
}

// longer orders waits: the longer one, then the first pod by name.
func longer(d time.Duration, key string, than time.Duration, thanKey string) bool {
	return thanKey == "" || d > than || (d == than && key < thanKey)
}

// result is the longest wait as of now (a pod still unbound counts until
// now) and which pod it was ("" when no pod was created).
func (w *waitWatcher) result(now time.Time) (time.Duration, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	longest, key, pod := w.longest, w.key, w.pod
	for _, p := range w.waiting {
		if d, k := now.Sub(p.CreationTimestamp.Time), p.Namespace+"/"+p.Name; longer(d, k, longest, key) {
			longest, key = d, k
			pod = fmt.Sprintf("%s: created %s, still unbound at %s", k, p.CreationTimestamp.Format("15:04:05"), now.Format("15:04:05"))
		}
	}
	return longest, pod
}
