package plan

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// A wave moving six pods off three legacy nodes, two each, that the
// engine packs onto two m5.large nodes (1930m each for pods) full on CPU:
// A = 965m + 965m, B = 600m × 3 + 130m. The drain evicts legacy-0's pods
// (600m, 965m): A's placeholder goes, both land on A (365m left);
// legacy-1's (600m, 965m): B's goes, both land on B, the emptiest (365m
// left); legacy-2's 600m then fits nowhere, 730m being free in fragments:
// it waited for a node Karpenter launched after its eviction. The wave
// holds 600m more, first among its placeholders, released with legacy-0's
// pods: 600m lands there, 965m on A, legacy-1's on B and beside the 600m,
// legacy-2's on B and A.
func TestPlaceholdersHoldRoomForKubeSchedulersSpread(t *testing.T) {
	np := onDemandM5Large("apps")
	var pods []inventory.Pod
	for i, cpu := range []string{"600m", "965m", "600m", "965m", "600m", "130m"} {
		pods = append(pods, inventory.Pod{Namespace: "app", Name: fmt.Sprintf("p%d", i), NodeName: fmt.Sprintf("legacy-%d", i/2), Phase: corev1.PodRunning,
			OwnerKind: inventory.OwnerDeployment, OwnerName: "app",
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}})
	}
	pl := &planner{p: &Plan{Budget: Budget{PreProvision: true}}, pred: newPredictor([]engine.NodePool{engine.NodePoolFromV1(np, nil)}, catalog.Default(), nil)}
	w := Wave{Index: 1, NodePools: []string{"apps"}, Nodes: []WaveNode{{Name: "legacy-0"}, {Name: "legacy-1"}, {Name: "legacy-2"}}}
	if err := pl.predictWave(&w, pods); err != nil {
		t.Fatal(err)
	}
	pl.priceWave(&w)
	var got []string
	for _, ph := range w.PreProvision {
		got = append(got, ph.CPU+"/"+ph.Memory)
	}
	want := []string{"600m/256Mi", "1930m/512Mi", "1930m/1Gi"}
	if len(w.PredictedNodes) != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("predicted %+v, placeholders %q; want two nodes and placeholders %q", w.PredictedNodes, got, want)
	}
	if !w.PreProvision[0].Headroom || w.PreProvision[1].Headroom {
		t.Errorf("placeholders %+v: want the first marked headroom, the others not", w.PreProvision)
	}
}
