package testenv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestKwokLeavesAReplacementAlone: kwok, the kubelet of the test control
// plane, finishes a pod deleted gracefully by deleting it (grace 0) by
// name; a pod a StatefulSet creates again under that name as soon as the
// first is gone is not deleted with it. A real kubelet's delete carries
// the pod's UID. TestRolloutStateful saw redis-0's replacement deleted
// once while Pending and once 170ms after binding (7 evictions for 6
// pods): kwok's own delete first updates the pod (its grace period to 0),
// that update matched the pod-delete stage again, and the second delete,
// by name, came after the StatefulSet controller had created redis-0
// anew.
func TestKwokLeavesAReplacementAlone(t *testing.T) {
	t.Parallel()
	env := cluster.Env(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	node := createNodes(t, env, ns, 0, 1)[0]
	const n = 40
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i), Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(30)),
				Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
		}
	}
	for i := range n {
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod(i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.WaitForPodsRunning(ctx, ns, "app=db", n); err != nil {
		t.Fatal(err)
	}

	// As a StatefulSet controller: each pod made again under its name as
	// soon as the first is gone.
	var mu sync.Mutex
	first, replaced := map[types.UID]bool{}, map[types.UID]string{}
	var lost []string
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		first[p.UID] = true
	}
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	created := make(chan struct{}, n)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
				p, ok = d.Obj.(*corev1.Pod)
			}
		}
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case first[p.UID]:
			var i int
			if _, err := fmt.Sscanf(p.Name, "db-%d", &i); err != nil {
				t.Error(err)
				return
			}
			r, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod(i), metav1.CreateOptions{})
			if err != nil {
				t.Errorf("create the replacement %s: %v", p.Name, err)
				return
			}
			replaced[r.UID] = r.Name
			created <- struct{}{}
		case replaced[p.UID] != "":
			lost = append(lost, fmt.Sprintf("%s (%s, on %q)", p.Name, p.UID, p.Spec.NodeName))
		}
	}}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	factory.Start(wctx.Done())
	defer func() { stop(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := env.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("db-%d", i), metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for range n {
		select {
		case <-created:
		case <-time.After(time.Minute):
			t.Fatal("the pods deleted were not all gone within a minute")
		}
	}
	time.Sleep(3 * time.Second) // what kwok still had queued for the first pods
	mu.Lock()
	defer mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("%d of %d replacements deleted, none asked for: %v", len(lost), n, lost)
	}
}
