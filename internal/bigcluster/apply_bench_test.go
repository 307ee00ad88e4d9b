package bigcluster_test

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// BenchmarkApplyBigCluster runs the demo's whole migration in the sandbox
// (simulated clock) on the demo's snapshot replicated N times — N44 is
// 1,012 legacy nodes and 12,936 pods — from loading the cluster through
// plan, apply's waves and Karpenter's consolidation. It reports the wall
// time (the whole run's and the apply step's), the peak heap, the plan's
// predicted duration of the waves and its lower bound beside the waves'
// simulated makespan (the demo summary's figures; each wave's in the log),
// the apply step's simulated time, the longest pod wait for a node
// (apply-maxwait-s: during apply, the waves'; maxwait-s: the whole run's,
// Karpenter's consolidation after apply included), evictions per pod
// moved, PDB violations and the API requests apply's runner sent per pod
// moved (req/pod, and by verb).
//
//	slot go test ./internal/bigcluster -run '^$' -bench ApplyBigCluster/N44 -benchtime 1x -timeout 60m
func BenchmarkApplyBigCluster(b *testing.B) {
	for _, n := range []int{1, 4, 11, 22, 44} {
		b.Run(fmt.Sprintf("N%d", n), func(b *testing.B) { benchApply(b, n) })
	}
}

// applyCPUProfile names a file for a CPU profile of apply's step alone
// (-cpuprofile takes the whole run's, consolidation after apply included).
var applyCPUProfile = flag.String("apply-cpuprofile", "", "write a CPU profile of BenchmarkApplyBigCluster's apply step to this file")

// replaySeed seeds the sandbox the snapshot is replayed in: another seed
// than the snapshot's (DemoSeed), whose generated names would be drawn
// again for the replacement pods.
const replaySeed = bigcluster.DemoSeed + 1

func benchApply(b *testing.B, n int) {
	ctx := context.Background()
	demoInv, err := bigcluster.DemoSnapshot(ctx, bigcluster.DemoSeed)
	if err != nil {
		b.Fatal(err)
	}
	inv, err := bigcluster.Replicate(*demoInv, n, bigcluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	snap := inventory.NewSnapshot(inv, time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	b.ResetTimer()
	for range b.N {
		var applyStart, applyEnd, wallStart, wallEnd time.Time
		events := func(e demo.Event) {
			if e.Step != "apply" {
				return
			}
			if applyStart.IsZero() {
				applyStart, wallStart = e.SimTime, time.Now()
				startApplyProfile(b)
			}
			if e.Status == demo.StatusDone {
				applyEnd, wallEnd = e.SimTime, time.Now()
				if *applyCPUProfile != "" {
					pprof.StopCPUProfile()
				}
			}
		}
		stop := bigcluster.SamplePeakHeap()
		sum, err := demo.Run(ctx, demo.Options{Seed: replaySeed, OutDir: b.TempDir(), Snapshot: &snap, Events: events})
		peak := stop()
		settled := 1.0
		if err != nil {
			if applyEnd.IsZero() || !errors.Is(err, sandbox.ErrNotSettled) || sum == nil || sum.Consolidation != nil {
				b.Fatalf("%v (apply took %s wall, %s simulated; peak heap %d MB)", err, wallEnd.Sub(wallStart).Round(time.Millisecond), applyEnd.Sub(applyStart), peak>>20)
			}
			// Apply is done and Karpenter's consolidation afterwards
			// does not settle: a Delete's pods, placed by the scheduler's
			// LeastAllocated rather than where the simulation put them,
			// leave one pending, Karpenter launches a node for it and
			// consolidates it again after consolidateAfter — as a real
			// cluster with kube-scheduler's default scoring would. The
			// apply figures stand; settled says the rest did not.
			settled = 0
			b.Logf("consolidation after apply did not settle: %v", err)
		}
		b.Logf("%d nodes, %d pods: %d waves, %d pods to move, %d moves, %d evictions; waves %.0f s simulated (plan %.0f s, bound %.0f s), apply %s (ended %s), whole run %.0f s simulated in %.1f s wall; longest wait for a node %.0f s (%s)",
			len(inv.Nodes), len(inv.Pods), len(sum.Waves), sum.PodsToMove, sum.Moves, sum.Evictions, sum.MakespanSeconds, sum.PredictedSeconds, sum.BoundSeconds, applyEnd.Sub(applyStart), applyEnd.Format(time.TimeOnly), sum.SimulatedSeconds, sum.WallSeconds, sum.LongestWaitSeconds, cmp.Or(sum.LongestWaitPod, "none"))
		for _, w := range sum.Waves {
			group := ""
			if w.DrainGroup > 0 {
				group = fmt.Sprintf(", drained with group %d", w.DrainGroup)
			}
			b.Logf("%s: %d nodes, %d pods to move (%d evicted, %d replaced): %.0f s, predicted %.0f s%s", w.ID, w.PlannedNodes, w.PodsToMove, w.Evicted, w.Replaced, w.Seconds, w.PredictedSeconds, group)
		}
		b.Logf("longest wait for a node during apply %.0f s (%s); in the whole run, Karpenter's consolidation after apply included, %.0f s", sum.ApplyLongestWaitSeconds, cmp.Or(sum.ApplyLongestWaitPod, "none"), sum.LongestWaitSeconds)
		b.ReportMetric(sum.WallSeconds, "wall-s")
		b.ReportMetric(wallEnd.Sub(wallStart).Seconds(), "apply-wall-s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		b.ReportMetric(sum.PredictedSeconds, "predicted-s")
		b.ReportMetric(sum.BoundSeconds, "bound-s")
		b.ReportMetric(sum.MakespanSeconds, "makespan-s")
		b.ReportMetric(applyEnd.Sub(applyStart).Seconds(), "apply-s")
		b.ReportMetric(sum.SimulatedSeconds, "sim-s")
		b.ReportMetric(sum.LongestWaitSeconds, "maxwait-s")
		b.ReportMetric(sum.ApplyLongestWaitSeconds, "apply-maxwait-s")
		b.ReportMetric(float64(sum.Evictions)/float64(max(sum.PodsToMove, 1)), "evictions/pod")
		b.ReportMetric(sum.MovesPerPod, "moves/pod")
		b.ReportMetric(float64(sum.PDBViolations), "pdb-violations")
		b.ReportMetric(settled, "settled")
		for unit, v := range sum.APIRequests.PerPod(sum.PodsToMove) {
			b.ReportMetric(v, unit)
		}
		b.ReportMetric(float64(len(inv.Nodes)), "nodes")
		b.ReportMetric(float64(len(inv.Pods)), "pods")
	}
}

// startApplyProfile starts the CPU profile -apply-cpuprofile asks for.
func startApplyProfile(b *testing.B) {
	if *applyCPUProfile == "" {
		return
	}
	f, err := os.Create(*applyCPUProfile)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
}
