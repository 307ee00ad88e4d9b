package sandbox

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// byNode is each node's pods (the pending ones under ""), by
	// namespace and name, for lists selecting spec.nodeName; nodeOf is
	// the node each pod is indexed under by namespace/name (a controller
	// may have changed the cached pod's spec.nodeName before its write).
	byNode map[string][]*corev1.Pod
	nodeOf map[string]string
	// byOwner is the pods of each controller (its UID), oldest first
	// (byAge's order), for the DaemonSet and workload controllers.
	byOwner map[types.UID][]*corev1.Pod
	// rv is the tracker's resource version for pods: 1, plus one for every
	// pod it stored (a delete does not count, as in the tracker).
	rv int64
}

func newPodCache() *podCache {
	return &podCache{byNS: map[string][]*corev1.Pod{}, byNode: map[string][]*corev1.Pod{}, nodeOf: map[string]string{}, byOwner: map[types.UID][]*corev1.Pod{}, rv: 1}
}

// cmpAge orders pods as sortPods does: oldest first, then by namespace/name.
func cmpAge(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(podKey(a), podKey(b))
}

func cmpName(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) }

// cmpKey orders pods by namespace, then name (the tracker's list order).
func cmpKey(a, b *corev1.Pod) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

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
	// New slices: podsIn's and on's callers may still read the old ones.
	j, _ := slices.BinarySearchFunc(ns, p, cmpName)
	c.byNS[p.Namespace] = slices.Concat(ns[:j], []*corev1.Pod{p}, ns[j:])
	on := c.byNode[p.Spec.NodeName]
	k, _ := slices.BinarySearchFunc(on, p, cmpKey)
	c.byNode[p.Spec.NodeName] = slices.Concat(on[:k], []*corev1.Pod{p}, on[k:])
	c.nodeOf[podKey(p)] = p.Spec.NodeName
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		owned := c.byOwner[ref.UID]
		k, _ := slices.BinarySearchFunc(owned, p, cmpAge)
		c.byOwner[ref.UID] = slices.Concat(owned[:k], []*corev1.Pod{p}, owned[k:])
	}
}

// remove drops the pod ns/name, if cached.
func (c *podCache) remove(ns, name string) {
	pods := c.byNS[ns]
	j, found := slices.BinarySearchFunc(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, cmpName)
	if !found {
		return
	}
	old := pods[j]
	// New slices: podsIn's and on's callers may still read the old ones.
	c.byNS[ns] = slices.Concat(pods[:j], pods[j+1:])
	node := c.nodeOf[podKey(old)]
	delete(c.nodeOf, podKey(old))
	on := c.byNode[node]
	if k, found := slices.BinarySearchFunc(on, old, cmpKey); found {
		if len(on) == 1 {
			delete(c.byNode, node)
		} else {
			c.byNode[node] = slices.Concat(on[:k], on[k+1:])
		}
	}
	if ref := metav1.GetControllerOfNoCopy(old); ref != nil {
		owned := c.byOwner[ref.UID]
		if k, found := slices.BinarySearchFunc(owned, old, cmpAge); found {
			if len(owned) == 1 {
				delete(c.byOwner, ref.UID)
			} else {
				c.byOwner[ref.UID] = slices.Concat(owned[:k], owned[k+1:])
			}
		}
	}
	if c.shared {
		c.byAge, c.shared = slices.Clone(c.byAge), false
	}
	if i, found := slices.BinarySearchFunc(c.byAge, old, cmpAge); found {
		c.byAge = slices.Delete(c.byAge, i, i+1)
	}
}

// get returns the pod ns/name, or nil.
func (c *podCache) get(ns, name string) *corev1.Pod {
	pods := c.byNS[ns]
	if j, found := slices.BinarySearchFunc(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, cmpName); found {
		return pods[j]
	}
	return nil
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

// owned returns the pods whose controller has uid, oldest first.
func (c *podCache) owned(uid types.UID) []*corev1.Pod { return c.byOwner[uid] }

// on returns the pods bound to node (the pending ones when node is
// empty), by namespace and name.
func (c *podCache) on(node string) []*corev1.Pod { return c.byNode[node] }

func (c *podCache) resourceVersion() string { return strconv.FormatInt(c.rv, 10) }

// podTracker is the clientset's object tracker keeping the sandbox's pod
// cache current: every pod it stores or deletes, through the clientset or
// a reactor, is stored in or removed from the cache once the tracker has
// done it. It also counts the writes that may change what Karpenter's
// disruption controller reads (changes.count).
type podTracker struct {
	k8stesting.ObjectTracker
	pods    *podCache
	nodes   nodeCache
	changes *changes
}

// nodeCache is every node of the tracker by name (the tracker's copies),
// kept current write by write as the pod cache is: the controllers read
// the nodes several times a tick, and listing them copied every node each
// time.
type nodeCache map[string]*corev1.Node

// stored caches the tracker's copy of the pod a write of gvr stored.
func (t *podTracker) stored(gvr schema.GroupVersionResource, obj runtime.Object, ns string, err error) error {
	if err != nil {
		return err
	}
	t.changes.wrote(gvr)
	m, err := meta.Accessor(obj)
	if err != nil {
		if gvr != podsGVR && gvr != nodesGVR {
			return nil
		}
		return err
	}
	if m.GetNamespace() != "" {
		ns = m.GetNamespace()
	}
	t.changes.wroteIn(gvr, ns)
	t.changes.wroteObject(gvr, ns, m.GetName())
	if gvr != podsGVR && gvr != nodesGVR {
		return nil
	}
	got, err := t.ObjectTracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	switch o := got.(type) {
	case *corev1.Pod:
		t.pods.put(o)
	case *corev1.Node:
		t.nodes[o.Name] = o
	}
	return nil
}

func (t *podTracker) Add(obj runtime.Object) error {
	err := t.ObjectTracker.Add(obj)
	switch o := obj.(type) {
	case *corev1.Pod:
		return t.stored(podsGVR, o, o.Namespace, err)
	case *corev1.Node:
		return t.stored(nodesGVR, o, "", err)
	}
	if err == nil {
		t.changes.count++
		t.changes.added = t.changes.count
		if m, merr := meta.Accessor(obj); merr == nil && m.GetNamespace() != "" {
			t.changes.budgetNS[m.GetNamespace()] = true
			t.changes.inNS[m.GetNamespace()] = t.changes.count
		}
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
		t.changes.wroteIn(gvr, ns)
		t.changes.wroteObject(gvr, ns, name)
		switch gvr {
		case podsGVR:
			t.pods.remove(ns, name)
		case nodesGVR:
			delete(t.nodes, name)
		}
	}
	return err
}

// changes counts the writes to the cluster's objects but the runner's own
// bookkeeping (its journal's ConfigMap, its Lease, Events): the
// disruption controller reads none of those, and a count unchanged since
// its last pass means the cluster it read is unchanged.
type changes struct {
	count uint64
	// dynamic counts the dynamic client's writes (NodePools, NodeClaims,
	// EC2NodeClasses) alone.
	dynamic uint64
	// budgetNS are the namespaces in which a pod, ReplicaSet,
	// StatefulSet or PodDisruptionBudget was written since the PDB
	// controller last took them (budgetNamespaces): a budget's status
	// follows from those of its namespace alone.
	budgetNS map[string]bool
	// written is, for each Deployment and ReplicaSet written, the count
	// of writes at its last write.
	written map[objectKey]uint64
	// byResource is, for each resource written, the count of writes at
	// its last write; added the count at the last object added.
	byResource map[string]uint64
	added      uint64
	// inNS is, for each namespace, the count of writes at the last write
	// of an object in it (OnWrite's written).
	inNS map[string]uint64
}

func newChanges() *changes {
	return &changes{budgetNS: map[string]bool{}, written: map[objectKey]uint64{}, byResource: map[string]uint64{}, inNS: map[string]uint64{}}
}

// listed is the count of writes at the last write of resource or, if
// later, at the last object added to the tracker (as the sandbox loads):
// a list of the resource taken when it was the same is the same.
func (c *changes) listed(resource string) uint64 { return max(c.byResource[resource], c.added) }

// objectKey names a Deployment or ReplicaSet (versioned).
type objectKey struct{ resource, namespace, name string }

// versioned are the resources whose objects' last write is kept
// (changes.version): the Deployment controller's comparison of a
// template with its ReplicaSets' (sameTemplate) is remembered until one of
// them is written again.
var versioned = map[string]bool{"deployments": true, "replicasets": true}

// wroteObject notes a write of the object ns/name of gvr.
func (c *changes) wroteObject(gvr schema.GroupVersionResource, ns, name string) {
	c.byResource[gvr.Resource] = c.count
	if versioned[gvr.Resource] {
		c.written[objectKey{gvr.Resource, ns, name}] = c.count
	}
}

// version is the count of writes at the last write of the object (0
// if written before the sandbox counted, as when loaded): it differs
// after each write of it.
func (c *changes) version(resource, ns, name string) uint64 {
	return c.written[objectKey{resource, ns, name}]
}

// budgetResources are the resources a budget's status reads (pdbStatus).
var budgetResources = map[string]bool{"pods": true, "replicasets": true, "statefulsets": true, "poddisruptionbudgets": true}

// wroteIn notes a write of gvr in namespace ns.
func (c *changes) wroteIn(gvr schema.GroupVersionResource, ns string) {
	if budgetResources[gvr.Resource] {
		c.budgetNS[ns] = true
	}
	if ns != "" && !bookkeeping[gvr.Resource] {
		c.inNS[ns] = c.count
	}
}

// budgetNamespaces returns, in order, the namespaces written in (wroteIn)
// since the last call, and forgets them.
func (c *changes) budgetNamespaces() []string {
	out := slices.Sorted(maps.Keys(c.budgetNS))
	clear(c.budgetNS)
	return out
}

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
			c.dynamic++
		}
		return false, nil, nil
	}
}
