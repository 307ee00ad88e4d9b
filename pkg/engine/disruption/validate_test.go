package disruption

import (
	"strings"
	"testing"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
)

// A node the command does not touch may already hold more than its
// allocatable (the demo replicated 11 times: DaemonSet pods put 2095m on a
// node of 1930m). Decide's command must pass Validate on the same input,
// and a placement on that node must still be rejected.
func TestValidateIgnoresOvercommitOfUntouchedNodes(t *testing.T) {
	types := testTypes(4)
	np := newPool("p", types, onDemandOnly)
	doNotDisrupt := func(n Node) Node {
		n.Node.Annotations = map[string]string{apiv1.DoNotDisruptAnnotationKey: "true"}
		return n
	}
	in := Input{Now: t0, NodePools: []engine.NodePool{np}, Nodes: []Node{
		kNode("a", "p", typeByName(types, "t-2x"), "zone-a", catalog.CapacityTypeOnDemand, pod("x", "500m")),
		// 1200m bound on 1 CPU.
		doNotDisrupt(kNode("b", "p", typeByName(types, "t-1x"), "zone-a", catalog.CapacityTypeOnDemand, pod("agent", "300m", ds), pod("y", "900m"))),
		doNotDisrupt(kNode("c", "p", typeByName(types, "t-8x"), "zone-a", catalog.CapacityTypeOnDemand, pod("z", "1"))),
	}}
	d, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Commands) != 1 || d.Commands[0].Action != ActionDelete || d.Commands[0].Nodes[0].Name != "a" {
		t.Fatalf("want node a deleted, got %+v", d.Commands)
	}
	if errs := Validate(in, d.Commands); len(errs) > 0 {
		t.Fatalf("Validate rejects Decide's command on the same input: %v", errs)
	}
	bad := d.Commands[0]
	bad.Placements = append([]engine.Placement(nil), bad.Placements...)
	for i := range bad.Placements {
		bad.Placements[i].Node = "b"
	}
	errs := Validate(in, []Command{bad})
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "node b: cpu requested 1700m exceeds allocatable 1") {
		t.Fatalf("a placement on the overcommitted node b: want it rejected for cpu, got %v", errs)
	}
}
