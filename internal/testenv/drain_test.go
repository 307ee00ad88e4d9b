package testenv_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/drain"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// TestDrainKeepsPDBMinimum drains a cordoned node with kubectl's drain
// package while a watch counts the workload's healthy pods after every
// event: the count never drops below the PDB's minAvailable.
func TestDrainKeepsPDBMinimum(t *testing.T) {
	t.Parallel()
	env := cluster.Env(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	const replicas, minAvailable = 4, 3

	// All replicas start on the first node; two more nodes of the same group
	// join afterwards to take them.
	nodes := createNodes(t, env, ns, 0, 1)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, deployment("api", replicas, ns, "100m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForPodsRunning(ctx, ns, "app=api", replicas); err != nil {
		t.Fatal(err)
	}
	others := createNodes(t, env, ns, 1, 2)
	createPDB(t, env, ns, "api", minAvailable)
	waitPDB(ctx, t, env, ns, "api", replicas-minAvailable)

	w := watchHealthy(ctx, t, env, ns, "app=api")

	var mu sync.Mutex
	var evicted []string
	blocked := &countingWriter{w: logWriter{t}, substr: "disruption budget"}
	helper := &drain.Helper{
		Ctx:                 ctx,
		Client:              env.Client,
		GracePeriodSeconds:  -1,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		Timeout:             2 * time.Minute,
		// The zero value retries a 429 at once, in a busy loop; kubectl
		// itself waits 5s.
		EvictErrorRetryDelay: time.Second,
		Out:                  logWriter{t},
		ErrOut:               blocked,
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, usingEviction bool, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil && usingEviction {
				evicted = append(evicted, pod.Name)
			}
		},
	}
	node, err := env.Client.CoreV1().Nodes().Get(ctx, nodes[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := drain.RunCordonOrUncordon(helper, node, true); err != nil {
		t.Fatalf("cordon: %v", err)
	}
	if err := drain.RunNodeDrain(helper, nodes[0]); err != nil {
		t.Fatalf("drain: %v", err)
	}
	t.Logf("drained %s in %s", nodes[0], time.Since(began).Round(time.Millisecond))

	pods, err := env.WaitForPodsRunning(ctx, ns, "app=api", replicas)
	if err != nil {
		t.Fatal(err)
	}
	minSeen, events := w.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(evicted) != replicas {
		t.Errorf("drain evicted %d pods (%v), want %d", len(evicted), evicted, replicas)
	}
	for _, p := range pods {
		if !slices.Contains(others, p.Spec.NodeName) {
			t.Errorf("pod %s runs on %s after the drain, want one of %v", p.Name, p.Spec.NodeName, others)
		}
	}
	if events == 0 {
		t.Fatal("the watch saw no pod events during the drain")
	}
	if minSeen < minAvailable {
		t.Errorf("healthy pods dropped to %d during the drain, below minAvailable %d", minSeen, minAvailable)
	}
	t.Logf("fewest healthy pods during the drain: %d over %d watch events (minAvailable %d); %d evictions refused with 429",
		minSeen, events, minAvailable, blocked.count())
}

// countingWriter passes writes on and counts those containing substr.
type countingWriter struct {
	w      io.Writer
	substr string
	mu     sync.Mutex
	n      int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	if strings.Contains(string(p), c.substr) {
		c.n++
	}
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *countingWriter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// healthyWatch tracks the fewest healthy pods seen after any watch event.
type healthyWatch struct {
	stopWatch func()
	stopping  atomic.Bool // set before stopWatch: the stream may then end with an error event
	done      chan struct{}
	min       int
	events    int
}

// watchHealthy lists the selected pods, then watches them from that list's
// resourceVersion, recomputing the healthy count after every event.
func watchHealthy(ctx context.Context, t *testing.T, env *testenv.Env, ns, selector string) *healthyWatch {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	healthy := map[string]bool{}
	for _, p := range list.Items {
		healthy[p.Name] = testenv.PodHealthy(&p)
	}
	wi, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	w := &healthyWatch{stopWatch: wi.Stop, done: make(chan struct{}), min: count(healthy)}
	go func() {
		defer close(w.done)
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if !w.stopping.Load() {
					t.Errorf("watch ended early, healthy pods unknown from here: %s %v", ev.Type, ev.Object)
				}
				return
			}
			if ev.Type == watch.Deleted {
				delete(healthy, p.Name)
			} else {
				healthy[p.Name] = testenv.PodHealthy(p)
			}
			w.events++
			w.min = min(w.min, count(healthy))
		}
	}()
	return w
}

// stop ends the watch and returns the fewest healthy pods seen and the
// number of events.
func (w *healthyWatch) stop() (int, int) {
	w.stopping.Store(true)
	w.stopWatch()
	<-w.done
	return w.min, w.events
}

func count(healthy map[string]bool) int {
	n := 0
	for _, h := range healthy {
		if h {
			n++
		}
	}
	return n
}
