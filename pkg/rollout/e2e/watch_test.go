package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// budget is a PDB's selector and the healthy pods it requires.
type budget struct {
	name     string
	selector labels.Selector
	min      int
	// appears marks pods the run itself creates (the controller step 07
	// installs): their budget counts from when it first has its minimum.
	appears bool
}

// podWatch follows every pod of a namespace through a watch and keeps, per
// budget, the count of its healthy pods (Running, Ready, not terminating —
// what the disruption controller counts), updated by each event for the
// budgets that select the pod, and the lowest count seen. It also records
// the longest time a pod waited for a node. The counts are incremental so
// that the watcher, on the machine it measures, costs little CPU.
type podWatch struct {
	mu      sync.Mutex
	budgets []budget
	healthy map[string]bool
	counts  map[string]int
	lowest  map[string]int
	since   map[string]time.Time // when a pod was first seen without a node
	pending time.Duration        // longest time a pod waited for a node
	// deleted counts, per namespace, the pods deleted that are not a
	// DaemonSet's: each is a move (an eviction or a surge restart).
	deleted map[string]int
	// violations counts the moments a budget's healthy pods fell below
	// its minimum (each drop from at or above it).
	violations int
	// violated says when and by which pod each violation began.
	violated []string
	stopped  chan struct{}
	cancel   context.CancelFunc
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

// watchPods starts watching namespace ns ("" for all) through an
// informer, which lists again and carries on when the API server drops
// the watch or cannot resume it (restarted or paused: the chaos ladder).
// It returns once the initial list is counted.
func watchPods(ctx context.Context, c kubernetes.Interface, ns string, budgets []budget) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{budgets: budgets, healthy: map[string]bool{}, counts: map[string]int{}, lowest: map[string]int{}, since: map[string]time.Time{}, deleted: map[string]int{}, stopped: make(chan struct{}), cancel: cancel}
	on := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			w.mu.Lock()
			w.observe(p, deleted)
			w.mu.Unlock()
		}
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", ns, fields.Everything()),
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { on(obj, false) },
			UpdateFunc: func(_, obj any) { on(obj, false) },
			DeleteFunc: func(obj any) { on(obj, true) },
		},
	})
	go func() {
		defer close(w.stopped)
		ctrl.Run(ctx.Done())
	}()
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
		cancel()
		return nil, fmt.Errorf("pod informer did not sync: %w", ctx.Err())
	}
	w.mu.Lock()
	for _, b := range budgets {
		if !b.appears || w.counts[b.name] >= b.min {
			w.lowest[b.name] = w.counts[b.name]
		}
	}
	w.mu.Unlock()
	return w, nil
}

// observe applies one pod event: a pod turning healthy or not moves the
// counts of the budgets selecting it, and their lowest.
func (w *podWatch) observe(p *corev1.Pod, deleted bool) {
	key := p.Namespace + "/" + p.Name
	if deleted && !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
		w.deleted[p.Namespace]++
	}
	now := !deleted && healthy(p)
	if now != w.healthy[key] {
		if now {
			w.healthy[key] = true
		} else {
			delete(w.healthy, key)
		}
		for _, b := range w.budgets {
			if !b.selector.Matches(labels.Set(p.Labels)) {
				continue
			}
			if now {
				w.counts[b.name]++
				if _, counting := w.lowest[b.name]; !counting && w.counts[b.name] >= b.min {
					w.lowest[b.name] = w.counts[b.name]
				}
			} else {
				w.counts[b.name]--
				if _, counting := w.lowest[b.name]; counting && w.counts[b.name] == b.min-1 {
					w.violations++
					w.violated = append(w.violated, fmt.Sprintf("%s %s below %d: %s on %s (deleted %t, phase %s)",
						time.Now().Format("15:04:05.000"), b.name, b.min, key, p.Spec.NodeName, deleted, p.Status.Phase))
				}
			}
			if l, ok := w.lowest[b.name]; ok {
				w.lowest[b.name] = min(l, w.counts[b.name])
			}
		}
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
	return out, w.pending, nil
}

// violationCount is how many times a budget fell below its minimum.
func (w *podWatch) violationCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.violations
}

// violationLog says when each violation began and which pod caused it.
func (w *podWatch) violationLog() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.violated)
}

// deletions is the count of pods of namespace ns, not a DaemonSet's,
// deleted while the watch ran.
func (w *podWatch) deletions(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleted[ns]
}

// TestPodWatchCounts: the incremental counts follow pods turning healthy
// and unhealthy, per budget, and keep the lowest (no control plane needed).
func TestPodWatchCounts(t *testing.T) {
	budgets := []budget{{name: "web", selector: labels.SelectorFromSet(labelsOf("web")), min: 1}, {name: "db", selector: labels.SelectorFromSet(labelsOf("db")), min: 1}}
	w := &podWatch{budgets: budgets, healthy: map[string]bool{}, counts: map[string]int{}, lowest: map[string]int{}, since: map[string]time.Time{}, deleted: map[string]int{}}
	pod := func(name, app string, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labelsOf(app)}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	w.observe(pod("web-1", "web", true), false)
	w.observe(pod("web-2", "web", true), false)
	w.observe(pod("db-1", "db", true), false)
	for _, b := range budgets {
		if !b.appears || w.counts[b.name] >= b.min {
			w.lowest[b.name] = w.counts[b.name]
		}
	}
	steps := []struct {
		pod     *corev1.Pod
		deleted bool
		web, db int
	}{
		{pod("web-1", "web", true), false, 2, 1}, // no change
		{pod("web-1", "web", false), false, 1, 1},
		{pod("web-1", "web", false), true, 1, 1}, // already unhealthy
		{pod("web-3", "web", true), false, 2, 1},
		{pod("db-1", "db", true), true, 2, 0},
	}
	for i, s := range steps {
		w.observe(s.pod, s.deleted)
		if w.counts["web"] != s.web || w.counts["db"] != s.db {
			t.Errorf("step %d: counts %v, want web %d db %d", i, w.counts, s.web, s.db)
		}
	}
	if w.lowest["web"] != 1 || w.lowest["db"] != 0 {
		t.Errorf("lowest %v, want web 1 db 0", w.lowest)
	}
	if n := w.violationCount(); n != 1 {
		t.Errorf("%d violations, want 1 (db below its minimum of 1 once)", n)
	}
	// Two pods deleted (moves); a DaemonSet's deleted pod is not one.
	agent := pod("agent-1", "agent", true)
	agent.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
	w.observe(agent, true)
	if n := w.deletions("ns"); n != 2 {
		t.Errorf("%d deletions, want 2 (web-1, db-1; not the DaemonSet's)", n)
	}
}
