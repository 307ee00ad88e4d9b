package sandbox

import (
	"cmp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// podCache is every pod of the clientset's tracker, kept current write by
// write (podTracker) instead of listed again after each: the list of all
// pods oldest first (listPods), each namespace's pods by name (podsIn, and
// the pod lists the clientset serves) and the tracker's resource version
// for pods. A thousand-node apply evicts one pod at a time, and listing
// and copying every pod after each eviction made its wall time grow with
// the square of the pods.
type podCache struct {
	// byAge is every pod, oldest first, then by namespace/name (sortPods's
	// order). It is handed out by listPods: shared says so, and the next
	// change copies it first, so a caller's list does not change while it
	// writes.
	byAge  []*corev1.Pod
	shared bool
	// byNS is each namespace's pods by name; namespaces is byNS's keys in
	// order.
	byNS       map[string][]*corev1.Pod
	namespaces []string
	// rv is the tracker's resource version for pods: 1, plus one for every
	// pod it stored (a delete does not count, as in the tracker).
	rv int64
}

func newPodCache() *podCache { return &podCache{byNS: map[string][]*corev1.Pod{}, rv: 1} }

// cmpAge orders pods as sortPods does: oldest first, then by namespace/name.
func cmpAge(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(podKey(a), podKey(b))
}

func cmpName(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) }

// put stores p (the tracker's copy), replacing the pod of that name.
func (c *podCache) put(p *corev1.Pod) {
	c.rv++
	c.remove(p.Namespace, p.Name)
	if c.shared {
		c.byAge, c.shared = slices.Clone(c.byAge), false
	}
	i, _ := slices.BinarySearchFunc(c.byAge, p, cmpAge)
	c.byAge = slices.Insert(c.byAge, i, p)
	ns, ok := c.byNS[p.Namespace]
	if !ok {
		j, _ := slices.BinarySearch(c.namespaces, p.Namespace)
		c.namespaces = slices.Insert(c.namespaces, j, p.Namespace)
	}
	// A new slice: podsIn's callers may still read the old one.
	j, _ := slices.BinarySearchFunc(ns, p, cmpName)
	c.byNS[p.Namespace] = slices.Concat(ns[:j], []*corev1.Pod{p}, ns[j:])
}

// remove drops the pod ns/name, if cached.
func (c *podCache) remove(ns, name string) {
	pods := c.byNS[ns]
	j, found := slices.BinarySearchFunc(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, cmpName)
	if !found {
		return
	}
	old := pods[j]
	// A new slice: podsIn's callers may still read the old one.
	c.byNS[ns] = slices.Concat(pods[:j], pods[j+1:])
	if c.shared {
		c.byAge, c.shared = slices.Clone(c.byAge), false
	}
	if i, found := slices.BinarySearchFunc(c.byAge, old, cmpAge); found {
		c.byAge = slices.Delete(c.byAge, i, i+1)
	}
}

// all returns every pod, oldest first; the slice is the caller's to read
// (the next change copies it).
func (c *podCache) all() []*corev1.Pod {
	c.shared = true
	return c.byAge
}

// in returns namespace ns's pods by name, or every pod by namespace and
// name when ns is empty.
func (c *podCache) in(ns string) []*corev1.Pod {
	if ns != "" {
		return c.byNS[ns]
	}
	out := make([]*corev1.Pod, 0, len(c.byAge))
	for _, n := range c.namespaces {
		out = append(out, c.byNS[n]...)
	}
	return out
}

func (c *podCache) resourceVersion() string { return strconv.FormatInt(c.rv, 10) }

// podTracker is the clientset's object tracker keeping the sandbox's pod
// cache current: every pod it stores or deletes, through the clientset or
// a reactor, is stored in or removed from the cache once the tracker has
// done it. It also counts the writes that may change what Karpenter's
// disruption controller reads (changes.count).
type podTracker struct {
	k8stesting.ObjectTracker
	pods    *podCache
	changes *changes
}

// stored caches the tracker's copy of the pod a write of gvr stored.
func (t *podTracker) stored(gvr schema.GroupVersionResource, obj runtime.Object, ns string, err error) error {
	if err == nil {
		t.changes.wrote(gvr)
	}
	if err != nil || gvr != podsGVR {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if m.GetNamespace() != "" {
		ns = m.GetNamespace()
	}
	got, err := t.ObjectTracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	t.pods.put(got.(*corev1.Pod))
	return nil
}

func (t *podTracker) Add(obj runtime.Object) error {
	err := t.ObjectTracker.Add(obj)
	if p, ok := obj.(*corev1.Pod); ok {
		return t.stored(podsGVR, p, p.Namespace, err)
	}
	if err == nil {
		t.changes.count++
	}
	return err
}

func (t *podTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	return t.stored(gvr, obj, ns, t.ObjectTracker.Create(gvr, obj, ns, opts...))
}

func (t *podTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	return t.stored(gvr, obj, ns, t.ObjectTracker.Update(gvr, obj, ns, opts...))
}

func (t *podTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return t.stored(gvr, obj, ns, t.ObjectTracker.Patch(gvr, obj, ns, opts...))
}

func (t *podTracker) Apply(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return t.stored(gvr, obj, ns, t.ObjectTracker.Apply(gvr, obj, ns, opts...))
}

func (t *podTracker) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	err := t.ObjectTracker.Delete(gvr, ns, name, opts...)
	if err == nil {
		t.changes.wrote(gvr)
		if gvr == podsGVR {
			t.pods.remove(ns, name)
		}
	}
	return err
}

// changes counts the writes to the cluster's objects but the runner's own
// bookkeeping (its journal's ConfigMap, its Lease, Events): the
// disruption controller reads none of those, and a count unchanged since
// its last pass means the cluster it read is unchanged.
type changes struct{ count uint64 }

// bookkeeping are the resources a write of which changes nothing the
// disruption controller reads.
var bookkeeping = map[string]bool{"configmaps": true, "leases": true, "events": true}

func (c *changes) wrote(gvr schema.GroupVersionResource) {
	if !bookkeeping[gvr.Resource] {
		c.count++
	}
}

// dynamicWrites counts the dynamic client's writes (NodePools, NodeClaims,
// EC2NodeClasses) in c; it never handles the action.
func dynamicWrites(c *changes) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete", "delete-collection":
			c.wrote(a.GetResource())
		}
		return false, nil, nil
	}
}
