package discover

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// listAll lists every object of a kind in pages of 500.
func listAll[T any](ctx context.Context, list func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]T, error) {
	var out []T
	err := eachItem(ctx, list, func(v T) { out = append(out, v) })
	return out, err
}

// eachItem calls fn for every object of a kind, page by page, so a large
// list (pods) is never held whole.
func eachItem[T any](ctx context.Context, list func(context.Context, metav1.ListOptions) (runtime.Object, error), fn func(T)) error {
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) })
	p.PageSize = 500
	return p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if v, ok := obj.(T); ok {
			fn(v)
		}
		return nil
	})
}

// kube reads the Kubernetes side.
func (d *run) kube(ctx context.Context) error {
	k := d.src.Kube
	nodes, err := listAll[*corev1.Node](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.CoreV1().Nodes().List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	listed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		d.inv.Nodes = append(d.inv.Nodes, nodeOf(n))
		listed[n.Name] = true
	}
	rsOwner := map[string]metav1.OwnerReference{} // ns/name -> owner of a ReplicaSet
	rss, err := listAll[*appsv1.ReplicaSet](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.AppsV1().ReplicaSets("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list replicasets: %w", err)
	}
	for _, rs := range rss {
		if ref := metav1.GetControllerOf(rs); ref != nil {
			rsOwner[rs.Namespace+"/"+rs.Name] = *ref
		}
	}
	jobOwner := map[string]metav1.OwnerReference{}
	jobs, err := listAll[*batchv1.Job](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.BatchV1().Jobs("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	for _, j := range jobs {
		if ref := metav1.GetControllerOf(j); ref != nil {
			jobOwner[j.Namespace+"/"+j.Name] = *ref
		}
	}
	err = eachItem(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		list, err := k.CoreV1().Pods("").List(ctx, o)
		if err == nil && o.Continue == "" && list.RemainingItemCount != nil {
			// The first page tells how many pods follow: size the slice once.
			d.inv.Pods = slices.Grow(d.inv.Pods, len(list.Items)+int(*list.RemainingItemCount))
		}
		return list, err
	}, func(p *corev1.Pod) {
		// A pod bound to a node that is gone (deleted since the node list,
		// or orphaned until the pod garbage collector removes it, as after
		// a rollback's Karpenter nodes) is not part of the cluster to plan.
		gone := p.Spec.NodeName != "" && !listed[p.Spec.NodeName]
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && !gone {
			d.inv.Pods = append(d.inv.Pods, podOf(p, rsOwner, jobOwner))
		}
	})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}

	deps, err := listAll[*appsv1.Deployment](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.AppsV1().Deployments("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	for _, dep := range deps {
		d.inv.Workloads = append(d.inv.Workloads, inventory.Workload{Kind: inventory.OwnerDeployment, Namespace: dep.Namespace, Name: dep.Name,
			Replicas: replicas(dep.Spec.Replicas), ReadyReplicas: dep.Status.ReadyReplicas, Selector: dep.Spec.Selector})
		d.detectControllers(dep)
	}
	sts, err := listAll[*appsv1.StatefulSet](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.AppsV1().StatefulSets("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list statefulsets: %w", err)
	}
	for _, s := range sts {
		d.inv.Workloads = append(d.inv.Workloads, inventory.Workload{Kind: inventory.OwnerStatefulSet, Namespace: s.Namespace, Name: s.Name,
			Replicas: replicas(s.Spec.Replicas), ReadyReplicas: s.Status.ReadyReplicas, Selector: s.Spec.Selector})
	}
	dss, err := listAll[*appsv1.DaemonSet](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.AppsV1().DaemonSets("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list daemonsets: %w", err)
	}
	for _, ds := range dss {
		spec := &ds.Spec.Template.Spec
		d.inv.DaemonSets = append(d.inv.DaemonSets, inventory.DaemonSet{Namespace: ds.Namespace, Name: ds.Name, Labels: ds.Labels,
			Requests:     resourcehelper.PodRequests(&corev1.Pod{Spec: *spec}, resourcehelper.PodResourcesOptions{}),
			NodeSelector: spec.NodeSelector, Affinity: spec.Affinity, Tolerations: spec.Tolerations, HostPorts: hostPorts(spec)})
	}
	pdbs, err := listAll[*policyv1.PodDisruptionBudget](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.PolicyV1().PodDisruptionBudgets("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list poddisruptionbudgets: %w", err)
	}
	for _, p := range pdbs {
		d.inv.PDBs = append(d.inv.PDBs, pdbOf(*p))
	}
	if err := d.volumes(ctx); err != nil {
		return err
	}
	cm, err := k.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
	switch {
	case err == nil:
		d.inv.AWSAuth = &inventory.AWSAuth{ResourceVersion: cm.ResourceVersion, Data: cm.Data}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read kube-system/aws-auth: %w", err)
	}
	return d.karpenterCRDs(ctx)
}

// volumes reads what Karpenter's scheduler reads of pods' volumes: every
// PersistentVolume (zones and CSI driver), the claims, the StorageClasses
// (allowedTopologies and binding mode for unbound claims) and the CSINodes'
// attach limits.
func (d *run) volumes(ctx context.Context) error {
	k := d.src.Kube
	pvs, err := listAll[*corev1.PersistentVolume](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.CoreV1().PersistentVolumes().List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list persistentvolumes: %w", err)
	}
	for _, pv := range pvs {
		v := inventory.PersistentVolume{Name: pv.Name, StorageClass: pv.Spec.StorageClassName, Zones: pvZones(pv)}
		switch {
		case pv.Spec.CSI != nil:
			v.Driver = pv.Spec.CSI.Driver
		case pv.Spec.AWSElasticBlockStore != nil:
			v.Driver = inventory.EBSCSIDriver
		}
		if ref := pv.Spec.ClaimRef; ref != nil {
			v.ClaimNamespace, v.ClaimName = ref.Namespace, ref.Name
		}
		d.inv.PersistentVolumes = append(d.inv.PersistentVolumes, v)
	}
	pvcs, err := listAll[*corev1.PersistentVolumeClaim](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.CoreV1().PersistentVolumeClaims("").List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	for _, c := range pvcs {
		d.inv.Claims = append(d.inv.Claims, inventory.PersistentVolumeClaim{Namespace: c.Namespace, Name: c.Name,
			StorageClass: deref(c.Spec.StorageClassName), VolumeName: c.Spec.VolumeName})
	}
	scs, err := listAll[*storagev1.StorageClass](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.StorageV1().StorageClasses().List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list storageclasses: %w", err)
	}
	for _, sc := range scs {
		out := inventory.StorageClass{Name: sc.Name, Provisioner: sc.Provisioner, AllowedTopologies: sc.AllowedTopologies}
		if sc.VolumeBindingMode != nil {
			out.VolumeBindingMode = string(*sc.VolumeBindingMode)
		}
		d.inv.StorageClasses = append(d.inv.StorageClasses, out)
	}
	csiNodes, err := listAll[*storagev1.CSINode](ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.StorageV1().CSINodes().List(ctx, o)
	})
	if err != nil {
		return fmt.Errorf("list csinodes: %w", err)
	}
	limits := map[string]map[string]int32{}
	for _, cn := range csiNodes {
		for _, drv := range cn.Spec.Drivers {
			if drv.Allocatable != nil && drv.Allocatable.Count != nil {
				if limits[cn.Name] == nil {
					limits[cn.Name] = map[string]int32{}
				}
				limits[cn.Name][drv.Name] = *drv.Allocatable.Count
			}
		}
	}
	for i := range d.inv.Nodes {
		d.inv.Nodes[i].VolumeLimits = limits[d.inv.Nodes[i].Name]
	}
	return nil
}

// pvZones reads a volume's zones from its required node affinity (or the
// legacy zone labels).
func pvZones(pv *corev1.PersistentVolume) []string {
	var zones []string
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for _, term := range na.Required.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if (e.Key == corev1.LabelTopologyZone || e.Key == corev1.LabelFailureDomainBetaZone || e.Key == "topology.ebs.csi.aws.com/zone") && e.Operator == corev1.NodeSelectorOpIn {
					zones = append(zones, e.Values...)
				}
			}
		}
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone} {
		if z := pv.Labels[key]; z != "" {
			zones = append(zones, z)
		}
	}
	return unique(zones)
}

// detectControllers recognises the Cluster Autoscaler and Karpenter
// deployments by their labels or images.
func (d *run) detectControllers(dep *appsv1.Deployment) {
	spec := &dep.Spec.Template.Spec
	for _, c := range spec.Containers {
		img := c.Image
		switch {
		case isClusterAutoscaler(dep, c):
			if d.inv.ClusterAutoscaler != nil {
				continue
			}
			args := append(append([]string{}, c.Command...), c.Args...)
			ca := &inventory.ClusterAutoscaler{Namespace: dep.Namespace, Name: dep.Name, Replicas: replicas(dep.Spec.Replicas), Image: img, Version: imageTag(img), Args: args}
			parseCAArgs(ca, args)
			d.inv.ClusterAutoscaler = ca
		case strings.Contains(img, "karpenter/controller") || (dep.Labels["app.kubernetes.io/name"] == "karpenter" && c.Name == "controller"):
			if d.inv.Karpenter == nil {
				d.inv.Karpenter = &inventory.KarpenterInstall{}
			}
			kp := d.inv.Karpenter
			kp.Installed, kp.Version, kp.Namespace, kp.Deployment = true, imageTag(img), dep.Namespace, dep.Name
			kp.Ready = dep.Status.ReadyReplicas > 0
			kp.ControllerAffinity, kp.ControllerNodeSelector = spec.Affinity, spec.NodeSelector
			kp.ControllerTolerations, kp.ControllerLabels, kp.ControllerReplicas = spec.Tolerations, dep.Spec.Template.Labels, replicas(dep.Spec.Replicas)
		}
	}
}

// karpenterCRDs records which Karpenter API groups the server serves and
// the NodePools that exist.
func (d *run) karpenterCRDs(ctx context.Context) error {
	served := map[string]bool{}
	for _, gv := range []string{"karpenter.sh/v1", "karpenter.sh/v1beta1", "karpenter.sh/v1alpha5", "karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1", "karpenter.k8s.aws/v1alpha1"} {
		rl, err := d.src.Kube.Discovery().ServerResourcesForGroupVersion(gv)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && rl == nil):
			continue // not served
		case err != nil:
			return fmt.Errorf("discover %s: %w", gv, err)
		}
		if d.inv.Karpenter == nil {
			d.inv.Karpenter = &inventory.KarpenterInstall{}
		}
		group, version, _ := strings.Cut(gv, "/")
		for _, r := range rl.APIResources {
			if !strings.Contains(r.Name, "/") {
				crd := r.Name + "." + group + "/" + version
				served[crd] = true
				d.inv.Karpenter.CRDs = append(d.inv.Karpenter.CRDs, crd)
			}
		}
	}
	if d.inv.Karpenter == nil {
		return nil
	}
	sort.Strings(d.inv.Karpenter.CRDs)
	return d.nodePools(ctx, served)
}

func imageTag(img string) string {
	img, _, _ = strings.Cut(img, "@")
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		return img[i+1:]
	}
	return ""
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func nodeOf(n *corev1.Node) inventory.Node {
	out := inventory.Node{
		Name: n.Name, ProviderID: n.Spec.ProviderID, Labels: n.Labels, Annotations: n.Annotations, Taints: n.Spec.Taints,
		Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Unschedulable: n.Spec.Unschedulable, CreatedAt: n.CreationTimestamp,
		InstanceType: n.Labels[corev1.LabelInstanceTypeStable], Zone: n.Labels[corev1.LabelTopologyZone], NodePool: n.Labels["karpenter.sh/nodepool"],
	}
	// aws:///us-east-1a/i-0123456789abcdef0
	if id, ok := strings.CutPrefix(n.Spec.ProviderID, "aws:///"); ok {
		out.InstanceID = id[strings.LastIndex(id, "/")+1:]
	}
	switch {
	case n.Labels["karpenter.sh/capacity-type"] != "":
		out.CapacityType = n.Labels["karpenter.sh/capacity-type"]
	case n.Labels["eks.amazonaws.com/capacityType"] == "SPOT":
		out.CapacityType = inventory.CapacitySpot
	case n.Labels["eks.amazonaws.com/capacityType"] == "ON_DEMAND":
		out.CapacityType = inventory.CapacityOnDemand
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	return out
}

func podOf(p *corev1.Pod, rsOwner, jobOwner map[string]metav1.OwnerReference) inventory.Pod {
	out := inventory.Pod{
		Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, Phase: p.Status.Phase, Labels: p.Labels, Annotations: p.Annotations,
		Requests:     resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}),
		NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity, Tolerations: p.Spec.Tolerations,
		TopologySpreadConstraints: p.Spec.TopologySpreadConstraints, PriorityClassName: p.Spec.PriorityClassName, Priority: p.Spec.Priority,
		HostPorts: hostPorts(&p.Spec), TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds,
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.OwnerKind, out.OwnerName = ref.Kind, ref.Name
		switch ref.Kind {
		case "ReplicaSet":
			if up, ok := rsOwner[p.Namespace+"/"+ref.Name]; ok {
				out.OwnerKind, out.OwnerName = up.Kind, up.Name
			}
		case "Job":
			if up, ok := jobOwner[p.Namespace+"/"+ref.Name]; ok {
				out.OwnerKind, out.OwnerName = up.Kind, up.Name
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		vol := inventory.Volume{Name: v.Name, Kind: inventory.VolumeOther}
		switch {
		case v.EmptyDir != nil:
			vol.Kind = inventory.VolumeEmptyDir
		case v.HostPath != nil:
			vol.Kind = inventory.VolumeHostPath
		case v.PersistentVolumeClaim != nil:
			vol.Kind, vol.ClaimName = inventory.VolumePVC, v.PersistentVolumeClaim.ClaimName
		}
		out.Volumes = append(out.Volumes, vol)
	}
	return out
}

func hostPorts(spec *corev1.PodSpec) []inventory.HostPort {
	var out []inventory.HostPort
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out = append(out, inventory.HostPort{Port: p.HostPort, Protocol: p.Protocol, HostIP: p.HostIP})
			}
		}
	}
	return out
}

func pdbOf(p policyv1.PodDisruptionBudget) inventory.PDB {
	return inventory.PDB{Namespace: p.Namespace, Name: p.Name, Selector: p.Spec.Selector, MinAvailable: p.Spec.MinAvailable,
		MaxUnavailable: p.Spec.MaxUnavailable, UnhealthyPodEvictionPolicy: p.Spec.UnhealthyPodEvictionPolicy,
		DisruptionsAllowed: p.Status.DisruptionsAllowed, CurrentHealthy: p.Status.CurrentHealthy, DesiredHealthy: p.Status.DesiredHealthy,
		ExpectedPods: p.Status.ExpectedPods}
}
