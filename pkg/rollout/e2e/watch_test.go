package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
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
//
// When the watch cannot be resumed (kube-apiserver restarted: its new
// watch cache does not reach back to the last event seen), the pods are
// listed again and the list is taken as one snapshot (relist): the counts
// become the snapshot's, and a pod gone from it, or there under its name
// with a new UID (a StatefulSet's, replaced), was deleted. Applying the
// list pod by pod, as an informer's handlers see it — the deletions
// first, then the pods that replaced them — would show a budget below its
// minimum that it never was.
type podWatch struct {
	mu      sync.Mutex
	budgets []budget
	healthy map[string]bool
	counts  map[string]int
	lowest  map[string]int
	since   map[string]time.Time // when a pod was first seen without a node
	pending time.Duration        // longest time a pod waited for a node
	// known is every pod seen, for a relist to tell which went.
	known map[string]knownPod
	// deleted lists, per namespace, the pods deleted that are not a
	// DaemonSet's ("name on node"): each is a move (an eviction or a
	// surge restart).
	deleted map[string][]string
	// violations counts the moments a budget's healthy pods fell below
	// its minimum (each drop from at or above it).
	violations int
	// violated says when and by which pod each violation began.
	violated []string
	// relists says when the watch was listed again after the first
	// list, and how long no event had come before it (the watcher was
	// blind for at most that long).
	relists []string
	// placed lists, in order, every pod (by UID) the first time it was
	// seen on a node.
	placed    []placement
	placedUID map[types.UID]bool
	lastEvent time.Time
	synced    chan struct{}
	stopped   chan struct{}
	cancel    context.CancelFunc
}

// placement is a pod seen on a node for the first time.
type placement struct {
	namespace, name, node string
	uid                   types.UID
	labels                map[string]string
	at                    time.Time
}

type knownPod struct {
	uid    types.UID
	node   string
	daemon bool
}

func newPodWatch(budgets []budget) *podWatch {
	return &podWatch{budgets: budgets, healthy: map[string]bool{}, counts: map[string]int{}, lowest: map[string]int{}, since: map[string]time.Time{},
		known: map[string]knownPod{}, deleted: map[string][]string{}, placedUID: map[types.UID]bool{}, synced: make(chan struct{}), stopped: make(chan struct{})}
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

func daemon(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}

// watchPods starts watching namespace ns ("" for all) through a
// reflector, which lists again and carries on when the API server drops
// the watch or cannot resume it (restarted or paused: the chaos ladder),
// retrying every 100ms to 1s so that it is blind as briefly as it can be.
// It returns once the initial list is counted.
func watchPods(ctx context.Context, c kubernetes.Interface, ns string, budgets []budget) (*podWatch, error) {
	return watchPodsFrom(ctx, cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", ns, fields.Everything()), budgets)
}

func watchPodsFrom(ctx context.Context, lw cache.ListerWatcher, budgets []budget) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := newPodWatch(budgets)
	w.cancel = cancel
	r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, w,
		cache.ReflectorOptions{Name: "pdb-watcher", Backoff: &wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: 10, Jitter: 0.1}})
	go func() {
		defer close(w.stopped)
		r.RunWithContext(ctx)
	}()
	select {
	case <-w.synced:
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("pod watch did not list: %w", ctx.Err())
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

// Add, Update, Delete, Replace and Resync make podWatch the reflector's
// store (cache.ReflectorStore): watch events one by one, a list whole.

func (w *podWatch) Add(obj any) error    { return w.event(obj, false) }
func (w *podWatch) Update(obj any) error { return w.event(obj, false) }
func (w *podWatch) Delete(obj any) error { return w.event(obj, true) }
func (w *podWatch) Resync() error        { return nil }

func (w *podWatch) event(obj any, deleted bool) error {
	if p, ok := obj.(*corev1.Pod); ok {
		w.mu.Lock()
		w.observe(p, deleted)
		w.lastEvent = time.Now()
		w.mu.Unlock()
	}
	return nil
}

func (w *podWatch) Replace(list []any, _ string) error {
	pods := make([]*corev1.Pod, 0, len(list))
	for _, o := range list {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.synced:
		w.relists = append(w.relists, fmt.Sprintf("%s (no event for %s before)", time.Now().Format("15:04:05.000"), time.Since(w.lastEvent).Round(100*time.Millisecond)))
	default:
		defer close(w.synced)
	}
	w.relist(pods)
	w.lastEvent = time.Now()
	return nil
}

// relist takes a fresh list of every pod as the state: a pod known
// before and not in it (or in it with another UID) was deleted; each
// budget's count is the list's, a violation if it is below the minimum
// the last count was not below.
func (w *podWatch) relist(pods []*corev1.Pod) {
	now := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		now[p.Namespace+"/"+p.Name] = p
	}
	for key, k := range w.known {
		if p, ok := now[key]; ok && p.UID == k.uid {
			continue
		}
		if !k.daemon {
			ns, name, _ := strings.Cut(key, "/")
			w.deleted[ns] = append(w.deleted[ns], name+" on "+k.node)
		}
		delete(w.known, key)
		if start, waiting := w.since[key]; waiting {
			w.pending = max(w.pending, time.Since(start))
			delete(w.since, key)
		}
	}
	healthyNow, counts := map[string]bool{}, map[string]int{}
	for key, p := range now {
		w.known[key] = knownPod{uid: p.UID, node: p.Spec.NodeName, daemon: daemon(p)}
		w.place(p)
		if !healthy(p) {
			continue
		}
		healthyNow[key] = true
		for _, b := range w.budgets {
			if b.selector.Matches(labels.Set(p.Labels)) {
				counts[b.name]++
			}
		}
	}
	for key, p := range now {
		start, waiting := w.since[key]
		switch {
		case p.Spec.NodeName == "" && !waiting:
			w.since[key] = time.Now()
		case waiting && p.Spec.NodeName != "":
			w.pending = max(w.pending, time.Since(start))
			delete(w.since, key)
		}
	}
	for _, b := range w.budgets {
		l, counting := w.lowest[b.name]
		if !counting {
			continue
		}
		if counts[b.name] < b.min && w.counts[b.name] >= b.min {
			w.violations++
			w.violated = append(w.violated, fmt.Sprintf("%s %s below %d in a relist: %d healthy",
				time.Now().Format("15:04:05.000"), b.name, b.min, counts[b.name]))
		}
		w.lowest[b.name] = min(l, counts[b.name])
	}
	w.healthy, w.counts = healthyNow, counts
}

// observe applies one pod event: a pod turning healthy or not moves the
// counts of the budgets selecting it, and their lowest.
func (w *podWatch) observe(p *corev1.Pod, deleted bool) {
	key := p.Namespace + "/" + p.Name
	if deleted {
		delete(w.known, key)
		if !daemon(p) {
			w.deleted[p.Namespace] = append(w.deleted[p.Namespace], p.Name+" on "+p.Spec.NodeName)
		}
	} else {
		w.known[key] = knownPod{uid: p.UID, node: p.Spec.NodeName, daemon: daemon(p)}
		w.place(p)
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

// place records p's node the first time p (by UID) is seen on one.
func (w *podWatch) place(p *corev1.Pod) {
	if p.Spec.NodeName == "" || w.placedUID[p.UID] {
		return
	}
	w.placedUID[p.UID] = true
	w.placed = append(w.placed, placement{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName, uid: p.UID, labels: p.Labels, at: time.Now()})
}

// placements lists, in order, every pod the watch saw on a node, once.
func (w *podWatch) placements() []placement {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.placed)
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

// relistLog says when the watch was listed again after its first list.
func (w *podWatch) relistLog() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.relists)
}

// deletions lists the pods of namespace ns, not a DaemonSet's, deleted
// while the watch ran, in order, each as "name on node".
func (w *podWatch) deletions(ns string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.deleted[ns])
}

// TestPodWatchCounts: the incremental counts follow pods turning healthy
// and unhealthy, per budget, and keep the lowest (no control plane needed).
func TestPodWatchCounts(t *testing.T) {
	budgets := []budget{{name: "web", selector: labels.SelectorFromSet(labelsOf("web")), min: 1}, {name: "db", selector: labels.SelectorFromSet(labelsOf("db")), min: 1}}
	w := newPodWatch(budgets)
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
	if n := len(w.deletions("ns")); n != 2 {
		t.Errorf("%d deletions, want 2 (web-1, db-1; not the DaemonSet's)", n)
	}
}

// noWatchList is a ListerWatcher that says it cannot stream its list
// (the reflector then lists, as it falls back to against a real server).
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestPodWatchRelist: when the watch cannot be resumed (410: the API
// server restarted and its watch cache does not reach back) the pods are
// listed again, and the list is one snapshot. Two web pods of a budget of
// minimum 2 stayed healthy while one was replaced by another (a move), and
// a StatefulSet's db-0 was replaced under its name (a move): no
// violation, two moves. Applied pod by pod as an informer's handlers see
// it (the deletion of web-1 first, then web-3) the budget would seem to
// fall to 1; and db-0 would seem never to have moved.
func TestPodWatchRelist(t *testing.T) {
	pod := func(name, uid, app string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), Labels: labelsOf(app)}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	lists := [][]corev1.Pod{
		{pod("web-1", "u1", "web"), pod("web-2", "u2", "web"), pod("db-0", "u3", "db")},
		{pod("web-2", "u2", "web"), pod("web-3", "u4", "web"), pod("db-0", "u5", "db")},
	}
	var mu sync.Mutex
	listed := 0
	watches := make(chan *watch.FakeWatcher, len(lists))
	lw := noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			i := min(listed, len(lists)-1)
			listed++
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(i + 1)}, Items: lists[i]}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			fw := watch.NewFake()
			watches <- fw
			return fw, nil
		},
	}}
	budgets := []budget{{name: "web", selector: labels.SelectorFromSet(labelsOf("web")), min: 2}}
	w, err := watchPodsFrom(t.Context(), lw, budgets)
	if err != nil {
		t.Fatal(err)
	}
	(<-watches).Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1"})
	<-watches // listed again and watching
	lowest, _, err := w.stop()
	if err != nil {
		t.Fatal(err)
	}
	if lowest["web"] != 2 || w.violationCount() != 0 {
		t.Errorf("lowest web %d, %d violations %v; want 2 and none", lowest["web"], w.violationCount(), w.violationLog())
	}
	if n := len(w.deletions("ns")); n != 2 {
		t.Errorf("%d deletions, want 2 (web-1, and db-0 replaced under its name)", n)
	}
	if r := w.relistLog(); len(r) != 1 {
		t.Errorf("relists %v, want one", r)
	}
}
