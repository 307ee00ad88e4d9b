package plan_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Two waves of one node, each with 2 pods of a budget allowing 1 at a
// time, worked by hand: a wave drains in ceil(2/1) × P; the bound lets the
// waves overlap, ceil(4/1) × P after the first launch. A DaemonSet's pod
// and a do-not-disrupt one on the nodes match the budget but do not move.
func TestPredictWavesWorkedByHand(t *testing.T) {
	const L, P = 60.0, 5.0
	inv := twoWavesOfWeb()
	waves := [][]plan.WaveNode{{{Name: "n1"}}, {{Name: "n2"}}}
	in := plan.Timing{NodeLaunchSeconds: L, PodReadySeconds: P}
	tests := []struct {
		name                 string
		launches             bool
		wantWave             plan.WaveTiming
		wantTotal, wantBound float64
	}{{
		// Capacity Ready before each wave: 2 waves × 2P; bound 4P.
		name: "capacity ready", wantWave: plan.WaveTiming{DrainSeconds: 2 * P, BoundBy: "PodDisruptionBudget app/web: 2 pods, 1 at a time"},
		wantTotal: 2 * 2 * P, wantBound: 4 * P,
	}, {
		// Pre-provisioned per wave: 2 × (L + P + 2P); bound L + P + 4P.
		name: "pre-provisioned", launches: true,
		wantWave:  plan.WaveTiming{LaunchSeconds: L + P, DrainSeconds: 2 * P, BoundBy: "PodDisruptionBudget app/web: 2 pods, 1 at a time"},
		wantTotal: 2 * (L + P + 2*P), wantBound: L + P + 4*P,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, timing := plan.PredictWaves(inv, plan.Budget{Concurrency: 1, PreProvision: true}, in, waves, tt.launches)
			if len(got) != 2 || got[0] != tt.wantWave || got[1] != tt.wantWave {
				t.Errorf("waves %+v, want two of %+v", got, tt.wantWave)
			}
			if timing.PredictedSeconds != tt.wantTotal || timing.BoundSeconds != tt.wantBound || timing.BoundBy != "PodDisruptionBudget app/web: 4 pods, 1 at a time" {
				t.Errorf("timing %+v, want predicted %vs, bound %vs by app/web's 4 pods", timing, tt.wantTotal, tt.wantBound)
			}
			if timing.NodeLaunchSeconds != L || timing.PodReadySeconds != P {
				t.Errorf("inputs %+v, want L %v, P %v", timing, L, P)
			}
		})
	}
}

// The cluster's replacement rate bounds a wave's drain when the budgets
// would allow more, worked by hand on the same two waves (P = 5s, each
// wave's budget 2 × P = 10s): at 0.1 replacements a second a wave's 2 pods
// take 20s, and the bound is the 4 pods' 40s; at 1 a second (2s) the
// budget binds as without a rate.
func TestPredictWavesThroughput(t *testing.T) {
	const P = 5.0
	inv := twoWavesOfWeb()
	waves := [][]plan.WaveNode{{{Name: "n1"}}, {{Name: "n2"}}}
	tests := []struct {
		rate                 float64
		wantWave             plan.WaveTiming
		wantTotal, wantBound float64
		wantBoundBy          string
	}{
		{0.1, plan.WaveTiming{DrainSeconds: 20, BoundBy: "2 pods at 0.1 replacements a second"}, 40, 40, "4 pods at 0.1 replacements a second"},
		{1, plan.WaveTiming{DrainSeconds: 2 * P, BoundBy: "PodDisruptionBudget app/web: 2 pods, 1 at a time"}, 4 * P, 4 * P, "PodDisruptionBudget app/web: 4 pods, 1 at a time"},
	}
	for _, tt := range tests {
		got, timing := plan.PredictWaves(inv, plan.Budget{Concurrency: 1}, plan.Timing{PodReadySeconds: P, PodsPerSecond: tt.rate}, waves, false)
		if len(got) != 2 || got[0] != tt.wantWave || got[1] != tt.wantWave {
			t.Errorf("rate %v: waves %+v, want two of %+v", tt.rate, got, tt.wantWave)
		}
		if timing.PredictedSeconds != tt.wantTotal || timing.BoundSeconds != tt.wantBound || timing.BoundBy != tt.wantBoundBy {
			t.Errorf("rate %v: timing %+v, want predicted %vs, bound %vs by %q", tt.rate, timing, tt.wantTotal, tt.wantBound, tt.wantBoundBy)
		}
	}
}

// twoWavesOfWeb is two nodes, each with 2 pods of a budget allowing 1 at
// a time, a DaemonSet's pod and a do-not-disrupt one.
func twoWavesOfWeb() *inventory.Inventory {
	one := intstr.FromInt32(1)
	web := map[string]string{"app": "web"}
	inv := &inventory.Inventory{PDBs: []inventory.PDB{{Namespace: "app", Name: "web", Selector: &metav1.LabelSelector{MatchLabels: web}, MaxUnavailable: &one}}}
	for _, n := range []string{"n1", "n2"} {
		inv.Pods = append(inv.Pods,
			inventory.Pod{Namespace: "app", Name: n + "-a", NodeName: n, Labels: web, OwnerKind: inventory.OwnerDeployment, OwnerName: "web"},
			inventory.Pod{Namespace: "app", Name: n + "-b", NodeName: n, Labels: web, OwnerKind: inventory.OwnerDeployment, OwnerName: "web"},
			inventory.Pod{Namespace: "app", Name: n + "-ds", NodeName: n, Labels: web, OwnerKind: inventory.OwnerDaemonSet, OwnerName: "agent"},
			inventory.Pod{Namespace: "app", Name: n + "-stay", NodeName: n, Labels: web, OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
				Annotations: map[string]string{"karpenter.sh/do-not-disrupt": "true"}})
	}
	return inv
}
