package action

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWorkloadOf(t *testing.T) {
	owned := func(kind, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: ptr.To(true)}}}}
	}
	placeholder := owned("ReplicaSet", "x-1")
	placeholder.Labels = map[string]string{"karpenter-migrate.io/component": "placeholder"}
	tests := []struct {
		pod  *corev1.Pod
		want string
	}{
		{owned("ReplicaSet", "web-7d9f8c"), "ns/deployment/web"},
		{owned("ReplicaSet", "web"), "ns/replicaset/web"},
		{owned("StatefulSet", "redis"), "ns/statefulset/redis"},
		{owned("Job", "etl"), "ns/job/etl"},
		{owned("DaemonSet", "cni"), ""},
		{placeholder, ""},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bare"}}, "ns/pod/bare"},
	}
	for _, tc := range tests {
		if got := WorkloadOf(tc.pod); got != tc.want {
			t.Errorf("WorkloadOf(%v) = %q, want %q", tc.pod.OwnerReferences, got, tc.want)
		}
	}
}
