package demo

import (
	"context"
	"testing"
)

// BenchmarkDemo is one whole migration of the demo account; it reports how
// many simulated seconds run per wall second and the pods moved.
//
//	go test -run '^$' -bench Demo -benchtime 3x ./pkg/demo
func BenchmarkDemo(b *testing.B) {
	var sim, wall float64
	moved := 0
	for i := 0; i < b.N; i++ {
		sum, err := Run(context.Background(), Options{Seed: uint64(i + 1), OutDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		sim += sum.SimulatedSeconds
		wall += sum.WallSeconds
		moved = sum.Moves
	}
	b.ReportMetric(sim/wall, "sim-s/wall-s")
	b.ReportMetric(wall/float64(b.N), "wall-s/demo")
	b.ReportMetric(float64(moved), "pods-moved")
}
