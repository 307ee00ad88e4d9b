package testenv

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KwokAnnotation marks the nodes that kwok manages; its value is "fake".
// Karpenter's kwok provider sets it on the nodes it launches too.
const KwokAnnotation = "kwok.x-k8s.io/node"

// Well-known node labels set by CreateKwokNode.
const (
	LabelNodeGroup             = "eks.amazonaws.com/nodegroup"
	LabelEKSCapacityType       = "eks.amazonaws.com/capacityType"
	LabelKarpenterCapacityType = "karpenter.sh/capacity-type"
)

// NodeSpec describes a fake node made to look like an EKS worker.
type NodeSpec struct {
	// Name is required.
	Name string
	// Zone defaults to us-east-1a; the region label is derived from it.
	Zone string
	// InstanceType defaults to m5.xlarge. It does not change capacity.
	InstanceType string
	// NodeGroup, when set, labels the node as a member of that EKS managed
	// node group and writes the capacity type in EKS form (ON_DEMAND, SPOT).
	// Without it the capacity type uses Karpenter's label and form.
	NodeGroup string
	// CapacityType is on-demand (default) or spot.
	CapacityType string
	// CPU, Memory and Pods are the capacity, which is also allocatable;
	// they default to m5.xlarge's 4, 16Gi and 58 (the EKS max-pods value).
	CPU, Memory, Pods string
	// Labels are added last and win over the defaults.
	Labels map[string]string
	Taints []corev1.Taint
	// ProviderID defaults to aws:///<zone>/i-<17 hex digits derived from Name>.
	ProviderID string
}

// CreateKwokNode creates a node that kwok manages: it becomes Ready within a
// second, and pods bound to it become Running. Wait with WaitForNodesReady.
func (e *Env) CreateKwokNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	node, err := KwokNode(spec)
	if err != nil {
		return nil, err
	}
	created, err := e.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	return created, nil
}

// KwokNode is the Node object CreateKwokNode creates for spec, with the
// defaults applied.
func KwokNode(spec NodeSpec) (*corev1.Node, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("kwok node: name is required")
	}
	zone := withDefault(spec.Zone, "us-east-1a")
	capacityType := withDefault(spec.CapacityType, "on-demand")
	if capacityType != "on-demand" && capacityType != "spot" {
		return nil, fmt.Errorf("kwok node %s: capacity type %q: want on-demand or spot", spec.Name, capacityType)
	}
	resources := corev1.ResourceList{}
	for _, r := range []struct {
		name  corev1.ResourceName
		value string
		def   string
	}{
		{corev1.ResourceCPU, spec.CPU, "4"},
		{corev1.ResourceMemory, spec.Memory, "16Gi"},
		{corev1.ResourcePods, spec.Pods, "58"},
		{corev1.ResourceEphemeralStorage, "", "20Gi"},
	} {
		q, err := resource.ParseQuantity(withDefault(r.value, r.def))
		if err != nil {
			return nil, fmt.Errorf("kwok node %s: %s: %w", spec.Name, r.name, err)
		}
		resources[r.name] = q
	}

	labels := map[string]string{
		corev1.LabelHostname:           spec.Name,
		corev1.LabelArchStable:         "amd64",
		corev1.LabelOSStable:           "linux",
		corev1.LabelInstanceTypeStable: withDefault(spec.InstanceType, "m5.xlarge"),
		corev1.LabelTopologyZone:       zone,
		corev1.LabelTopologyRegion:     strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz"),
		"type":                         "kwok",
	}
	if spec.NodeGroup != "" {
		labels[LabelNodeGroup] = spec.NodeGroup
		labels[LabelEKSCapacityType] = strings.ReplaceAll(strings.ToUpper(capacityType), "-", "_")
	} else {
		labels[LabelKarpenterCapacityType] = capacityType
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}

	providerID := spec.ProviderID
	if providerID == "" {
		h := fnv.New64a()
		h.Write([]byte(spec.Name))
		providerID = fmt.Sprintf("aws:///%s/i-%017x", zone, h.Sum64())
	}

	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   spec.Name,
			Labels: labels,
		},
		Spec: corev1.NodeSpec{ProviderID: providerID, Taints: spec.Taints},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
			},
		},
	}
	MarkKwok(n)
	return n, nil
}

func withDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
