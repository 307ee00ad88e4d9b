package tui

import (
	"context"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	schedulingv1client "k8s.io/client-go/kubernetes/typed/scheduling/v1"
)

// The sandbox is single-threaded, but the runner is not: the drainer
// evicts a node's pods on several goroutines, and the lease is renewed on
// another. lockedKube serialises the calls whose fake-API reactors touch
// the sandbox's own state (pod writes, pod lists, evictions, and creates,
// which the sandbox stamps with names and UIDs) with the simulation steps
// the clock takes, under one mutex. Other calls only reach the fake's
// object tracker, which is safe for concurrent use.
type lockedKube struct {
	kubernetes.Interface
	mu *sync.Mutex
}

func locked[T any](mu *sync.Mutex, f func() (T, error)) (T, error) {
	mu.Lock()
	defer mu.Unlock()
	return f()
}

func (k lockedKube) CoreV1() corev1client.CoreV1Interface {
	return lockedCore{k.Interface.CoreV1(), k.mu}
}

func (k lockedKube) PolicyV1() policyv1client.PolicyV1Interface {
	return lockedPolicy{k.Interface.PolicyV1(), k.mu}
}

func (k lockedKube) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return lockedCoordination{k.Interface.CoordinationV1(), k.mu}
}

func (k lockedKube) SchedulingV1() schedulingv1client.SchedulingV1Interface {
	return lockedScheduling{k.Interface.SchedulingV1(), k.mu}
}

type lockedCore struct {
	corev1client.CoreV1Interface
	mu *sync.Mutex
}

func (c lockedCore) Pods(ns string) corev1client.PodInterface {
	return lockedPods{c.CoreV1Interface.Pods(ns), c.mu}
}

func (c lockedCore) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return lockedConfigMaps{c.CoreV1Interface.ConfigMaps(ns), c.mu}
}

func (c lockedCore) Namespaces() corev1client.NamespaceInterface {
	return lockedNamespaces{c.CoreV1Interface.Namespaces(), c.mu}
}

type lockedPods struct {
	corev1client.PodInterface
	mu *sync.Mutex
}

func (p lockedPods) Create(ctx context.Context, o *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return locked(p.mu, func() (*corev1.Pod, error) { return p.PodInterface.Create(ctx, o, opts) })
}

func (p lockedPods) Update(ctx context.Context, o *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	return locked(p.mu, func() (*corev1.Pod, error) { return p.PodInterface.Update(ctx, o, opts) })
}

func (p lockedPods) UpdateStatus(ctx context.Context, o *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	return locked(p.mu, func() (*corev1.Pod, error) { return p.PodInterface.UpdateStatus(ctx, o, opts) })
}

func (p lockedPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	_, err := locked(p.mu, func() (struct{}, error) { return struct{}{}, p.PodInterface.Delete(ctx, name, opts) })
	return err
}

func (p lockedPods) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, list metav1.ListOptions) error {
	_, err := locked(p.mu, func() (struct{}, error) { return struct{}{}, p.PodInterface.DeleteCollection(ctx, opts, list) })
	return err
}

func (p lockedPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	return locked(p.mu, func() (*corev1.Pod, error) { return p.PodInterface.Get(ctx, name, opts) })
}

func (p lockedPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	return locked(p.mu, func() (*corev1.PodList, error) { return p.PodInterface.List(ctx, opts) })
}

func (p lockedPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	return locked(p.mu, func() (*corev1.Pod, error) { return p.PodInterface.Patch(ctx, name, pt, data, opts, sub...) })
}

func (p lockedPods) EvictV1(ctx context.Context, e *policyv1.Eviction) error {
	_, err := locked(p.mu, func() (struct{}, error) { return struct{}{}, p.PodInterface.EvictV1(ctx, e) })
	return err
}

type lockedConfigMaps struct {
	corev1client.ConfigMapInterface
	mu *sync.Mutex
}

func (c lockedConfigMaps) Create(ctx context.Context, o *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error) {
	return locked(c.mu, func() (*corev1.ConfigMap, error) { return c.ConfigMapInterface.Create(ctx, o, opts) })
}

type lockedNamespaces struct {
	corev1client.NamespaceInterface
	mu *sync.Mutex
}

func (n lockedNamespaces) Create(ctx context.Context, o *corev1.Namespace, opts metav1.CreateOptions) (*corev1.Namespace, error) {
	return locked(n.mu, func() (*corev1.Namespace, error) { return n.NamespaceInterface.Create(ctx, o, opts) })
}

type lockedPolicy struct {
	policyv1client.PolicyV1Interface
	mu *sync.Mutex
}

func (p lockedPolicy) Evictions(ns string) policyv1client.EvictionInterface {
	return lockedEvictions{p.PolicyV1Interface.Evictions(ns), p.mu}
}

type lockedEvictions struct {
	policyv1client.EvictionInterface
	mu *sync.Mutex
}

func (e lockedEvictions) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	_, err := locked(e.mu, func() (struct{}, error) { return struct{}{}, e.EvictionInterface.Evict(ctx, ev) })
	return err
}

type lockedCoordination struct {
	coordinationv1client.CoordinationV1Interface
	mu *sync.Mutex
}

func (c lockedCoordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return lockedLeases{c.CoordinationV1Interface.Leases(ns), c.mu}
}

type lockedLeases struct {
	coordinationv1client.LeaseInterface
	mu *sync.Mutex
}

func (l lockedLeases) Create(ctx context.Context, o *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return locked(l.mu, func() (*coordinationv1.Lease, error) { return l.LeaseInterface.Create(ctx, o, opts) })
}

type lockedScheduling struct {
	schedulingv1client.SchedulingV1Interface
	mu *sync.Mutex
}

func (s lockedScheduling) PriorityClasses() schedulingv1client.PriorityClassInterface {
	return lockedPriorityClasses{s.SchedulingV1Interface.PriorityClasses(), s.mu}
}

type lockedPriorityClasses struct {
	schedulingv1client.PriorityClassInterface
	mu *sync.Mutex
}

func (p lockedPriorityClasses) Create(ctx context.Context, o *schedulingv1.PriorityClass, opts metav1.CreateOptions) (*schedulingv1.PriorityClass, error) {
	return locked(p.mu, func() (*schedulingv1.PriorityClass, error) { return p.PriorityClassInterface.Create(ctx, o, opts) })
}
