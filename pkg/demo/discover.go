package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

func (r *runner) stepDiscover(ctx context.Context) (string, error) {
	inv, err := Discover(ctx, r.sb.Kube(), r.sb.Cloud())
	if err != nil {
		return "", err
	}
	r.inv = inv
	n, byType, cost := r.fleet()
	r.sum.Cluster = inv.Cluster.Name
	r.sum.NodesBefore, r.sum.NodesBeforeByType, r.sum.CostPerHourBefore = n, byType, cost
	path := filepath.Join(r.opts.OutDir, "snapshot.json")
	if err := inventory.NewSnapshot(inv, r.sb.Now()).WriteFile(path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return fmt.Sprintf("%d node groups, %d nodes, %d pods, %d PDBs ($%.4f/h) → %s", len(inv.NodeGroups), len(inv.Nodes), len(inv.Pods), len(inv.PDBs), cost, path), nil
}

// Discover builds the inventory from the sandbox's cluster and account.
// It stands in for pkg/discover until that package can be pointed at the
// sandbox (the AWS fake over loopback and this clientset).
func Discover(ctx context.Context, kube kubernetes.Interface, cloud *sandbox.Cloud) (inventory.Inventory, error) {
	inv := inventory.Inventory{Cluster: cloud.Cluster, NodeGroups: cloud.Groups()}
	groupOf := map[string]string{}
	capacityOf := map[string]string{}
	for _, in := range cloud.Instances() {
		groupOf[in.ID] = in.Group
		capacityOf[in.ID] = in.CapacityType
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
		inv.Nodes = append(inv.Nodes, inventory.Node{
			Name: n.Name, ProviderID: n.Spec.ProviderID, InstanceID: id,
			InstanceType: n.Labels[corev1.LabelInstanceTypeStable], Zone: n.Labels[corev1.LabelTopologyZone],
			CapacityType: capacityOf[id], NodeGroup: groupOf[id], NodePool: n.Labels[apisv1.NodePoolLabelKey],
			Labels: n.Labels, Annotations: n.Annotations, Taints: n.Spec.Taints,
			Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Ready: nodeReady(&n),
			Unschedulable: n.Spec.Unschedulable, CreatedAt: n.CreationTimestamp,
		})
	}
	sort.Slice(inv.Nodes, func(i, j int) bool { return inv.Nodes[i].Name < inv.Nodes[j].Name })

	rsOwner := map[string]string{}
	rss, err := kube.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list ReplicaSets: %w", err)
	}
	for _, rs := range rss.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
			rsOwner[rs.Namespace+"/"+rs.Name] = ref.Name
		}
	}
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.Items {
		ip := inventory.Pod{
			Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
			Labels: p.Labels, Annotations: p.Annotations, Requests: sandbox.PodRequests(&p),
			NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity, Tolerations: p.Spec.Tolerations,
			TopologySpreadConstraints: p.Spec.TopologySpreadConstraints, PriorityClassName: p.Spec.PriorityClassName,
			Priority: p.Spec.Priority, TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds,
		}
		delete(ip.Requests, corev1.ResourcePods)
		if ref := metav1.GetControllerOf(&p); ref != nil {
			ip.OwnerKind, ip.OwnerName = ref.Kind, ref.Name
			if ref.Kind == "ReplicaSet" {
				if d, ok := rsOwner[p.Namespace+"/"+ref.Name]; ok {
					ip.OwnerKind, ip.OwnerName = inventory.OwnerDeployment, d
				}
			}
		}
		for _, v := range p.Spec.Volumes {
			iv := inventory.Volume{Name: v.Name, Kind: inventory.VolumeOther}
			switch {
			case v.EmptyDir != nil:
				iv.Kind = inventory.VolumeEmptyDir
			case v.HostPath != nil:
				iv.Kind = inventory.VolumeHostPath
			case v.PersistentVolumeClaim != nil:
				iv.Kind, iv.ClaimName = inventory.VolumePVC, v.PersistentVolumeClaim.ClaimName
			}
			ip.Volumes = append(ip.Volumes, iv)
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.HostPort != 0 {
					ip.HostPorts = append(ip.HostPorts, inventory.HostPort{Port: port.HostPort, Protocol: port.Protocol, HostIP: port.HostIP})
				}
			}
		}
		inv.Pods = append(inv.Pods, ip)
	}
	sort.Slice(inv.Pods, func(i, j int) bool {
		return inv.Pods[i].Namespace+"/"+inv.Pods[i].Name < inv.Pods[j].Namespace+"/"+inv.Pods[j].Name
	})

	deploys, err := kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list Deployments: %w", err)
	}
	for _, d := range deploys.Items {
		inv.Workloads = append(inv.Workloads, inventory.Workload{Kind: inventory.OwnerDeployment, Namespace: d.Namespace, Name: d.Name,
			Replicas: replicas(d.Spec.Replicas), ReadyReplicas: d.Status.ReadyReplicas, Selector: d.Spec.Selector})
		if d.Name == "cluster-autoscaler" {
			ca := &inventory.ClusterAutoscaler{Namespace: d.Namespace, Name: d.Name, Replicas: replicas(d.Spec.Replicas)}
			if len(d.Spec.Template.Spec.Containers) > 0 {
				c := d.Spec.Template.Spec.Containers[0]
				ca.Image, ca.Args = c.Image, c.Args
				if i := strings.LastIndex(c.Image, ":v"); i >= 0 {
					ca.Version = c.Image[i+2:]
				}
				for _, a := range c.Args {
					if v, ok := strings.CutPrefix(a, "--node-group-auto-discovery="); ok {
						ca.AutoDiscovery = append(ca.AutoDiscovery, v)
					}
				}
			}
			inv.ClusterAutoscaler = ca
		}
	}
	stss, err := kube.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list StatefulSets: %w", err)
	}
	for _, s := range stss.Items {
		inv.Workloads = append(inv.Workloads, inventory.Workload{Kind: inventory.OwnerStatefulSet, Namespace: s.Namespace, Name: s.Name,
			Replicas: replicas(s.Spec.Replicas), ReadyReplicas: s.Status.ReadyReplicas, Selector: s.Spec.Selector})
	}
	jobs, err := kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list Jobs: %w", err)
	}
	for _, j := range jobs.Items {
		inv.Workloads = append(inv.Workloads, inventory.Workload{Kind: inventory.OwnerJob, Namespace: j.Namespace, Name: j.Name,
			Replicas: replicas(j.Spec.Parallelism), ReadyReplicas: j.Status.Active, Selector: j.Spec.Selector})
	}
	sort.Slice(inv.Workloads, func(i, j int) bool {
		a, b := inv.Workloads[i], inv.Workloads[j]
		return a.Kind+"/"+a.Namespace+"/"+a.Name < b.Kind+"/"+b.Namespace+"/"+b.Name
	})
	dss, err := kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list DaemonSets: %w", err)
	}
	for _, ds := range dss.Items {
		probe := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		req := sandbox.PodRequests(probe)
		delete(req, corev1.ResourcePods)
		var tols []corev1.Toleration
		for _, t := range ds.Spec.Template.Spec.Tolerations {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeUnschedulable {
				continue
			}
			tols = append(tols, t)
		}
		inv.DaemonSets = append(inv.DaemonSets, inventory.DaemonSet{Namespace: ds.Namespace, Name: ds.Name, Labels: ds.Spec.Template.Labels,
			Requests: req, NodeSelector: ds.Spec.Template.Spec.NodeSelector, Affinity: ds.Spec.Template.Spec.Affinity, Tolerations: tols})
	}
	sort.Slice(inv.DaemonSets, func(i, j int) bool {
		return inv.DaemonSets[i].Namespace+"/"+inv.DaemonSets[i].Name < inv.DaemonSets[j].Namespace+"/"+inv.DaemonSets[j].Name
	})
	pdbs, err := kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list PDBs: %w", err)
	}
	for _, p := range pdbs.Items {
		inv.PDBs = append(inv.PDBs, inventory.PDB{Namespace: p.Namespace, Name: p.Name, Selector: p.Spec.Selector,
			MinAvailable: p.Spec.MinAvailable, MaxUnavailable: p.Spec.MaxUnavailable, UnhealthyPodEvictionPolicy: p.Spec.UnhealthyPodEvictionPolicy,
			DisruptionsAllowed: p.Status.DisruptionsAllowed, CurrentHealthy: p.Status.CurrentHealthy,
			DesiredHealthy: p.Status.DesiredHealthy, ExpectedPods: p.Status.ExpectedPods})
	}
	sort.Slice(inv.PDBs, func(i, j int) bool {
		return inv.PDBs[i].Namespace+"/"+inv.PDBs[i].Name < inv.PDBs[j].Namespace+"/"+inv.PDBs[j].Name
	})
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	for _, pv := range pvs.Items {
		ipv := inventory.PersistentVolume{Name: pv.Name, StorageClass: pv.Spec.StorageClassName}
		if pv.Spec.ClaimRef != nil {
			ipv.ClaimNamespace, ipv.ClaimName = pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name
		}
		if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
			for _, t := range na.Required.NodeSelectorTerms {
				for _, e := range t.MatchExpressions {
					if e.Key == corev1.LabelTopologyZone {
						ipv.Zones = append(ipv.Zones, e.Values...)
					}
				}
			}
		}
		inv.PersistentVolumes = append(inv.PersistentVolumes, ipv)
	}
	sort.Slice(inv.PersistentVolumes, func(i, j int) bool { return inv.PersistentVolumes[i].Name < inv.PersistentVolumes[j].Name })
	if cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{}); err == nil {
		inv.AWSAuth = &inventory.AWSAuth{ResourceVersion: cm.ResourceVersion, Data: cm.Data}
	}
	return inv, inv.Validate()
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
