package engine

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// fakeInstanceTypes reproduces Karpenter's fake.InstanceTypes(n): fake-it-i
// with i+1 CPU, 2(i+1) GiB, 10(i+1) pods, kube-reserved 100m/10Mi, amd64,
// linux/windows/darwin, spot in test-zone-1/2 and on-demand in 1/2/3, every
// offering priced 0.1×CPU + 0.1×GB.
func fakeInstanceTypes(n int) []InstanceType {
	out := make([]InstanceType, 0, n)
	for i := 0; i < n; i++ {
		cpu := int64(i + 1)
		mem := resource.MustParse(fmt.Sprintf("%dGi", (i+1)*2))
		price := 0.1*float64(cpu) + 0.1*float64(mem.Value())/1e9
		var offs []catalog.Offering
		for _, z := range []string{"test-zone-1", "test-zone-2"} {
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: catalog.CapacityTypeSpot, Price: price})
		}
		for _, z := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: catalog.CapacityTypeOnDemand, Price: price})
		}
		out = append(out, InstanceType{
			Name:        fmt.Sprintf("fake-it-%d", i),
			Labels:      map[string]string{catalog.LabelInstanceType: fmt.Sprintf("fake-it-%d", i), catalog.LabelArch: "amd64"},
			MultiLabels: map[string][]string{catalog.LabelOS: {"linux", "windows", "darwin"}},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: mem,
				corev1.ResourcePods:   *resource.NewQuantity(int64(i+1)*10, resource.DecimalSI),
			},
			Overhead:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")},
			Offerings: offs,
		})
	}
	return out
}

func hugePool(name string, types []InstanceType) NodePool {
	return NodePool{Name: name, InstanceTypes: types, Spec: apiv1.NodePoolSpec{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100000000"), corev1.ResourceMemory: resource.MustParse("100000000Gi")},
	}}
}

// karpenterMix reproduces makeDiversePods from Karpenter's
// scheduling_benchmark_test.go, in the same order of random draws.
func karpenterMix(count int) []inventory.Pod {
	r := rand.New(rand.NewSource(42))
	vals := []string{"a", "b", "c", "d", "e", "f", "g"}
	label := func() string { return vals[r.Intn(len(vals))] }
	res := func() corev1.ResourceList {
		cpu := []int{100, 250, 500, 1000, 1500}
		mem := []int{100, 256, 512, 1024, 2048, 4096}
		return corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("%dm", cpu[r.Intn(len(cpu))])),
			corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", mem[r.Intn(len(mem))])),
		}
	}
	var pods []inventory.Pod
	add := func(p inventory.Pod) {
		p.Namespace = "default"
		p.Name = fmt.Sprintf("pod-%05d", len(pods))
		pods = append(pods, p)
	}
	generic := func(n int) {
		for i := 0; i < n; i++ {
			add(inventory.Pod{Labels: map[string]string{"my-label": label()}, Requests: res()})
		}
	}
	spread := func(n int, key string) {
		for i := 0; i < n; i++ {
			l := map[string]string{"my-label": label()}
			sel := map[string]string{"my-label": label()}
			add(inventory.Pod{Labels: l, Requests: res(), TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}}})
		}
	}
	affinity := func(n int, key string) {
		for i := 0; i < n; i++ {
			l := map[string]string{"my-affininity": label()}
			add(inventory.Pod{Labels: l, Requests: res(), Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: key}}}}})
		}
	}
	anti := func(n int, key string) {
		l := map[string]string{"app": "nginx"}
		for i := 0; i < n; i++ {
			add(inventory.Pod{Labels: l, Requests: res(), Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: key}}}}})
		}
	}
	generic(count / 5)
	spread(count/5, catalog.LabelZone)
	spread(count/5, catalog.LabelHostname)
	affinity(count/5, catalog.LabelZone)
	anti(count/5, catalog.LabelHostname)
	generic(count - len(pods))
	return pods
}
