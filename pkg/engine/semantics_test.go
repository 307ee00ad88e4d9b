package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestRequirementAlgebra(t *testing.T) {
	tests := []struct {
		op     corev1.NodeSelectorOperator
		values []string
		has    map[string]bool
		opName corev1.NodeSelectorOperator
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, map[string]bool{"a": true, "b": true, "c": false}, corev1.NodeSelectorOpIn},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, map[string]bool{"a": false, "b": true}, corev1.NodeSelectorOpNotIn},
		{corev1.NodeSelectorOpExists, nil, map[string]bool{"a": true, "": true}, corev1.NodeSelectorOpExists},
		{corev1.NodeSelectorOpDoesNotExist, nil, map[string]bool{"a": false}, corev1.NodeSelectorOpDoesNotExist},
		{corev1.NodeSelectorOpGt, []string{"4"}, map[string]bool{"4": false, "5": true, "x": false}, corev1.NodeSelectorOpNotIn},
		{corev1.NodeSelectorOpLt, []string{"4"}, map[string]bool{"3": true, "4": false}, corev1.NodeSelectorOpNotIn},
		{"Gte", []string{"4"}, map[string]bool{"3": false, "4": true, "5": true}, corev1.NodeSelectorOpNotIn},
		{"Lte", []string{"4"}, map[string]bool{"4": true, "5": false}, corev1.NodeSelectorOpNotIn},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			r, err := NewRequirement("k", tt.op, tt.values...)
			if err != nil {
				t.Fatal(err)
			}
			for v, want := range tt.has {
				if got := r.Has(v); got != want {
					t.Errorf("%s.Has(%q) = %v, want %v", r, v, got, want)
				}
			}
			if got := r.Operator(); got != tt.opName {
				t.Errorf("operator %s, want %s", got, tt.opName)
			}
		})
	}
	// Intersections.
	in := func(v ...string) Requirement { r, _ := NewRequirement("k", corev1.NodeSelectorOpIn, v...); return r }
	notIn := func(v ...string) Requirement { r, _ := NewRequirement("k", corev1.NodeSelectorOpNotIn, v...); return r }
	gt, _ := NewRequirement("k", corev1.NodeSelectorOpGt, "4")
	lt, _ := NewRequirement("k", corev1.NodeSelectorOpLt, "6")
	lt5, _ := NewRequirement("k", corev1.NodeSelectorOpLt, "5")
	for _, tt := range []struct {
		name string
		a, b Requirement
		want []string // allowed among the probe values 1..9, a, b, c
	}{
		{"In∩In", in("a", "b"), in("b", "c"), []string{"b"}},
		{"In∩NotIn", in("a", "b"), notIn("a"), []string{"b"}},
		{"NotIn∩NotIn", notIn("a"), notIn("b"), []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "c"}},
		{"Gt∩Lt", gt, lt, []string{"5"}},
		{"Gt∩Lt empty", gt, lt5, nil},
		{"In∩Gt", in("3", "7", "a"), gt, []string{"7"}},
	} {
		got := tt.a.Intersect(tt.b)
		var allowed []string
		for _, v := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c"} {
			if got.Has(v) {
				allowed = append(allowed, v)
			}
		}
		if fmt.Sprint(allowed) != fmt.Sprint(tt.want) {
			t.Errorf("%s: allows %v, want %v", tt.name, allowed, tt.want)
		}
	}
	if _, err := NewRequirement("k", corev1.NodeSelectorOpGt, "x"); err == nil {
		t.Error("Gt x: want an error for a non-integer")
	}
	if _, err := NewRequirement("k", "Near", "x"); err == nil {
		t.Error("unknown operator: want an error")
	}
}

// Helpers for readable scenarios.

func qty(s string) resource.Quantity { return resource.MustParse(s) }

func mkPod(name, cpu, mem string, mods ...func(*inventory.Pod)) inventory.Pod {
	p := inventory.Pod{Namespace: "default", Name: name, Labels: map[string]string{"app": strings.TrimRight(name, "0123456789-")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: qty(cpu), corev1.ResourceMemory: qty(mem)}}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func pods(n int, prefix, cpu, mem string, mods ...func(*inventory.Pod)) []inventory.Pod {
	var out []inventory.Pod
	for i := 0; i < n; i++ {
		out = append(out, mkPod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem, mods...))
	}
	return out
}

func withSelector(k, v string) func(*inventory.Pod) {
	return func(p *inventory.Pod) { p.NodeSelector = map[string]string{k: v} }
}

func withLabel(k, v string) func(*inventory.Pod) {
	return func(p *inventory.Pod) { p.Labels[k] = v }
}

func withToleration(key, value string, effect corev1.TaintEffect) func(*inventory.Pod) {
	return func(p *inventory.Pod) {
		p.Tolerations = append(p.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect})
	}
}

func withSpread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, f func(*corev1.TopologySpreadConstraint)) func(*inventory.Pod) {
	return func(p *inventory.Pod) {
		c := corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}
		if f != nil {
			f(&c)
		}
		p.TopologySpreadConstraints = append(p.TopologySpreadConstraints, c)
	}
}

func withPodAffinity(anti bool, key string, match map[string]string) func(*inventory.Pod) {
	return func(p *inventory.Pod) {
		term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match}}
		if p.Affinity == nil {
			p.Affinity = &corev1.Affinity{}
		}
		if anti {
			p.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		} else {
			p.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		}
	}
}

func withNodeAffinity(terms ...[]corev1.NodeSelectorRequirement) func(*inventory.Pod) {
	return func(p *inventory.Pod) {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
}

func withPreferredZone(zone string) func(*inventory.Pod) {
	return func(p *inventory.Pod) {
		p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: catalog.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, v ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: v}
}

func mkPool(name string, n int, mods ...func(*NodePool)) NodePool {
	p := NodePool{Name: name, InstanceTypes: fakeInstanceTypes(n)}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func taint(key, value string, effect corev1.TaintEffect) func(*NodePool) {
	return func(p *NodePool) {
		p.Spec.Template.Spec.Taints = append(p.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func zones(z ...string) func(*NodePool) {
	return func(p *NodePool) {
		p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
			apiv1.NodeSelectorRequirementWithMinValues{Key: catalog.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: z})
	}
}

// zonesOf maps pod name → zone of its claim or existing node.
func zonesOf(in Input, res Result) map[string]string {
	out := map[string]string{}
	for _, nc := range res.NodeClaims {
		for _, p := range nc.Pods {
			out[p.Name] = nc.Zone
		}
	}
	for _, pl := range res.Placements {
		for _, en := range in.ExistingNodes {
			if en.Node.Name == pl.Node {
				out[pl.Pod.Name] = en.Node.Labels[catalog.LabelZone]
			}
		}
	}
	return out
}

func perZone(in Input, res Result) map[string]int {
	out := map[string]int{}
	for _, z := range zonesOf(in, res) {
		out[z]++
	}
	return out
}

func nodeOf(res Result) map[string]string {
	out := map[string]string{}
	for _, nc := range res.NodeClaims {
		for _, p := range nc.Pods {
			out[p.Name] = nc.Name
		}
	}
	for _, pl := range res.Placements {
		out[pl.Pod.Name] = pl.Node
	}
	return out
}

func reasons(res Result) string {
	var parts []string
	for _, u := range res.Unschedulable {
		parts = append(parts, u.String())
	}
	return strings.Join(parts, "\n")
}

func existing(name, zone, cpu string) ExistingNode {
	return ExistingNode{Node: inventory.Node{Name: name, Labels: map[string]string{catalog.LabelZone: zone, catalog.LabelArch: "amd64"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: qty(cpu), corev1.ResourceMemory: qty("32Gi"), corev1.ResourcePods: qty("110")}}}
}

// TestSemantics: one scenario per scheduling rule, each asserting the
// behaviour the rule implies (and, for every result, the independent
// checker finds nothing wrong).
func TestSemantics(t *testing.T) {
	z1, z2, z3 := "test-zone-1", "test-zone-2", "test-zone-3"
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	tests := []struct {
		name  string
		in    Input
		check func(t *testing.T, in Input, res Result)
	}{
		{"nodeSelector pins the zone",
			Input{Pods: pods(3, "a", "1", "1Gi", withSelector(catalog.LabelZone, z2)), NodePools: []NodePool{mkPool("p", 10)}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); got[z2] != 3 {
					t.Errorf("per zone %v, want all 3 in %s", got, z2)
				}
			}},
		{"required node affinity: OR of terms, the first impossible",
			Input{Pods: pods(2, "a", "1", "1Gi", withNodeAffinity(
				[]corev1.NodeSelectorRequirement{expr(catalog.LabelInstanceType, corev1.NodeSelectorOpIn, "nope")},
				[]corev1.NodeSelectorRequirement{expr(catalog.LabelZone, corev1.NodeSelectorOpNotIn, z1, z2)})), NodePools: []NodePool{mkPool("p", 10)}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); got[z3] != 2 {
					t.Errorf("per zone %v, want both in %s (second term)", got, z3)
				}
			}},
		{"required node affinity Gt on a numeric label",
			Input{Pods: pods(1, "a", "500m", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{expr("cpus", corev1.NodeSelectorOpGt, "3")})),
				NodePools: []NodePool{mkPool("p", 10, func(p *NodePool) {
					for i := range p.InstanceTypes {
						p.InstanceTypes[i].Labels["cpus"] = fmt.Sprint(i + 1)
					}
				})}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 || res.NodeClaims[0].InstanceType != "fake-it-3" {
					t.Errorf("claims %+v, want one fake-it-3 (the cheapest with cpus > 3)", res.NodeClaims)
				}
			}},
		{"preferred node affinity is honoured when satisfiable",
			Input{Pods: pods(2, "a", "1", "1Gi", withPreferredZone(z3)), NodePools: []NodePool{mkPool("p", 10)}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); got[z3] != 2 {
					t.Errorf("per zone %v, want both in preferred %s", got, z3)
				}
			}},
		{"preferred node affinity is relaxed when unsatisfiable",
			Input{Pods: pods(2, "a", "1", "1Gi", withPreferredZone("test-zone-9")), NodePools: []NodePool{mkPool("p", 10)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 0 || len(res.NodeClaims) == 0 {
					t.Errorf("want the preference relaxed and the pods placed: %s", reasons(res))
				}
			}},
		{"NoSchedule taint not tolerated: reason names it",
			Input{Pods: pods(1, "a", "1", "1Gi"), NodePools: []NodePool{mkPool("gpu", 10, taint("dedicated", "gpu", corev1.TaintEffectNoSchedule))}},
			func(t *testing.T, in Input, res Result) {
				if !strings.Contains(reasons(res), "does not tolerate taint dedicated=gpu:NoSchedule") {
					t.Errorf("reasons %q, want the taint named", reasons(res))
				}
			}},
		{"NoExecute taint tolerated: scheduled on the tainted pool",
			Input{Pods: pods(1, "a", "1", "1Gi", withToleration("dedicated", "gpu", corev1.TaintEffectNoExecute)),
				NodePools: []NodePool{mkPool("gpu", 10, taint("dedicated", "gpu", corev1.TaintEffectNoExecute))}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 || res.NodeClaims[0].NodePool != "gpu" {
					t.Errorf("claims %+v, want one on gpu", res.NodeClaims)
				}
			}},
		{"NoExecute taint not tolerated",
			Input{Pods: pods(1, "a", "1", "1Gi"), NodePools: []NodePool{mkPool("gpu", 10, taint("dedicated", "gpu", corev1.TaintEffectNoExecute))}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 1 {
					t.Errorf("want the pod unschedulable, got %+v", res.NodeClaims)
				}
			}},
		{"PreferNoSchedule: an untainted pool wins, the tainted one is the fallback",
			Input{Pods: pods(1, "a", "1", "1Gi"), NodePools: []NodePool{
				mkPool("soft", 10, taint("spot", "", corev1.TaintEffectPreferNoSchedule), func(p *NodePool) { p.Spec.Weight = ptr[int32](50) }),
				mkPool("plain", 10)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 || res.NodeClaims[0].NodePool != "plain" {
					t.Errorf("claims %+v, want plain (PreferNoSchedule avoided first)", res.NodeClaims)
				}
			}},
		{"PreferNoSchedule only: relaxed and scheduled",
			Input{Pods: pods(1, "a", "1", "1Gi"), NodePools: []NodePool{mkPool("soft", 10, taint("spot", "", corev1.TaintEffectPreferNoSchedule))}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 {
					t.Errorf("want one claim on the PreferNoSchedule pool: %s", reasons(res))
				}
			}},
		{"zone spread maxSkew 1 over three zones",
			Input{Pods: pods(6, "web", "1", "1Gi", withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, nil)), NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); got[z1] != 2 || got[z2] != 2 || got[z3] != 2 {
					t.Errorf("per zone %v, want 2/2/2", got)
				}
			}},
		{"hostname spread maxSkew 1: one pod per node",
			Input{Pods: pods(3, "web", "100m", "128Mi", withSpread(catalog.LabelHostname, 1, corev1.DoNotSchedule, nil)), NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 3 {
					t.Errorf("%d claims, want 3", len(res.NodeClaims))
				}
			}},
		{"minDomains above the zone count keeps the minimum at 0",
			Input{Pods: pods(4, "web", "1", "1Gi", withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr[int32](5) })),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 1 {
					t.Errorf("%d unschedulable, want 1 (one pod per zone, a fourth exceeds the skew)", len(res.Unschedulable))
				}
			}},
		{"whenUnsatisfiable ScheduleAnyway is relaxed",
			Input{Pods: pods(4, "web", "1", "1Gi", withSpread(catalog.LabelZone, 1, corev1.ScheduleAnyway, func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr[int32](5) })),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 0 {
					t.Errorf("want all scheduled: %s", reasons(res))
				}
			}},
		{"nodeAffinityPolicy Honor: only the pod's own zones count",
			Input{Pods: pods(4, "web", "1", "1Gi", withSelector(catalog.LabelZone, z1), withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, func(c *corev1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &honor })),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 0 {
					t.Errorf("want all 4 in %s: %s", z1, reasons(res))
				}
			}},
		{"nodeAffinityPolicy Ignore: empty zones elsewhere cap the skew",
			Input{Pods: pods(4, "web", "1", "1Gi", withSelector(catalog.LabelZone, z1), withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, func(c *corev1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &ignore })),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 3 {
					t.Errorf("%d unschedulable, want 3 (only one pod fits in %s while other zones stay empty)", len(res.Unschedulable), z1)
				}
			}},
		{"nodeTaintsPolicy Ignore: a tainted zone counts as an empty domain",
			Input{Pods: pods(4, "web", "1", "1Gi", withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, nil)),
				NodePools: []NodePool{mkPool("a", 20, zones(z1, z2)), mkPool("b", 20, zones(z3), taint("dedicated", "x", corev1.TaintEffectNoSchedule))}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 2 {
					t.Errorf("%d unschedulable, want 2", len(res.Unschedulable))
				}
			}},
		{"nodeTaintsPolicy Honor: the tainted zone is not a domain",
			Input{Pods: pods(4, "web", "1", "1Gi", withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor })),
				NodePools: []NodePool{mkPool("a", 20, zones(z1, z2)), mkPool("b", 20, zones(z3), taint("dedicated", "x", corev1.TaintEffectNoSchedule))}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); len(res.Unschedulable) != 0 || got[z1] != 2 || got[z2] != 2 {
					t.Errorf("per zone %v, unschedulable %d; want 2/2 in the untainted zones", got, len(res.Unschedulable))
				}
			}},
		{"matchLabelKeys: each version spreads on its own",
			Input{Pods: append(pods(2, "web-v1", "100m", "128Mi", withLabel("app", "web"), withLabel("version", "1"), withSpread(catalog.LabelHostname, 1, corev1.DoNotSchedule, func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"version"} })),
				pods(2, "web-v2", "100m", "128Mi", withLabel("app", "web"), withLabel("version", "2"), withSpread(catalog.LabelHostname, 1, corev1.DoNotSchedule, func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"version"} }))...),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 2 {
					t.Errorf("%d claims, want 2 (a v1 and a v2 pod per node)", len(res.NodeClaims))
				}
			}},
		{"pod affinity on hostname: followers join the leader's node",
			Input{Pods: append(pods(1, "db", "1", "1Gi"), pods(3, "cache", "500m", "512Mi", withPodAffinity(false, catalog.LabelHostname, map[string]string{"app": "db"}))...),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				n := nodeOf(res)
				for i := 0; i < 3; i++ {
					if c := n[fmt.Sprintf("cache-%d", i)]; c != n["db-0"] {
						t.Errorf("cache-%d on %q, db-0 on %q", i, c, n["db-0"])
					}
				}
			}},
		{"pod affinity on zone: followers join the leader's zone",
			Input{Pods: append(pods(1, "db", "1", "1Gi", withSelector(catalog.LabelZone, z3)), pods(4, "api", "2", "1Gi", withPodAffinity(false, catalog.LabelZone, map[string]string{"app": "db"}))...),
				NodePools: []NodePool{mkPool("p", 4)}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); got[z3] != 5 {
					t.Errorf("per zone %v, want all 5 in %s", got, z3)
				}
			}},
		{"pod anti-affinity on zone: one per zone, the fourth cannot be placed",
			Input{Pods: pods(4, "solo", "1", "1Gi", withPodAffinity(true, catalog.LabelZone, map[string]string{"app": "solo"})), NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if got := perZone(in, res); len(res.Unschedulable) != 1 || got[z1] != 1 || got[z2] != 1 || got[z3] != 1 {
					t.Errorf("per zone %v, unschedulable %d; want 1/1/1 and 1", got, len(res.Unschedulable))
				}
			}},
		{"pod anti-affinity on hostname: one per node",
			Input{Pods: pods(3, "solo", "100m", "128Mi", withPodAffinity(true, catalog.LabelHostname, map[string]string{"app": "solo"})), NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 3 {
					t.Errorf("%d claims, want 3", len(res.NodeClaims))
				}
			}},
		{"DaemonSet overhead is reserved on new nodes",
			Input{Pods: pods(1, "a", "1", "256Mi"), NodePools: []NodePool{mkPool("p", 20)},
				DaemonSets: []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: corev1.ResourceList{corev1.ResourceCPU: qty("1")}}}},
			func(t *testing.T, in Input, res Result) {
				// fake-it-1 (2 CPU, 1.9 allocatable) would hold the pod alone; with 1 CPU of DaemonSet it needs fake-it-2.
				if len(res.NodeClaims) != 1 || res.NodeClaims[0].InstanceType != "fake-it-2" {
					t.Errorf("claims %+v, want one fake-it-2", res.NodeClaims)
				}
			}},
		{"DaemonSet that does not tolerate the pool's taint adds nothing",
			Input{Pods: pods(1, "a", "1", "256Mi", withToleration("dedicated", "x", corev1.TaintEffectNoSchedule)),
				NodePools:  []NodePool{mkPool("p", 20, taint("dedicated", "x", corev1.TaintEffectNoSchedule))},
				DaemonSets: []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: corev1.ResourceList{corev1.ResourceCPU: qty("1")}}}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 || res.NodeClaims[0].InstanceType != "fake-it-1" {
					t.Errorf("claims %+v, want one fake-it-1", res.NodeClaims)
				}
			}},
		{"host ports cannot be shared",
			Input{Pods: pods(2, "ingress", "100m", "128Mi", func(p *inventory.Pod) { p.HostPorts = []inventory.HostPort{{Port: 443, Protocol: corev1.ProtocolTCP}} }),
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if n := nodeOf(res); n["ingress-0"] == n["ingress-1"] {
					t.Errorf("both on %s", n["ingress-0"])
				}
			}},
		{"NodePool CPU limit: no new node beyond it",
			Input{Pods: pods(3, "a", "1500m", "1Gi"), NodePools: []NodePool{mkPool("p", 20, func(p *NodePool) { p.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: qty("4")} })}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Unschedulable) != 1 || !strings.Contains(reasons(res), "limit") {
					t.Errorf("unschedulable %q, want one pod stopped by the limit", reasons(res))
				}
			}},
		{"NodePool nodes limit",
			Input{Pods: pods(2, "solo", "100m", "128Mi", withPodAffinity(true, catalog.LabelHostname, map[string]string{"app": "solo"})),
				NodePools: []NodePool{mkPool("p", 20, func(p *NodePool) { p.Spec.Limits = corev1.ResourceList{"nodes": qty("1")} })}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 || !strings.Contains(reasons(res), "node limit") {
					t.Errorf("%d claims, reasons %q; want 1 and a node-limit reason", len(res.NodeClaims), reasons(res))
				}
			}},
		{"weights: the heavier pool is used first",
			Input{Pods: pods(1, "a", "1", "1Gi"), NodePools: []NodePool{mkPool("light", 20), mkPool("heavy", 20, func(p *NodePool) { p.Spec.Weight = ptr[int32](90) })}},
			func(t *testing.T, in Input, res Result) {
				if len(res.NodeClaims) != 1 || res.NodeClaims[0].NodePool != "heavy" {
					t.Errorf("claims %+v, want heavy", res.NodeClaims)
				}
			}},
		{"existing capacity is used before new nodes",
			Input{Pods: pods(3, "a", "1", "1Gi"), ExistingNodes: []ExistingNode{existing("old-1", z1, "4")}, NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Placements) != 3 || len(res.NodeClaims) != 0 {
					t.Errorf("%d placements, %d claims; want 3 and 0", len(res.Placements), len(res.NodeClaims))
				}
			}},
		{"in-flight capacity is used before new nodes",
			Input{Pods: pods(2, "a", "1", "1Gi"), ExistingNodes: []ExistingNode{func() ExistingNode { e := existing("claim-1", z2, "4"); e.InFlight = true; return e }()},
				NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if len(res.Placements) != 2 || len(res.NodeClaims) != 0 {
					t.Errorf("%d placements, %d claims; want 2 and 0", len(res.Placements), len(res.NodeClaims))
				}
			}},
		{"reason: larger than every allowed type",
			Input{Pods: pods(1, "big", "96", "1Gi"), NodePools: []NodePool{mkPool("p", 20)}},
			func(t *testing.T, in Input, res Result) {
				if !strings.Contains(reasons(res), "needs cpu 96 (largest allowed type has 19900m)") {
					t.Errorf("reasons %q", reasons(res))
				}
			}},
		{"reason: zone not in the NodePool",
			Input{Pods: pods(1, "a", "1", "1Gi", withSelector(catalog.LabelZone, "us-east-1d")), NodePools: []NodePool{mkPool("p", 20, zones(z1, z2))}},
			func(t *testing.T, in Input, res Result) {
				if !strings.Contains(reasons(res), "us-east-1d") || !strings.Contains(reasons(res), catalog.LabelZone) {
					t.Errorf("reasons %q, want the zone named", reasons(res))
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, only := range []bool{true, false} {
				in := tt.in
				in.Options.KarpenterOnly = only
				res, err := Solve(in)
				if err != nil {
					t.Fatal(err)
				}
				if errs := Check(in, res); len(errs) > 0 {
					t.Fatalf("KarpenterOnly=%v: checker: %v", only, errs)
				}
				tt.check(t, in, res)
			}
		})
	}
}

// TestGoldenPlans renders readable scenarios; run with -update to rewrite
// testdata/*.golden after a deliberate change.
func TestGoldenPlans(t *testing.T) {
	gpu := mkPool("gpu", 40, taint("dedicated", "gpu", corev1.TaintEffectNoSchedule), func(p *NodePool) {
		p.InstanceTypes = p.InstanceTypes[16:]
		p.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "ml"}
	})
	scenarios := map[string]Input{
		"web-spread": {Pods: append(pods(9, "web", "500m", "1Gi", withSpread(catalog.LabelZone, 1, corev1.DoNotSchedule, nil)), pods(6, "worker", "2", "4Gi")...),
			NodePools: []NodePool{mkPool("general", 16)}},
		"gpu-taint": {Pods: append(pods(4, "train", "8", "16Gi", withToleration("dedicated", "gpu", corev1.TaintEffectNoSchedule), withSelector("team", "ml")), pods(3, "api", "1", "2Gi")...),
			NodePools: []NodePool{mkPool("general", 16), gpu}},
		"limits-and-reasons": {Pods: append(pods(4, "batch", "3", "4Gi"), mkPod("huge", "64", "8Gi"), mkPod("lost", "1", "1Gi", withSelector(catalog.LabelZone, "us-east-1d"))),
			NodePools: []NodePool{mkPool("general", 16, func(p *NodePool) { p.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: qty("12")} })}},
		"existing-first": {Pods: pods(5, "api", "1", "2Gi"), ExistingNodes: []ExistingNode{existing("legacy-1", "test-zone-1", "3")},
			NodePools: []NodePool{mkPool("general", 16)}},
	}
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			in := scenarios[name]
			res, err := Solve(in)
			if err != nil {
				t.Fatal(err)
			}
			if errs := Check(in, res); len(errs) > 0 {
				t.Fatalf("checker: %v", errs)
			}
			got := renderPlan(res)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenPlans -update)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s (rerun with -update if intended):\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

func renderPlan(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cost $%.3f/h  greedy $%.3f/h  lower bound $%.3f/h\n", res.Cost, res.KarpenterCost, res.LowerBound)
	for _, nc := range res.NodeClaims {
		opts := nc.InstanceTypes
		if len(opts) > 3 {
			opts = append(opts[:3:3], fmt.Sprintf("…%d more", len(nc.InstanceTypes)-3))
		}
		names := make([]string, len(nc.Pods))
		for i, p := range nc.Pods {
			names[i] = p.Name
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "claim %s pool=%s type=%s zone=%s %s $%.3f options=[%s]\n  requests cpu=%s memory=%s of cpu=%s memory=%s\n  pods %s\n",
			nc.Name, nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, nc.Price, strings.Join(opts, " "),
			nc.Requests.Cpu(), nc.Requests.Memory(), nc.Allocatable.Cpu(), nc.Allocatable.Memory(), strings.Join(names, " "))
	}
	for _, p := range res.Placements {
		fmt.Fprintf(&b, "existing %s <- %s\n", p.Node, p.Pod.Name)
	}
	for _, u := range res.Unschedulable {
		fmt.Fprintf(&b, "unschedulable %s\n", u)
	}
	return b.String()
}
