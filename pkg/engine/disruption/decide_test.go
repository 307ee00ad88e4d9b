package disruption

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

const (
	od   = catalog.CapacityTypeOnDemand
	spot = catalog.CapacityTypeSpot
)

func ptr[T any](v T) *T { return &v }

// TestDecideRules: one case per disruption rule. want* fields left empty
// are not checked; reasons maps a node to a substring of its candidacy.
func TestDecideRules(t *testing.T) {
	types := testTypes(5)
	x1, x2, x4, x8 := typeByName(types, "t-1x"), typeByName(types, "t-2x"), typeByName(types, "t-4x"), typeByName(types, "t-8x")
	_ = x1
	cases := []struct {
		name        string
		in          func() Input
		wantMethod  Method
		wantAction  Action
		wantNodes   []string
		wantType    string // replacement instance type
		wantCT      string // replacement capacity type
		wantReasons map[string]string
		wantOutcome map[string]string
	}{
		{
			name: "empty node is deleted by emptiness",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{
					kNode("empty", "p", x4, "zone-a", od, pod("agent", "100m", ds)),
					kNode("busy", "p", x4, "zone-a", od, pod("web", "3")),
				}}
			},
			wantMethod: MethodEmptiness, wantAction: ActionDelete, wantNodes: []string{"empty"},
			wantOutcome: map[string]string{"empty": "deleted by Emptiness"},
		},
		{
			name: "consolidateAfter not reached",
			in: func() Input {
				n := kNode("empty", "p", x4, "zone-a", od)
				n.LastPodEventTime = t0.Add(-10 * time.Second)
				return Input{NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{n}}
			},
			wantReasons: map[string]string{"empty": "consolidateAfter 30s not reached"},
		},
		{
			name: "consolidateAfter Never",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, func(np *engine.NodePool) { np.Spec.Disruption.ConsolidateAfter = apiv1.NillableDuration{} })},
					Nodes: []Node{kNode("empty", "p", x4, "zone-a", od)}}
			},
			wantReasons: map[string]string{"empty": "consolidateAfter: Never"},
		},
		{
			name: "node do-not-disrupt, unmanaged and uninitialized nodes are not candidates",
			in: func() Input {
				a := kNode("annotated", "p", x4, "zone-a", od)
				a.Node.Annotations = map[string]string{apiv1.DoNotDisruptAnnotationKey: "true"}
				legacy := kNode("legacy", "", x4, "zone-a", od)
				delete(legacy.Node.Labels, catalog.LabelNodePool)
				u := kNode("booting", "p", x4, "zone-a", od)
				u.Node.Labels[apiv1.NodeInitializedLabelKey] = "false"
				return Input{NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{a, legacy, u}}
			},
			wantReasons: map[string]string{"annotated": "node is annotated karpenter.sh/do-not-disrupt=true", "legacy": "not managed by Karpenter", "booting": "not initialized"},
		},
		{
			name: "pod do-not-disrupt and PDB block a node",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types)},
					PDBs: []inventory.PDB{{Namespace: "default", Name: "db", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db-0"}}, MinAvailable: ptr(intstr.FromInt32(1))}},
					Nodes: []Node{
						kNode("n1", "p", x8, "zone-a", od, pod("db-0", "1")),
						kNode("n2", "p", x8, "zone-a", od, pod("batch", "1", func(p *inventory.Pod) {
							p.Annotations = map[string]string{apiv1.DoNotDisruptAnnotationKey: "true"}
						})),
						kNode("n3", "p", x8, "zone-a", od, pod("web", "6")),
					}}
			},
			// n1 and n2 cannot go, but they can take n3's pod.
			wantMethod: MethodSingleNode, wantAction: ActionDelete, wantNodes: []string{"n3"},
			wantReasons: map[string]string{"n1": "pod default/db-0 has PDB db allowing 0 disruptions", "n2": "pod default/batch is annotated karpenter.sh/do-not-disrupt=true"},
		},
		{
			name: "WhenEmpty does not consolidate underutilized nodes",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, policy(apiv1.ConsolidationPolicyWhenEmpty))}, Nodes: []Node{
					kNode("n1", "p", x8, "zone-a", od, pod("a", "1")),
					kNode("n2", "p", x8, "zone-a", od, pod("b", "1")),
				}}
			},
			wantReasons: map[string]string{"n1": "consolidationPolicy WhenEmpty"},
		},
		{
			name: "multi-node replaces three nodes with one cheaper node pinned to spot",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{
					kNode("n1", "p", x8, "zone-a", od, pod("a", "1")),
					kNode("n2", "p", x8, "zone-a", od, pod("b", "1")),
					kNode("n3", "p", x8, "zone-a", od, pod("c", "1")),
				}}
			},
			wantMethod: MethodMultiNode, wantAction: ActionReplace, wantNodes: []string{"n1", "n2", "n3"}, wantType: "t-4x", wantCT: spot,
		},
		{
			name: "single-node deletes a node whose pods fit elsewhere",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, onDemandOnly)}, Nodes: []Node{
					kNode("small", "p", x8, "zone-a", od, pod("a", "1")),
					kNode("big", "p", x8, "zone-a", od, pod("b", "6")),
				}}
			},
			// Equal savings ratios: name order tries "big" first, and its
			// pod fits in the room left on "small".
			wantMethod: MethodSingleNode, wantAction: ActionDelete, wantNodes: []string{"big"},
		},
		{
			name: "single on-demand node replaced by a cheaper one",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, onDemandOnly)}, Nodes: []Node{
					kNode("n1", "p", x8, "zone-a", od, pod("a", "1500m")),
				}}
			},
			wantMethod: MethodSingleNode, wantAction: ActionReplace, wantNodes: []string{"n1"}, wantType: "t-2x", wantCT: od,
		},
		{
			name: "spot node is not replaced while spot-to-spot is off",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{
					kNode("n1", "p", x8, "zone-a", spot, pod("a", "1500m")),
				}, Options: Options{ExplainAll: true}}
			},
			wantReasons: map[string]string{"n1": "spot-to-spot consolidation is off"},
		},
		{
			name: "spot-to-spot needs 15 cheaper types",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{
					kNode("n1", "p", x8, "zone-a", spot, pod("a", "1500m")),
				}, Options: Options{SpotToSpot: true, ExplainAll: true}}
			},
			wantReasons: map[string]string{"n1": "spot-to-spot needs at least 15 cheaper spot instance types, found 2"},
		},
		{
			name: "several new nodes are never a consolidation",
			in: func() Input {
				// The pool no longer offers the node's type; its price is given.
				n := kNode("n1", "p", typeByName(types, "t-16x"), "zone-a", od, pod("a", "5"), pod("b", "4"))
				n.Price = 0.8
				return Input{NodePools: []engine.NodePool{newPool("p", types[:4], onDemandOnly)}, Nodes: []Node{n}, Options: Options{ExplainAll: true}}
			},
			wantReasons: map[string]string{"n1": "would need 2 new nodes"},
		},
		{
			name: "budget of 0 nodes blocks emptiness",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, budgetsOf(apiv1.Budget{Nodes: "0", Reasons: []apiv1.DisruptionReason{apiv1.DisruptionReasonEmpty}}))},
					Nodes: []Node{kNode("empty", "p", x4, "zone-a", od)}}
			},
			wantReasons: map[string]string{"empty": "budget for Empty allows no more nodes"},
		},
		{
			name: "10% of three nodes rounds up to one",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, budgetsOf(apiv1.Budget{Nodes: "10%"}))},
					Nodes: []Node{kNode("e1", "p", x4, "zone-a", od), kNode("e2", "p", x4, "zone-a", od), kNode("e3", "p", x2, "zone-a", od)}}
			},
			wantMethod: MethodEmptiness, wantAction: ActionDelete, wantNodes: []string{"e1"},
			wantReasons: map[string]string{"e2": "budget for Empty allows no more nodes"},
		},
		{
			name: "a deleting node uses up the budget",
			in: func() Input {
				d := kNode("going", "p", x4, "zone-a", od)
				d.Node.Taints = []corev1.Taint{{Key: apiv1.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}}
				return Input{NodePools: []engine.NodePool{newPool("p", types, budgetsOf(apiv1.Budget{Nodes: "1"}))},
					Nodes: []Node{d, kNode("e1", "p", x4, "zone-a", od)}}
			},
			wantReasons: map[string]string{"going": "already being disrupted", "e1": "budget for Empty allows no more nodes"},
		},
		{
			name: "scheduled budget window blocks during business hours",
			in: func() Input {
				return Input{NodePools: []engine.NodePool{newPool("p", types, budgetsOf(
					apiv1.Budget{Nodes: "100%"},
					apiv1.Budget{Nodes: "0", Schedule: ptr("0 9 * * *"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}))},
					Nodes: []Node{kNode("empty", "p", x4, "zone-a", od)}}
			},
			wantReasons: map[string]string{"empty": "budget for Empty allows no more nodes"},
		},
		{
			name: "Balanced rejects a move that saves little for its disruption",
			in: func() Input {
				var nodes []Node
				// Ten busy nodes cost the pool a lot; the candidate saves little.
				for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
					nodes = append(nodes, kNode("big-"+n, "p", typeByName(types, "t-16x"), "zone-a", od, pod("w-"+n, "15")))
				}
				nodes = append(nodes, kNode("n1", "p", x4, "zone-a", od, pod("a1", "1100m"), pod("a2", "100m"), pod("a3", "100m"), pod("a4", "100m"), pod("a5", "100m")))
				return Input{NodePools: []engine.NodePool{newPool("p", types, onDemandOnly, policy(apiv1.ConsolidationPolicyBalanced))}, Nodes: nodes, Options: Options{ExplainAll: true}}
			},
			wantReasons: map[string]string{"n1": "Balanced policy"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			in.Now = t0
			d, err := Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Method != tc.wantMethod {
				t.Fatalf("method = %q, want %q (commands %+v)", d.Method, tc.wantMethod, d.Commands)
			}
			if errs := Validate(in, d.Commands); len(errs) > 0 {
				t.Fatalf("Validate: %v", errs)
			}
			if tc.wantMethod != "" {
				c := d.Commands[0]
				var got []string
				for _, n := range c.Nodes {
					got = append(got, n.Name)
				}
				slices.Sort(got)
				if c.Action != tc.wantAction || !slices.Equal(got, tc.wantNodes) {
					t.Fatalf("command %s %v, want %s %v", c.Action, got, tc.wantAction, tc.wantNodes)
				}
				if tc.wantType != "" && (c.Replacement == nil || c.Replacement.InstanceType != tc.wantType || c.Replacement.CapacityType != tc.wantCT) {
					t.Fatalf("replacement %+v, want %s %s", c.Replacement, tc.wantCT, tc.wantType)
				}
				if c.Savings <= 0 || d.Savings != c.Savings {
					t.Fatalf("savings %v / %v", c.Savings, d.Savings)
				}
			}
			byName := map[string]Candidacy{}
			for _, c := range d.Nodes {
				byName[c.Node.Name] = c
			}
			for n, want := range tc.wantReasons {
				if got := strings.Join(byName[n].Reasons, "; "); !strings.Contains(got, want) {
					t.Errorf("node %s reasons %q, want %q", n, got, want)
				}
			}
			for n, want := range tc.wantOutcome {
				if got := byName[n].Outcome; !strings.Contains(got, want) {
					t.Errorf("node %s outcome %q, want %q", n, got, want)
				}
			}
		})
	}
}

func TestReplacementPinnedToSpotHasSpotRequirement(t *testing.T) {
	types := testTypes(5)
	in := Input{Now: t0, NodePools: []engine.NodePool{newPool("p", types)}, Nodes: []Node{
		kNode("n1", "p", typeByName(types, "t-8x"), "zone-a", od, pod("a", "1500m")),
	}}
	d, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Commands) != 1 || d.Commands[0].Replacement == nil {
		t.Fatalf("want one replace, got %+v", d.Commands)
	}
	r := d.Commands[0].Replacement
	found := false
	for _, q := range r.Requirements {
		if q.Key == catalog.LabelCapacityType {
			found = true
			if !slices.Equal(q.Values, []string{spot}) || q.Operator != corev1.NodeSelectorOpIn {
				t.Fatalf("capacity-type requirement %+v, want In [spot]", q)
			}
		}
	}
	if !found || r.CapacityType != spot {
		t.Fatalf("replacement %+v is not pinned to spot", r)
	}
}

func TestDrift(t *testing.T) {
	types := testTypes(5)
	x4 := typeByName(types, "t-4x")
	hashed := kNode("old-hash", "p", x4, "zone-a", od, pod("a", "1"))
	hashed.Node.Annotations = map[string]string{apiv1.NodePoolHashAnnotationKey: "111"}
	fresh := kNode("new-hash", "p", x4, "zone-a", od, pod("b", "1"))
	fresh.Node.Annotations = map[string]string{apiv1.NodePoolHashAnnotationKey: "222"}
	arm := kNode("arm", "p", x4, "zone-a", od, pod("c", "1"))
	arm.Node.Labels[catalog.LabelArch] = "arm64"
	pool := newPool("p", types, func(np *engine.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			apiv1.NodeSelectorRequirementWithMinValues{Key: catalog.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
	})
	in := Input{Now: t0, NodePools: []engine.NodePool{pool}, Nodes: []Node{hashed, fresh, arm},
		Options: Options{NodePoolHashes: map[string]string{"p": "222"}, KarpenterOnly: true}}
	d, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, dn := range d.Drifted {
		got[dn.Node.Name] = dn.Reason
	}
	want := map[string]string{"old-hash": NodePoolDrifted, "arm": RequirementsDrifted}
	if len(got) != len(want) || got["old-hash"] != want["old-hash"] || got["arm"] != want["arm"] {
		t.Fatalf("drifted = %v, want %v", got, want)
	}
	// Settle's passes keep each node's verdict: the same report.
	cache := newNodeCache()
	for pass := range 2 {
		again, err := decide(in, cache)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again.Drifted, d.Drifted) {
			t.Fatalf("pass %d with Settle's cache: drifted %+v, want %+v", pass+1, again.Drifted, d.Drifted)
		}
	}

	// What-if: a new taint on the proposed pool rolls every node of it.
	proposed := pool
	proposed.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	in.Options = Options{Proposed: []engine.NodePool{proposed}}
	d, err = Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Drifted) != 3 || !strings.Contains(d.Drifted[0].Detail, "spec.template.spec.taints") {
		t.Fatalf("what-if drift = %+v", d.Drifted)
	}
	// Changing only behavioural fields rolls nothing.
	proposed = pool
	proposed.Spec.Weight = ptr(int32(50))
	proposed.Spec.Disruption.ConsolidateAfter = apiv1.NewNillableDuration(time.Hour)
	in.Nodes = []Node{fresh}
	in.Options = Options{Proposed: []engine.NodePool{proposed}}
	d, err = Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Drifted) != 0 {
		t.Fatalf("behavioural change drifted %+v", d.Drifted)
	}
}

func TestBudgetNodes(t *testing.T) {
	cases := []struct {
		nodes   string
		total   int
		want    int
		wantErr bool
	}{
		{"10%", 3, 1, false}, {"10%", 0, 0, false}, {"50%", 5, 3, false}, {"100%", 7, 7, false},
		{"0", 9, 0, false}, {"4", 2, 4, false}, {"-1", 2, 0, true}, {"ten", 2, 0, true}, {"101%", 2, 0, true}, {"x%", 2, 0, true},
	}
	for _, c := range cases {
		got, err := BudgetNodes(c.nodes, c.total)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("BudgetNodes(%q, %d) = %d, %v; want %d, err %v", c.nodes, c.total, got, err, c.want, c.wantErr)
		}
	}
}

func TestBudgetActive(t *testing.T) {
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	cases := []struct {
		name     string
		b        apiv1.Budget
		now      time.Time
		want     bool
		wantErr  string
		reason   apiv1.DisruptionReason
		allowed  int
		allowedN int
	}{
		{name: "no schedule is always active", b: apiv1.Budget{Nodes: "1"}, now: t0, want: true},
		{name: "inside the window", b: apiv1.Budget{Nodes: "0", Schedule: ptr("0 9 * * *"), Duration: dur(8 * time.Hour)}, now: t0, want: true},
		{name: "after the window", b: apiv1.Budget{Nodes: "0", Schedule: ptr("0 9 * * *"), Duration: dur(2 * time.Hour)}, now: t0, want: false},
		{name: "before the window", b: apiv1.Budget{Nodes: "0", Schedule: ptr("0 13 * * *"), Duration: dur(2 * time.Hour)}, now: t0, want: false},
		{name: "at the hit", b: apiv1.Budget{Nodes: "0", Schedule: ptr("0 12 * * *"), Duration: dur(time.Minute)}, now: t0, want: true},
		{name: "macro", b: apiv1.Budget{Nodes: "0", Schedule: ptr("@daily"), Duration: dur(13 * time.Hour)}, now: t0, want: true},
		{name: "schedule without duration", b: apiv1.Budget{Nodes: "0", Schedule: ptr("@daily")}, now: t0, wantErr: "needs a duration"},
		{name: "bad cron", b: apiv1.Budget{Nodes: "0", Schedule: ptr("61 * * * *"), Duration: dur(time.Hour)}, now: t0, wantErr: "schedule"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := BudgetActive(c.b, c.now)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("BudgetActive = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	// Reasons select budgets; the most restrictive active one wins.
	bs := []apiv1.Budget{{Nodes: "50%"}, {Nodes: "1", Reasons: []apiv1.DisruptionReason{apiv1.DisruptionReasonDrifted}}}
	for reason, want := range map[apiv1.DisruptionReason]int{apiv1.DisruptionReasonDrifted: 1, apiv1.DisruptionReasonEmpty: 5} {
		if got, err := AllowedDisruptions(bs, reason, 10, t0); err != nil || got != want {
			t.Errorf("AllowedDisruptions(%s) = %d, %v; want %d", reason, got, err, want)
		}
	}
	if got, _ := AllowedDisruptions(nil, apiv1.DisruptionReasonEmpty, 25, t0); got != 3 {
		t.Errorf("default budget of 25 nodes = %d, want 3 (10%% rounded up)", got)
	}
}

func TestEvictionCost(t *testing.T) {
	cases := []struct {
		ann  map[string]string
		prio *int32
		want float64
	}{
		{nil, nil, 1},
		{map[string]string{PodDeletionCostAnnotation: "134217728"}, nil, 2},
		{nil, ptr(int32(33554432)), 2},
		{nil, ptr(int32(2000000000)), 10},
		{map[string]string{PodDeletionCostAnnotation: "-2147483648"}, nil, -10},
		{map[string]string{PodDeletionCostAnnotation: "junk"}, nil, 1},
	}
	for _, c := range cases {
		p := inventory.Pod{Annotations: c.ann, Priority: c.prio}
		if got := EvictionCost(&p); got != c.want {
			t.Errorf("EvictionCost(%v, %v) = %v, want %v", c.ann, c.prio, got, c.want)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	types := testTypes(3)
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"duplicate pool", Input{NodePools: []engine.NodePool{newPool("p", types), newPool("p", types)}}, "duplicate NodePool"},
		{"unnamed node", Input{Nodes: []Node{{}}}, "nodes[0]: name is required"},
		{"bad budget", Input{NodePools: []engine.NodePool{newPool("p", types, budgetsOf(apiv1.Budget{Nodes: "lots"}))}}, "nodePool p: spec.disruption.budgets[0]: nodes \"lots\""},
		{"bad PDB selector", Input{PDBs: []inventory.PDB{{Namespace: "d", Name: "x", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}}, "pdb d/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = t0
			_, err := Decide(c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
