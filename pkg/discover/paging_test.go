package discover_test

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// pagingClient is a clientset whose pod and node lists page like an API
// server: they honour Limit and Continue and hand out a fresh copy of each
// page (as decoding a response would), where client-go's fake returns a deep
// copy of everything on every call. The benchmark then measures discover,
// not the fixture. Every other resource comes from the fake.
type pagingClient struct {
	kubernetes.Interface
	pods  []corev1.Pod
	nodes []corev1.Node
}

// newPagingClient splits objs: pods and nodes are paged, the rest go to a
// fake clientset.
func newPagingClient(objs []runtime.Object) *pagingClient {
	c := &pagingClient{pods: make([]corev1.Pod, 0, len(objs)), nodes: make([]corev1.Node, 0, len(objs)/10)}
	var rest []runtime.Object
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Pod:
			c.pods = append(c.pods, *v)
		case *corev1.Node:
			c.nodes = append(c.nodes, *v)
		default:
			rest = append(rest, o)
		}
	}
	c.Interface = fake.NewSimpleClientset(rest...)
	return c
}

func (c *pagingClient) CoreV1() corev1client.CoreV1Interface {
	return pagingCore{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

type pagingCore struct {
	corev1client.CoreV1Interface
	c *pagingClient
}

func (p pagingCore) Pods(ns string) corev1client.PodInterface {
	return pagingPods{PodInterface: p.CoreV1Interface.Pods(ns), pods: p.c.pods, ns: ns}
}

func (p pagingCore) Nodes() corev1client.NodeInterface {
	return pagingNodes{NodeInterface: p.CoreV1Interface.Nodes(), nodes: p.c.nodes}
}

type pagingPods struct {
	corev1client.PodInterface
	pods []corev1.Pod
	ns   string
}

func (p pagingPods) List(_ context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	if p.ns != "" {
		return nil, fmt.Errorf("pagingClient lists pods of all namespaces only")
	}
	from, to, next, err := page(len(p.pods), o)
	if err != nil {
		return nil, err
	}
	out := &corev1.PodList{ListMeta: metav1.ListMeta{Continue: next, RemainingItemCount: remaining(len(p.pods), to)}, Items: make([]corev1.Pod, to-from)}
	for i := range out.Items {
		p.pods[from+i].DeepCopyInto(&out.Items[i])
	}
	return out, nil
}

type pagingNodes struct {
	corev1client.NodeInterface
	nodes []corev1.Node
}

func (p pagingNodes) List(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	from, to, next, err := page(len(p.nodes), o)
	if err != nil {
		return nil, err
	}
	out := &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: next, RemainingItemCount: remaining(len(p.nodes), to)}, Items: make([]corev1.Node, to-from)}
	for i := range out.Items {
		p.nodes[from+i].DeepCopyInto(&out.Items[i])
	}
	return out, nil
}

// page turns Limit and Continue (an offset) into a slice range and the
// next continue token.
func page(n int, o metav1.ListOptions) (from, to int, next string, err error) {
	if o.Continue != "" {
		if from, err = strconv.Atoi(o.Continue); err != nil || from < 0 || from > n {
			return 0, 0, "", fmt.Errorf("bad continue token %q", o.Continue)
		}
	}
	to = n
	if o.Limit > 0 && from+int(o.Limit) < n {
		to = from + int(o.Limit)
		next = strconv.Itoa(to)
	}
	return from, to, next, nil
}

// remaining is the API server's remainingItemCount: set on pages that have
// a next one.
func remaining(n, to int) *int64 {
	if to >= n {
		return nil
	}
	r := int64(n - to)
	return &r
}
