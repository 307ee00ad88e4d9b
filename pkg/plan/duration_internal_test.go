package plan

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// The duration model on small cases worked by hand. Every case uses a
// node launch of L = 60s and a replacement start of P = 5s, so each
// expected figure below is written as its arithmetic.
func TestWaveTimingWorkedByHand(t *testing.T) {
	const L, P = 60.0, 5.0
	maxUnavailable := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	minAvailable := func(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }
	pdb := func(name string, mu, ma *intstr.IntOrString) inventory.PDB {
		return inventory.PDB{Namespace: "app", Name: name, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, MaxUnavailable: mu, MinAvailable: ma}
	}
	// pods puts n pods of app on node (app "" has no budget).
	type podsOn struct {
		node, app string
		n         int
	}
	tests := []struct {
		name         string
		nodes        int
		pods         []podsOn
		pdbs         []inventory.PDB
		concurrency  int
		preProvision bool
		restart      bool
		want         WaveTiming
		wantBound    float64
	}{{
		// 3 pods, 1 at a time: evict, wait P for the replacement, evict,
		// wait P, evict; the gate waits P for the last: 3 × P = 15s.
		name: "1 node, 3 pods of one PDB maxUnavailable 1", nodes: 1, concurrency: 1,
		pods: []podsOn{{"n1", "web", 3}}, pdbs: []inventory.PDB{pdb("web", maxUnavailable(1), nil)},
		want: WaveTiming{DrainSeconds: 3 * P, BoundBy: "PodDisruptionBudget app/web: 3 pods, 1 at a time"},
		// The bound: no launch, ceil(3/1) = 3 rounds of P = 15s.
		wantBound: 3 * P,
	}, {
		// Pre-provisioned: the placeholders' node is Ready after L and
		// their pods run P later (L + P = 65s), then the drain's 3 × P.
		name: "pre-provisioned, 3 pods of one PDB", nodes: 1, concurrency: 1, preProvision: true,
		pods: []podsOn{{"n1", "web", 3}}, pdbs: []inventory.PDB{pdb("web", maxUnavailable(1), nil)},
		want:      WaveTiming{LaunchSeconds: L + P, DrainSeconds: 3 * P, BoundBy: "PodDisruptionBudget app/web: 3 pods, 1 at a time"},
		wantBound: L + P + 3*P,
	}, {
		// Two budgets on one node drain side by side: web 4 pods 2 at a
		// time = ceil(4/2) = 2 rounds, api 3 pods 1 at a time = 3 rounds;
		// the node takes max(2, 3) = 3 rounds = 15s.
		name: "two budgets on one node", nodes: 1, concurrency: 1,
		pods: []podsOn{{"n1", "web", 4}, {"n1", "api", 3}},
		// web: minAvailable 50% of 4 expected = 2, so 4 - 2 = 2 allowed.
		pdbs:      []inventory.PDB{pdb("web", nil, minAvailable("50%")), pdb("api", maxUnavailable(1), nil)},
		want:      WaveTiming{DrainSeconds: 3 * P, BoundBy: "PodDisruptionBudget app/api: 3 pods, 1 at a time"},
		wantBound: 3 * P,
	}, {
		// Four nodes, each with 2 pods of its own budget (1 at a time):
		// a node waits one replacement (P) between its two evictions.
		// Concurrency 2: nodes 1, 2 from 0 to P, nodes 3, 4 from P to 2P;
		// the gate waits P for the last replacements: 2P + P = 15s.
		name: "concurrency 2", nodes: 4, concurrency: 2,
		pods: []podsOn{{"n1", "a", 2}, {"n2", "b", 2}, {"n3", "c", 2}, {"n4", "d", 2}},
		pdbs: []inventory.PDB{pdb("a", maxUnavailable(1), nil), pdb("b", maxUnavailable(1), nil), pdb("c", maxUnavailable(1), nil), pdb("d", maxUnavailable(1), nil)},
		want: WaveTiming{DrainSeconds: 3 * P, BoundBy: "4 nodes drained 2 at a time"},
		// Every budget could go at once: ceil(2/1) = 2 rounds = 10s.
		wantBound: 2 * P,
	}, {
		// The same nodes one at a time: 4 × P between evictions, then the
		// gate's P: 5 × P = 25s.
		name: "concurrency 1", nodes: 4, concurrency: 1,
		pods:      []podsOn{{"n1", "a", 2}, {"n2", "b", 2}, {"n3", "c", 2}, {"n4", "d", 2}},
		pdbs:      []inventory.PDB{pdb("a", maxUnavailable(1), nil), pdb("b", maxUnavailable(1), nil), pdb("c", maxUnavailable(1), nil), pdb("d", maxUnavailable(1), nil)},
		want:      WaveTiming{DrainSeconds: 5 * P, BoundBy: "4 nodes drained 1 at a time"},
		wantBound: 2 * P,
	}, {
		// One budget over two nodes drained at once: each node alone would
		// take 2 rounds, but the budget lets 1 of the 4 pods go per
		// replacement: ceil(4/1) = 4 rounds = 20s.
		name: "one budget over two nodes", nodes: 2, concurrency: 2,
		pods: []podsOn{{"n1", "web", 2}, {"n2", "web", 2}}, pdbs: []inventory.PDB{pdb("web", maxUnavailable(1), nil)},
		want:      WaveTiming{DrainSeconds: 4 * P, BoundBy: "PodDisruptionBudget app/web: 4 pods, 1 at a time"},
		wantBound: 4 * P,
	}, {
		// No budget: every pod goes at once, whatever the concurrency;
		// the gate waits one replacement: P = 5s.
		name: "no PDB", nodes: 3, concurrency: 1,
		pods: []podsOn{{"n1", "", 10}, {"n2", "", 10}, {"n3", "", 10}},
		want: WaveTiming{DrainSeconds: P, BoundBy: "one replacement start: every pod evicted at once"}, wantBound: P,
	}, {
		// A budget that allows no eviction (1 replica, minAvailable 1):
		// its Deployment is restarted with surge, P, before the drain; the
		// drain of the other pods (no budget) is P: 2 × P = 10s in all.
		name: "a budget allowing none, restarted", nodes: 1, concurrency: 1, restart: true,
		pods: []podsOn{{"n1", "solo", 1}, {"n1", "", 2}}, pdbs: []inventory.PDB{pdb("solo", nil, minAvailable("1"))},
		want: WaveTiming{RestartSeconds: P, DrainSeconds: P, BoundBy: "one replacement start: every pod evicted at once"},
		// One surge restart: one round of P = 5s.
		wantBound: P,
	}, {
		// Two Deployments whose budgets allow none are restarted together
		// (each keeps its own budget), P for both, not P each.
		name: "two budgets allowing none, restarted together", nodes: 2, concurrency: 1, restart: true,
		pods:      []podsOn{{"n1", "solo", 1}, {"n2", "lone", 1}, {"n2", "", 1}},
		pdbs:      []inventory.PDB{pdb("solo", nil, minAvailable("1")), pdb("lone", nil, minAvailable("1"))},
		want:      WaveTiming{RestartSeconds: P, DrainSeconds: P, BoundBy: "one replacement start: every pod evicted at once"},
		wantBound: P,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &inventory.Inventory{PDBs: tt.pdbs}
			var nodes []WaveNode
			for i := range tt.nodes {
				nodes = append(nodes, WaveNode{Name: fmt.Sprintf("n%d", i+1)})
			}
			var pods []inventory.Pod
			for _, po := range tt.pods {
				for i := range po.n {
					p := inventory.Pod{Namespace: "app", Name: fmt.Sprintf("%s-%s-%d", po.node, po.app, i), NodeName: po.node, OwnerKind: inventory.OwnerDeployment, OwnerName: po.app}
					if po.app != "" {
						p.Labels = map[string]string{"app": po.app}
					}
					pods = append(pods, p)
				}
			}
			inv.Pods = pods
			tm := newTimer(inv, Budget{Concurrency: tt.concurrency, RestartBlocked: tt.restart}, Timing{NodeLaunchSeconds: L, PodReadySeconds: P})
			got := tm.wave(nodes, pods, tt.preProvision, tt.preProvision)
			if got != tt.want {
				t.Errorf("wave timing\n got %+v\nwant %+v", got, tt.want)
			}
			bound, _ := tm.bound()
			if bound != tt.wantBound {
				t.Errorf("bound %vs, want %vs", bound, tt.wantBound)
			}
			if predicted := got.LaunchSeconds + got.RestartSeconds + got.DrainSeconds; bound > predicted {
				t.Errorf("bound %vs above the predicted %vs", bound, predicted)
			}
		})
	}
}

// The bound lets waves overlap: two waves of the same budget, each
// pre-provisioned, are predicted one after the other (2 × (L + P + 2P)),
// but bounded by one launch and the budget's 4 pods: L + P + 4P.
func TestBoundOverlapsWaves(t *testing.T) {
	const L, P = 60.0, 5.0
	v := intstr.FromInt32(1)
	inv := &inventory.Inventory{PDBs: []inventory.PDB{{Namespace: "app", Name: "web", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MaxUnavailable: &v}}}
	tm := newTimer(inv, Budget{Concurrency: 1}, Timing{NodeLaunchSeconds: L, PodReadySeconds: P})
	predicted := 0.0
	for w := 1; w <= 2; w++ {
		node := fmt.Sprintf("n%d", w)
		pods := []inventory.Pod{{Namespace: "app", Name: node + "-a", NodeName: node, Labels: map[string]string{"app": "web"}}, {Namespace: "app", Name: node + "-b", NodeName: node, Labels: map[string]string{"app": "web"}}}
		wt := tm.wave([]WaveNode{{Name: node}}, pods, true, true)
		predicted += wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds
	}
	if want := 2 * (L + P + 2*P); predicted != want {
		t.Errorf("predicted %vs, want %vs", predicted, want)
	}
	bound, by := tm.bound()
	if want := L + P + 4*P; bound != want || by != "PodDisruptionBudget app/web: 4 pods, 1 at a time" {
		t.Errorf("bound %vs (%s), want %vs by app/web", bound, by, want)
	}
}

// A wave whose capacity was prepared ahead (Budget.PrepareAhead) waits only
// for what is left of its launch: its placeholders were created with those
// of the first wave within reach, as that wave started, and it waits
// max(0, that start + L + P − its own start). Three pre-provisioned waves
// of one node and two pods without a budget, each draining in P (both
// evicted at once, the gate waits P): a wave alone takes L + P + P = 70s.
func TestPreparedAheadWaitsForWhatIsLeft(t *testing.T) {
	const L, P = 60.0, 5.0
	for _, tc := range []struct {
		ahead       int
		wantLaunch  [3]float64
		wantPredict float64
	}{
		// One after another: 3 × 70.
		{0, [3]float64{L + P, L + P, L + P}, 3 * (L + P + P)},
		// Wave 2 prepared at 0 (wave 1's start), ready at 65, starts at
		// 70: nothing left. Wave 3 prepared by wave 2 as it starts, at
		// 70, starts at 75: 70 + 65 − 75 = 60 left.
		{1, [3]float64{L + P, 0, 60}, (L + P + P) + P + (60 + P)},
		// Wave 3 prepared by wave 1 too, at 0: ready at 65, before its
		// start at 75.
		{2, [3]float64{L + P, 0, 0}, (L + P + P) + P + P},
	} {
		t.Run(fmt.Sprintf("%d ahead", tc.ahead), func(t *testing.T) {
			tm := newTimer(&inventory.Inventory{}, Budget{Concurrency: 1, PrepareAhead: tc.ahead}, Timing{NodeLaunchSeconds: L, PodReadySeconds: P})
			predicted := 0.0
			for w := range 3 {
				node := fmt.Sprintf("n%d", w+1)
				pods := []inventory.Pod{{Namespace: "app", Name: node + "-a", NodeName: node}, {Namespace: "app", Name: node + "-b", NodeName: node}}
				wt := tm.wave([]WaveNode{{Name: node}}, pods, true, true)
				if wt.LaunchSeconds != tc.wantLaunch[w] || wt.DrainSeconds != P {
					t.Errorf("wave %d: %+v; want launch %vs, drain %vs", w+1, wt, tc.wantLaunch[w], P)
				}
				predicted += wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds
			}
			if predicted != tc.wantPredict {
				t.Errorf("predicted %vs, want %vs", predicted, tc.wantPredict)
			}
			// The bound is the same however far ahead: one launch, one start.
			if bound, _ := tm.bound(); bound != L+P+P || bound > predicted {
				t.Errorf("bound %vs, want %vs (at most the predicted %vs)", bound, L+P+P, predicted)
			}
		})
	}
}

// Drain groups on small cases worked by hand: waves of one node each, on
// NodePool a unless said, moving pods of the budgets named ("" a pod
// without one). A wave joins the group before it unless it shares a
// budget with it, or one of its NodePools is unproven (no earlier group
// used it) and the group uses it already.
func TestDrainGroupsWorkedByHand(t *testing.T) {
	type wave struct {
		pools   []string
		budgets []string
	}
	a := []string{"a"}
	tests := []struct {
		name     string
		waves    []wave
		together bool
		want     [][]int
	}{{
		// Wave 1 is NodePool a's canary; wave 2 waits for its gate (a is
		// unproven while wave 1 is in the group), wave 3 joins wave 2.
		name: "disjoint budgets", together: true,
		waves: []wave{{a, []string{"x"}}, {a, []string{"y"}}, {a, []string{"z"}}},
		want:  [][]int{{0}, {1, 2}},
	}, {
		name: "off", together: false,
		waves: []wave{{a, []string{"x"}}, {a, []string{"y"}}, {a, []string{"z"}}},
		want:  [][]int{{0}, {1}, {2}},
	}, {
		// y spans waves 2 and 3: they drain one after the other.
		name: "a budget spanning waves", together: true,
		waves: []wave{{a, []string{"x"}}, {a, []string{"y"}}, {a, []string{"y", "z"}}, {a, []string{"u"}}},
		want:  [][]int{{0}, {1}, {2, 3}},
	}, {
		// The same Deployment's pods on waves 2 and 3, without a budget.
		name: "pods without a budget conflict with none", together: true,
		waves: []wave{{a, []string{""}}, {a, []string{""}}, {a, []string{""}}},
		want:  [][]int{{0}, {1, 2}},
	}, {
		// b is new in wave 3: it joins, as b's canary in the group; wave
		// 4 on b waits for that group's gate.
		name: "a new NodePool's first wave joins, its second waits", together: true,
		waves: []wave{{a, []string{"x"}}, {a, []string{"y"}}, {[]string{"b"}, []string{"z"}}, {[]string{"b"}, []string{"u"}}},
		want:  [][]int{{0}, {1, 2}, {3}},
	}}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &inventory.Inventory{}
			for _, b := range []string{"x", "y", "z", "u"} {
				inv.PDBs = append(inv.PDBs, inventory.PDB{Namespace: "app", Name: b, Selector: sel(b), DisruptionsAllowed: 1})
			}
			var waves []Wave
			var pods [][]inventory.Pod
			for i, w := range tt.waves {
				node := fmt.Sprintf("n%d", i+1)
				waves = append(waves, Wave{Index: i + 1, NodePools: w.pools, Nodes: []WaveNode{{Name: node}}})
				var mine []inventory.Pod
				for _, b := range w.budgets {
					p := inventory.Pod{Namespace: "app", Name: node + "-" + b, NodeName: node, OwnerKind: inventory.OwnerDeployment, OwnerName: "web"}
					if b != "" {
						p.Labels = map[string]string{"app": b}
					}
					mine = append(mine, p)
				}
				pods = append(pods, mine)
			}
			tm := newTimer(inv, Budget{Concurrency: 1}, Timing{NodeLaunchSeconds: 60, PodReadySeconds: 5})
			if got := tm.drainGroups(waves, pods, tt.together); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("drain groups %v, want %v", got, tt.want)
			}
		})
	}
}

// Two pre-provisioned waves drained together, worked by hand: each one
// node with 2 pods of its own budget (1 at a time). Alone, each takes
// L + P to launch, then its node's rounds (one P between its two
// evictions) and the gate's P: 65 + 10 = 75s, 150s one after the other.
// Together, their capacity launches at once (L + P = 65s), then their
// nodes drain c at a time: with c = 1 n1 then n2 (P each) and the gate's
// P, 65 + 15 = 80s; with c = 2 side by side, 65 + 10 = 75s — the bound
// (a budget's launch and its 2 rounds: 65 + 10), never above the
// prediction.
func TestDrainGroupTimingWorkedByHand(t *testing.T) {
	const L, P = 60.0, 5.0
	one := intstr.FromInt32(1)
	inv := &inventory.Inventory{}
	var ws []waveIn
	for i, app := range []string{"a", "b"} {
		inv.PDBs = append(inv.PDBs, inventory.PDB{Namespace: "app", Name: app, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, MaxUnavailable: &one})
		node := fmt.Sprintf("n%d", i+1)
		var pods []inventory.Pod
		for k := range 2 {
			pods = append(pods, inventory.Pod{Namespace: "app", Name: fmt.Sprintf("%s-%d", app, k), NodeName: node, Labels: map[string]string{"app": app}, OwnerKind: inventory.OwnerDeployment, OwnerName: app})
		}
		inv.Pods = append(inv.Pods, pods...)
		ws = append(ws, waveIn{nodes: []WaveNode{{Name: node}}, pods: pods, hasNodes: true, preProvision: true})
	}
	for _, tc := range []struct {
		concurrency int
		want        WaveTiming
	}{
		{1, WaveTiming{LaunchSeconds: L + P, DrainSeconds: 3 * P, BoundBy: "2 nodes drained 1 at a time"}},
		{2, WaveTiming{LaunchSeconds: L + P, DrainSeconds: 2 * P, BoundBy: "PodDisruptionBudget app/a: 2 pods, 1 at a time"}},
	} {
		t.Run(fmt.Sprintf("c=%d", tc.concurrency), func(t *testing.T) {
			tm := newTimer(inv, Budget{Concurrency: tc.concurrency, PreProvision: true}, Timing{NodeLaunchSeconds: L, PodReadySeconds: P})
			alone := newTimer(inv, Budget{Concurrency: tc.concurrency, PreProvision: true}, Timing{NodeLaunchSeconds: L, PodReadySeconds: P})
			sum := 0.0
			for _, w := range ws {
				wt := alone.wave(w.nodes, w.pods, true, true)
				sum += wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds
			}
			if sum != 2*(L+P+2*P) {
				t.Errorf("alone: %vs one after the other, want %vs", sum, 2*(L+P+2*P))
			}
			got := tm.group(ws)
			if got != tc.want {
				t.Errorf("together\n got %+v\nwant %+v", got, tc.want)
			}
			bound, _ := tm.bound()
			if predicted := got.LaunchSeconds + got.RestartSeconds + got.DrainSeconds; bound != L+P+2*P || bound > predicted {
				t.Errorf("bound %vs, want %vs and at most the predicted %vs", bound, L+P+2*P, predicted)
			}
		})
	}
}

// TestGroupStartsEarlyWorkedByHand: wave 1 moves two pods of budget a (1
// at a time) off n1; wave 2 moves one of b (1 at a time) and billing's
// pod, whose budget allows none (a surge restart), off n2. Wave 1 takes
// L+P (launch) + 2P (a's two rounds, the gate's P included). Wave 2, its
// placeholders made as wave 1 started (prepareAhead 1), has its capacity
// Ready at L+P, before wave 1's gate starts at L+2P: its restart (P) runs
// during that gate, so it starts at L+2P, takes P (restart) + P (b's round
// and its gate), and the waves end at L+4P, not L+5P. Without its
// capacity Ready by then (prepareAhead 0), or without a restart, it starts
// as wave 1 ends; the first wave never starts early.
func TestGroupStartsEarlyWorkedByHand(t *testing.T) {
	const L, P = 60.0, 5.0
	one := intstr.FromInt32(1)
	pdb := func(name string, maxUnavailable, minAvailable *intstr.IntOrString) inventory.PDB {
		return inventory.PDB{Namespace: "app", Name: name, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, MaxUnavailable: maxUnavailable, MinAvailable: minAvailable}
	}
	pod := func(app, node string, k int) inventory.Pod {
		return inventory.Pod{Namespace: "app", Name: fmt.Sprintf("%s-%d", app, k), NodeName: node, Labels: map[string]string{"app": app}, OwnerKind: inventory.OwnerDeployment, OwnerName: app}
	}
	wave1 := []inventory.Pod{pod("a", "n1", 0), pod("a", "n1", 1)}
	for _, tc := range []struct {
		name         string
		prepareAhead int
		restart      bool
		want2        WaveTiming
		total        float64
	}{
		{"prepared, restarting", 1, true, WaveTiming{RestartSeconds: P, DrainSeconds: P, EarlySeconds: P, BoundBy: "PodDisruptionBudget app/b: 1 pods, 1 at a time"}, L + 4*P},
		{"launched as it starts", 0, true, WaveTiming{LaunchSeconds: L + P, RestartSeconds: P, DrainSeconds: P, BoundBy: "PodDisruptionBudget app/b: 1 pods, 1 at a time"}, 2*L + 6*P},
		{"prepared, no restart", 1, false, WaveTiming{DrainSeconds: P, BoundBy: "PodDisruptionBudget app/b: 1 pods, 1 at a time"}, L + 4*P},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wave2 := []inventory.Pod{pod("b", "n2", 0)}
			if tc.restart {
				wave2 = append(wave2, pod("billing", "n2", 0))
			}
			inv := &inventory.Inventory{Pods: slices.Concat(wave1, wave2),
				PDBs: []inventory.PDB{pdb("a", &one, nil), pdb("b", &one, nil), pdb("billing", nil, &one)}}
			tm := newTimer(inv, Budget{Concurrency: 1, PreProvision: true, PrepareAhead: tc.prepareAhead, RestartBlocked: true}, Timing{NodeLaunchSeconds: L, PodReadySeconds: P})
			got1 := tm.wave([]WaveNode{{Name: "n1"}}, wave1, true, true)
			if want := (WaveTiming{LaunchSeconds: L + P, DrainSeconds: 2 * P, BoundBy: "PodDisruptionBudget app/a: 2 pods, 1 at a time"}); got1 != want {
				t.Errorf("wave 1\n got %+v\nwant %+v", got1, want)
			}
			got2 := tm.wave([]WaveNode{{Name: "n2"}}, wave2, true, true)
			if got2 != tc.want2 {
				t.Errorf("wave 2\n got %+v\nwant %+v", got2, tc.want2)
			}
			if wantStart := L + 3*P - tc.want2.EarlySeconds; tm.started[1] != wantStart {
				t.Errorf("wave 2 starts at %vs, want %vs", tm.started[1], wantStart)
			}
			if tm.now != tc.total {
				t.Errorf("the waves end at %vs, want %vs", tm.now, tc.total)
			}
		})
	}
}

// TestHeadroomPlacesPodsInDrainOrder: the headroom simulation reads a
// wave's pods in the order the runner's drain evicts them (DrainOrder), not
// the plan's node order: node a's two pods of web (1 at a time) would hold
// the drain's only slot for a replacement, so node b's pod, without a
// budget, goes first. At the demo replicated 4 times, placing them in the
// plan's order left wave 7's headroom short and a 400m pod waited 60s for a
// node launched after its eviction.
func TestHeadroomPlacesPodsInDrainOrder(t *testing.T) {
	web := inventory.PDB{Namespace: "app", Name: "web", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	pods := []inventory.Pod{
		{Namespace: "app", Name: "web-1", NodeName: "a", Labels: map[string]string{"app": "web"}, OwnerKind: inventory.OwnerDeployment, OwnerName: "web"},
		{Namespace: "app", Name: "web-2", NodeName: "a", Labels: map[string]string{"app": "web"}, OwnerKind: inventory.OwnerDeployment, OwnerName: "web"},
		{Namespace: "app", Name: "batch-1", NodeName: "b", OwnerKind: inventory.OwnerDeployment, OwnerName: "batch"},
	}
	tm := newTimer(&inventory.Inventory{PDBs: []inventory.PDB{web}, Pods: pods}, Budget{Concurrency: 1}, Timing{NodeLaunchSeconds: 60, PodReadySeconds: 5})
	var got []string
	for _, p := range tm.drainOrdered([]WaveNode{{Name: "a"}, {Name: "b"}}, pods) {
		got = append(got, p.Name)
	}
	if want := []string{"batch-1", "web-1", "web-2"}; !slices.Equal(got, want) {
		t.Errorf("pods in drain order %v, want %v", got, want)
	}
}
