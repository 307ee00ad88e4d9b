package e2e

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// budget is a PDB's selector and the healthy pods it requires.
type budget struct {
	name     string
	selector labels.Selector
	min      int
}

// podWatch follows every pod of a namespace through a watch and, after
// each event, counts the healthy pods of every budget (Running, Ready, not
// terminating — what the disruption controller counts) and records the
// lowest count seen. It also records the longest time a pod waited for a
// node.
type podWatch struct {
	mu       sync.Mutex
	budgets  []budget
	healthy  map[string]*corev1.Pod
	lowest   map[string]int
	since    map[string]time.Time // when a pod was first seen without a node
	pending  time.Duration        // longest time a pod waited for a node
	stopped  chan struct{}
	cancel   context.CancelFunc
	watchErr error
}

func healthy(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchPods starts watching namespace ns ("" for all). It returns once
// the initial list is counted.
func watchPods(ctx context.Context, c kubernetes.Interface, ns string, budgets []budget) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{budgets: budgets, healthy: map[string]*corev1.Pod{}, lowest: map[string]int{}, since: map[string]time.Time{}, stopped: make(chan struct{}), cancel: cancel}
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range list.Items {
		w.observe(&list.Items[i], false)
	}
	for _, b := range budgets {
		w.lowest[b.name] = w.count(b)
	}
	wi, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(w.stopped)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if ev.Type == watch.Error && ctx.Err() == nil {
					w.mu.Lock()
					w.watchErr = errFromEvent(ev)
					w.mu.Unlock()
					return
				}
				continue
			}
			w.mu.Lock()
			w.observe(p, ev.Type == watch.Deleted)
			for _, b := range w.budgets {
				w.lowest[b.name] = min(w.lowest[b.name], w.count(b))
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func errFromEvent(ev watch.Event) error {
	if s, ok := ev.Object.(*metav1.Status); ok {
		return &statusError{s.Message}
	}
	return &statusError{"watch error"}
}

type statusError struct{ msg string }

func (e *statusError) Error() string { return e.msg }

func (w *podWatch) observe(p *corev1.Pod, deleted bool) {
	key := p.Namespace + "/" + p.Name
	if deleted || !healthy(p) {
		delete(w.healthy, key)
	} else {
		w.healthy[key] = p
	}
	// Pending time is measured on the watcher's clock (object timestamps
	// have one-second resolution): from the first event without a node to
	// the first with one, or to deletion, or to the end of the watch.
	start, waiting := w.since[key]
	switch {
	case !deleted && p.Spec.NodeName == "" && !waiting:
		w.since[key] = time.Now()
	case waiting && (deleted || p.Spec.NodeName != ""):
		w.pending = max(w.pending, time.Since(start))
		delete(w.since, key)
	}
}

func (w *podWatch) count(b budget) int {
	n := 0
	for _, p := range w.healthy {
		if b.selector.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

// stop ends the watch and returns the lowest healthy count per budget and
// the longest wait for a node.
func (w *podWatch) stop() (map[string]int, time.Duration, error) {
	w.cancel()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, start := range w.since {
		w.pending = max(w.pending, time.Since(start))
	}
	out := map[string]int{}
	for k, v := range w.lowest {
		out[k] = v
	}
	return out, w.pending, w.watchErr
}
