package engine

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func TestCheckKarpenterMix(t *testing.T) {
	in := Input{Pods: karpenterMix(500), NodePools: []NodePool{hugePool("default", fakeInstanceTypes(400))}}
	for _, only := range []bool{true, false} {
		in.Options.KarpenterOnly = only
		res, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		if errs := Check(in, res); len(errs) > 0 {
			t.Fatalf("KarpenterOnly=%v: %d violations, first: %v", only, len(errs), errs[0])
		}
		if len(res.Unschedulable) > 0 || len(res.NodeClaims) != 100 {
			t.Fatalf("KarpenterOnly=%v: %d unschedulable, %d nodes (want 0 and 100: one per anti-affine pod)", only, len(res.Unschedulable), len(res.NodeClaims))
		}
		if res.Cost < res.LowerBound {
			t.Fatalf("cost %v below the lower bound %v", res.Cost, res.LowerBound)
		}
	}
}

// TestCheckCatchesViolations makes sure the checker can fail.
func TestCheckCatchesViolations(t *testing.T) {
	in := Input{Pods: karpenterMix(50), NodePools: []NodePool{hugePool("default", fakeInstanceTypes(20))}}
	res, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	bad := res
	bad.NodeClaims = append([]NodeClaim(nil), res.NodeClaims...)
	// Put every pod on the first claim: anti-affinity and resources break.
	first := bad.NodeClaims[0]
	for _, nc := range bad.NodeClaims[1:] {
		first.Pods = append(first.Pods, nc.Pods...)
		first.Seq = append(first.Seq, nc.Seq...)
	}
	bad.NodeClaims = []NodeClaim{first}
	if errs := Check(in, bad); len(errs) == 0 {
		t.Fatal("checker accepted every pod on one node")
	}
	drop := res
	drop.NodeClaims = res.NodeClaims[1:]
	if errs := Check(in, drop); len(errs) == 0 {
		t.Fatal("checker accepted a result that lost pods")
	}
}

// randomWorkload draws pods with every constraint kind the engine supports.
func randomWorkload(r *rand.Rand, n int) Input {
	types := fakeInstanceTypes(40)
	gpu := NodePool{Name: "gpu", InstanceTypes: types[20:], Spec: apiv1.NodePoolSpec{Weight: ptr[int32](10), Template: apiv1.NodeClaimTemplate{
		ObjectMeta: apiv1.TemplateMetadata{Labels: map[string]string{"team": "ml"}},
		Spec:       apiv1.NodeClaimTemplateSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}}}}}
	general := NodePool{Name: "general", InstanceTypes: types, Spec: apiv1.NodePoolSpec{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(r.Intn(400) + 50))},
		Template: apiv1.NodeClaimTemplate{Spec: apiv1.NodeClaimTemplateSpec{Requirements: []apiv1.NodeSelectorRequirementWithMinValues{
			{Key: catalog.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-1", "test-zone-2", "test-zone-3"}}}}}}}
	in := Input{NodePools: []NodePool{general, gpu}}
	zones := []string{"test-zone-1", "test-zone-2", "test-zone-3", "test-zone-4"}
	apps := []string{"a", "b", "c"}
	for i := 0; i < n; i++ {
		app := apps[r.Intn(len(apps))]
		p := inventory.Pod{Namespace: "ns", Name: fmt.Sprintf("p%03d", i), Labels: map[string]string{"app": app},
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(50+r.Intn(8000)), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(1+r.Intn(16000))<<20, resource.BinarySI)}}
		switch r.Intn(9) {
		case 0:
			p.NodeSelector = map[string]string{catalog.LabelZone: zones[r.Intn(len(zones))]}
		case 1:
			p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			p.NodeSelector = map[string]string{"team": "ml"}
		case 2:
			p.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: int32(1 + r.Intn(2)), TopologyKey: []string{catalog.LabelZone, catalog.LabelHostname}[r.Intn(2)],
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		case 3:
			p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: []string{catalog.LabelZone, catalog.LabelHostname}[r.Intn(2)], LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
		case 4:
			p.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: []string{catalog.LabelZone, catalog.LabelHostname}[r.Intn(2)], LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
		case 5:
			p.HostPorts = []inventory.HostPort{{Port: 8080, Protocol: corev1.ProtocolTCP}}
		case 6:
			p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"nope"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: catalog.LabelZone, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"test-zone-1"}}}},
			}}}}
		case 7:
			p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey: catalog.LabelZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}}
		}
		in.Pods = append(in.Pods, p)
	}
	if r.Intn(2) == 0 {
		in.DaemonSets = []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m"), corev1.ResourceMemory: resource.MustParse("200Mi")}}}
	}
	if r.Intn(2) == 0 {
		in.ExistingNodes = []ExistingNode{{Node: inventory.Node{Name: "old-1", Labels: map[string]string{catalog.LabelZone: "test-zone-1", catalog.LabelArch: "amd64"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("50")}},
			Pods: []inventory.Pod{{Namespace: "ns", Name: "old-pod", Labels: map[string]string{"app": "a"}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}
	}
	return in
}

// TestPropertyRandomWorkloads: on random workloads, the independent checker
// finds nothing wrong, with and without the improvement pass, and the cost
// never drops below the lower bound.
func TestPropertyRandomWorkloads(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := randomWorkload(r, 20+r.Intn(120))
		for _, only := range []bool{true, false} {
			in.Options.KarpenterOnly = only
			res, err := Solve(in)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if errs := Check(in, res); len(errs) > 0 {
				t.Fatalf("seed %d KarpenterOnly=%v: %d violations, first: %v", seed, only, len(errs), errs[0])
			}
			if res.Cost+1e-9 < res.TopologyLowerBound || res.TopologyLowerBound+1e-9 < res.LowerBound {
				t.Fatalf("seed %d: cost %v, topology lower bound %v, lower bound %v: want cost ≥ topology ≥ LP", seed, res.Cost, res.TopologyLowerBound, res.LowerBound)
			}
			if !only && res.Cost > res.KarpenterCost+1e-9 {
				t.Fatalf("seed %d: improved cost %v above Karpenter's %v", seed, res.Cost, res.KarpenterCost)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestTopologyLowerBound: pods that required hostname anti-affinity keeps
// apart force one node each, so the topology-aware bound is that many of the
// cheapest type that holds one — which is also what the engine launches —
// while the LP bound prices only their requests.
func TestTopologyLowerBound(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "alone"}}
	var pods []inventory.Pod
	for i := 0; i < 6; i++ {
		pods = append(pods, inventory.Pod{Namespace: "default", Name: fmt.Sprintf("alone-%d", i), Labels: map[string]string{"app": "alone"},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: catalog.LabelHostname, LabelSelector: sel}}}}})
	}
	types := fakeInstanceTypes(10)
	res, err := Solve(Input{Pods: pods, NodePools: []NodePool{hugePool("default", types)}})
	if err != nil {
		t.Fatal(err)
	}
	smallest := types[0].Offerings[0].Price
	if len(res.NodeClaims) != 6 || math.Abs(res.Cost-6*smallest) > 1e-9 {
		t.Fatalf("%d nodes at $%v/h, want 6 of the smallest type ($%v/h)", len(res.NodeClaims), res.Cost, 6*smallest)
	}
	if math.Abs(res.TopologyLowerBound-res.Cost) > 1e-6 {
		t.Errorf("topology lower bound %v, want the cost %v", res.TopologyLowerBound, res.Cost)
	}
	if res.LowerBound > res.Cost/2 {
		t.Errorf("LP lower bound %v: want it to miss the forced nodes (< %v)", res.LowerBound, res.Cost/2)
	}
}

// TestFewClaimsListGivesTheScansAnswer: small one-per-node pods, queued
// after the Karpenter mix, fill the claims it opened; once they are on ¾ of
// them, they look only at the list of claims they are not on yet
// (fewClaims). The result is the scans' own.
func TestFewClaimsListGivesTheScansAnswer(t *testing.T) {
	pods := karpenterMix(2000)
	for i := 0; i < 600; i++ {
		pods = append(pods, inventory.Pod{Namespace: "default", Name: fmt.Sprintf("solo-%03d", i), Labels: map[string]string{"app": "solo"},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}, TopologyKey: catalog.LabelHostname}}}}})
	}
	defer func(v int) { fewMinClaims = v }(fewMinClaims)
	for _, karpenterOnly := range []bool{false, true} {
		in := Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(100))}, Options: Options{KarpenterOnly: karpenterOnly}}
		fewMinClaims = 64
		withList, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		fewMinClaims = math.MaxInt
		scans, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(withList, scans) {
			t.Errorf("KarpenterOnly=%v: the list gives %d nodes $%.2f/h, the scans %d nodes $%.2f/h", karpenterOnly,
				len(withList.NodeClaims), withList.Cost, len(scans.NodeClaims), scans.Cost)
		}
		if errs := Check(in, withList); len(errs) > 0 {
			t.Errorf("KarpenterOnly=%v: Check: %v", karpenterOnly, errs[0])
		}
	}
}

// TestCheckReportsInOrder: Check's problems come in the same order every
// time — overcommitted nodes by name, each node's resources by name,
// pods neither placed nor reported by namespace/name. They came in map
// order, so the sandbox's record of an invalid consolidation command (its
// problems are Check's) differed from run to run on one seed.
func TestCheckReportsInOrder(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	withPods := func(l corev1.ResourceList) corev1.ResourceList {
		l[corev1.ResourcePods] = resource.MustParse("110")
		return l
	}
	var in Input
	for _, name := range []string{"node-c", "node-a", "node-d", "node-b"} {
		in.ExistingNodes = append(in.ExistingNodes, ExistingNode{
			Node: inventory.Node{Name: name, Allocatable: withPods(rl("1", "1Gi"))},
			Pods: []inventory.Pod{{Namespace: "app", Name: "big-" + name, NodeName: name, Requests: rl("2", "2Gi")}},
		})
	}
	for _, name := range []string{"web-3", "web-1", "web-4", "web-2"} {
		in.Pods = append(in.Pods, inventory.Pod{Namespace: "app", Name: name, Requests: rl("100m", "100Mi")})
	}
	var want []string
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		want = append(want, fmt.Sprintf("node %s: cpu requested 2 exceeds allocatable 1", n), fmt.Sprintf("node %s: memory requested 2Gi exceeds allocatable 1Gi", n))
	}
	pendingWant := []string{"app/web-1 is neither placed nor reported unschedulable", "app/web-2 is neither placed nor reported unschedulable",
		"app/web-3 is neither placed nor reported unschedulable", "app/web-4 is neither placed nor reported unschedulable"}
	want = append(pendingWant, want...)
	for range 20 {
		var got []string
		for _, err := range Check(in, Result{}) {
			got = append(got, err.Error())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("problems\n%v\nwant\n%v", got, want)
		}
	}
}
