package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

var zones = []string{"zone-a", "zone-b"}

// testTypes are a family of sizes: size i has 2^i CPU and 2^(i+1) GiB, on
// demand at $0.05 per CPU, spot at 30 % of that, in two zones; no overhead.
func testTypes(sizes int) []engine.InstanceType {
	var out []engine.InstanceType
	for i := 0; i < sizes; i++ {
		cpu := int64(1) << i
		name := fmt.Sprintf("t-%dx", cpu)
		od := 0.05 * float64(cpu)
		var offs []catalog.Offering
		for zi, z := range zones {
			// Spot varies a little by zone so worst and cheapest differ.
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: catalog.CapacityTypeSpot, Price: od * (0.3 + 0.01*float64(zi))})
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: catalog.CapacityTypeOnDemand, Price: od})
		}
		out = append(out, engine.InstanceType{
			Name:   name,
			Labels: map[string]string{catalog.LabelInstanceType: name, catalog.LabelArch: "amd64", catalog.LabelOS: "linux"},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(cpu*2<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
			},
			Offerings: offs,
		})
	}
	return out
}

func typeByName(types []engine.InstanceType, name string) engine.InstanceType {
	for _, t := range types {
		if t.Name == name {
			return t
		}
	}
	panic("no type " + name)
}

type poolOpt func(*engine.NodePool)

func newPool(name string, types []engine.InstanceType, opts ...poolOpt) engine.NodePool {
	np := engine.NodePool{Name: name, InstanceTypes: types, Spec: apiv1.NodePoolSpec{
		Disruption: apiv1.Disruption{ConsolidationPolicy: apiv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
			ConsolidateAfter: apiv1.NewNillableDuration(30 * time.Second), Budgets: []apiv1.Budget{{Nodes: "100%"}}},
		Template: apiv1.NodeClaimTemplate{Spec: apiv1.NodeClaimTemplateSpec{Requirements: []apiv1.NodeSelectorRequirementWithMinValues{
			{Key: catalog.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{catalog.CapacityTypeOnDemand, catalog.CapacityTypeSpot}},
		}}},
	}}
	for _, o := range opts {
		o(&np)
	}
	return np
}

func onDemandOnly(np *engine.NodePool) {
	np.Spec.Template.Spec.Requirements[0].Values = []string{catalog.CapacityTypeOnDemand}
}

func policy(p apiv1.ConsolidationPolicy) poolOpt {
	return func(np *engine.NodePool) { np.Spec.Disruption.ConsolidationPolicy = p }
}

func budgetsOf(b ...apiv1.Budget) poolOpt {
	return func(np *engine.NodePool) { np.Spec.Disruption.Budgets = b }
}

func pod(name, cpu string, opts ...func(*inventory.Pod)) inventory.Pod {
	p := inventory.Pod{Namespace: "default", Name: name, Phase: corev1.PodRunning, Labels: map[string]string{"app": name},
		OwnerKind: inventory.OwnerDeployment, OwnerName: name,
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// kNode is an initialized Karpenter node created an hour before t0.
func kNode(name, pool string, it engine.InstanceType, zone, ct string, pods ...inventory.Pod) Node {
	alloc := it.Capacity.DeepCopy()
	for i := range pods {
		pods[i].NodeName = name
	}
	return Node{ExistingNode: engine.ExistingNode{Node: inventory.Node{
		Name: name, NodePool: pool, InstanceType: it.Name, Zone: zone, CapacityType: ct, Ready: true,
		CreatedAt: metav1.NewTime(t0.Add(-time.Hour)), Allocatable: alloc,
		Labels: map[string]string{catalog.LabelNodePool: pool, catalog.LabelInstanceType: it.Name, catalog.LabelZone: zone,
			catalog.LabelCapacityType: ct, catalog.LabelHostname: name, catalog.LabelArch: "amd64", catalog.LabelOS: "linux",
			apiv1.NodeInitializedLabelKey: "true"},
	}, Pods: pods}}
}

func ds(p *inventory.Pod) { p.OwnerKind = inventory.OwnerDaemonSet }
