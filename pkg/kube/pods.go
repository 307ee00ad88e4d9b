package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// LostWithNode reports whether a pod still on a node when its instance
// terminates is work lost without an eviction: not a DaemonSet's (it goes
// with its node by design), not finished and not already terminating.
func LostWithNode(p *corev1.Pod) bool {
	return !IsDaemonSetPod(p) && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// AddResources adds sign times src to dst, resource by resource.
func AddResources(dst, src corev1.ResourceList, sign int) {
	for name, q := range src {
		v := dst[name]
		if sign < 0 {
			v.Sub(q)
		} else {
			v.Add(q)
		}
		dst[name] = v
	}
}
