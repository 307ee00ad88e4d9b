package engine

import (
	"testing"
	"time"
)

func benchKarpenterMix(b *testing.B, n int) {
	types := fakeInstanceTypes(400)
	in := Input{Pods: karpenterMix(n), NodePools: []NodePool{hugePool("default", types)}}
	var res Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if res, err = Solve(in); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if len(res.Unschedulable) > 0 {
		b.Fatalf("%d pods unschedulable, first: %s", len(res.Unschedulable), res.Unschedulable[0])
	}
	b.ReportMetric(float64(n)/(elapsed.Seconds()/float64(b.N)), "pods/s")
	b.ReportMetric(float64(len(res.NodeClaims)), "nodes")
	b.ReportMetric(res.Cost, "$/h")
	b.ReportMetric(res.KarpenterCost, "karpenter$/h")
	b.ReportMetric(res.LowerBound, "lb$/h")
}

func BenchmarkKarpenterMix1(b *testing.B)     { benchKarpenterMix(b, 1) }
func BenchmarkKarpenterMix50(b *testing.B)    { benchKarpenterMix(b, 50) }
func BenchmarkKarpenterMix100(b *testing.B)   { benchKarpenterMix(b, 100) }
func BenchmarkKarpenterMix500(b *testing.B)   { benchKarpenterMix(b, 500) }
func BenchmarkKarpenterMix1000(b *testing.B)  { benchKarpenterMix(b, 1000) }
func BenchmarkKarpenterMix2000(b *testing.B)  { benchKarpenterMix(b, 2000) }
func BenchmarkKarpenterMix5000(b *testing.B)  { benchKarpenterMix(b, 5000) }
func BenchmarkKarpenterMix10000(b *testing.B) { benchKarpenterMix(b, 10000) }
func BenchmarkKarpenterMix20000(b *testing.B) { benchKarpenterMix(b, 20000) }
