package sandbox

import (
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/kubectl/pkg/util/podutils"
)

var (
	podsGVR  = corev1.SchemeGroupVersion.WithResource("pods")
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
	podGVK   = corev1.SchemeGroupVersion.WithKind("Pod")
	pdbGVR   = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	pdbGVK   = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")

	deploymentsGVR     = appsv1.SchemeGroupVersion.WithResource("deployments")
	priorityClassesGVR = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
)

// installDiscovery makes discovery answer like a Kubernetes 1.35 API server
// for the groups the tool uses, including pods/eviction in policy/v1, which
// kubectl drain's CheckEvictionSupport looks for.
func (s *Sandbox) installDiscovery() {
	d := s.kube.Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = &version.Info{Major: "1", Minor: "35", GitVersion: "v1.35.4-eks-sandbox", Platform: "linux/amd64"}
	verbs := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	res := func(name, kind string, namespaced bool) metav1.APIResource {
		return metav1.APIResource{Name: name, Kind: kind, Namespaced: namespaced, Verbs: verbs}
	}
	d.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			res("configmaps", "ConfigMap", true),
			res("namespaces", "Namespace", false),
			res("nodes", "Node", false),
			res("persistentvolumeclaims", "PersistentVolumeClaim", true),
			res("persistentvolumes", "PersistentVolume", false),
			res("pods", "Pod", true),
			{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1", Namespaced: true, Verbs: metav1.Verbs{"create"}},
			{Name: "pods/binding", Kind: "Binding", Namespaced: true, Verbs: metav1.Verbs{"create"}},
			res("serviceaccounts", "ServiceAccount", true),
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			res("daemonsets", "DaemonSet", true),
			res("deployments", "Deployment", true),
			{Name: "deployments/scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Namespaced: true, Verbs: metav1.Verbs{"get", "patch", "update"}},
			res("replicasets", "ReplicaSet", true),
			res("statefulsets", "StatefulSet", true),
		}},
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{res("jobs", "Job", true), res("cronjobs", "CronJob", true)}},
		{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{res("poddisruptionbudgets", "PodDisruptionBudget", true)}},
		{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{res("leases", "Lease", true)}},
		{GroupVersion: "apiextensions.k8s.io/v1", APIResources: []metav1.APIResource{res("customresourcedefinitions", "CustomResourceDefinition", false)}},
		{GroupVersion: "karpenter.sh/v1", APIResources: []metav1.APIResource{res("nodepools", "NodePool", false), res("nodeclaims", "NodeClaim", false)}},
		{GroupVersion: "karpenter.k8s.aws/v1", APIResources: []metav1.APIResource{res("ec2nodeclasses", "EC2NodeClass", false)}},
	}
}

func (s *Sandbox) installReactors() {
	s.kube.PrependReactor("create", "*", s.stampReactor(s.tracker))
	s.kube.PrependReactor("list", "pods", s.listPodsReactor)
	s.kube.PrependReactor("create", "pods", s.evictionReactor)
	s.kube.PrependReactor("create", "pods", s.priorityReactor)
	s.kube.PrependReactor("*", "deployments", s.scaleReactor)
	s.kube.PrependReactor("delete-collection", "pods", s.deleteCollectionReactor)
}

// stampReactor fills in what the API server would on create (stampMeta):
// a name from generateName that tr does not hold yet, a UID and the
// creation time (from the simulated clock). kubectl drain tells a
// recreated StatefulSet pod from the evicted one by UID.
func (s *Sandbox) stampReactor(tr k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || ca.GetSubresource() != "" {
			return false, nil, nil
		}
		m, err := meta.Accessor(ca.GetObject())
		if err != nil {
			return false, nil, nil
		}
		ns := m.GetNamespace()
		if ns == "" {
			ns = ca.GetNamespace()
		}
		s.stampMeta(m, func(name string) bool {
			_, err := tr.Get(ca.GetResource(), ns, name)
			return err == nil
		})
		return false, nil, nil
	}
}

// listPodsReactor serves every pod list from the sandbox's pod cache
// (podsIn), copying only the pods that match: label and field selectors
// (spec.nodeName, status.phase, metadata.name, metadata.namespace) are
// honoured, as the API server does, and the items come in the tracker's
// order (namespace, name). Copying every pod of the cluster for each list
// was what made a thousand-node apply slow.
func (s *Sandbox) listPodsReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	la, ok := action.(k8stesting.ListAction)
	if !ok {
		return false, nil, nil
	}
	restr, ns := la.GetListRestrictions(), la.GetNamespace()
	cands := s.podsIn(ns)
	if restr.Fields != nil {
		// A node's pods (a drain's list) from the node's index.
		if node, ok := restr.Fields.RequiresExactMatch("spec.nodeName"); ok {
			cands = s.pods.on(node)
		}
	}
	var match []*corev1.Pod
	for _, p := range cands {
		if podMatches(p, ns, restr) {
			match = append(match, p)
		}
	}
	out := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: s.pods.resourceVersion()}, Items: make([]corev1.Pod, len(match))}
	for i, p := range match {
		p.DeepCopyInto(&out.Items[i])
	}
	return true, out, nil
}

// podMatches reports whether a list or delete-collection of namespace ns
// (all when empty) with these restrictions selects p.
func podMatches(p *corev1.Pod, ns string, r k8stesting.ListRestrictions) bool {
	if ns != "" && p.Namespace != ns {
		return false
	}
	if r.Labels != nil && !r.Labels.Matches(labels.Set(p.Labels)) {
		return false
	}
	return r.Fields == nil || r.Fields.Empty() || r.Fields.Matches(podFields{p})
}

// podFields are the pod's fields a field selector may name
// (spec.nodeName, status.phase, metadata.name, metadata.namespace), read
// from the pod rather than copied into a fields.Set for each pod a list
// looks at.
type podFields struct{ p *corev1.Pod }

func (f podFields) Has(field string) bool {
	switch field {
	case "spec.nodeName", "status.phase", "metadata.name", "metadata.namespace":
		return true
	}
	return false
}

func (f podFields) Get(field string) string {
	switch field {
	case "spec.nodeName":
		return f.p.Spec.NodeName
	case "status.phase":
		return string(f.p.Status.Phase)
	case "metadata.name":
		return f.p.Name
	case "metadata.namespace":
		return f.p.Namespace
	}
	return ""
}

// evictionReactor implements the Eviction API (pods/eviction): it deletes
// the pod only if every PDB selecting it allows a disruption, and answers
// 429 TooManyRequests naming the PDB otherwise, as the API server does.
func (s *Sandbox) evictionReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := action.(k8stesting.CreateAction)
	if !ok || ca.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev, ok := ca.GetObject().(*policyv1.Eviction)
	if !ok {
		return true, nil, apierrors.NewBadRequest(fmt.Sprintf("eviction body is %T, want policy/v1 Eviction", ca.GetObject()))
	}
	ns := ca.GetNamespace()
	tr := s.tracker
	obj, err := tr.Get(podsGVR, ns, ev.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Spec.NodeName == "" {
		return true, nil, s.deletePodNow(ns, pod.Name)
	}
	pdbs, err := s.pdbsFor(pod)
	if err != nil {
		return true, nil, err
	}
	if len(pdbs) > 1 {
		return true, nil, apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
	}
	if len(pdbs) == 1 {
		st, err := s.pdbStatus(&pdbs[0])
		if err != nil {
			return true, nil, err
		}
		unhealthyOK := !podutils.IsPodReady(pod) && st.CurrentHealthy >= st.DesiredHealthy
		if st.DisruptionsAllowed <= 0 && !unhealthyOK {
			s.stats.Rejected++
			return true, nil, tooManyRequests(pdbs[0].Name, st)
		}
	}
	s.stats.Evictions++
	return true, nil, s.deletePodNow(ns, pod.Name)
}

func (s *Sandbox) deletePodNow(ns, name string) error {
	return s.tracker.Delete(podsGVR, ns, name)
}

func tooManyRequests(pdb string, st policyv1.PodDisruptionBudgetStatus) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusTooManyRequests,
		Reason:  metav1.StatusReasonTooManyRequests,
		Message: "Cannot evict pod as it would violate the pod's disruption budget.",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type:    policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb, st.DesiredHealthy, st.CurrentHealthy),
		}}},
	}}
}

// pdbsFor lists the PDBs in the pod's namespace that select it.
func (s *Sandbox) pdbsFor(pod *corev1.Pod) ([]policyv1.PodDisruptionBudget, error) {
	obj, err := s.tracker.List(pdbGVR, pdbGVK, pod.Namespace)
	if err != nil {
		return nil, err
	}
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range obj.(*policyv1.PodDisruptionBudgetList).Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pdb)
		}
	}
	return out, nil
}

// pdbStatus computes a PDB's status as the disruption controller does:
// expected pods from the owning controllers' scale, healthy pods are Ready.
func (s *Sandbox) pdbStatus(pdb *policyv1.PodDisruptionBudget) (policyv1.PodDisruptionBudgetStatus, error) {
	nsPods := s.podsIn(pdb.Namespace)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return policyv1.PodDisruptionBudgetStatus{}, fmt.Errorf("pdb %s/%s selector: %w", pdb.Namespace, pdb.Name, err)
	}
	var healthy, podCount int32
	scales := map[string]int32{}
	for _, p := range nsPods {
		if !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		podCount++
		if podutils.IsPodReady(p) {
			healthy++
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			key := ref.Kind + "/" + ref.Name
			if _, seen := scales[key]; !seen {
				scales[key] = s.scaleOf(p.Namespace, ref.Kind, ref.Name)
			}
		}
	}
	expected := podCount
	if len(scales) > 0 {
		expected = 0
		for _, n := range scales {
			if n < 0 {
				expected = podCount
				break
			}
			expected += n
		}
	}
	var desired int32
	switch {
	case pdb.Spec.MinAvailable != nil:
		v, err := intOrPercent(pdb.Spec.MinAvailable, expected, true)
		if err != nil {
			return policyv1.PodDisruptionBudgetStatus{}, fmt.Errorf("pdb %s/%s minAvailable: %w", pdb.Namespace, pdb.Name, err)
		}
		desired = v
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intOrPercent(pdb.Spec.MaxUnavailable, expected, true)
		if err != nil {
			return policyv1.PodDisruptionBudgetStatus{}, fmt.Errorf("pdb %s/%s maxUnavailable: %w", pdb.Namespace, pdb.Name, err)
		}
		desired = max(expected-v, 0)
	default:
		desired = expected
	}
	return policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptionsAllowed: max(healthy-desired, 0),
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
	}, nil
}

// podsIn returns a namespace's pods by name (every pod by namespace and
// name when ns is empty) from the pod cache, never through the clientset:
// reactors call this while the fake holds its lock. Callers read them and
// must not modify them.
func (s *Sandbox) podsIn(ns string) []*corev1.Pod { return s.pods.in(ns) }

// scaleOf returns the replicas a controller wants, or -1 when the kind has
// no scale (then the PDB counts pods, as the disruption controller does
// for bare pods and Jobs).
func (s *Sandbox) scaleOf(ns, kind, name string) int32 {
	tr := s.tracker
	switch kind {
	case "ReplicaSet":
		if o, err := tr.Get(rsGVR, ns, name); err == nil {
			return replicasOrOne(o.(*appsv1.ReplicaSet).Spec.Replicas)
		}
	case "StatefulSet":
		if o, err := tr.Get(stsGVR, ns, name); err == nil {
			return replicasOrOne(o.(*appsv1.StatefulSet).Spec.Replicas)
		}
	}
	return -1
}

func replicasOrOne(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func intOrPercent(v *intstr.IntOrString, total int32, roundUp bool) (int32, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(total), roundUp)
	return int32(n), err
}

// Built-in PriorityClasses, which exist without objects.
var builtinPriorities = map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}

// priorityReactor is the Priority admission plugin: a pod created with a
// PriorityClass name and no priority gets the class's value and preemption
// policy (a placeholder pod's -100 and Never, so any pod preempts it). A
// class the sandbox does not have leaves the pod at priority 0.
func (s *Sandbox) priorityReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := action.(k8stesting.CreateAction)
	if !ok || ca.GetSubresource() != "" {
		return false, nil, nil
	}
	p, ok := ca.GetObject().(*corev1.Pod)
	if !ok || p.Spec.PriorityClassName == "" || p.Spec.Priority != nil {
		return false, nil, nil
	}
	if v, ok := builtinPriorities[p.Spec.PriorityClassName]; ok {
		p.Spec.Priority = ptr(v)
		return false, nil, nil
	}
	obj, err := s.tracker.Get(priorityClassesGVR, "", p.Spec.PriorityClassName)
	if err != nil {
		return false, nil, nil
	}
	pc := obj.(*schedulingv1.PriorityClass)
	p.Spec.Priority = ptr(pc.Value)
	if pc.PreemptionPolicy != nil {
		p.Spec.PreemptionPolicy = ptr(*pc.PreemptionPolicy)
	}
	return false, nil, nil
}

// deleteCollectionReactor deletes the pods a delete-collection selects
// (label and field selectors), which the fake tracker ignores: the runner
// removes a wave's placeholder pods this way.
func (s *Sandbox) deleteCollectionReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	da, ok := action.(k8stesting.DeleteCollectionAction)
	if !ok {
		return false, nil, nil
	}
	r := da.GetListRestrictions()
	for _, p := range s.podsIn(action.GetNamespace()) {
		if !podMatches(p, "", r) {
			continue
		}
		if err := s.deletePodNow(p.Namespace, p.Name); err != nil && !apierrors.IsNotFound(err) {
			return true, nil, err
		}
	}
	return true, nil, nil
}
