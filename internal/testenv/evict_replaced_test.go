package testenv_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// TestDrainLeavesAReplacementAlone: a pod replaced under its name (a
// StatefulSet's db-0) while its eviction waits on the budget is not
// evicted when the budget allows one: the drain's eviction names the
// replaced pod's UID, and the real API server refuses it (409) rather than
// moving the replacement.
func TestDrainLeavesAReplacementAlone(t *testing.T) {
	t.Parallel()
	env := cluster.Env(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	nodes := createNodes(t, env, ns, 0, 2)
	pod := func(node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "db-0", Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(0)),
				Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
		}
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod(nodes[0]), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForPodsRunning(ctx, ns, "app=db", 1); err != nil {
		t.Fatal(err)
	}
	createPDB(t, env, ns, "db", 1)
	waitPDB(ctx, t, env, ns, "db", 0)

	// The retry delay leaves time to replace the pod between two asks.
	o := kube.DefaultDrainOptions()
	o.EvictUnreplicated, o.GracePeriodSeconds, o.Timeout = true, 0, time.Minute
	o.RetryInitial, o.RetryMax, o.PollInterval = 3*time.Second, 3*time.Second, 100*time.Millisecond
	blocked := make(chan struct{})
	var once sync.Once
	d := &kube.Drainer{Client: env.Client, Clock: clock.RealClock{}, Options: o, OnEvent: func(e kube.DrainEvent) {
		if e.Type == kube.DrainBlocked {
			once.Do(func() { close(blocked) })
		}
	}}
	done := make(chan error, 1)
	go func() {
		_, err := d.Drain(ctx, nodes[0])
		done <- err
	}()
	select {
	case <-blocked:
	case err := <-done:
		t.Fatalf("drain ended (%v) before its budget refused an eviction", err)
	}

	// Deleted gracefully and gone before the replacement comes, as a
	// StatefulSet does: kwok finishes a terminating pod by deleting it by
	// name, which would take a replacement created under it too soon.
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "db-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))}); err != nil {
		t.Fatal(err)
	}
	err := env.WaitFor(ctx, "db-0 gone", func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatal(err)
	}
	replacement, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod(nodes[1]), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForPodsRunning(ctx, ns, "app=db", 1); err != nil {
		t.Fatal(err)
	}
	// minAvailable 0, not maxUnavailable: the disruption controller
	// allows nothing under maxUnavailable for a pod no controller owns.
	patch := []byte(`{"spec":{"minAvailable":0}}`)
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// No waitPDB here: the refused eviction still spends the disruption
	// (the API server decrements the budget before it tries the delete),
	// so the budget may be back at 0 before it could be seen at 1.
	if err := <-done; err != nil {
		t.Fatalf("drain: %v", err)
	}
	got, err := env.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil || got.UID != replacement.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the replacement db-0 after the drain: %v (err %v); want it running, untouched", got, err)
	}
}
