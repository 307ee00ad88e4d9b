package demo

import (
	"context"
	"testing"
)

// BenchmarkDemo is one whole migration of the demo account (seed 1) per
// environment; it reports how many simulated seconds run per wall second,
// the pods moved, and the migration's duration as the plan predicted it
// (predicted-s, its lower bound bound-s) against what the waves took in
// simulated time (makespan-s), with the longest a pod stayed Pending
// (maxwait-s), and the API requests apply's runner sent per pod to move
// (req/pod, and by verb).
//
//	go test -run '^$' -bench Demo -benchtime 1x ./pkg/demo
func BenchmarkDemo(b *testing.B) {
	for _, env := range []string{"dev", "staging", "prod"} {
		b.Run(env, func(b *testing.B) {
			var sim, wall float64
			var sum *Summary
			for range b.N {
				var err error
				sum, err = Run(context.Background(), Options{Seed: 1, OutDir: b.TempDir(), Environment: env})
				if err != nil {
					b.Fatal(err)
				}
				sim += sum.SimulatedSeconds
				wall += sum.WallSeconds
			}
			b.ReportMetric(sim/wall, "sim-s/wall-s")
			b.ReportMetric(wall/float64(b.N), "wall-s/demo")
			b.ReportMetric(float64(sum.Moves), "pods-moved")
			b.ReportMetric(sum.PredictedSeconds, "predicted-s")
			b.ReportMetric(sum.BoundSeconds, "bound-s")
			b.ReportMetric(sum.MakespanSeconds, "makespan-s")
			b.ReportMetric(sum.LongestWaitSeconds, "maxwait-s")
			for unit, v := range sum.APIRequests.PerPod(sum.PodsToMove) {
				b.ReportMetric(v, unit)
			}
		})
	}
}
