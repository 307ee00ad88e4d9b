package disruption

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// randomCluster builds a cluster of n Karpenter nodes in two NodePools with
// about podsPerNode pods each at mixed utilisation: some nodes nearly
// empty, some full; a few pods behind a PDB allowing 0 disruptions, a few
// do-not-disrupt, zonal spread and hostname anti-affinity for some apps,
// DaemonSet pods everywhere, a few empty nodes and pending pods.
func randomCluster(r *rand.Rand, n, podsPerNode int) Input {
	types := testTypes(6)
	pools := []engine.NodePool{
		newPool("general", types, budgetsOf(apiv1.Budget{Nodes: "20%"})),
		newPool("batch", types, onDemandOnly, func(np *engine.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "batch", Effect: corev1.TaintEffectNoSchedule}}
			np.Spec.Disruption.Budgets = []apiv1.Budget{{Nodes: "3"}}
			if r.Intn(2) == 0 {
				np.Spec.Disruption.ConsolidationPolicy = apiv1.ConsolidationPolicyBalanced
			}
		}),
	}
	in := Input{NodePools: pools, Now: t0,
		DaemonSets: []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
		PDBs: []inventory.PDB{
			{Namespace: "default", Name: "db", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, MinAvailable: ptr(intstr.FromInt32(3)), DisruptionsAllowed: 0},
			{Namespace: "default", Name: "api", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}, MaxUnavailable: ptr(intstr.FromInt32(1)), DisruptionsAllowed: 1},
		}}
	apps := []string{"web", "api", "worker", "db", "cache", "batch"}
	podN := 0
	mkPod := func(app string) inventory.Pod {
		podN++
		cpu := []string{"100m", "250m", "500m", "1", "2"}[r.Intn(5)]
		mem := []string{"128Mi", "512Mi", "1Gi", "2Gi"}[r.Intn(4)]
		p := inventory.Pod{Namespace: "default", Name: fmt.Sprintf("%s-%05d", app, podN), Phase: corev1.PodRunning, Labels: map[string]string{"app": app},
			OwnerKind: inventory.OwnerDeployment, OwnerName: app,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
		switch app {
		case "web":
			p.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: catalog.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		case "cache":
			p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: catalog.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}}}}
		case "batch":
			p.Tolerations = []corev1.Toleration{{Key: "batch", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			p.NodeSelector = map[string]string{catalog.LabelNodePool: "batch"}
		}
		if r.Intn(40) == 0 {
			p.Annotations = map[string]string{apiv1.DoNotDisruptAnnotationKey: "true"}
		}
		if r.Intn(10) == 0 {
			p.Priority = ptr(int32(r.Intn(1000000)))
		}
		return p
	}
	for i := 0; i < n; i++ {
		poolName, taint := "general", false
		if i%5 == 4 {
			poolName, taint = "batch", true
		}
		t := types[2+r.Intn(4)] // 4 to 32 CPU
		ct := od
		if !taint && r.Intn(3) == 0 {
			ct = spot
		}
		node := kNode(fmt.Sprintf("node-%04d", i), poolName, t, zones[r.Intn(len(zones))], ct)
		if taint {
			node.Node.Taints = pools[1].Spec.Template.Spec.Taints
		}
		if r.Intn(25) == 0 {
			node.LastPodEventTime = t0.Add(-5 * time.Second) // inside consolidateAfter
		}
		agent := inventory.Pod{Namespace: "kube-system", Name: fmt.Sprintf("agent-%04d", i), OwnerKind: inventory.OwnerDaemonSet, Phase: corev1.PodRunning, NodeName: node.Node.Name,
			Requests: in.DaemonSets[0].Requests}
		node.Pods = append(node.Pods, agent)
		free := t.Capacity.Cpu().MilliValue() - 100
		freeMem := t.Capacity.Memory().Value() - 128<<20
		// Utilisation target: a third nearly empty, a third half, a third full.
		target := []float64{0.15, 0.5, 0.95}[r.Intn(3)]
		if r.Intn(30) == 0 {
			target = 0 // empty
		}
		budget := int64(float64(free) * target)
		for k := 0; k < podsPerNode*3 && budget > 0; k++ {
			app := apps[r.Intn(5)]
			if taint {
				app = "batch"
			}
			p := mkPod(app)
			c, m := p.Requests.Cpu().MilliValue(), p.Requests.Memory().Value()
			if c > budget || c > free || m > freeMem {
				continue
			}
			if app == "cache" {
				dup := false
				for _, q := range node.Pods {
					dup = dup || q.Labels["app"] == "cache"
				}
				if dup {
					continue
				}
			}
			p.NodeName = node.Node.Name
			node.Pods = append(node.Pods, p)
			budget, free, freeMem = budget-c, free-c, freeMem-m
		}
		in.Nodes = append(in.Nodes, node)
	}
	for k := 0; k < r.Intn(3); k++ {
		p := mkPod("worker")
		p.Phase = corev1.PodPending
		in.Pending = append(in.Pending, p)
	}
	return in
}

// TestPropertyRandomClusters: on random clusters every command Decide
// returns passes the independent Validate, with and without Karpenter-only
// mode; the default mode never saves less than Karpenter's methods; Settle
// converges with every pass valid and never raises the cost.
func TestPropertyRandomClusters(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	methods := map[Method]int{}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		r := rand.New(rand.NewSource(seed))
		in := randomCluster(r, 6+r.Intn(20), 2+r.Intn(6))
		in.Options.SpotToSpot = r.Intn(2) == 0
		savings := map[bool]float64{}
		for _, only := range []bool{true, false} {
			in.Options.KarpenterOnly = only
			d, err := Decide(in)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if errs := Validate(in, d.Commands); len(errs) > 0 {
				t.Fatalf("seed %d KarpenterOnly=%v: %d violations, first: %v\ncommands: %+v", seed, only, len(errs), errs[0], d.Commands)
			}
			if len(d.Nodes) != len(in.Nodes) {
				t.Fatalf("seed %d: %d explanations for %d nodes", seed, len(d.Nodes), len(in.Nodes))
			}
			savings[only] = d.Savings
		}
		if savings[false]+1e-9 < savings[true] {
			t.Fatalf("seed %d: default saves %.4f, less than Karpenter's %.4f", seed, savings[false], savings[true])
		}
		in.Options.KarpenterOnly = false
		s, err := Settle(in, SettleOptions{})
		if err != nil {
			t.Fatalf("seed %d: settle: %v", seed, err)
		}
		if s.After.PricePerHour > s.Before.PricePerHour+1e-9 {
			t.Fatalf("seed %d: settled at $%.4f/h, above $%.4f/h", seed, s.After.PricePerHour, s.Before.PricePerHour)
		}
		for _, p := range s.Passes {
			methods[p.Method]++
		}
		replaySettle(t, seed, in, s)
		// Settled means settled: another pass at the end acts no more.
		final := s.Final
		final.Now = final.Now.Add(48 * time.Hour)
		d, err := Decide(final)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Commands) > 0 {
			t.Fatalf("seed %d: settled cluster still consolidates: %+v", seed, d.Commands[0])
		}
	}
	// The clusters must exercise every acting method, or the test proves little.
	for _, m := range []Method{MethodEmptiness, MethodMultiNode, MethodSingleNode} {
		if methods[m] == 0 {
			t.Errorf("no Settle pass used %s (passes by method: %v)", m, methods)
		}
	}
	t.Logf("passes by method: %v", methods)
}

// replaySettle: each pass's commands are valid in the state they acted on,
// and are what Decide, deriving everything afresh, decides there (Settle
// reuses what earlier passes derived of unchanged nodes, and their
// simulations' answers).
func replaySettle(t *testing.T, seed int64, in Input, s Settlement) {
	t.Helper()
	cur := in
	cur.Nodes = cloneNodes(in.Nodes)
	seq := 0
	for i, p := range s.Passes {
		cur.Now = p.Now
		if errs := Validate(cur, p.Commands); len(errs) > 0 {
			t.Fatalf("seed %d pass %d: %v", seed, i, errs[0])
		}
		fresh, err := Decide(cur)
		if err != nil {
			t.Fatalf("seed %d pass %d: %v", seed, i, err)
		}
		if !reflect.DeepEqual(fresh.Commands, p.Commands) {
			t.Fatalf("seed %d pass %d: Settle's commands differ from Decide's afresh:\nsettle %+v\ndecide %+v", seed, i, p.Commands, fresh.Commands)
		}
		for _, c := range p.Commands {
			seq++
			if _, err := apply(&cur, c, seq); err != nil {
				t.Fatalf("seed %d pass %d: apply: %v", seed, i, err)
			}
		}
	}
}

// Without topology, a pass's simulations leave out the nodes that cannot
// take a pod and take over what the last pass read of the unchanged nodes
// (engine.NewClusterFrom), with its answers; Settle still decides in
// every pass what Decide decides afresh. Nodes given pods, or whose
// consolidateAfter runs out (the simulations' taint comes off), since the
// last simulated pass must be read again.
func TestSettleWithoutTopologyIsDecideAfresh(t *testing.T) {
	passes := 0
	for seed := int64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := randomCluster(r, 10+r.Intn(30), 2+r.Intn(6))
		for i := range in.Nodes {
			// Many nodes inside consolidateAfter: the simulations' taint
			// comes off them between passes, nothing else changing.
			if r.Intn(3) == 0 {
				in.Nodes[i].LastPodEventTime = t0.Add(-time.Duration(r.Intn(30)) * time.Second)
			}
			for j := range in.Nodes[i].Pods {
				p := &in.Nodes[i].Pods[j]
				p.TopologySpreadConstraints, p.Affinity = nil, nil
			}
		}
		in.Options.KarpenterOnly = seed%2 == 0
		s, err := Settle(in, SettleOptions{})
		if err != nil {
			t.Fatalf("seed %d: settle: %v", seed, err)
		}
		replaySettle(t, seed, in, s)
		passes += len(s.Passes)
	}
	if passes < 60 {
		t.Fatalf("%d passes acted in 30 clusters: too few to test the passes' reuse", passes)
	}
}

func TestSettleReachesSteadyState(t *testing.T) {
	types := testTypes(5)
	x8 := typeByName(types, "t-8x")
	in := Input{Now: t0, NodePools: []engine.NodePool{newPool("p", types, onDemandOnly)}, Nodes: []Node{
		kNode("empty", "p", x8, "zone-a", od),
		kNode("n1", "p", x8, "zone-a", od, pod("a", "1")),
		kNode("n2", "p", x8, "zone-b", od, pod("b", "1")),
		kNode("n3", "p", x8, "zone-a", od, pod("c", "1")),
	}}
	s, err := Settle(in, SettleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Before.Nodes != 4 || s.Before.PricePerHour != 1.6 {
		t.Fatalf("before = %+v", s.Before)
	}
	// Emptiness first, then the three 1-CPU pods end up on one t-4x
	// ($0.20/h), the cheapest node that holds 3 CPU.
	if len(s.Passes) < 2 || s.Passes[0].Method != MethodEmptiness {
		t.Fatalf("passes = %+v", s.Passes)
	}
	if s.After.Nodes != 1 || s.After.Types[0].InstanceType != "t-4x" || s.Savings < 1.39 {
		t.Fatalf("after = %+v (savings %.2f)", s.After, s.Savings)
	}
	pods := 0
	for _, n := range s.Final.Nodes {
		pods += len(n.Pods)
	}
	if pods != 3 {
		t.Fatalf("final cluster runs %d pods, want 3", pods)
	}
}
