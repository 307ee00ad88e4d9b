package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

var (
	rsGVR  = appsv1.SchemeGroupVersion.WithResource("replicasets")
	stsGVR = appsv1.SchemeGroupVersion.WithResource("statefulsets")
)

// listPods returns every pod, oldest first (then by namespace/name), from
// the pod cache: controllers that only read share one list; callers may
// modify the pods they then write (a write caches the tracker's copy), and
// the list they hold does not change while they write.
func (s *Sandbox) listPods() []*corev1.Pod { return s.pods.all() }

// Pods returns every pod, oldest first, as the simulation holds it (not a
// copy): for an OnTick hook, which runs under the simulation's lock, to
// read without copying a thousand-node cluster every tick. The hook must
// not modify them or keep them past its return.
func (s *Sandbox) Pods() []*corev1.Pod { return s.pods.all() }

// nodesByName returns every node by name from the node cache: the map is
// the caller's, the nodes are shared (read them, write through the
// clientset).
func (s *Sandbox) nodesByName() map[string]*corev1.Node { return maps.Clone(s.nodes) }

func sortedNodes(m map[string]*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(m))
	for _, n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func controllerRef(kind string, m metav1.ObjectMeta, gv string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: gv, Kind: kind, Name: m.Name, UID: m.UID, Controller: &t, BlockOwnerDeletion: &t}
}

// createPod creates a pod from a template, owned by ref, named name or,
// when name is empty, by the API server from generateName (as the
// DaemonSet, ReplicaSet and Job controllers name their pods).
func (s *Sandbox) createPod(ctx context.Context, ns, name, generateName string, tmpl corev1.PodTemplateSpec, ref metav1.OwnerReference, mutate func(*corev1.Pod)) error {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, GenerateName: generateName,
			Labels:          copyMap(tmpl.Labels),
			Annotations:     copyMap(tmpl.Annotations),
			OwnerReferences: []metav1.OwnerReference{ref},
		},
		Spec:   *tmpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if mutate != nil {
		mutate(p)
	}
	if _, err := s.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s for %s %s: %w", ns, cmp.Or(p.Name, p.GenerateName), ref.Kind, ref.Name, err)
	}
	return nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cachedList returns list's list of resource, taken again only when an
// object of resource was written (or added) since it was last taken
// (changes.listed): the DaemonSet and workload controllers listed every
// controller, a copy of each, in each pass. The list is the controllers'
// to read; they change an item only to write it, which makes the next
// call take the list again.
func cachedList[L runtime.Object](s *Sandbox, resource string, list func() (L, error)) (L, error) {
	at := s.changes.listed(resource)
	if c, ok := s.lists[resource]; ok && c.at == at {
		return c.list.(L), nil
	}
	l, err := list()
	if err != nil {
		return l, err
	}
	s.lists[resource] = listed{at: at, list: l}
	return l, nil
}

// listed is a list of a resource as cachedList took it, at changes.listed.
type listed struct {
	at   uint64
	list runtime.Object
}

// reconcileDaemonSets runs one pod per eligible node, bound directly as the
// DaemonSet controller does, and removes pods from nodes that no longer fit.
func (s *Sandbox) reconcileDaemonSets(ctx context.Context) error {
	dss, err := cachedList(s, "daemonsets", func() (*appsv1.DaemonSetList, error) {
		return s.kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return fmt.Errorf("list DaemonSets: %w", err)
	}
	nodes := s.nodesByName()
	sort.Slice(dss.Items, func(i, j int) bool {
		return dss.Items[i].Namespace+"/"+dss.Items[i].Name < dss.Items[j].Namespace+"/"+dss.Items[j].Name
	})
	// The nodes in order: once, not once per DaemonSet.
	ordered := sortedNodes(nodes)
	for i := range dss.Items {
		ds := &dss.Items[i]
		have := map[string]bool{}
		// The pod cache's list, which the deletes below replace, not
		// change.
		for _, p := range s.pods.owned(ds.UID) {
			if n := nodes[p.Spec.NodeName]; n == nil || !daemonPodMayStay(p, n) || have[p.Spec.NodeName] {
				if err := s.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete DaemonSet pod %s/%s: %w", p.Namespace, p.Name, err)
				}
				continue
			}
			have[p.Spec.NodeName] = true
		}
		var want, ready int32
		probe := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		for _, n := range ordered {
			if labelsAndTaintsFit(probe, n, nil) != nil {
				continue
			}
			want++
			if have[n.Name] {
				ready++
				continue
			}
			node := n.Name
			err := s.createPod(ctx, ds.Namespace, "", ds.Name+"-", ds.Spec.Template, controllerRef("DaemonSet", ds.ObjectMeta, "apps/v1"), func(p *corev1.Pod) {
				p.Spec.NodeName = node
			})
			if err != nil {
				return err
			}
		}
		if ds.Status.DesiredNumberScheduled != want || ds.Status.NumberReady != ready {
			ds.Status.DesiredNumberScheduled, ds.Status.CurrentNumberScheduled, ds.Status.NumberReady = want, ready, ready
			if _, err := s.kube.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update DaemonSet %s/%s status: %w", ds.Namespace, ds.Name, err)
			}
		}
	}
	return nil
}

// reconcileWorkloads runs the Deployment, ReplicaSet, StatefulSet and Job
// controllers: missing pods are recreated, surplus pods removed.
func (s *Sandbox) reconcileWorkloads(ctx context.Context) error {
	// The live pods of a controller (its UID), oldest first, from the pod
	// cache's index by controller, as they were when the pass began (the
	// pods it creates and deletes are not counted until the next).
	byOwner := map[types.UID][]*corev1.Pod{}
	live := func(uid types.UID) []*corev1.Pod {
		if ps, ok := byOwner[uid]; ok {
			return ps
		}
		var ps []*corev1.Pod
		for _, p := range s.pods.owned(uid) {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
				ps = append(ps, p)
			}
		}
		byOwner[uid] = ps
		return ps
	}
	readyOf := func(ps []*corev1.Pod) int32 {
		var n int32
		for _, p := range ps {
			if podutils.IsPodReady(p) {
				n++
			}
		}
		return n
	}
	deploys, err := cachedList(s, "deployments", func() (*appsv1.DeploymentList, error) {
		return s.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return fmt.Errorf("list Deployments: %w", err)
	}
	rss, err := cachedList(s, "replicasets", func() (*appsv1.ReplicaSetList, error) {
		return s.kube.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return fmt.Errorf("list ReplicaSets: %w", err)
	}
	// The ReplicaSets by their Deployment's UID; those created are added
	// after the loop, which keeps these pointers into rss.Items valid.
	ownedRSs := map[types.UID][]*appsv1.ReplicaSet{}
	for i := range rss.Items {
		if ref := metav1.GetControllerOfNoCopy(&rss.Items[i]); ref != nil {
			ownedRSs[ref.UID] = append(ownedRSs[ref.UID], &rss.Items[i])
		}
	}
	var created []appsv1.ReplicaSet
	for i := range deploys.Items {
		d := &deploys.Items[i]
		rs, err := s.reconcileDeployment(ctx, d, ownedRSs[d.UID], live, readyOf)
		if err != nil {
			return err
		}
		if rs != nil {
			created = append(created, *rs)
		}
	}
	rss.Items = append(rss.Items, created...)
	for i := range rss.Items {
		rs := &rss.Items[i]
		ps := live(rs.UID)
		want := int(replicasOrOne(rs.Spec.Replicas))
		for n := len(ps); n < want; n++ {
			if err := s.createPod(ctx, rs.Namespace, "", rs.Name+"-", rs.Spec.Template, controllerRef("ReplicaSet", rs.ObjectMeta, "apps/v1"), nil); err != nil {
				return err
			}
		}
		if err := s.deleteSurplus(ctx, ps, want); err != nil {
			return err
		}
		if ready := readyOf(ps); rs.Status.Replicas != int32(len(ps)) || rs.Status.ReadyReplicas != ready {
			rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = int32(len(ps)), ready, ready
			if _, err := s.kube.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update ReplicaSet %s/%s status: %w", rs.Namespace, rs.Name, err)
			}
		}
	}
	stss, err := cachedList(s, "statefulsets", func() (*appsv1.StatefulSetList, error) {
		return s.kube.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return fmt.Errorf("list StatefulSets: %w", err)
	}
	for i := range stss.Items {
		ss := &stss.Items[i]
		ps := live(ss.UID)
		have := map[string]*corev1.Pod{}
		for _, p := range ps {
			have[p.Name] = p
		}
		want := int(replicasOrOne(ss.Spec.Replicas))
		for ord := 0; ord < want; ord++ {
			name := fmt.Sprintf("%s-%d", ss.Name, ord)
			if have[name] != nil {
				continue
			}
			ordinal := ord
			err := s.createPod(ctx, ss.Namespace, name, "", ss.Spec.Template, controllerRef("StatefulSet", ss.ObjectMeta, "apps/v1"), func(p *corev1.Pod) {
				p.Labels = withLabel(p.Labels, appsv1.StatefulSetPodNameLabel, p.Name)
				p.Spec.Hostname = p.Name
				for _, vct := range ss.Spec.VolumeClaimTemplates {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("%s-%s-%d", vct.Name, ss.Name, ordinal)},
					}})
				}
			})
			if err != nil {
				return err
			}
		}
		for _, p := range ps {
			if ord, err := strconv.Atoi(strings.TrimPrefix(p.Name, ss.Name+"-")); err == nil && ord >= want {
				if err := s.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("scale down StatefulSet pod %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
		}
		if ready := readyOf(ps); ss.Status.Replicas != int32(len(ps)) || ss.Status.ReadyReplicas != ready {
			ss.Status.Replicas, ss.Status.ReadyReplicas, ss.Status.AvailableReplicas = int32(len(ps)), ready, ready
			if _, err := s.kube.AppsV1().StatefulSets(ss.Namespace).UpdateStatus(ctx, ss, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update StatefulSet %s/%s status: %w", ss.Namespace, ss.Name, err)
			}
		}
	}
	jobs, err := cachedList(s, "jobs", func() (*batchv1.JobList, error) {
		return s.kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return fmt.Errorf("list Jobs: %w", err)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		ps := live(j.UID)
		want := int(replicasOrOne(j.Spec.Parallelism))
		for n := len(ps); n < want; n++ {
			if err := s.createPod(ctx, j.Namespace, "", j.Name+"-", j.Spec.Template, controllerRef("Job", j.ObjectMeta, batchv1.SchemeGroupVersion.String()), func(p *corev1.Pod) {
				p.Labels = withLabel(p.Labels, batchv1.JobNameLabel, j.Name)
			}); err != nil {
				return err
			}
		}
		if j.Status.Active != int32(len(ps)) {
			j.Status.Active = int32(len(ps))
			if _, err := s.kube.BatchV1().Jobs(j.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update Job %s/%s status: %w", j.Namespace, j.Name, err)
			}
		}
	}
	return nil
}

func withLabel(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// reconcileDeployment is the Deployment controller for one Deployment: a
// ReplicaSet whose template is the Deployment's, and, after a template
// change (a rollout restart), a rolling update within maxSurge and
// maxUnavailable — the new ReplicaSet grows as far as the surge allows and
// the old ones shrink as far as availability allows; rss are the
// ReplicaSets d controls. It returns the ReplicaSet it created, if any.
func (s *Sandbox) reconcileDeployment(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet,
	live func(types.UID) []*corev1.Pod, readyOf func([]*corev1.Pod) int32) (*appsv1.ReplicaSet, error) {
	var cur *appsv1.ReplicaSet
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if s.sameTemplate(rs, d) {
			cur = rs
		} else if replicasOrOne(rs.Spec.Replicas) > 0 || len(live(rs.UID)) > 0 {
			old = append(old, rs)
		}
	}
	desired := replicasOrOne(d.Spec.Replicas)
	if cur == nil {
		hash := strconv.FormatUint(s.rng.Uint64()%(1<<40), 36)
		tmpl := *d.Spec.Template.DeepCopy()
		tmpl.Labels = withLabel(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
		n := desired
		if len(old) > 0 {
			n = 0 // the rolling update below grows it
		}
		nrs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-" + hash, Labels: tmpl.Labels,
				OwnerReferences: []metav1.OwnerReference{controllerRef("Deployment", d.ObjectMeta, "apps/v1")}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr(n), Selector: d.Spec.Selector, Template: tmpl},
		}
		created, err := s.kube.AppsV1().ReplicaSets(d.Namespace).Create(ctx, nrs, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create ReplicaSet for Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		return created, nil
	}
	scale := func(rs *appsv1.ReplicaSet, n int32) error {
		if replicasOrOne(rs.Spec.Replicas) == n {
			return nil
		}
		rs.Spec.Replicas = ptr(n)
		if _, err := s.kube.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("scale ReplicaSet %s/%s to %d: %w", rs.Namespace, rs.Name, n, err)
		}
		return nil
	}
	if len(old) == 0 {
		if err := scale(cur, desired); err != nil {
			return nil, err
		}
	} else {
		surge, unavailable, err := rollingBounds(d, desired)
		if err != nil {
			return nil, fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		total := replicasOrOne(cur.Spec.Replicas)
		for _, rs := range old {
			total += replicasOrOne(rs.Spec.Replicas)
		}
		if n := replicasOrOne(cur.Spec.Replicas); n < desired && total < desired+surge {
			if err := scale(cur, min(desired, n+desired+surge-total)); err != nil {
				return nil, err
			}
		}
		available := readyOf(live(cur.UID))
		for _, rs := range old {
			available += readyOf(live(rs.UID))
		}
		removable := available - (desired - unavailable)
		for _, rs := range old {
			n := replicasOrOne(rs.Spec.Replicas)
			// Pods that are not ready count for no availability: drop them freely.
			notReady := int32(len(live(rs.UID))) - readyOf(live(rs.UID))
			cut := min(n, max(removable, 0)+max(notReady, 0))
			if cut <= 0 {
				continue
			}
			if err := scale(rs, n-cut); err != nil {
				return nil, err
			}
			removable -= cut - min(cut, max(notReady, 0))
		}
	}
	var pods, updated, ready int32
	for _, rs := range append([]*appsv1.ReplicaSet{cur}, old...) {
		ps := live(rs.UID)
		pods += int32(len(ps))
		ready += readyOf(ps)
	}
	updated = int32(len(live(cur.UID)))
	st := &d.Status
	if st.Replicas != pods || st.ReadyReplicas != ready || st.UpdatedReplicas != updated || st.ObservedGeneration != d.Generation {
		st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas, st.ObservedGeneration = pods, ready, ready, updated, d.Generation
		if _, err := s.kube.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update Deployment %s/%s status: %w", d.Namespace, d.Name, err)
		}
	}
	return nil, nil
}

// sameTemplate reports whether a ReplicaSet runs the Deployment's pod
// template (its pod-template-hash label aside).
//
// The answer is kept until either is written again (changes.version): a
// comparison of every Deployment's template in each pass was the
// workload controllers' main cost on a thousand-node cluster.
func (s *Sandbox) sameTemplate(rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	key := templateCheck{namespace: rs.Namespace, rs: rs.Name, d: d.Name,
		rsVersion: s.changes.version("replicasets", rs.Namespace, rs.Name), dVersion: s.changes.version("deployments", d.Namespace, d.Name)}
	if same, ok := s.templates[key]; ok {
		return same
	}
	same := sameTemplate(rs, d)
	if len(s.templates) > 1<<16 {
		clear(s.templates)
	}
	s.templates[key] = same
	return same
}

// templateCheck is a comparison of a ReplicaSet's template with its
// Deployment's, as both were written.
type templateCheck struct {
	namespace, rs, d    string
	rsVersion, dVersion uint64
}

func sameTemplate(rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	// The labels compared here, the rest on a shallow copy carrying the
	// Deployment's labels: no deep copy of a template per Deployment and
	// pass (Semantic.DeepEqual takes nil and empty maps as equal).
	rl, dl := rs.Spec.Template.Labels, d.Spec.Template.Labels
	n := len(rl)
	if _, ok := rl[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		n--
	}
	if n != len(dl) {
		return false
	}
	for k, v := range dl {
		if w, ok := rl[k]; !ok || w != v || k == appsv1.DefaultDeploymentUniqueLabelKey {
			return false
		}
	}
	t := rs.Spec.Template
	t.Labels = dl
	return apiequality.Semantic.DeepEqual(t, d.Spec.Template)
}

// rollingBounds are a Deployment's maxSurge and maxUnavailable in pods
// (defaults 25% each, surge rounded up, unavailability down; not both 0).
func rollingBounds(d *appsv1.Deployment, desired int32) (surge, unavailable int32, err error) {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0, desired, nil
	}
	def := intstr.FromString("25%")
	ms, mu := &def, &def
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			ms = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			mu = ru.MaxUnavailable
		}
	}
	if surge, err = intOrPercent(ms, desired, true); err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxSurge: %w", err)
	}
	if unavailable, err = intOrPercent(mu, desired, false); err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable, nil
}

// deleteSurplus removes pods above want: unscheduled first, then not
// Ready, then the newest, as the ReplicaSet controller ranks them.
func (s *Sandbox) deleteSurplus(ctx context.Context, ps []*corev1.Pod, want int) error {
	if len(ps) <= want {
		return nil
	}
	ranked := append([]*corev1.Pod(nil), ps...)
	sort.SliceStable(ranked, func(i, j int) bool {
		a, b := ranked[i], ranked[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if podutils.IsPodReady(a) != podutils.IsPodReady(b) {
			return !podutils.IsPodReady(a)
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
	for _, p := range ranked[:len(ps)-want] {
		if err := s.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete surplus pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// reconcileKubelet garbage-collects pods of deleted nodes and starts bound
// pods: Running and Ready PodStartDelay after binding (or after their node
// became Ready, if later).
func (s *Sandbox) reconcileKubelet(ctx context.Context) error {
	nodes := s.nodesByName()
	pods := s.listPods()
	for i := range pods {
		p := pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		n := nodes[p.Spec.NodeName]
		if n == nil {
			if err := s.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("garbage-collect pod %s/%s of deleted node %s: %w", p.Namespace, p.Name, p.Spec.NodeName, err)
			}
			continue
		}
		if podutils.IsPodReady(p) || !nodeReady(n) {
			continue
		}
		bound := boundAt(p)
		if s.Now().Sub(bound) < s.opts.PodStartDelay || s.Now().Sub(readySince(n)) < s.opts.PodStartDelay {
			continue
		}
		now := metav1.NewTime(s.Now())
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.HostIP = "10.0.0.1"
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(bound)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		if _, err := s.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("start pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// boundAt is when a bound pod was bound: its PodScheduled condition's time
// (the scheduler's binding), else its creation (a pod created bound, as
// the DaemonSet controller creates its pods).
func boundAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

// readySince is when a Ready node's Ready condition last turned True.
func readySince(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// schedule binds pending pods, highest priority first, to the node that
// fits and scores best — least allocated after placement (kube-scheduler's
// default), or most allocated with Options.PackNodes — preferring the node
// Karpenter launched for the pod, and preempting lower-priority pods when
// nothing fits.
func (s *Sandbox) schedule(ctx context.Context) error {
	pods := s.listPods()
	var pending []*corev1.Pod
	for _, p := range s.pods.on("") {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	// Oldest first, as in the list of every pod, before the sort by priority.
	slices.SortFunc(pending, cmpAge)
	nodes := s.nodesByName()
	used := map[string]corev1.ResourceList{}
	on := map[string][]*corev1.Pod{}
	inNS := map[string][]*corev1.Pod{}
	for i := range pods {
		p := pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Spec.NodeName == "" {
			continue
		}
		on[p.Spec.NodeName] = append(on[p.Spec.NodeName], p)
		inNS[p.Namespace] = append(inNS[p.Namespace], p)
		if used[p.Spec.NodeName] == nil {
			used[p.Spec.NodeName] = corev1.ResourceList{}
		}
		kube.AddResources(used[p.Spec.NodeName], PodRequests(p), 1)
	}
	sort.SliceStable(pending, func(i, j int) bool {
		pi, pj := priority(pending[i]), priority(pending[j])
		return pi > pj
	})
	ordered := sortedNodes(nodes)
	rooms := newRoomTable(pending, ordered, used)
	// Which of ordered admit the pods of a podFit key: the nodes do not
	// change during the pass, and a deployment's replicas share a key.
	admitted := map[string][]bool{}
	// The node of the NodeClaim Karpenter launched for a pod, by claim,
	// taken when a pod has one: the instances do not change either.
	var claimNodes map[string]string
	for _, p := range pending {
		vols := s.VolumeSelectors(ctx, p)
		var best *corev1.Node
		bestI, bestScore := -1, -1.0
		preferred := ""
		if claim, ok := s.nominated[podKey(p)]; ok {
			if claimNodes == nil {
				claimNodes = s.cloud.claimNodes()
			}
			preferred = claimNodes[claim]
		}
		// What the filters and the score read of the pod, worked out once
		// for all the nodes.
		fit := s.fitter(p, vols)
		admits := admitted[fit.key]
		if admits == nil {
			admits = make([]bool, len(ordered))
			for i, n := range ordered {
				admits[i] = fit.admits(n)
			}
			if fit.key != "" {
				admitted[fit.key] = admits
			}
		}
		blocked := antiAffinityDomains(p, nodes, inNS)
		want := rooms.want(PodRequests(p))
		for i, n := range ordered {
			if !admits[i] || blocked.block(n) {
				continue
			}
			if fit.room != nil && !fit.room(n, used[n.Name]) || fit.room == nil && !rooms.fits(i, want) {
				continue
			}
			score := rooms.score(i, want)
			if s.loading || !s.opts.PackNodes {
				score = 2 - score
			}
			// kube-scheduler's TaintToleration score (weight 3) outweighs
			// the resource scores (weight 1 each): a node with a
			// PreferNoSchedule taint the pod does not tolerate comes last.
			score -= 3 * float64(preferNoSchedule(p, n))
			if n.Name == preferred {
				score += 10
			}
			if score > bestScore {
				best, bestI, bestScore = n, i, score
			}
		}
		if best == nil && (p.Spec.PreemptionPolicy == nil || *p.Spec.PreemptionPolicy != corev1.PreemptNever) {
			var err error
			if best, err = s.preempt(ctx, p, ordered, used, on, vols); err != nil {
				return err
			}
			if best != nil {
				bestI, _ = slices.BinarySearchFunc(ordered, best, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
			}
		}
		if best == nil {
			continue
		}
		p.Spec.NodeName = best.Name
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(s.Now())}}
		if _, err := s.kube.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("bind pod %s/%s to %s: %w", p.Namespace, p.Name, best.Name, err)
		}
		if used[best.Name] == nil {
			used[best.Name] = corev1.ResourceList{}
		}
		kube.AddResources(used[best.Name], PodRequests(p), 1)
		rooms.update(bestI, used[best.Name])
		on[best.Name] = append(on[best.Name], p)
		inNS[p.Namespace] = append(inNS[p.Namespace], p)
	}
	return nil
}

// blockedDomains are, for each of a pod's required pod anti-affinity
// terms, its topology key and the values of it (the domains) in which a
// pod matching the term runs.
type blockedDomains []struct {
	key     string
	domains map[string]bool
}

// antiAffinityDomains works out the domains p's required pod
// anti-affinity terms keep it out of (kube-scheduler's InterPodAffinity
// filter, for anti-affinity): those of the nodes (their label of the
// term's topology key) on which a pod matching the term runs. inNS is the
// bound pods by namespace: a term looks only at its namespaces' pods. A
// term whose selector does not parse blocks nothing.
func antiAffinityDomains(p *corev1.Pod, nodes map[string]*corev1.Node, inNS map[string][]*corev1.Pod) blockedDomains {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	var out blockedDomains
	for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			continue
		}
		namespaces := term.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{p.Namespace}
		}
		domains := map[string]bool{}
		for _, ns := range slices.Compact(slices.Sorted(slices.Values(namespaces))) {
			for _, q := range inNS[ns] {
				if m, ok := nodes[q.Spec.NodeName]; ok && q.UID != p.UID && sel.Matches(labels.Set(q.Labels)) {
					domains[m.Labels[term.TopologyKey]] = true
				}
			}
		}
		out = append(out, struct {
			key     string
			domains map[string]bool
		}{term.TopologyKey, domains})
	}
	return out
}

// block reports whether placing the pod on n breaks one of its terms: n
// is in one of the term's blocked domains.
func (b blockedDomains) block(n *corev1.Node) bool {
	for _, t := range b {
		if domain, ok := n.Labels[t.key]; ok && t.domains[domain] {
			return true
		}
	}
	return false
}

// preferNoSchedule counts n's PreferNoSchedule taints p does not tolerate.
func preferNoSchedule(p *corev1.Pod, n *corev1.Node) int {
	count := 0
	for i := range n.Spec.Taints {
		if t := &n.Spec.Taints[i]; t.Effect == corev1.TaintEffectPreferNoSchedule && !tolerates(p.Spec.Tolerations, *t) {
			count++
		}
	}
	return count
}

// preempt makes room for a pod that fits nowhere by deleting pods of lower
// priority on one node, as kube-scheduler's preemption does: the node
// needing the fewest victims wins, victims go lowest priority and newest
// first, and pods whose PDB allows no disruption are not chosen.
func (s *Sandbox) preempt(ctx context.Context, p *corev1.Pod, nodes []*corev1.Node, used map[string]corev1.ResourceList, on map[string][]*corev1.Pod, vols []*corev1.NodeSelector) (*corev1.Node, error) {
	want := PodRequests(p)
	var best *corev1.Node
	var bestVictims []*corev1.Pod
	for _, n := range nodes {
		if !nodeReady(n) || n.Spec.Unschedulable || labelsAndTaintsFit(p, n, vols) != nil {
			continue
		}
		var cands []*corev1.Pod
		for _, q := range on[n.Name] {
			if priority(q) < priority(p) && !kube.IsDaemonSetPod(q) && s.disruptable(q) {
				cands = append(cands, q)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			if priority(cands[i]) != priority(cands[j]) {
				return priority(cands[i]) < priority(cands[j])
			}
			return cands[j].CreationTimestamp.Before(&cands[i].CreationTimestamp)
		})
		left := corev1.ResourceList{}
		kube.AddResources(left, used[n.Name], 1)
		var victims []*corev1.Pod
		for _, q := range cands {
			if resourcesFit(want, left, n.Status.Allocatable) == nil {
				break
			}
			subtract(left, PodRequests(q))
			decPods(left)
			victims = append(victims, q)
		}
		if resourcesFit(want, left, n.Status.Allocatable) != nil {
			continue
		}
		if best == nil || len(victims) < len(bestVictims) {
			best, bestVictims = n, victims
		}
	}
	if best == nil {
		return nil, nil
	}
	for _, q := range bestVictims {
		if err := s.kube.CoreV1().Pods(q.Namespace).Delete(ctx, q.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("preempt pod %s/%s for %s/%s: %w", q.Namespace, q.Name, p.Namespace, p.Name, err)
		}
		subtract(used[best.Name], PodRequests(q))
		decPods(used[best.Name])
		s.stats.Preempted++
		s.stats.PreemptedPods = append(s.stats.PreemptedPods, fmt.Sprintf("%s/%s on %s for %s/%s", q.Namespace, q.Name, best.Name, p.Namespace, p.Name))
	}
	return best, nil
}

// disruptable reports whether every PDB selecting the pod allows a disruption.
func (s *Sandbox) disruptable(p *corev1.Pod) bool {
	pdbs, err := s.pdbsFor(p)
	if err != nil {
		return false
	}
	for i := range pdbs {
		st, err := s.pdbStatus(&pdbs[i])
		if err != nil || st.DisruptionsAllowed <= 0 {
			return false
		}
	}
	return true
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// VolumeSelectors returns the node affinity of the PVs bound to the pod's
// claims (the zone of an EBS volume).
func (s *Sandbox) VolumeSelectors(ctx context.Context, p *corev1.Pod) []*corev1.NodeSelector {
	var out []*corev1.NodeSelector
	byClaim := s.claimSelectors(ctx, p)
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			if sel := byClaim[v.PersistentVolumeClaim.ClaimName]; sel != nil {
				out = append(out, sel)
			}
		}
	}
	return out
}

// claimSelectors are the node affinity of the PVs bound to the pod's
// claims, by claim name.
func (s *Sandbox) claimSelectors(ctx context.Context, p *corev1.Pod) map[string]*corev1.NodeSelector {
	out := map[string]*corev1.NodeSelector{}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := s.kube.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := s.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		out[v.PersistentVolumeClaim.ClaimName] = pv.Spec.NodeAffinity.Required
	}
	return out
}

// reconcilePDBs writes the PDBs' status and counts violations: a PDB
// going below its desired healthy count while tracking is on. Only the
// budgets of the namespaces written in since its last run are computed
// again (changes.budgetNamespaces): a budget's status follows from its
// namespace's pods, ReplicaSets and StatefulSets and itself alone, so the
// others' are as it last wrote them (TestPDBStatusOnlyWhereWritten).
func (s *Sandbox) reconcilePDBs(ctx context.Context) error {
	for _, ns := range s.changes.budgetNamespaces() {
		if err := s.reconcilePDBsIn(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// reconcilePDBsIn is reconcilePDBs for namespace ns's budgets.
func (s *Sandbox) reconcilePDBsIn(ctx context.Context, ns string) error {
	pdbs, err := s.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list PDBs in %q: %w", ns, err)
	}
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		st, err := s.pdbStatus(pdb)
		if err != nil {
			return err
		}
		key := pdb.Namespace + "/" + pdb.Name
		broken := st.CurrentHealthy < st.DesiredHealthy
		if broken && !s.pdbBroken[key] && s.tracking {
			s.stats.PDBViolations++
			s.violations = append(s.violations, fmt.Sprintf("%s at %s: %d healthy, %d desired", key, s.Now().Format("15:04:05"), st.CurrentHealthy, st.DesiredHealthy))
		}
		s.pdbBroken[key] = broken
		if pdb.Status.DisruptionsAllowed != st.DisruptionsAllowed || pdb.Status.CurrentHealthy != st.CurrentHealthy ||
			pdb.Status.DesiredHealthy != st.DesiredHealthy || pdb.Status.ExpectedPods != st.ExpectedPods {
			pdb.Status = st
			if _, err := s.kube.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update PDB %s status: %w", key, err)
			}
		}
	}
	return nil
}

func decPods(rl corev1.ResourceList) {
	q := rl[corev1.ResourcePods]
	q.Sub(*resource.NewQuantity(1, resource.DecimalSI))
	rl[corev1.ResourcePods] = q
}
