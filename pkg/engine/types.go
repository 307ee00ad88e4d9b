package engine

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Input is everything Solve needs. All of it is read-only to Solve.
type Input struct {
	// Pods are the pending pods to place.
	Pods []inventory.Pod
	// ExistingNodes are nodes (and in-flight NodeClaims) that already exist,
	// with the pods already bound to them; they are filled before any new
	// NodeClaim is made.
	ExistingNodes []ExistingNode
	// NodePools are the pools new NodeClaims may come from.
	NodePools []NodePool
	// DaemonSets add their pods' requests to every node they select.
	DaemonSets []inventory.DaemonSet
	// Catalog supplies instance types to NodePools that have none of their own.
	Catalog *catalog.Catalog
	// Options tune the scheduler.
	Options Options
}

// Options tune Solve.
type Options struct {
	// IgnorePreferences drops preferred affinities and ScheduleAnyway spreads
	// up front (Karpenter's --preference-policy=Ignore).
	IgnorePreferences bool
	// KarpenterOnly skips the improvement pass and returns Karpenter's greedy
	// result (for comparisons).
	KarpenterOnly bool
	// MaxInstanceTypes truncates each NodeClaim's instance-type options (by
	// price), as Karpenter's AWS provider does before CreateFleet; default 60.
	MaxInstanceTypes int
	// SkipLowerBounds leaves Result.LowerBound and TopologyLowerBound at 0:
	// consolidation's simulations read only the fleet, and the LP is a
	// visible part of each.
	SkipLowerBounds bool
}

// ExistingNode is a node already in the cluster, or a NodeClaim launched but
// not registered yet (InFlight), with the pods bound to it.
type ExistingNode struct {
	Node inventory.Node
	Pods []inventory.Pod
	// InFlight marks a launched NodeClaim that is not a Node yet.
	InFlight bool
}

// NodePool is a Karpenter NodePool with the part of its EC2NodeClass that
// decides allocatable resources.
type NodePool struct {
	Name string
	Spec apiv1.NodePoolSpec
	// Kubelet is the EC2NodeClass's amiFamily and kubelet block.
	Kubelet catalog.Kubelet
	// InstanceTypes, when set, replaces the catalogue for this pool
	// (synthetic catalogues, kwok).
	InstanceTypes []InstanceType
}

// NodePoolFromV1 adapts a v1 NodePool and its EC2NodeClass (nil: defaults).
func NodePoolFromV1(np *apiv1.NodePool, nc *apiv1.EC2NodeClass) NodePool {
	out := NodePool{Name: np.Name, Spec: np.Spec}
	if nc != nil {
		if nc.Spec.AMIFamily != nil {
			out.Kubelet.AMIFamily = *nc.Spec.AMIFamily
		}
		if k := nc.Spec.Kubelet; k != nil {
			out.Kubelet.MaxPods = k.MaxPods
			out.Kubelet.PodsPerCore = k.PodsPerCore
			out.Kubelet.KubeReserved = k.KubeReserved
			out.Kubelet.SystemReserved = k.SystemReserved
			out.Kubelet.EvictionHard = k.EvictionHard
		}
	}
	return out
}

// InstanceType is the scheduler's view of one instance type.
type InstanceType struct {
	Name string
	// Labels are single-valued well-known labels; MultiLabels allow a set
	// (synthetic types that run several OSes). Keys of UndefinedLabels are
	// DoesNotExist for this type.
	Labels          map[string]string
	MultiLabels     map[string][]string
	UndefinedLabels []string
	Capacity        corev1.ResourceList
	// Overhead is kube-reserved + system-reserved + eviction threshold.
	Overhead  corev1.ResourceList
	Offerings []catalog.Offering
}

// InstanceTypesFromCatalog builds the scheduler's view of every catalogue
// type under one kubelet configuration.
func InstanceTypesFromCatalog(c *catalog.Catalog, k catalog.Kubelet) ([]InstanceType, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	wk := catalog.WellKnownLabels()
	var out []InstanceType
	for _, it := range c.Types() {
		if len(it.Offerings) == 0 {
			continue
		}
		overhead, err := it.Overhead(k)
		if err != nil {
			return nil, err
		}
		var undefined []string
		for _, key := range wk {
			if _, ok := it.Labels[key]; !ok {
				undefined = append(undefined, key)
			}
		}
		out = append(out, InstanceType{
			Name: it.Name, Labels: it.Labels, UndefinedLabels: undefined,
			Capacity: it.Capacity(k), Overhead: overhead, Offerings: it.Offerings,
		})
	}
	return out, nil
}

// PodRef names a pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

func refOf(p *inventory.Pod) PodRef { return PodRef{Namespace: p.Namespace, Name: p.Name} }

// Result is Solve's answer.
type Result struct {
	// NodeClaims are the new nodes to launch.
	NodeClaims []NodeClaim `json:"nodeClaims"`
	// Placements are pods bound to existing or in-flight nodes.
	Placements []Placement `json:"placements,omitempty"`
	// Unschedulable are pods that fit nowhere, with the reasons.
	Unschedulable []Unschedulable `json:"unschedulable,omitempty"`
	// Cost is the $/h of the new NodeClaims at their cheapest offering.
	Cost float64 `json:"cost"`
	// KarpenterCost is the $/h after the greedy pass, before the re-pack
	// (Options.KarpenterOnly gives Karpenter's own greedy result).
	KarpenterCost float64 `json:"karpenterCost"`
	// LowerBound is a $/h no placement of the same pods on new nodes can beat.
	LowerBound float64 `json:"lowerBound"`
	// TopologyLowerBound is LowerBound that also counts the nodes required
	// hostname anti-affinity forces (≥ LowerBound; see the package doc).
	TopologyLowerBound float64 `json:"topologyLowerBound,omitempty"`
}

// NodeClaim is one new node.
type NodeClaim struct {
	// Name is a placeholder hostname, <nodepool>-<n>.
	Name     string `json:"name"`
	NodePool string `json:"nodePool"`
	// InstanceType, Zone, CapacityType and Price are the cheapest offering,
	// which is what Karpenter's AWS provider will most likely launch.
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	// InstanceTypes are all feasible types, cheapest first (truncated).
	InstanceTypes []string `json:"instanceTypes"`
	// Requirements are the NodeClaim's final requirements.
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	// Pods in placement order; Seq gives the global order.
	Pods []PodRef `json:"pods"`
	Seq  []int    `json:"seq"`
	// Requests are the pods' requests plus DaemonSet overhead.
	Requests corev1.ResourceList `json:"requests"`
	// Allocatable is the chosen type's allocatable.
	Allocatable corev1.ResourceList `json:"allocatable"`
}

// Placement binds a pod to an existing node.
type Placement struct {
	Pod  PodRef `json:"pod"`
	Node string `json:"node"`
	Seq  int    `json:"seq"`
}

// Unschedulable explains why a pod could not be placed.
type Unschedulable struct {
	Pod PodRef `json:"pod"`
	// Reasons per NodePool name; the key "" holds reasons that are not about
	// a pool (existing nodes, invalid pod).
	Reasons map[string]string `json:"reasons"`
}

func (u Unschedulable) String() string {
	keys := make([]string, 0, len(u.Reasons))
	for k := range u.Reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := u.Pod.String() + ":"
	for _, k := range keys {
		name := k
		if name == "" {
			name = "existing nodes"
		}
		s += fmt.Sprintf(" [%s] %s;", name, u.Reasons[k])
	}
	return s
}
