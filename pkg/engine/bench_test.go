package engine

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func benchKarpenterMix(b *testing.B, n int) {
	runBench(b, Input{Pods: karpenterMix(n), NodePools: []NodePool{hugePool("default", fakeInstanceTypes(400))}}, n)
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

func BenchmarkKarpenterMix100000(b *testing.B) { benchKarpenterMix(b, 100000) }

// realisticMix is the real-catalogue benchmark's workload (n ≥ 100): a web
// tier spread over zones, APIs, workers, memory-heavy caches, batch jobs and
// a GPU group behind a taint. Shares: web 30 %, API 25 %, workers 20 %,
// batch 19 %, caches 5 %, GPU 1 %.
func realisticMix(n int) []inventory.Pod {
	mk := func(app string, count int, cpu, mem string, f func(*inventory.Pod)) []inventory.Pod {
		var out []inventory.Pod
		for i := 0; i < count; i++ {
			p := inventory.Pod{Namespace: "prod", Name: fmt.Sprintf("%s-%04d", app, i), Labels: map[string]string{"app": app},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
			if f != nil {
				f(&p)
			}
			out = append(out, p)
		}
		return out
	}
	var pods []inventory.Pod
	pods = append(pods, mk("web", n*30/100, "250m", "512Mi", func(p *inventory.Pod) {
		p.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: catalog.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	})...)
	pods = append(pods, mk("api", n*25/100, "500m", "1Gi", nil)...)
	pods = append(pods, mk("worker", n*20/100, "1", "2Gi", nil)...)
	pods = append(pods, mk("batch", n*19/100, "2", "4Gi", nil)...)
	pods = append(pods, mk("cache", n*5/100, "500m", "8Gi", nil)...)
	pods = append(pods, mk("gpu", max(n/100, 1), "3", "12Gi", func(p *inventory.Pod) {
		p.Requests[catalog.ResourceNVIDIAGPU] = resource.MustParse("1")
		p.Tolerations = []corev1.Toleration{{Key: catalog.ResourceNVIDIAGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})...)
	return pods
}

func realisticPools() []NodePool {
	req := func(key string, op corev1.NodeSelectorOperator, v ...string) apiv1.NodeSelectorRequirementWithMinValues {
		return apiv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: v}
	}
	general := NodePool{Name: "general", Spec: apiv1.NodePoolSpec{Template: apiv1.NodeClaimTemplate{Spec: apiv1.NodeClaimTemplateSpec{Requirements: []apiv1.NodeSelectorRequirementWithMinValues{
		req(catalog.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		req(catalog.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "4"),
		req(catalog.LabelArch, corev1.NodeSelectorOpIn, "amd64"),
		req(catalog.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"),
	}}}}}
	gpu := NodePool{Name: "gpu", Spec: apiv1.NodePoolSpec{Template: apiv1.NodeClaimTemplate{Spec: apiv1.NodeClaimTemplateSpec{
		Taints: []corev1.Taint{{Key: catalog.ResourceNVIDIAGPU, Effect: corev1.TaintEffectNoSchedule}},
		Requirements: []apiv1.NodeSelectorRequirementWithMinValues{
			req(catalog.LabelInstanceCategory, corev1.NodeSelectorOpIn, "g"),
			req(catalog.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		}}}}}
	return []NodePool{general, gpu}
}

// BenchmarkRealCatalogue schedules realisticMix(2000) on the embedded AWS
// catalogue (1,377 types, three zones, spot and on-demand).
func BenchmarkRealCatalogue(b *testing.B) {
	in := Input{Pods: realisticMix(2000), NodePools: realisticPools(), Catalog: catalog.Default()}
	runBench(b, in, len(in.Pods))
}

// BenchmarkPreferences: 4,000 pods with a satisfiable zone preference, an
// unsatisfiable zonal anti-preference (weight 10) and a satisfiable hostname
// anti-preference (weight 1), on Karpenter's 400 fake types.
func BenchmarkPreferences(b *testing.B) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pref"}}
	var pods []inventory.Pod
	for i := 0; i < 4000; i++ {
		pods = append(pods, inventory.Pod{Namespace: "default", Name: fmt.Sprintf("pref-%04d", i), Labels: map[string]string{"app": "pref"},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: catalog.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-1"}}}}}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
					{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: catalog.LabelZone, LabelSelector: sel}},
					{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: catalog.LabelHostname, LabelSelector: sel}},
				}},
			}})
	}
	in := Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(400))}}
	runBench(b, in, len(pods))
}

func runBench(b *testing.B, in Input, n int) {
	var res Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	start, startCPU := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		if res, err = Solve(in); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-startCPU
	b.StopTimer()
	if len(res.Unschedulable) > 0 {
		b.Fatalf("%d pods unschedulable, first: %s", len(res.Unschedulable), res.Unschedulable[0])
	}
	b.ReportMetric(float64(n)/(elapsed.Seconds()/float64(b.N)), "pods/s")
	if cpu > 0 {
		// Throughput per CPU-second (user+system, all threads incl. GC).
		b.ReportMetric(float64(n)/(cpu.Seconds()/float64(b.N)), "pods/cpu-s")
		b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/op")
	}
	b.ReportMetric(float64(len(res.NodeClaims)), "nodes")
	b.ReportMetric(res.Cost, "$/h")
	b.ReportMetric(res.KarpenterCost, "karpenter$/h")
	b.ReportMetric(res.LowerBound, "lb$/h")
	b.ReportMetric(res.TopologyLowerBound, "topo-lb$/h")
	if res.TopologyLowerBound > 0 {
		b.ReportMetric(res.Cost/res.TopologyLowerBound, "cost/lb")
	}
	if errs := Check(in, res); len(errs) > 0 {
		b.Fatalf("Check: %d errors, first: %v", len(errs), errs[0])
	}
}
