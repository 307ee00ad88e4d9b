package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// NodeGroupsAnnotation lists, on every NodePool pkg/generate writes, the
// legacy node groups the pool replaces (comma-separated). The constant in
// pkg/generate is unexported; TestPoolsFromGeneratedTree keeps the two in step.
const NodeGroupsAnnotation = "karpenter-migrate.io/node-groups"

// Pools are the environment's NodePools as the planner needs them: the
// scheduler's view of each and which pools replace each legacy node group
// (most preferred first: highest weight, then name).
type Pools struct {
	NodePools []engine.NodePool
	ForGroup  map[string][]string
	// Unmapped says why generate wrote no NodePool for a group, and what
	// to do (generate.Result.Unmapped).
	Unmapped map[string]string

	// v1 and classes are the objects the pools were read from, for
	// ReadinessOptions.
	v1      []*apiv1.NodePool
	classes []*apiv1.EC2NodeClass
}

// ReadinessOptions is the one wiring of pkg/readiness: the checks judged
// against these pools (their labels, taints, zones and instance types,
// readiness.FromNodePools). The readiness action and the plan both call it,
// so a cluster gets the same findings from readiness, the wizard, the demo
// and plan.
func (p Pools) ReadinessOptions(inv *inventory.Inventory, cat *catalog.Catalog) readiness.Options {
	return readiness.FromNodePools(inv, p.v1, p.classes, cat)
}

// PoolsFromObjects reads the NodePools and EC2NodeClasses of a built
// overlay (OverlayDir.Objects). A NodePool without the node-groups
// annotation replaces no group (it was not generated, or its annotation
// was removed by hand) but still takes part in predictions.
func PoolsFromObjects(objs []*unstructured.Unstructured) (Pools, error) {
	classes := map[string]*apiv1.EC2NodeClass{}
	var nps []*apiv1.NodePool
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Group == apiv1.AWSGroup && gvk.Kind == apiv1.EC2NodeClassKind:
			var nc apiv1.EC2NodeClass
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &nc); err != nil {
				return Pools{}, fmt.Errorf("EC2NodeClass %s: %w", o.GetName(), err)
			}
			classes[nc.Name] = &nc
		case gvk.Group == apiv1.Group && gvk.Kind == apiv1.NodePoolKind:
			np, err := DecodeNodePool(o)
			if err != nil {
				return Pools{}, err
			}
			nps = append(nps, np)
		}
	}
	if len(nps) == 0 {
		return Pools{}, errors.New("the overlay has no NodePool; run generate for this environment")
	}
	return newPools(nps, classes), nil
}

// DecodeNodePool reads a NodePool from an object of a built overlay or of
// the cluster.
func DecodeNodePool(u *unstructured.Unstructured) (*apiv1.NodePool, error) {
	var np apiv1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", u.GetName(), err)
	}
	return &np, nil
}

// PoolsFromGenerate uses pkg/generate's result directly (no tree on disk).
func PoolsFromGenerate(res *generate.Result) Pools {
	classes := map[string]*apiv1.EC2NodeClass{}
	for _, nc := range res.NodeClasses {
		classes[nc.Name] = nc
	}
	p := newPools(res.NodePools, classes)
	p.Unmapped = res.Unmapped
	return p
}

func newPools(nps []*apiv1.NodePool, classes map[string]*apiv1.EC2NodeClass) Pools {
	p := Pools{ForGroup: map[string][]string{}, v1: nps}
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		p.classes = append(p.classes, classes[name])
	}
	weight := map[string]int32{}
	for _, np := range nps {
		var nc *apiv1.EC2NodeClass
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Kind == apiv1.EC2NodeClassKind {
			nc = classes[ref.Name]
		}
		p.NodePools = append(p.NodePools, engine.NodePoolFromV1(np, nc))
		weight[np.Name] = ptr.Deref(np.Spec.Weight, 0)
		for _, g := range strings.Split(np.Annotations[NodeGroupsAnnotation], ",") {
			if g = strings.TrimSpace(g); g != "" {
				p.ForGroup[g] = append(p.ForGroup[g], np.Name)
			}
		}
	}
	sort.Slice(p.NodePools, func(i, j int) bool { return p.NodePools[i].Name < p.NodePools[j].Name })
	for g := range p.ForGroup {
		sort.Slice(p.ForGroup[g], func(i, j int) bool {
			a, b := p.ForGroup[g][i], p.ForGroup[g][j]
			if weight[a] != weight[b] {
				return weight[a] > weight[b]
			}
			return a < b
		})
	}
	return p
}

// predictor predicts wave after wave with pkg/engine: the Karpenter nodes
// of earlier waves stay in the simulated cluster, so a later wave's pods
// first fill the room they left, as Karpenter's scheduler does.
type predictor struct {
	pools []engine.NodePool
	// typed are the pools with the catalogue's instance types, narrowed
	// once (withTypes) for every wave's simulation and the forecast's;
	// typedErr is why they could not be.
	typed      []engine.NodePool
	typedErr   error
	catalog    *catalog.Catalog
	daemonSets []inventory.DaemonSet
	fleet      []engine.ExistingNode
	// cluster is the fleet as the last wave's simulation read it, and
	// given the fleet's nodes that wave gave pods (read again by the next).
	cluster *engine.Cluster
	given   map[int]bool
	wave    int
	// price is each predicted node's $/h, by name, as the plan prices it.
	price map[string]float64
}

func newPredictor(pools []engine.NodePool, cat *catalog.Catalog, daemonSets []inventory.DaemonSet) *predictor {
	pr := &predictor{pools: pools, catalog: cat, daemonSets: daemonSets, price: map[string]float64{}}
	pr.typed, pr.typedErr = withTypes(pools, cat)
	return pr
}

// predict returns the new nodes for one wave's pods on the named pools and
// the pods that fit none of them.
func (pr *predictor) predict(pods []inventory.Pod, poolNames []string) ([]PredictedNode, []engine.Unschedulable, error) {
	pr.wave++
	if len(pods) == 0 {
		return nil, nil, nil
	}
	// Pools withTypes failed on are left to the engine, which says why.
	all := pr.typed
	if pr.typedErr != nil {
		all = pr.pools
	}
	var pools []engine.NodePool
	for _, np := range all {
		if slices.Contains(poolNames, np.Name) {
			pools = append(pools, np)
		}
	}
	if len(pools) == 0 {
		return nil, nil, fmt.Errorf("none of the NodePools %v is in the environment's overlay", poolNames)
	}
	// A Cluster answers as Solve does, but leaves out the fleet's nodes
	// that can take none of the wave's pods (full, or tainted against them).
	// It takes over what the last wave's read of the nodes no pod has
	// landed on since: the fleet only grows, its nodes keep their places.
	same := make([]int, len(pr.fleet))
	for i := range same {
		same[i] = i
		if pr.cluster == nil || i >= pr.cluster.Nodes() || pr.given[i] {
			same[i] = -1
		}
	}
	pr.cluster = engine.NewClusterFrom(pr.cluster, engine.Input{ExistingNodes: pr.fleet, NodePools: pools, DaemonSets: pr.daemonSets, Catalog: pr.catalog}, same)
	res, err := pr.cluster.Solve(engine.NewPods(pods), nil)
	if err != nil {
		return nil, nil, err
	}
	byRef := make(map[engine.PodRef]inventory.Pod, len(pods))
	for _, p := range pods {
		byRef[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = p
	}
	fleetIndex := make(map[string]int, len(pr.fleet))
	for i, n := range pr.fleet {
		fleetIndex[n.Node.Name] = i
	}
	pr.given = map[int]bool{}
	for _, pl := range res.Placements {
		if i, ok := fleetIndex[pl.Node]; ok {
			pr.fleet[i].Pods = append(pr.fleet[i].Pods, byRef[pl.Pod])
			pr.given[i] = true
		}
	}
	out := make([]PredictedNode, 0, len(res.NodeClaims))
	for _, c := range res.NodeClaims {
		cpu, mem := resource.Quantity{}, resource.Quantity{}
		var claimPods []inventory.Pod
		zonal := false
		for _, ref := range c.Pods {
			p := byRef[ref]
			claimPods = append(claimPods, p)
			for _, v := range p.Volumes {
				zonal = zonal || len(v.Topology) > 0
			}
			cpu.Add(p.Requests[corev1.ResourceCPU])
			mem.Add(p.Requests[corev1.ResourceMemory])
		}
		node := pr.existing(c, claimPods, cpu, mem)
		out = append(out, PredictedNode{
			Name: node.Node.Name, NodePool: c.NodePool, InstanceType: c.InstanceType, Zone: c.Zone, CapacityType: c.CapacityType,
			Pods: len(c.Pods), CPU: cpu.String(), Memory: mem.String(), PricePerHour: c.Price, zonal: zonal,
		})
		pr.fleet = append(pr.fleet, node)
	}
	return out, res.Unschedulable, nil
}

// existing turns a predicted claim into a node of the simulated cluster.
// Its allocatable is reduced by the claim's DaemonSet overhead, which the
// engine does not add to existing nodes.
func (pr *predictor) existing(c engine.NodeClaim, pods []inventory.Pod, cpu, mem resource.Quantity) engine.ExistingNode {
	name := fmt.Sprintf("w%d-%s", pr.wave, c.Name)
	labels := map[string]string{}
	var taints []corev1.Taint
	for _, np := range pr.pools {
		if np.Name == c.NodePool {
			for k, v := range np.Spec.Template.ObjectMeta.Labels {
				labels[k] = v
			}
			taints = append(taints, np.Spec.Template.Spec.Taints...)
		}
	}
	for _, r := range c.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	labels[catalog.LabelNodePool] = c.NodePool
	labels[catalog.LabelInstanceType] = c.InstanceType
	labels[catalog.LabelZone] = c.Zone
	labels[catalog.LabelCapacityType] = c.CapacityType
	labels[catalog.LabelHostname] = name
	alloc := c.Allocatable.DeepCopy()
	for _, r := range []struct {
		name corev1.ResourceName
		pods resource.Quantity
	}{{corev1.ResourceCPU, cpu}, {corev1.ResourceMemory, mem}} {
		overhead := c.Requests[r.name]
		overhead.Sub(r.pods)
		q := alloc[r.name]
		q.Sub(overhead)
		alloc[r.name] = q
	}
	return engine.ExistingNode{
		Node: inventory.Node{Name: name, NodePool: c.NodePool, InstanceType: c.InstanceType, Zone: c.Zone, CapacityType: c.CapacityType,
			Labels: labels, Taints: taints, Allocatable: alloc, Ready: true},
		Pods: pods,
	}
}
