package plan

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// PredictWaves applies the plan's duration model (Timing, the timer
// BuildPlan uses) to waves cut elsewhere, as a benchmark drains them:
// each wave's nodes in drain order, moving the inventory's pods on them
// that BuildPlan moves (not DaemonSets', nor finished ones, nor
// do-not-disrupt ones without b.ForceEvict). launches says each wave
// launches capacity for its pods (pre-provisioned with b.PreProvision);
// without it the capacity is Ready before the wave starts. t gives the
// inputs L and P; the result is each wave's timing and t with the total
// and the bound.
func PredictWaves(inv *inventory.Inventory, b Budget, t Timing, waves [][]WaveNode, launches bool) ([]WaveTiming, Timing) {
	onNode := map[string][]inventory.Pod{}
	for _, p := range inv.Pods {
		if p.OwnerKind == inventory.OwnerDaemonSet || p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed ||
			(inventory.DisruptionBlocked(p.Annotations) != "" && !b.ForceEvict) {
			continue
		}
		onNode[p.NodeName] = append(onNode[p.NodeName], p)
	}
	tm := newTimer(inv, b, t)
	t.PredictedSeconds = 0
	out := make([]WaveTiming, 0, len(waves))
	for _, nodes := range waves {
		var pods []inventory.Pod
		for _, n := range nodes {
			pods = append(pods, onNode[n.Name]...)
		}
		wt := tm.wave(nodes, pods, launches, launches && b.PreProvision)
		t.PredictedSeconds += wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds - wt.EarlySeconds
		out = append(out, wt)
	}
	t.BoundSeconds, t.BoundBy = tm.bound()
	return out, t
}
