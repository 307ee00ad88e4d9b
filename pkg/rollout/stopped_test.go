package rollout_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// TestDrainLeavesWhatTheRunbookStops: a Cluster Autoscaler pod still on a
// drained node after step 09 scaled its Deployment to zero (terminating,
// or not yet collected) is left to go, not evicted, and the waves still
// finish.
func TestDrainLeavesWhatTheRunbookStops(t *testing.T) {
	sc := newScenario(t)
	for _, o := range []runtime.Object{
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-7d9",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "cluster-autoscaler", Controller: ptr.To(true)}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-7d9-x",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cluster-autoscaler-7d9", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "a-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	} {
		if err := sc.kube.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var evicted []string
	obs := func(e rollout.Event) {
		if e.Kind == rollout.EventEviction && strings.Contains(e.Pod, "cluster-autoscaler") {
			mu.Lock()
			evicted = append(evicted, e.Pod+" "+e.Message)
			mu.Unlock()
		}
	}
	if err := sc.runner(obs).Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(evicted) > 0 {
		t.Errorf("the drain evicted Cluster Autoscaler's pod, which step 09 stopped: %v", evicted)
	}
}
