package engine

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// familyTypes builds types <family>.<cpu> with 2 GiB per CPU, priced
// 0.1 $/h per CPU times the family's factor (so families sort by price).
func familyTypes(sizes map[string][]int, factor map[string]float64) []InstanceType {
	var out []InstanceType
	for _, fam := range []string{"a", "b", "c", "d"} {
		for _, cpu := range sizes[fam] {
			name := fmt.Sprintf("%s.%d", fam, cpu)
			price := 0.1 * float64(cpu) * factor[fam]
			out = append(out, InstanceType{
				Name:   name,
				Labels: map[string]string{catalog.LabelInstanceType: name, catalog.LabelInstanceFamily: fam, catalog.LabelArch: "amd64"},
				Capacity: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewQuantity(int64(cpu), resource.DecimalSI),
					corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 2*cpu)),
					corev1.ResourcePods:   resource.MustParse("110"),
				},
				Overhead:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
				Offerings: []catalog.Offering{{Zone: "test-zone-1", CapacityType: catalog.CapacityTypeOnDemand, Price: price}},
			})
		}
	}
	return out
}

// familyPool is a pool over the types whose instance-family requirement
// asks minValues (0: no minValues).
func familyPool(types []InstanceType, minValues int) NodePool {
	r := apiv1.NodeSelectorRequirementWithMinValues{Key: catalog.LabelInstanceFamily, Operator: corev1.NodeSelectorOpExists}
	if minValues > 0 {
		r.MinValues = &minValues
	}
	return NodePool{Name: "p", InstanceTypes: types, Spec: apiv1.NodePoolSpec{Template: apiv1.NodeClaimTemplate{Spec: apiv1.NodeClaimTemplateSpec{
		Requirements: []apiv1.NodeSelectorRequirementWithMinValues{r}}}}}
}

// familiesOf counts the distinct families among a claim's options.
func familiesOf(nc NodeClaim) int {
	fams := map[string]bool{}
	for _, t := range nc.InstanceTypes {
		fams[strings.SplitN(t, ".", 2)[0]] = true
	}
	return len(fams)
}

func TestMinValues(t *testing.T) {
	even := map[string]float64{"a": 1, "b": 1.1, "c": 1.2, "d": 1.3}
	allSizes := map[string][]int{"a": {2, 4, 8, 16}, "b": {2, 4, 8, 16}, "c": {2, 4, 8, 16}, "d": {2, 4, 8, 16}}
	all := familyTypes(allSizes, even)
	// Only a and b hold 16 CPU; c holds up to 4.
	twoBig := familyTypes(map[string][]int{"a": {2, 4, 8, 16}, "b": {2, 4, 8, 16}, "c": {2, 4}}, even)
	tests := []struct {
		name      string
		in        Input
		minValues int // the pool's instance-family minValues
		check     func(t *testing.T, res Result)
	}{
		{"a pod pinning one family is unschedulable, naming minValues",
			Input{Pods: pods(1, "pin", "1", "1Gi", withSelector(catalog.LabelInstanceFamily, "a"))}, 3,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 0 || len(res.Unschedulable) != 1 {
					t.Fatalf("%d claims, %d unschedulable; want 0 and 1", len(res.NodeClaims), len(res.Unschedulable))
				}
				if r := reasons(res); !strings.Contains(r, "minValues") || !strings.Contains(r, catalog.LabelInstanceFamily) || !strings.Contains(r, "span 1") {
					t.Errorf("reason %q, want minValues on %s with 1 family", r, catalog.LabelInstanceFamily)
				}
			}},
		{"without minValues the same pod gets a claim",
			Input{Pods: pods(1, "pin", "1", "1Gi", withSelector(catalog.LabelInstanceFamily, "a"))}, 0,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 1 || len(res.Unschedulable) != 0 {
					t.Fatalf("%d claims, %d unschedulable; want 1 and 0: %s", len(res.NodeClaims), len(res.Unschedulable), reasons(res))
				}
			}},
		{"a pod that leaves three families joins the claim",
			Input{Pods: append(pods(1, "any", "1", "1Gi"),
				mkPod("three", "1", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{expr(catalog.LabelInstanceFamily, corev1.NodeSelectorOpIn, "a", "b", "c")})))}, 3,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 1 || len(res.NodeClaims[0].Pods) != 2 {
					t.Fatalf("claims %+v, want both pods on one claim: %s", res.NodeClaims, reasons(res))
				}
				if got := familiesOf(res.NodeClaims[0]); got != 3 {
					t.Errorf("options %v span %d families, want 3", res.NodeClaims[0].InstanceTypes, got)
				}
			}},
		{"a big pod only two families hold opens no claim",
			Input{Pods: pods(1, "big", "10", "1Gi"), NodePools: []NodePool{familyPool(twoBig, 3)}}, 3,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 0 {
					t.Fatalf("%d claims, want none", len(res.NodeClaims))
				}
				if r := reasons(res); !strings.Contains(r, "minValues") || !strings.Contains(r, "span 2") {
					t.Errorf("reason %q, want minValues with 2 families", r)
				}
			}},
		{"a pod that would narrow a claim below minValues opens another",
			// Together the two 3-CPU pods need 8 CPU, which only a and b hold.
			Input{Pods: pods(2, "mid", "3", "1Gi"), NodePools: []NodePool{familyPool(twoBig, 3)}}, 3,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 2 {
					t.Fatalf("%d claims, want 2 (one claim would span only a and b)", len(res.NodeClaims))
				}
				for _, nc := range res.NodeClaims {
					if got := familiesOf(nc); got < 3 {
						t.Errorf("%s options %v span %d families, want ≥3", nc.Name, nc.InstanceTypes, got)
					}
				}
			}},
		{"without minValues the two pods share a claim",
			Input{Pods: pods(2, "mid", "3", "1Gi"), NodePools: []NodePool{familyPool(twoBig, 0)}}, 0,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 1 {
					t.Fatalf("%d claims, want 1", len(res.NodeClaims))
				}
			}},
		{"truncation keeps minValues",
			// The 3 cheapest options are all family a.
			Input{Pods: pods(1, "small", "1", "1Gi"), Options: Options{MaxInstanceTypes: 3},
				NodePools: []NodePool{familyPool(familyTypes(allSizes, map[string]float64{"a": 1, "b": 3, "c": 5, "d": 7}), 3)}}, 3,
			func(t *testing.T, res Result) {
				if len(res.NodeClaims) != 1 {
					t.Fatalf("%d claims, want 1: %s", len(res.NodeClaims), reasons(res))
				}
				nc := res.NodeClaims[0]
				if len(nc.InstanceTypes) != 3 || familiesOf(nc) != 3 || nc.InstanceType != "a.2" {
					t.Errorf("options %v (launch %s), want 3 options over 3 families with a.2 cheapest", nc.InstanceTypes, nc.InstanceType)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, only := range []bool{true, false} {
				in := tt.in
				if in.NodePools == nil {
					in.NodePools = []NodePool{familyPool(all, tt.minValues)}
				}
				in.Options.KarpenterOnly = only
				res, err := Solve(in)
				if err != nil {
					t.Fatal(err)
				}
				if errs := Check(in, res); len(errs) > 0 {
					t.Fatalf("KarpenterOnly=%v: checker: %v", only, errs)
				}
				tt.check(t, res)
			}
		})
	}
}

// TestCheckMinValues: the checker rejects a claim whose options span fewer
// families than minValues.
func TestCheckMinValues(t *testing.T) {
	types := familyTypes(map[string][]int{"a": {2, 4}, "b": {2, 4}, "c": {2, 4}}, map[string]float64{"a": 1, "b": 1.1, "c": 1.2})
	in := Input{Pods: pods(1, "x", "1", "1Gi"), NodePools: []NodePool{familyPool(types, 3)}}
	res, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	if errs := Check(in, res); len(errs) > 0 {
		t.Fatalf("checker rejected the solver's result: %v", errs)
	}
	for _, tt := range []struct {
		name    string
		options []string
		want    string
	}{
		{"two families", []string{"a.2", "a.4", "b.2"}, "span 2 distinct values"},
		{"unknown option", []string{"a.2", "b.2", "c.2", "z.9"}, `option "z.9" is not available`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := res
			bad.NodeClaims = append([]NodeClaim(nil), res.NodeClaims...)
			bad.NodeClaims[0].InstanceTypes = tt.options
			errs := Check(in, bad)
			if !strings.Contains(fmt.Sprint(errs), tt.want) {
				t.Errorf("errors %v, want one containing %q", errs, tt.want)
			}
		})
	}
}
