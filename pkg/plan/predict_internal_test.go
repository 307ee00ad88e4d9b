package plan

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Each wave's simulation takes over what the last one read of the fleet's
// nodes no pod has landed on since (engine.NewClusterFrom); the waves are
// predicted as if every wave read the whole fleet afresh. The waves' pods
// fill the room earlier waves left, so a node read before it was given a
// pod would take a pod it has no room for.
func TestPredictTakesOverTheFleetAsRead(t *testing.T) {
	np := onDemandM5Large("web")
	pools := []engine.NodePool{engine.NodePoolFromV1(np, nil)}
	cat := catalog.Default()
	reused, fresh := newPredictor(pools, cat, nil), newPredictor(pools, cat, nil)
	pod := func(i int, cpu string) inventory.Pod {
		return inventory.Pod{Namespace: "app", Name: fmt.Sprintf("p-%d", i), Phase: corev1.PodRunning, OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}
	}
	// A 2-CPU node for the first pod, then half a CPU at a time into what
	// it leaves, until it is full.
	waves := [][]inventory.Pod{{pod(0, "1200m")}, {pod(1, "500m")}, {pod(2, "500m")}, {pod(3, "500m")}, {pod(4, "500m")}}
	landed := 0
	for w, pods := range waves {
		fresh.cluster = nil
		want, _, err := fresh.predict(pods, []string{"web"})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := reused.predict(pods, []string{"web"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("wave %d predicted\n%+v\nread afresh\n%+v", w+1, got, want)
		}
		if len(want) == 0 {
			landed++
		}
	}
	if !reflect.DeepEqual(reused.fleet, fresh.fleet) {
		t.Fatalf("fleet\n%+v\nread afresh\n%+v", reused.fleet, fresh.fleet)
	}
	if landed == 0 || len(fresh.fleet) < 2 {
		t.Fatalf("%d waves landed on earlier nodes, %d nodes: the case tests nothing", landed, len(fresh.fleet))
	}
}

// A wave that moves two pods whose volumes are in us-east-1b, too big to
// share an m5.large, predicts two nodes in us-east-1b, and each of their
// placeholders reserves room there.
func TestWaveNodesAndPlaceholdersInTheVolumesZone(t *testing.T) {
	np := onDemandM5Large("db")
	inv := inventory.Inventory{}
	for i := range 2 {
		claim := fmt.Sprintf("data-db-%d", i)
		inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "db", Name: fmt.Sprintf("db-%d", i), Phase: corev1.PodRunning,
			OwnerKind: "StatefulSet", OwnerName: "db", Volumes: []inventory.Volume{{Name: "data", Kind: inventory.VolumePVC, ClaimName: claim}},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1200m"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
		inv.PersistentVolumes = append(inv.PersistentVolumes, inventory.PersistentVolume{Name: "pv-" + claim, ClaimNamespace: "db", ClaimName: claim,
			Zones: []string{"us-east-1b"}, Driver: inventory.EBSCSIDriver})
	}
	inv.ResolveVolumes()
	pr := newPredictor([]engine.NodePool{engine.NodePoolFromV1(np, nil)}, catalog.Default(), nil)
	nodes, unsched, err := pr.predict(inv.Pods, []string{"db"})
	if err != nil || len(unsched) > 0 {
		t.Fatalf("predict: %v, unschedulable %v", err, unsched)
	}
	if len(nodes) != 2 || nodes[0].Zone != "us-east-1b" || nodes[1].Zone != "us-east-1b" {
		t.Fatalf("predicted %+v, want two nodes in us-east-1b", nodes)
	}
	pl := &planner{p: &Plan{Budget: Budget{PreProvision: true}}, pred: pr}
	w := Wave{Index: 1, PredictedNodes: nodes}
	pl.priceWave(&w)
	if len(w.PreProvision) != 2 {
		t.Fatalf("placeholders %+v, want two", w.PreProvision)
	}
	for _, ph := range w.PreProvision {
		if ph.Zone != "us-east-1b" {
			t.Errorf("placeholder %+v, want it in us-east-1b", ph)
		}
	}
	// Without volumes nothing pins the placeholders.
	free := []inventory.Pod{inv.Pods[0], inv.Pods[1]}
	for i := range free {
		free[i].Volumes = nil
	}
	nodes, _, err = newPredictor(pr.pools, catalog.Default(), nil).predict(free, []string{"db"})
	if err != nil {
		t.Fatal(err)
	}
	w = Wave{Index: 1, PredictedNodes: nodes}
	pl.priceWave(&w)
	for _, ph := range w.PreProvision {
		if ph.Zone != "" {
			t.Errorf("placeholder %+v pinned to a zone without volumes", ph)
		}
	}
}

// onDemandM5Large is a NodePool of on-demand m5.large nodes only.
func onDemandM5Large(name string) *apiv1.NodePool {
	np := &apiv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.Requirements = []apiv1.NodeSelectorRequirementWithMinValues{
		{Key: catalog.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
		{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
	}
	return np
}
