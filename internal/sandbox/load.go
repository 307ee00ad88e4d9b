package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// pauseImage is what every simulated container runs.
const pauseImage = "registry.k8s.io/pause:3.10"

// Load fills the sandbox from an inventory — the seeded demo account or a
// snapshot written by discover — and settles it: node groups get their
// instances, controllers their pods, and the scheduler places pending pods
// (spreading them, as kube-scheduler's defaults do). Pods the inventory
// shows bound stay on their nodes.
func (s *Sandbox) Load(ctx context.Context, inv inventory.Inventory) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := inv.Validate(); err != nil {
		return fmt.Errorf("load inventory: %w", err)
	}
	s.cloud.Cluster = inv.Cluster
	if s.cloud.Cluster.Region == "" {
		s.cloud.Cluster.Region = "us-east-1"
	}
	for _, g := range inv.NodeGroups {
		g := g
		g.Instances = nil
		if g.ASGName == "" {
			g.ASGName = g.Name
		}
		s.cloud.groups[g.Name] = &g
	}
	if err := s.loadNodes(ctx, inv); err != nil {
		return err
	}
	s.seedInstances()
	s.startAWS(inv)
	nsSeen := map[string]bool{}
	ensureNS := func(ns string) error {
		if ns == "" || nsSeen[ns] {
			return nil
		}
		nsSeen[ns] = true
		_, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		return nil
	}
	for _, ns := range []string{"kube-system", "default"} {
		if err := ensureNS(ns); err != nil {
			return err
		}
	}
	for _, p := range inv.Pods {
		if err := ensureNS(p.Namespace); err != nil {
			return err
		}
	}
	if err := s.loadVolumes(ctx, inv); err != nil {
		return err
	}
	owners, err := s.loadWorkloads(ctx, inv, ensureNS)
	if err != nil {
		return err
	}
	if err := s.loadPods(ctx, inv, owners); err != nil {
		return err
	}
	for _, ds := range inv.DaemonSets {
		if err := ensureNS(ds.Namespace); err != nil {
			return err
		}
		if err := s.createDaemonSet(ctx, ds); err != nil {
			return err
		}
	}
	for _, pdb := range inv.PDBs {
		if err := ensureNS(pdb.Namespace); err != nil {
			return err
		}
		obj := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: pdb.Namespace, Name: pdb.Name},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: pdb.Selector, MinAvailable: pdb.MinAvailable,
				MaxUnavailable: pdb.MaxUnavailable, UnhealthyPodEvictionPolicy: pdb.UnhealthyPodEvictionPolicy},
		}
		if _, err := s.kube.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PDB %s/%s: %w", pdb.Namespace, pdb.Name, err)
		}
	}
	if inv.AWSAuth != nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"}, Data: copyMap(inv.AWSAuth.Data)}
		if _, err := s.kube.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create aws-auth ConfigMap: %w", err)
		}
	}
	s.loading = true
	defer func() { s.loading = false }()
	if err := s.settle(ctx, 30*time.Minute); err != nil {
		return fmt.Errorf("load inventory of cluster %s: %w", inv.Cluster.Name, err)
	}
	return nil
}

// loadNodes creates the inventory's nodes and their instances; node groups
// then top up to their desired size on the first tick.
func (s *Sandbox) loadNodes(ctx context.Context, inv inventory.Inventory) error {
	for _, n := range inv.Nodes {
		it, ok := s.cat.Get(n.InstanceType)
		if !ok {
			return fmt.Errorf("node %s: instance type %q is not in the sandbox catalog (pkg/catalog's %d types); is the snapshot from a newer catalogue?", n.Name, n.InstanceType, len(s.cat.Types()))
		}
		id := n.InstanceID
		if id == "" {
			if i := strings.LastIndex(n.ProviderID, "/"); i >= 0 {
				id = n.ProviderID[i+1:]
			}
		}
		in := s.launch(Instance{ID: id, InstanceType: n.InstanceType, Zone: n.Zone, CapacityType: n.CapacityType, Group: n.NodeGroup, NodePool: n.NodePool,
			LaunchedAt: n.CreatedAt.Add(-s.opts.LaunchDelay), hostname: n.Name})
		in.NodeName = n.Name
		capacity, alloc := n.Capacity, n.Allocatable
		if len(capacity) == 0 {
			capacity = it.Capacity(catalog.Kubelet{})
		}
		if len(alloc) == 0 {
			alloc = allocatable(it)
		}
		status := corev1.ConditionFalse
		if n.Ready {
			status = corev1.ConditionTrue
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: copyMap(n.Labels), Annotations: copyMap(n.Annotations), CreationTimestamp: n.CreatedAt},
			Spec:       corev1.NodeSpec{ProviderID: in.ProviderID(), Taints: n.Taints, Unschedulable: n.Unschedulable},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: alloc,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
		}
		if _, err := s.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	s.stats = Stats{}
	return nil
}

func (s *Sandbox) loadVolumes(ctx context.Context, inv inventory.Inventory) error {
	for _, pv := range inv.PersistentVolumes {
		obj := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pv.Name},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName: pv.StorageClass,
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			},
		}
		if len(pv.Zones) > 0 {
			obj.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: pv.Zones}},
			}}}}
		}
		if pv.ClaimName != "" {
			obj.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pv.ClaimNamespace, Name: pv.ClaimName}
		}
		if _, err := s.kube.CoreV1().PersistentVolumes().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PersistentVolume %s: %w", pv.Name, err)
		}
		if pv.ClaimName == "" {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: pv.ClaimNamespace, Name: pv.ClaimName},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, StorageClassName: &pv.StorageClass,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		}
		if _, err := s.kube.CoreV1().PersistentVolumeClaims(pv.ClaimNamespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PersistentVolumeClaim %s/%s: %w", pv.ClaimNamespace, pv.ClaimName, err)
		}
	}
	return nil
}

// ownerKey names a top-level controller: kind/namespace/name.
func ownerKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// loadWorkloads creates the Deployments (with a ReplicaSet each),
// StatefulSets and Jobs, their pod templates taken from their first pod.
// It returns each controller's direct pod owner reference.
func (s *Sandbox) loadWorkloads(ctx context.Context, inv inventory.Inventory, ensureNS func(string) error) (map[string]metav1.OwnerReference, error) {
	templates := map[string]inventory.Pod{}
	counts := map[string]int32{}
	var keys []string
	for _, p := range inv.Pods {
		switch p.OwnerKind {
		case inventory.OwnerDeployment, inventory.OwnerStatefulSet, inventory.OwnerJob:
		default:
			continue
		}
		k := ownerKey(p.OwnerKind, p.Namespace, p.OwnerName)
		if _, ok := templates[k]; !ok {
			templates[k] = p
			keys = append(keys, k)
		}
		counts[k]++
	}
	replicas := map[string]int32{}
	selectors := map[string]*metav1.LabelSelector{}
	for _, w := range inv.Workloads {
		k := ownerKey(w.Kind, w.Namespace, w.Name)
		replicas[k] = w.Replicas
		selectors[k] = w.Selector
	}
	if ca := inv.ClusterAutoscaler; ca != nil {
		k := ownerKey(inventory.OwnerDeployment, ca.Namespace, ca.Name)
		if _, ok := templates[k]; !ok {
			templates[k] = inventory.Pod{Namespace: ca.Namespace, Name: ca.Name, OwnerKind: inventory.OwnerDeployment, OwnerName: ca.Name,
				Labels:   map[string]string{"app.kubernetes.io/name": "cluster-autoscaler"},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("600Mi")}}
			keys = append(keys, k)
		}
		replicas[k] = ca.Replicas
	}
	sort.Strings(keys)
	owners := map[string]metav1.OwnerReference{}
	for _, k := range keys {
		p := templates[k]
		if err := ensureNS(p.Namespace); err != nil {
			return nil, err
		}
		n, ok := replicas[k]
		if !ok {
			n = counts[k]
		}
		tmpl := podTemplate(p)
		if ca := inv.ClusterAutoscaler; ca != nil && p.OwnerKind == inventory.OwnerDeployment && p.Namespace == ca.Namespace && p.OwnerName == ca.Name {
			tmpl.Spec.Containers[0].Image = ca.Image
			tmpl.Spec.Containers[0].Args = ca.Args
		}
		sel := selectors[k]
		if sel == nil {
			sel = &metav1.LabelSelector{MatchLabels: copyMap(tmpl.Labels)}
		}
		meta := metav1.ObjectMeta{Namespace: p.Namespace, Name: p.OwnerName, Labels: copyMap(tmpl.Labels)}
		switch p.OwnerKind {
		case inventory.OwnerDeployment:
			d, err := s.kube.AppsV1().Deployments(p.Namespace).Create(ctx, &appsv1.Deployment{ObjectMeta: meta,
				Spec: appsv1.DeploymentSpec{Replicas: ptr(n), Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create Deployment %s/%s: %w", p.Namespace, p.OwnerName, err)
			}
			rsName := rsNameOf(p.Name)
			if rsName == "" || p.NodeName == "" {
				rsName = s.newName(d.Name + "-")
			}
			rt := *tmpl.DeepCopy()
			rt.Labels = withLabel(rt.Labels, appsv1.DefaultDeploymentUniqueLabelKey, strings.TrimPrefix(rsName, d.Name+"-"))
			rs, err := s.kube.AppsV1().ReplicaSets(p.Namespace).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: rsName, Labels: rt.Labels,
					OwnerReferences: []metav1.OwnerReference{controllerRef("Deployment", d.ObjectMeta, "apps/v1")}},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr(n), Selector: sel, Template: rt}}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create ReplicaSet %s/%s: %w", p.Namespace, rsName, err)
			}
			owners[k] = controllerRef("ReplicaSet", rs.ObjectMeta, "apps/v1")
		case inventory.OwnerStatefulSet:
			ss, err := s.kube.AppsV1().StatefulSets(p.Namespace).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta,
				Spec: appsv1.StatefulSetSpec{Replicas: ptr(n), Selector: sel, Template: tmpl, ServiceName: p.OwnerName}}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create StatefulSet %s/%s: %w", p.Namespace, p.OwnerName, err)
			}
			owners[k] = controllerRef("StatefulSet", ss.ObjectMeta, "apps/v1")
		case inventory.OwnerJob:
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			j, err := s.kube.BatchV1().Jobs(p.Namespace).Create(ctx, &batchv1.Job{ObjectMeta: meta,
				Spec: batchv1.JobSpec{Parallelism: ptr(n), Completions: ptr(n), Template: tmpl, Selector: sel}}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create Job %s/%s: %w", p.Namespace, p.OwnerName, err)
			}
			owners[k] = controllerRef("Job", j.ObjectMeta, batchv1.SchemeGroupVersion.String())
		}
	}
	return owners, nil
}

// rsNameOf strips the pod suffix from a ReplicaSet pod's name.
func rsNameOf(pod string) string {
	i := strings.LastIndex(pod, "-")
	if i <= 0 {
		return ""
	}
	return pod[:i]
}

// loadPods creates the pods the inventory shows bound (their controllers
// create the rest) and bare pods.
func (s *Sandbox) loadPods(ctx context.Context, inv inventory.Inventory, owners map[string]metav1.OwnerReference) error {
	for _, p := range inv.Pods {
		if p.OwnerKind == inventory.OwnerDaemonSet {
			continue
		}
		ref, owned := owners[ownerKey(p.OwnerKind, p.Namespace, p.OwnerName)]
		if p.NodeName == "" && owned {
			continue
		}
		pod := PodObject(p)
		pod.Status.Phase = corev1.PodPending
		if owned {
			pod.OwnerReferences = []metav1.OwnerReference{ref}
		}
		if p.OwnerKind == inventory.OwnerStatefulSet {
			pod.Spec.Hostname = p.Name
		}
		if _, err := s.kube.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// podTemplate rebuilds a pod spec from the scheduling fields an inventory keeps.
func podTemplate(p inventory.Pod) corev1.PodTemplateSpec {
	lbl := map[string]string{}
	for k, v := range p.Labels {
		switch k {
		case appsv1.DefaultDeploymentUniqueLabelKey, appsv1.ControllerRevisionHashLabelKey, appsv1.StatefulSetPodNameLabel,
			batchv1.JobNameLabel, batchv1.ControllerUidLabel, "job-name", "controller-uid", "pod-template-generation":
			continue
		}
		lbl[k] = v
	}
	c := corev1.Container{Name: "app", Image: pauseImage, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	for k, v := range p.Requests {
		if k != corev1.ResourcePods {
			c.Resources.Requests[k] = v
		}
	}
	if q, ok := c.Resources.Requests[ResourceGPU]; ok {
		c.Resources.Limits = corev1.ResourceList{ResourceGPU: q}
	}
	for _, hp := range p.HostPorts {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: hp.Port, HostPort: hp.Port, Protocol: hp.Protocol, HostIP: hp.HostIP})
	}
	spec := corev1.PodSpec{
		Containers:                    []corev1.Container{c},
		NodeSelector:                  copyMap(p.NodeSelector),
		Affinity:                      p.Affinity.DeepCopy(),
		Tolerations:                   append([]corev1.Toleration(nil), p.Tolerations...),
		TopologySpreadConstraints:     append([]corev1.TopologySpreadConstraint(nil), p.TopologySpreadConstraints...),
		PriorityClassName:             p.PriorityClassName,
		Priority:                      p.Priority,
		TerminationGracePeriodSeconds: p.TerminationGracePeriodSeconds,
	}
	for _, v := range p.Volumes {
		vol := corev1.Volume{Name: v.Name}
		switch v.Kind {
		case inventory.VolumeEmptyDir:
			vol.EmptyDir = &corev1.EmptyDirVolumeSource{}
		case inventory.VolumeHostPath:
			vol.HostPath = &corev1.HostPathVolumeSource{Path: "/var/lib/" + v.Name}
		case inventory.VolumePVC:
			vol.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.ClaimName}
		default:
			vol.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: v.Name}}
		}
		spec.Volumes = append(spec.Volumes, vol)
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: copyMap(p.Annotations)}, Spec: spec}
}

// daemonSetTolerations are the tolerations the DaemonSet controller adds.
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

func (s *Sandbox) createDaemonSet(ctx context.Context, ds inventory.DaemonSet) error {
	obj := DaemonSetObject(ds)
	if _, err := s.kube.AppsV1().DaemonSets(ds.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return nil
}

// PodObject rebuilds a pod from its inventory record (scheduling fields only).
func PodObject(p inventory.Pod) *corev1.Pod {
	tmpl := podTemplate(p)
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Namespace, pod.Name, pod.Labels, pod.Spec.NodeName = p.Namespace, p.Name, copyMap(p.Labels), p.NodeName
	return pod
}

// DaemonSetObject rebuilds a DaemonSet from its inventory record, with the
// tolerations the DaemonSet controller adds to its pods.
func DaemonSetObject(ds inventory.DaemonSet) *appsv1.DaemonSet {
	lbl := copyMap(ds.Labels)
	if len(lbl) == 0 {
		lbl = map[string]string{"app.kubernetes.io/name": ds.Name}
	}
	tmpl := podTemplate(inventory.Pod{Labels: lbl, Requests: ds.Requests, NodeSelector: ds.NodeSelector, Affinity: ds.Affinity,
		Tolerations: ds.Tolerations, HostPorts: ds.HostPorts})
	tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, daemonSetTolerations...)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: ds.Name, Labels: lbl},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: tmpl},
	}
}
