package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// A pod whose volume sits in zone-a moves only within zone-a: the only
// room elsewhere is in zone-b, where consolidation would move it without
// the volume; with it, the node is replaced in zone-a or left alone.
func TestConsolidationKeepsZonalVolumePodInItsZone(t *testing.T) {
	types := testTypes(5)
	x4 := typeByName(types, "t-4x")
	withVolume := func(p *inventory.Pod) {
		p.Volumes = []inventory.Volume{{Name: "data", Kind: inventory.VolumePVC, ClaimName: "data-db-0",
			Topology: inventory.ZoneTerms([]string{"zone-a"}), Driver: inventory.EBSCSIDriver}}
	}
	// Several small pods on the candidate, so none of them is folded away
	// for a reason other than the volume.
	in := func(opts ...func(*inventory.Pod)) Input {
		b := kNode("b", "p", x4, "zone-b", od, pod("web", "2"))
		b.Node.Annotations = map[string]string{apiv1.DoNotDisruptAnnotationKey: "true"} // room, not a candidate
		return Input{NodePools: []engine.NodePool{newPool("p", types)}, Now: t0, Nodes: []Node{
			kNode("a", "p", x4, "zone-a", od, pod("db-0", "500m", opts...), pod("side-1", "250m"), pod("side-2", "250m")), b,
		}}
	}
	zoneOf := map[string]string{"a": "zone-a", "b": "zone-b"}
	whereDB := func(d Decision) (string, bool) {
		for _, c := range d.Commands {
			for _, pl := range c.Placements {
				if pl.Pod.Name == "db-0" {
					return zoneOf[pl.Node], true
				}
			}
			if r := c.Replacement; r != nil {
				for _, p := range r.Pods {
					if p.Name == "db-0" {
						return r.Zone, true
					}
				}
			}
		}
		return "", false
	}
	free, err := Decide(in())
	if err != nil {
		t.Fatal(err)
	}
	if z, moved := whereDB(free); !moved || z != "zone-b" {
		t.Fatalf("without a volume db-0 moves to %q (moved %v): the test needs zone-b to be where it would go: %+v", z, moved, free.Commands)
	}
	pinned, err := Decide(in(withVolume))
	if err != nil {
		t.Fatal(err)
	}
	if z, moved := whereDB(pinned); moved && z != "zone-a" {
		t.Fatalf("db-0, whose volume is in zone-a, is moved to %s: %+v", z, pinned.Commands)
	}
	for _, c := range pinned.Commands {
		if r := c.Replacement; r != nil && r.Zone != "zone-a" {
			t.Errorf("replacement in %s for a node whose pod's volume is in zone-a", r.Zone)
		}
		if c.Replacement == nil {
			continue
		}
		for _, req := range c.Replacement.Requirements {
			if req.Key == catalog.LabelZone && (req.Operator != corev1.NodeSelectorOpIn || len(req.Values) != 1 || req.Values[0] != "zone-a") {
				t.Errorf("replacement zone requirement %v, want zone-a only", req)
			}
		}
	}
}
