package disruption

import (
	"math/rand"
	"testing"
)

// benchCluster is about n nodes and 10 n pods (n = 1,000 or 5,000):
// randomCluster's mixed utilisation (nearly empty, half and full nodes),
// PDB-blocked and do-not-disrupt pods, spread and anti-affinity, two
// NodePools with budgets. Emptiness would act first and end the pass
// cheaply, so the empty nodes are dropped: the pass is a consolidation
// decision.
func benchCluster(n int) Input {
	in := randomCluster(rand.New(rand.NewSource(7)), n*103/100, 7)
	kept := in.Nodes[:0]
	for _, n := range in.Nodes {
		for i := range n.Pods {
			if reschedulable(&n.Pods[i]) {
				kept = append(kept, n)
				break
			}
		}
	}
	in.Nodes = kept
	return in
}

func size(in Input) (nodes, pods int) {
	for _, n := range in.Nodes {
		pods += len(n.Pods)
	}
	return len(in.Nodes), pods
}

func benchDecide(b *testing.B, n int, karpenterOnly bool) {
	in := benchCluster(n)
	in.Options.KarpenterOnly = karpenterOnly
	var d Decision
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, err = Decide(in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if errs := Validate(in, d.Commands); len(errs) > 0 {
		b.Fatalf("invalid command: %v", errs[0])
	}
	removed := 0
	for _, c := range d.Commands {
		removed += len(c.Nodes)
	}
	nodes, pods := size(in)
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(pods), "pods")
	b.ReportMetric(float64(removed), "nodes-removed")
	b.ReportMetric(d.Savings, "saved$/h")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/decision")
}

// BenchmarkConsolidationDecision is one full pass on the 1,000-node cluster.
func BenchmarkConsolidationDecision(b *testing.B) { benchDecide(b, 1000, false) }

// BenchmarkConsolidationDecision5000 is one full pass on about 5,000 nodes.
func BenchmarkConsolidationDecision5000(b *testing.B) { benchDecide(b, 5000, false) }

// BenchmarkConsolidationDecisionKarpenter is the faithful Karpenter-order
// baseline (KarpenterOnly) on the same state.
func BenchmarkConsolidationDecisionKarpenter(b *testing.B) { benchDecide(b, 1000, true) }

// BenchmarkConsolidationSettle settles a 200-node cluster with the default
// engine and reports the steady state next to the faithful Karpenter-order
// baseline's on the same start.
func BenchmarkConsolidationSettle(b *testing.B) {
	in := randomCluster(rand.New(rand.NewSource(11)), 200, 7)
	var ours, theirs Settlement
	var err error
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		in.Options.KarpenterOnly = false
		if ours, err = Settle(in, SettleOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	in.Options.KarpenterOnly = true
	if theirs, err = Settle(in, SettleOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(ours.Before.PricePerHour, "before$/h")
	b.ReportMetric(ours.After.PricePerHour, "after$/h")
	b.ReportMetric(theirs.After.PricePerHour, "karpenter-after$/h")
	b.ReportMetric(float64(ours.After.Nodes), "after-nodes")
	b.ReportMetric(float64(theirs.After.Nodes), "karpenter-after-nodes")
	b.ReportMetric(float64(len(ours.Passes)), "passes")
}
