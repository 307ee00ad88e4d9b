package disruption

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
)

// withMinValues adds a requirement on key with minValues to the pool.
func withMinValues(key string, op corev1.NodeSelectorOperator, minValues int, values ...string) poolOpt {
	return func(np *engine.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			apiv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values, MinValues: &minValues})
	}
}

// spotTypes are n interchangeable 4-CPU types s-00…, each a little dearer
// than the last, spot and on-demand in both zones.
func spotTypes(n int) []engine.InstanceType {
	base := testTypes(3)[2] // t-4x
	var out []engine.InstanceType
	for i := range n {
		t := base
		t.Name = fmt.Sprintf("s-%02d", i)
		t.Labels = map[string]string{catalog.LabelInstanceType: t.Name, catalog.LabelArch: "amd64", catalog.LabelOS: "linux"}
		t.Offerings = nil
		for _, z := range zones {
			t.Offerings = append(t.Offerings, catalog.Offering{Zone: z, CapacityType: spot, Price: 0.1 + 0.001*float64(i)},
				catalog.Offering{Zone: z, CapacityType: od, Price: 0.2 + 0.001*float64(i)})
		}
		out = append(out, t)
	}
	return out
}

// TestConsolidationRespectsMinValues follows Karpenter's consolidation
// tests on minValues (pkg/controllers/disruption/consolidation_test.go):
// the replacement's instance types, once filtered by price, must still
// span the NodePool's minValues, or there is no command; spot-to-spot
// keeps max(15, the types minValues needs). Validate checks every command
// against the same rule on its own.
func TestConsolidationRespectsMinValues(t *testing.T) {
	types := testTypes(5)
	x4, x8, x16 := typeByName(types, "t-4x"), typeByName(types, "t-8x"), typeByName(types, "t-16x")

	t.Run("no replacement when filtering by price breaks minValues", func(t *testing.T) {
		// Both t-4x and t-8x hold the pod, so the simulation meets
		// minValues 2; only t-4x is cheaper than the node.
		pool := newPool("p", types, onDemandOnly, withMinValues(catalog.LabelInstanceType, corev1.NodeSelectorOpIn, 2, "t-4x", "t-8x"))
		in := Input{Now: t0, NodePools: []engine.NodePool{pool}, Nodes: []Node{kNode("n1", "p", x8, "zone-a", od, pod("a", "3"))}, Options: Options{ExplainAll: true}}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Commands) != 0 {
			t.Fatalf("commands %+v; Karpenter would refuse a replacement with one instance type under minValues 2", d.Commands)
		}
		want := "filtering the replacement's instance types by price: its 1 options span 1 distinct values of node.kubernetes.io/instance-type, below the NodePool's minValues 2"
		if got := strings.Join(d.Nodes[0].Reasons, "; "); !strings.Contains(got, want) {
			t.Errorf("reasons %q, want %q", got, want)
		}
	})

	t.Run("replacement keeps minValues after filtering", func(t *testing.T) {
		pool := newPool("p", types, onDemandOnly, withMinValues(catalog.LabelInstanceType, corev1.NodeSelectorOpExists, 2))
		in := Input{Now: t0, NodePools: []engine.NodePool{pool}, Nodes: []Node{kNode("n1", "p", x16, "zone-a", od, pod("a", "1500m"))}}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Commands) != 1 || d.Commands[0].Replacement == nil {
			t.Fatalf("want one Replace, got %+v", d.Commands)
		}
		r := d.Commands[0].Replacement
		if r.InstanceType != "t-2x" || len(r.InstanceTypes) != 3 {
			t.Errorf("replacement %s with options %v, want t-2x with the three types cheaper than t-16x", r.InstanceType, r.InstanceTypes)
		}
		if errs := Validate(in, d.Commands); len(errs) > 0 {
			t.Fatalf("Validate: %v", errs)
		}

		// Validate finds the rule broken without Decide's help.
		bad := d.Commands[0]
		narrowed := *bad.Replacement
		narrowed.InstanceTypes = narrowed.InstanceTypes[:1]
		bad.Replacement = &narrowed
		errs := Validate(in, []Command{bad})
		want := "replacement's 1 instance-type options span 1 distinct values of node.kubernetes.io/instance-type, but NodePool p requirements[1] asks minValues 2"
		if !strings.Contains(fmt.Sprint(errs), want) {
			t.Errorf("Validate of a narrowed replacement: %v\nwant %q", errs, want)
		}
	})

	t.Run("spot-to-spot keeps the types minValues needs beyond 15", func(t *testing.T) {
		st := append(spotTypes(30), x16)
		for _, mv := range []struct{ minValues, want int }{{16, 16}, {10, MinInstanceTypesForSpotToSpot}} {
			pool := newPool("p", st, withMinValues(catalog.LabelInstanceType, corev1.NodeSelectorOpExists, mv.minValues))
			in := Input{Now: t0, NodePools: []engine.NodePool{pool}, Nodes: []Node{kNode("n1", "p", x16, "zone-a", spot, pod("a", "1"))},
				Options: Options{SpotToSpot: true}}
			d, err := Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Commands) != 1 || d.Commands[0].Replacement == nil {
				t.Fatalf("minValues %d: want one spot-to-spot Replace, got %+v", mv.minValues, d.Commands)
			}
			if got := len(d.Commands[0].Replacement.InstanceTypes); got != mv.want {
				t.Errorf("minValues %d: %d launch options, want max(15, %d) = %d", mv.minValues, got, mv.minValues, mv.want)
			}
			if errs := Validate(in, d.Commands); len(errs) > 0 {
				t.Fatalf("minValues %d: Validate: %v", mv.minValues, errs)
			}
		}
	})

	t.Run("truncating to the launch's 60 types re-checks minValues", func(t *testing.T) {
		// The 60 cheapest types are one family, the rest another.
		st := spotTypes(70)
		for i := range st {
			st[i].Labels[catalog.LabelInstanceFamily] = map[bool]string{true: "a", false: "b"}[i < launchMaxInstanceTypes]
		}
		pool := newPool("p", st, withMinValues(catalog.LabelInstanceFamily, corev1.NodeSelectorOpExists, 2))
		n := kNode("n1", "p", x16, "zone-a", od, pod("a", "1"))
		n.Price = 0.8
		in := Input{Now: t0, NodePools: []engine.NodePool{pool}, Nodes: []Node{n}, Options: Options{ExplainAll: true}}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Commands) != 0 {
			t.Fatalf("commands %+v, want none", d.Commands)
		}
		want := "truncating the replacement to its 60 cheapest instance types, as the launch does: its 60 options span 1 distinct values of karpenter.k8s.aws/instance-family"
		if got := strings.Join(d.Nodes[0].Reasons, "; "); !strings.Contains(got, want) {
			t.Errorf("reasons %q, want %q", got, want)
		}
	})

	t.Run("pinning to spot re-checks minValues", func(t *testing.T) {
		// t-4x has no spot offering: pinned to spot, only t-2x is left.
		noSpot := x4
		noSpot.Offerings = nil
		for _, o := range x4.Offerings {
			if o.CapacityType == od {
				noSpot.Offerings = append(noSpot.Offerings, o)
			}
		}
		pool := newPool("p", []engine.InstanceType{typeByName(types, "t-2x"), noSpot}, withMinValues(catalog.LabelInstanceType, corev1.NodeSelectorOpExists, 2))
		n := kNode("n1", "p", x16, "zone-a", od, pod("a", "1500m"))
		n.Price = 0.8 // the pool no longer offers its type
		in := Input{Now: t0, NodePools: []engine.NodePool{pool}, Nodes: []Node{n}, Options: Options{ExplainAll: true}}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Commands) != 0 {
			t.Fatalf("commands %+v, want none", d.Commands)
		}
		if got := strings.Join(d.Nodes[0].Reasons, "; "); !strings.Contains(got, "pinning the replacement to spot: its 1 options span 1 distinct values") {
			t.Errorf("reasons %q", got)
		}
	})
}
