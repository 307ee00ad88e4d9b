package engine

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// randomCluster is a cluster of nodes built from a few templates, so that
// many nodes carry pods equal but for their names (what Cluster.Solve
// answers from memory): full, half-full and overcommitted nodes, tainted
// ones, cordoned ones, pods without requests, with tolerations, host ports,
// node selectors and node affinity. With topology, some pods also spread
// over zones.
func randomCluster(r *rand.Rand, nodes int, topology bool) Input {
	types := fakeInstanceTypes(20)
	in := Input{NodePools: []NodePool{
		{Name: "general", InstanceTypes: types},
		{Name: "tainted", InstanceTypes: types[4:], Spec: apiv1.NodePoolSpec{Template: apiv1.NodeClaimTemplate{
			Spec: apiv1.NodeClaimTemplateSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}}}},
	}}
	zones := []string{"test-zone-1", "test-zone-2", "test-zone-3"}
	type template struct {
		alloc string
		pods  []inventory.Pod
	}
	pod := func(cpu, mem string, mods ...func(*inventory.Pod)) inventory.Pod {
		p := inventory.Pod{Labels: map[string]string{"app": cpu}, Requests: corev1.ResourceList{}}
		if cpu != "" {
			p.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			p.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		for _, m := range mods {
			m(&p)
		}
		return p
	}
	tolerant := func(p *inventory.Pod) {
		p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
	ported := func(p *inventory.Pod) { p.HostPorts = []inventory.HostPort{{Port: 9100, Protocol: corev1.ProtocolTCP}} }
	pinned := func(p *inventory.Pod) {
		p.NodeSelector = map[string]string{catalog.LabelZone: zones[r.Intn(len(zones))]}
	}
	affine := func(p *inventory.Pod) {
		p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: catalog.LabelZone, Operator: corev1.NodeSelectorOpNotIn, Values: zones[:1]}}}}}}}
	}
	templates := []template{
		{"4", []inventory.Pod{pod("1", "2Gi"), pod("1", "2Gi"), pod("1500m", "1Gi"), pod("400m", "512Mi")}}, // full
		{"4", []inventory.Pod{pod("1", "1Gi"), pod("500m", "1Gi", ported)}},                                 // half
		{"8", []inventory.Pod{pod("2", "4Gi", pinned), pod("", ""), pod("100m", "128Mi", tolerant)}},        // room
		{"2", []inventory.Pod{pod("1500m", "1Gi"), pod("1", "1Gi")}},                                        // overcommitted
		{"4", []inventory.Pod{pod("250m", "256Mi", affine), pod("3", "2Gi")}},                               // parsed
	}
	if topology {
		// The spread pods select the 500m pods; the anti-affinity pods
		// (a Karpenter controller's, say) select only their own kind.
		templates = append(templates, template{"8", []inventory.Pod{pod("500m", "1Gi", func(p *inventory.Pod) {
			p.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: catalog.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "500m"}}}}
		}), pod("200m", "256Mi", func(p *inventory.Pod) {
			p.Labels = map[string]string{"app": "controller"}
			p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: catalog.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "controller"}}},
				{TopologyKey: catalog.LabelZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "controller"}}},
			}}}
		})}})
	}
	for i := range nodes {
		t := templates[r.Intn(len(templates))]
		name := fmt.Sprintf("node-%03d", i)
		n := ExistingNode{Node: inventory.Node{Name: name, Labels: map[string]string{catalog.LabelZone: zones[r.Intn(len(zones))]},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(t.alloc), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")}}}
		switch r.Intn(8) {
		case 0:
			n.Node.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
		case 1:
			n.Node.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
		case 2:
			n.Node.Unschedulable = r.Intn(3) == 0
		}
		for j, p := range t.pods {
			p.Namespace, p.Name, p.NodeName = fmt.Sprintf("ns-%d", r.Intn(3)), fmt.Sprintf("%s-p%d", name, j), name
			n.Pods = append(n.Pods, p)
		}
		in.ExistingNodes = append(in.ExistingNodes, n)
	}
	return in
}

// answers counts what the Cluster remembers.
func answers(c *Cluster) int {
	n := 0
	for _, m := range c.lin.memo {
		n += len(m)
	}
	return n
}

// simulateWithout simulates, through c, the nodes in without gone and
// their pods placed with pods on base's other nodes, and fails the test
// unless the answer is exactly Solve's. It returns the input Solve was
// given, the answer and its error, and whether c answered from memory.
func simulateWithout(t *testing.T, c *Cluster, base Input, pods []inventory.Pod, without []int, what string) (Input, Result, error, bool) {
	t.Helper()
	in := base
	in.ExistingNodes, in.Pods = nil, pods
	for i, n := range base.ExistingNodes {
		if slices.Contains(without, i) {
			in.Pods = append(in.Pods, n.Pods...)
			continue
		}
		in.ExistingNodes = append(in.ExistingNodes, n)
	}
	want, werr := Solve(in)
	memo := answers(c)
	got, gerr := c.Solve(NewPods(in.Pods), without)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("%s without %v: error %v, Solve's %v", what, without, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s without %v:\ngot  %+v\nwant %+v", what, without, got, want)
	}
	return in, got, gerr, answers(c) == memo
}

// Cluster.Solve gives exactly Solve's result — placements, claims, reasons,
// costs — for every simulation of "these nodes' pods without these nodes",
// whether it leaves nodes out, answers from memory or, when a bound pod's
// topology term selects one of the pods, solves the whole input (with
// topology the Cluster also leaves nodes out for pods no bound term
// selects); and, without topology, the checker finds nothing wrong with it
// but the overcommitted nodes it was given.
func TestClusterSolveIsSolve(t *testing.T) {
	var solves, remembered, leftOut, failed, topologyLeftOut int
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		topology := seed%4 == 0
		base := randomCluster(r, 20+r.Intn(40), topology)
		base.Options.KarpenterOnly = seed%2 == 0
		if seed%5 == 2 {
			// A bound pod Solve rejects: no simulation may leave its node out.
			n := &base.ExistingNodes[r.Intn(len(base.ExistingNodes))]
			n.Pods = append(slices.Clone(n.Pods), inventory.Pod{Namespace: "ns-0", Name: n.Node.Name + "-broken", NodeName: n.Node.Name,
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: catalog.LabelZone, Operator: "Near"}}}}}}}})
		}
		c := NewCluster(base)
		for range 30 {
			// One candidate mostly, sometimes several.
			without := []int{r.Intn(len(base.ExistingNodes))}
			for r.Intn(4) == 0 {
				without = append(without, r.Intn(len(base.ExistingNodes)))
			}
			in, got, gerr, fromMemory := simulateWithout(t, c, base, base.Pods, without, fmt.Sprintf("seed %d (topology %v)", seed, topology))
			solves++
			if gerr != nil {
				failed++
			}
			if gerr != nil || slices.ContainsFunc(got.Unschedulable, func(u Unschedulable) bool { return strings.HasPrefix(u.Reasons[""], "invalid pod") }) {
				continue // the broken pod's: nothing for the checker
			}
			// Overcommitted nodes are the input's fault: the checker reports
			// them with nothing to place too.
			bound := in
			bound.Pods = nil
			overcommitted := map[string]bool{}
			for _, err := range Check(bound, Result{}) {
				overcommitted[err.Error()] = true
			}
			// With topology the Cluster is Solve itself (compared above). On
			// these layouts, whose spread pods already break their skew, the
			// checker disagrees with Solve (seed 28): not the Cluster's doing.
			for _, err := range Check(in, got) {
				if !overcommitted[err.Error()] && !topology {
					t.Fatalf("seed %d without %v: %v", seed, without, err)
				}
			}
			if fromMemory && !topology {
				remembered++
			}
		}
		for _, tk := range c.takers {
			if tk.prune && len(tk.nodes) < len(base.ExistingNodes) {
				leftOut++
				if topology {
					topologyLeftOut++
				}
			}
		}
	}
	// The test exercises what it claims to.
	if remembered == 0 || leftOut == 0 || failed == 0 || topologyLeftOut == 0 {
		t.Fatalf("%d simulations: %d answered from memory, %d node sets left nodes out (%d with bound topology), %d failed on a bound pod; want some of each", solves, remembered, leftOut, topologyLeftOut, failed)
	}
}

// SkipLowerBounds, which consolidation's simulations set, changes nothing
// but the two bounds, which it leaves at 0.
func TestSkipLowerBoundsChangesOnlyTheBounds(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := randomCluster(r, 20+r.Intn(40), seed%2 == 0)
		in.Pods, in.ExistingNodes = append(in.Pods, in.ExistingNodes[0].Pods...), in.ExistingNodes[1:]
		want, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		if want.LowerBound == 0 && len(want.NodeClaims) > 0 {
			t.Fatalf("seed %d: no lower bound for %d new claims", seed, len(want.NodeClaims))
		}
		in.Options.SkipLowerBounds = true
		got, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		if got.LowerBound != 0 || got.TopologyLowerBound != 0 {
			t.Fatalf("seed %d: bounds %v, %v with SkipLowerBounds", seed, got.LowerBound, got.TopologyLowerBound)
		}
		got.LowerBound, got.TopologyLowerBound = want.LowerBound, want.TopologyLowerBound
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: SkipLowerBounds changed the result:\ngot  %+v\nwant %+v", seed, got, want)
		}
	}
}

// A Cluster made from an earlier one (a plan's next wave, consolidation's
// next pass) answers as Solve does: nodes changed, removed and added, and
// either the pools changed, with nodes with extended resources whose slots
// move (reading them from the earlier Cluster would put their GPUs in
// another resource's slot), or the same pools, whose answers it shares
// with the earlier Cluster (one remembered for nodes since changed, or for
// other nodes that may take the pods, would be wrong). Made from an earlier
// Cluster with nothing changed, it answers what that one was asked from
// memory.
func TestClusterFromIsNewCluster(t *testing.T) {
	const gpu, fpga = corev1.ResourceName("example.com/gpu"), corev1.ResourceName("example.com/fpga")
	gpuTypes := fakeInstanceTypes(4)
	for i := range gpuTypes {
		gpuTypes[i].Name = fmt.Sprintf("gpu-it-%d", i)
		gpuTypes[i].Labels = map[string]string{catalog.LabelInstanceType: gpuTypes[i].Name}
		gpuTypes[i].Capacity = gpuTypes[i].Capacity.DeepCopy()
		gpuTypes[i].Capacity[gpu] = resource.MustParse("8")
	}
	var solves, reused, remembered int
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		topology := seed%5 == 0
		prevIn := randomCluster(r, 20+r.Intn(30), topology)
		prevIn.Options.KarpenterOnly = seed%2 == 0
		prevIn.NodePools = append(prevIn.NodePools, NodePool{Name: "gpu", InstanceTypes: gpuTypes})
		// GPU nodes, each with a pod using one of its four GPUs.
		for k := range 3 {
			name := fmt.Sprintf("gpu-node-%d", k)
			prevIn.ExistingNodes = append(prevIn.ExistingNodes, ExistingNode{
				Node: inventory.Node{Name: name, Labels: map[string]string{catalog.LabelZone: "test-zone-1"}, Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("20"), gpu: resource.MustParse("4")}},
				Pods: []inventory.Pod{{Namespace: "ml", Name: name + "-train", NodeName: name, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("1")}}},
			})
		}
		// Sets of nodes to simulate without.
		withouts := func(nodes int) [][]int {
			var out [][]int
			for range 40 {
				without := []int{r.Intn(nodes)}
				for r.Intn(4) == 0 {
					without = append(without, r.Intn(nodes))
				}
				out = append(out, without)
			}
			return out
		}
		// simulate places the nodes' pods without them, and a pod that
		// needs two GPUs, and returns how many answers came from memory.
		simulate := func(c *Cluster, nodes Input, withouts [][]int) int {
			hits := 0
			for _, without := range withouts {
				infer := []inventory.Pod{{Namespace: "ml", Name: "infer", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("2")}}}
				_, _, _, fromMemory := simulateWithout(t, c, nodes, infer, without, fmt.Sprintf("seed %d (topology %v)", seed, topology))
				solves++
				if fromMemory {
					hits++
				}
			}
			return hits
		}
		prev := NewCluster(prevIn)
		asked := withouts(len(prevIn.ExistingNodes))
		simulate(prev, prevIn, asked)
		if !topology {
			// Nothing changed: every answer from memory.
			again := NewClusterFrom(prev, prevIn, slices.Collect(func(yield func(int) bool) {
				for i := range prevIn.ExistingNodes {
					yield(i)
				}
			}))
			if hits := simulate(again, prevIn, asked); hits != len(asked) {
				t.Fatalf("seed %d: %d of %d simulations asked again answered from memory", seed, hits, len(asked))
			}
			remembered += len(asked)
		}
		// The next cluster: the same pools, or the GPU pool gone (its slot
		// goes to the FPGA node first); some nodes given a pod, some
		// removed, some added.
		next := prevIn
		if seed%2 == 0 {
			next.NodePools = prevIn.NodePools[:2]
		}
		next.ExistingNodes = []ExistingNode{{Node: inventory.Node{Name: "fpga-node", Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20"), fpga: resource.MustParse("1")}}}}
		same := []int{-1}
		for j, n := range prevIn.ExistingNodes {
			switch r.Intn(6) {
			case 0: // removed
				continue
			case 1: // given a pod
				n.Pods = append(slices.Clone(n.Pods), inventory.Pod{Namespace: "ns-0", Name: n.Node.Name + "-new", NodeName: n.Node.Name,
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
				same = append(same, -1)
			default:
				same = append(same, j)
			}
			next.ExistingNodes = append(next.ExistingNodes, n)
		}
		added := randomCluster(r, 5, false).ExistingNodes
		for k := range added {
			added[k].Node.Name += "-added"
		}
		next.ExistingNodes = append(next.ExistingNodes, added...)
		same = append(same, slices.Repeat([]int{-1}, len(added))...)
		c := NewClusterFrom(prev, next, same)
		for k, j := range same {
			if j >= 0 && c.base[k] {
				reused++
			}
		}
		if shared := c.lin == prev.lin; shared != (seed%2 == 1) {
			t.Fatalf("seed %d: answers shared %v with the pools the same %v", seed, shared, seed%2 == 1)
		}
		simulate(c, next, withouts(len(next.ExistingNodes)))
	}
	if reused == 0 || remembered == 0 {
		t.Fatalf("%d simulations, %d nodes taken over, %d answered from an earlier Cluster's memory: want some of each", solves, reused, remembered)
	}
}
