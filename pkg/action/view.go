package action

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Reachable is what Ping found at each end.
type Reachable struct {
	// Server describes the Kubernetes API server (its version).
	Server string
	// Cluster describes the EKS cluster (name, version, region).
	Cluster string
}

// Ping checks that the API server answers and that the EKS cluster exists.
func (c *Configuration) Ping(ctx context.Context, cluster string) (Reachable, error) {
	var r Reachable
	if c.Kube == nil {
		return r, errors.New("no Kubernetes client")
	}
	v, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return r, fmt.Errorf("the API server did not answer: %w", err)
	}
	r.Server = "Kubernetes " + v.GitVersion
	out, err := eks.NewFromConfig(c.AWS).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String(cluster)})
	if err != nil {
		return r, fmt.Errorf("EKS cluster %s in %s: %w", cluster, c.AWS.Region, err)
	}
	r.Cluster = fmt.Sprintf("EKS %s %s, %s", cluster, awssdk.ToString(out.Cluster.Version), c.AWS.Region)
	return r, nil
}

// WorkloadView is one workload's pods during the rollout.
type WorkloadView struct {
	Name    string
	Ready   int
	Pending int
}

// ClusterView is the cluster as a rollout shows it while it runs.
type ClusterView struct {
	Time           time.Time
	LegacyNodes    int
	KarpenterNodes int
	CostPerHour    float64
	// Workloads with pods on the cluster, by name.
	Workloads []WorkloadView
	// PodWorkload maps namespace/name of each pod to its workload, so
	// evictions (which name pods) are counted per workload.
	PodWorkload map[string]string
}

// View reads the nodes and pods: legacy and Karpenter nodes, what they
// cost now (the configuration's catalogue, else the embedded one), and
// each workload's ready and pending pods (DaemonSets left out).
func (c *Configuration) View(ctx context.Context) (*ClusterView, error) {
	if c.Kube == nil {
		return nil, errors.New("no Kubernetes client")
	}
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	cat := c.Catalog
	if cat == nil {
		cat = catalog.Default()
	}
	v := &ClusterView{Time: c.now(), PodWorkload: map[string]string{}}
	lifecycle := c.lifecycles(ctx, nodes.Items)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Labels[apisv1.NodePoolLabelKey] != "" {
			v.KarpenterNodes++
		} else {
			v.LegacyNodes++
		}
		ct := capacityTypeOf(n)
		if ct == "" {
			ct = lifecycle[plan.InstanceIDFromProviderID(n.Spec.ProviderID)]
		}
		price, _ := cat.Price(n.Labels[corev1.LabelInstanceTypeStable], ct, n.Labels[corev1.LabelTopologyZone])
		v.CostPerHour += price
	}
	byName := map[string]*WorkloadView{}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := WorkloadOf(p)
		if name == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		v.PodWorkload[p.Namespace+"/"+p.Name] = name
		w := byName[name]
		if w == nil {
			w = &WorkloadView{Name: name}
			byName[name] = w
		}
		switch {
		case podutils.IsPodReady(p):
			w.Ready++
		case p.Status.Phase == corev1.PodPending:
			w.Pending++
		}
	}
	for _, w := range byName {
		v.Workloads = append(v.Workloads, *w)
	}
	sort.Slice(v.Workloads, func(i, j int) bool { return v.Workloads[i].Name < v.Workloads[j].Name })
	return v, nil
}

// lifecycles are the capacity types of the Auto Scaling groups'
// instances behind nodes that carry no capacity-type label (self-managed
// groups'), by instance ID, read from EC2 as discover reads them: priced
// by label alone, a self-managed on-demand node would cost its cheapest
// (spot) offering. Without an account, or when EC2 cannot be read, a node
// is priced as discover prices one it cannot see.
func (c *Configuration) lifecycles(ctx context.Context, nodes []corev1.Node) map[string]string {
	out := map[string]string{}
	unlabeled := false
	for i := range nodes {
		unlabeled = unlabeled || capacityTypeOf(&nodes[i]) == "" && plan.InstanceIDFromProviderID(nodes[i].Spec.ProviderID) != ""
	}
	if !unlabeled || c.AWS.Region == "" {
		return out
	}
	// What EC2 could not read leaves its nodes priced as discover prices
	// one it cannot see.
	_ = discover.ASGInstances(ctx, ec2.NewFromConfig(c.AWS), func(in ec2types.Instance) {
		ct := inventory.CapacityOnDemand
		if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
			ct = inventory.CapacitySpot
		}
		out[awssdk.ToString(in.InstanceId)] = ct
	})
	return out
}

func capacityTypeOf(n *corev1.Node) string {
	if ct := n.Labels[apisv1.CapacityTypeLabelKey]; ct != "" {
		return ct
	}
	switch n.Labels["eks.amazonaws.com/capacityType"] {
	case "SPOT":
		return inventory.CapacitySpot
	case "ON_DEMAND":
		return inventory.CapacityOnDemand
	}
	return ""
}

// WorkloadOf names the pod's workload as namespace/kind/name (a
// ReplicaSet's Deployment by the ReplicaSet's name), "" for DaemonSet pods
// and the tool's own placeholders.
func WorkloadOf(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if p.Labels[kube.LabelComponent] == "placeholder" {
		return ""
	}
	if ref == nil {
		return p.Namespace + "/pod/" + p.Name
	}
	switch ref.Kind {
	case "DaemonSet":
		return ""
	case "ReplicaSet":
		if i := strings.LastIndex(ref.Name, "-"); i > 0 {
			return p.Namespace + "/deployment/" + ref.Name[:i]
		}
	}
	return p.Namespace + "/" + strings.ToLower(ref.Kind) + "/" + ref.Name
}
