package engine

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// boundInstance is a small random instance: a few types with unrelated
// prices and shapes, a few pods, some of them kept one per node by a
// required hostname anti-affinity.
type boundInstance struct {
	types []InstanceType
	pods  []inventory.Pod
	// Brute-force view: allocatable and price per type, requests and
	// "solo" (the anti-affine ones) per pod, in milli-CPU and MiB.
	alloc [][2]int64
	price []float64
	req   [][2]int64
	solo  []bool
}

func randomBoundInstance(r *rand.Rand) boundInstance {
	var in boundInstance
	nTypes := 2 + r.Intn(3)
	for i := 0; i < nTypes; i++ {
		cpu, mem := int64(1+r.Intn(4)), int64(1+r.Intn(8))
		price := 0.01 + r.Float64()*(0.05*float64(cpu)+0.02*float64(mem))
		in.types = append(in.types, InstanceType{
			Name:   fmt.Sprintf("t%d", i),
			Labels: map[string]string{catalog.LabelInstanceType: fmt.Sprintf("t%d", i), catalog.LabelArch: "amd64", catalog.LabelOS: "linux"},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", mem)),
				corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
			},
			Offerings: []catalog.Offering{{Zone: "test-zone-1", CapacityType: catalog.CapacityTypeOnDemand, Price: price}},
		})
		in.alloc = append(in.alloc, [2]int64{cpu * 1000, mem * 1024})
		in.price = append(in.price, price)
	}
	var maxCPU, maxMem int64
	for _, a := range in.alloc {
		maxCPU, maxMem = max(maxCPU, a[0]), max(maxMem, a[1])
	}
	soloSel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}
	nPods := 2 + r.Intn(5)
	for i := 0; i < nPods; i++ {
		// Every pod fits the type with the most CPU or the most memory,
		// whichever holds both of its requests.
		var cpu, mem int64
		for {
			cpu, mem = 100*int64(1+r.Intn(int(maxCPU/100))), 128*int64(1+r.Intn(int(maxMem/128)))
			if in.fitsSome(cpu, mem) {
				break
			}
		}
		solo := r.Intn(2) == 0
		p := inventory.Pod{Namespace: "default", Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "other"},
			Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", mem))}}
		if solo {
			p.Labels["app"] = "solo"
			p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: catalog.LabelHostname, LabelSelector: soloSel}}}}
		}
		in.pods = append(in.pods, p)
		in.req = append(in.req, [2]int64{cpu, mem})
		in.solo = append(in.solo, solo)
	}
	return in
}

func (in *boundInstance) fitsSome(cpu, mem int64) bool {
	for _, a := range in.alloc {
		if cpu <= a[0] && mem <= a[1] {
			return true
		}
	}
	return false
}

// optimum is the cheapest fleet for the pods, by brute force over every
// partition of the pods into nodes (restricted growth strings), each node
// the cheapest type that holds its pods, with at most one solo pod a node.
func (in *boundInstance) optimum() float64 {
	n := len(in.pods)
	best := math.Inf(1)
	block := make([]int, n)
	var rec func(i, blocks int)
	rec = func(i, blocks int) {
		if i == n {
			total := 0.0
			for b := 0; b < blocks; b++ {
				var cpu, mem int64
				solos := 0
				for p := 0; p < n; p++ {
					if block[p] == b {
						cpu, mem = cpu+in.req[p][0], mem+in.req[p][1]
						if in.solo[p] {
							solos++
						}
					}
				}
				cheapest := math.Inf(1)
				for t, a := range in.alloc {
					if cpu <= a[0] && mem <= a[1] {
						cheapest = min(cheapest, in.price[t])
					}
				}
				if solos > 1 || math.IsInf(cheapest, 1) {
					return
				}
				total += cheapest
			}
			best = min(best, total)
			return
		}
		for b := 0; b <= blocks; b++ {
			block[i] = b
			nb := blocks
			if b == blocks {
				nb++
			}
			rec(i+1, nb)
		}
	}
	rec(0, 0)
	return best
}

// perPodCharge is a deliberately invalid "bound": every solo pod charged
// the cheapest type that holds it, plus the other pods' CPU at the cheapest
// price per CPU. A solo pod's node may hold the others for nothing, so it
// can exceed the optimum; the check below must catch it.
func (in *boundInstance) perPodCharge() float64 {
	total, rate, rest := 0.0, math.Inf(1), int64(0)
	for t, a := range in.alloc {
		rate = min(rate, in.price[t]/float64(a[0]))
	}
	for p, req := range in.req {
		if !in.solo[p] {
			rest += req[0]
			continue
		}
		cheapest := math.Inf(1)
		for t, a := range in.alloc {
			if req[0] <= a[0] && req[1] <= a[1] {
				cheapest = min(cheapest, in.price[t])
			}
		}
		total += cheapest
	}
	return total + rate*float64(rest)
}

// TestLowerBoundsAreLowerBounds: on 400 small random instances (2-4 types
// with unrelated prices, 2-6 pods, about half of them kept one per node by
// required hostname anti-affinity) both bounds are at most the optimum found
// by brute force, the engine's fleet is at least it, and the topology-aware
// bound is above the LP bound on some. The same comparison rejects a
// deliberately invalid bound (perPodCharge), so it can fail.
func TestLowerBoundsAreLowerBounds(t *testing.T) {
	r := rand.New(rand.NewSource(20))
	tighter, invalid := 0, 0
	for i := 0; i < 400; i++ {
		in := randomBoundInstance(r)
		res, err := Solve(Input{Pods: in.pods, NodePools: []NodePool{hugePool("default", in.types)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Unschedulable) > 0 {
			t.Fatalf("instance %d: %d pods unschedulable: %v", i, len(res.Unschedulable), res.Unschedulable[0])
		}
		opt := in.optimum()
		const eps = 1e-9
		if res.Cost < opt-eps {
			t.Fatalf("instance %d: the engine's fleet $%v is below the brute-force optimum $%v: the brute force is wrong", i, res.Cost, opt)
		}
		if res.LowerBound > opt+eps || res.TopologyLowerBound > opt+eps {
			t.Fatalf("instance %d: bounds $%v (LP) and $%v (topology) above the optimum $%v\npods %v solo %v\ntypes %v prices %v",
				i, res.LowerBound, res.TopologyLowerBound, opt, in.req, in.solo, in.alloc, in.price)
		}
		if res.TopologyLowerBound > res.LowerBound+1e-6 {
			tighter++
		}
		if in.perPodCharge() > opt+eps {
			invalid++
		}
	}
	if tighter == 0 {
		t.Error("the topology-aware bound was never tighter than the LP bound")
	}
	if invalid == 0 {
		t.Error("the per-pod charge never exceeded the optimum: the comparison cannot tell a bound from an invalid one")
	}
	t.Logf("topology bound tighter on %d of 400, per-pod charge above the optimum on %d", tighter, invalid)
}

// TestImproveKeepsThePodsOnClaims: the bounds are worked out from the pods
// the queue put on claims while improve runs, which is right only if
// improve and finalize leave the same pods on claims.
func TestImproveKeepsThePodsOnClaims(t *testing.T) {
	inputs := map[string]Input{
		"karpenter mix":  {Pods: karpenterMix(2000), NodePools: []NodePool{hugePool("default", fakeInstanceTypes(400))}},
		"real catalogue": {Pods: realisticMix(500), NodePools: realisticPools(), Catalog: catalog.Default()},
	}
	for seed := int64(1); seed <= 30; seed++ {
		inputs[fmt.Sprintf("random %d", seed)] = randomWorkload(rand.New(rand.NewSource(seed)), 20+int(seed)*4)
	}
	for name, in := range inputs {
		s := newScheduler(in.Options)
		pods, err := s.queue(in, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before := s.podsOnClaims(pods)
		s.improve()
		s.finalize()
		if after := s.podsOnClaims(pods); !slices.Equal(before, after) {
			t.Errorf("%s: %d pods on claims after the queue, %d after improve", name, len(before), len(after))
		}
	}
}
