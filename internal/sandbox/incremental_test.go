package sandbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// churnInventory is four namespaces, each with a Deployment and a
// StatefulSet and two bare pods under one PodDisruptionBudget, on four
// m5.xlarge nodes.
func churnInventory() inventory.Inventory {
	inv := inventory.Inventory{
		Cluster: inventory.Cluster{Name: "churn", Region: "us-east-1", AccountID: "111122223333"},
		NodeGroups: []inventory.NodeGroup{{Name: "ng", Kind: inventory.Managed, MinSize: 0, MaxSize: 8, DesiredSize: 4,
			InstanceTypes: []string{"m5.xlarge"}, CapacityType: inventory.CapacityOnDemand, Zones: []string{"us-east-1a"}}},
	}
	one, half := intstr.FromInt32(1), intstr.FromString("50%")
	for i := range 4 {
		ns := fmt.Sprintf("ns%d", i)
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "app"}}
		inv.Workloads = append(inv.Workloads,
			inventory.Workload{Kind: inventory.OwnerDeployment, Namespace: ns, Name: "web", Replicas: 3,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "app", "app": "web"}}},
			inventory.Workload{Kind: inventory.OwnerStatefulSet, Namespace: ns, Name: "db", Replicas: 2,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "app", "app": "db"}}})
		inv.Pods = append(inv.Pods,
			inventory.Pod{Namespace: ns, Name: "web-0", OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
				Labels: map[string]string{"tier": "app", "app": "web"}, Requests: requests("300m", "256Mi")},
			inventory.Pod{Namespace: ns, Name: "db-0", OwnerKind: inventory.OwnerStatefulSet, OwnerName: "db",
				Labels: map[string]string{"tier": "app", "app": "db"}, Requests: requests("300m", "256Mi")},
			inventory.Pod{Namespace: ns, Name: "bare-0", Labels: map[string]string{"tier": "app"}, Requests: requests("100m", "64Mi")},
			inventory.Pod{Namespace: ns, Name: "bare-1", Labels: map[string]string{"tier": "app"}, Requests: requests("100m", "64Mi")})
		pdb := inventory.PDB{Namespace: ns, Name: "app", Selector: sel, MaxUnavailable: &one}
		if i%2 == 1 {
			pdb.MaxUnavailable, pdb.MinAvailable = nil, &half
		}
		inv.PDBs = append(inv.PDBs, pdb)
	}
	return inv
}

// churn runs steps random writes on s — evictions, deletions, scaling,
// template changes —
// each followed by a random wait of the controllers, and calls check
// after each.
func churn(t *testing.T, s *Sandbox, seed uint64, steps int, check func(step int)) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	for step := range steps {
		ns := fmt.Sprintf("ns%d", rng.IntN(4))
		ps := pods(t, s, ns)
		switch op := rng.IntN(5); {
		case op == 0 && len(ps) > 0:
			_ = evict(s, ps[rng.IntN(len(ps))]) // a refusal (429) is a write-free step
		case op == 1 && len(ps) > 0:
			p := ps[rng.IntN(len(ps))]
			if err := s.Kube().CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		case op == 2:
			if err := scaleDeployment(ctx, s, ns, "web", int32(1+rng.IntN(5))); err != nil {
				t.Fatal(err)
			}
		case op == 3:
			// A rollout restart, or its undoing: the template changes.
			d, err := s.Kube().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": fmt.Sprint(rng.IntN(2))}
			if _, err := s.Kube().AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Step(ctx, time.Duration(1+rng.IntN(3))*s.opts.Tick); err != nil {
			t.Fatal(err)
		}
		check(step)
	}
}

// TestPDBStatusOnlyWhereWritten checks that the PDB controller, which
// computes only the budgets of the namespaces written in since its last
// run, leaves every budget's status as a computation of them all would:
// after each of a few hundred random writes and waits, each budget's
// status is pdbStatus's afresh.
func TestPDBStatusOnlyWhereWritten(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s := load(t, churnInventory())
			computed := 0
			churn(t, s, seed, 150, func(step int) {
				list, err := s.Kube().PolicyV1().PodDisruptionBudgets("").List(context.Background(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range list.Items {
					pdb := &list.Items[i]
					want, err := s.pdbStatus(pdb)
					if err != nil {
						t.Fatal(err)
					}
					if !apiequality.Semantic.DeepEqual(pdb.Status, want) {
						t.Fatalf("step %d: budget %s/%s status %+v, want %+v (computed afresh)", step, pdb.Namespace, pdb.Name, pdb.Status, want)
					}
					computed += int(want.CurrentHealthy)
				}
			})
			if computed == 0 {
				t.Fatal("no budget ever counted a healthy pod: the churn checked nothing")
			}
		})
	}
}

// TestFitterIsFit checks the scheduler's filter worked out once per pod
// (fitter, and the pass's roomTable kept as pods are bound) against
// SimpleFitter.Fit, its score from the table against one from the
// requests' maps, that pods of one podFit key are admitted by the same
// nodes (the scheduler asks once per key), and its anti-affinity domains
// (antiAffinityDomains, from the pods by namespace) against a look at
// every pod of the node's domain, on random pods and nodes.
func TestFitterIsFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	s := &Sandbox{opts: Options{Fitter: SimpleFitter{}}}
	zones := []string{"a", "b", "c"}
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	var nodes []*corev1.Node
	byName := map[string]*corev1.Node{}
	for i := range 24 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i), Labels: map[string]string{"zone": pick(zones...), "tier": pick("app", "db")}}}
		if rng.IntN(4) == 0 {
			delete(n.Labels, "zone")
		}
		ready := corev1.ConditionTrue
		if rng.IntN(6) == 0 {
			ready = corev1.ConditionFalse
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		n.Spec.Unschedulable = rng.IntN(6) == 0
		if rng.IntN(3) == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: pick("gpu", "db"), Effect: corev1.TaintEffect(pick(string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule)))}}
		}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(pick("2", "4", "32")), corev1.ResourceMemory: resource.MustParse(pick("4Gi", "8Gi", "128Gi")), corev1.ResourcePods: resource.MustParse(pick("10", "110"))}
		if rng.IntN(8) == 0 {
			delete(n.Status.Allocatable, corev1.ResourcePods) // fits no pod
		}
		nodes = append(nodes, n)
		byName[n.Name] = n
	}
	on := map[string][]*corev1.Pod{}
	inNS := map[string][]*corev1.Pod{}
	newPod := func(i int) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pick("x", "y"), Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("u", i)), Labels: map[string]string{"app": pick("web", "db")}}}
		p.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(pick("100m", "1500m", "3")), corev1.ResourceMemory: resource.MustParse(pick("1Gi", "6Gi"))}}}}
		if rng.IntN(2) == 0 {
			p.Spec.NodeSelector = map[string]string{"tier": pick("app", "db")}
		}
		if rng.IntN(4) == 0 {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{pick(zones...)}}}}}}}}
		}
		if rng.IntN(2) == 0 {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: pick("gpu", "db")}}
		}
		if rng.IntN(4) == 0 {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists})
		}
		if rng.IntN(2) == 0 {
			if p.Spec.Affinity == nil {
				p.Spec.Affinity = &corev1.Affinity{}
			}
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: pick("zone", "tier", corev1.LabelHostname), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick("web", "db")}}}}}
		}
		return p
	}
	for i := range 30 {
		n := nodes[rng.IntN(len(nodes))]
		p := newPod(i)
		p.Spec.NodeName = n.Name
		on[n.Name] = append(on[n.Name], p)
		inNS[p.Namespace] = append(inNS[p.Namespace], p)
	}
	used := map[string]corev1.ResourceList{}
	for name, ps := range on {
		used[name] = corev1.ResourceList{}
		for _, p := range ps {
			kube.AddResources(used[name], PodRequests(p), 1)
		}
	}
	// A look at every pod of the node's domain, term by term, as the
	// scheduler's filter says it.
	blocks := func(p *corev1.Pod, n *corev1.Node) bool {
		if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
			return false
		}
		for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			domain, ok := n.Labels[term.TopologyKey]
			if !ok {
				continue
			}
			for _, m := range nodes {
				if m.Labels[term.TopologyKey] != domain {
					continue
				}
				for _, q := range on[m.Name] {
					if q.UID != p.UID && q.Namespace == p.Namespace && q.Labels["app"] == term.LabelSelector.MatchLabels["app"] {
						return true
					}
				}
			}
		}
		return false
	}
	// The table of a pass whose pending pods request what newPod's do.
	rooms := newRoomTable([]*corev1.Pod{newPod(-1)}, nodes, used)
	// The mean of CPU and memory utilisation after placement, from the maps.
	score := func(want, used, alloc corev1.ResourceList) float64 {
		frac := func(name corev1.ResourceName) float64 {
			a, u, w := alloc[name], used[name], want[name]
			if a.IsZero() {
				return 0
			}
			return float64(u.MilliValue()+w.MilliValue()) / float64(a.MilliValue())
		}
		return (frac(corev1.ResourceCPU) + frac(corev1.ResourceMemory)) / 2
	}
	fitting, blocking, shared, bound := 0, 0, 0, 0
	// The first pod of each key, and the nodes that admitted it.
	type first struct {
		pod    *corev1.Pod
		admits []bool
	}
	byKey := map[string]first{}
	for i := range 300 {
		p := newPod(100 + i)
		fit := s.fitter(p, nil)
		blocked := antiAffinityDomains(p, byName, inNS)
		admits := make([]bool, len(nodes))
		for j, n := range nodes {
			admits[j] = fit.admits(n)
		}
		if f, ok := byKey[fit.key]; ok {
			if !slices.Equal(f.admits, admits) {
				t.Fatalf("pods %+v and %+v share key %s but not the nodes that admit them: %v, %v", f.pod.Spec, p.Spec, fit.key, f.admits, admits)
			}
			shared++
		} else {
			byKey[fit.key] = first{p, admits}
		}
		req := rooms.want(PodRequests(p))
		to := -1
		for j, n := range nodes {
			want := SimpleFitter{}.Fit(p, n, used[n.Name], nil) == nil
			if got := admits[j] && rooms.fits(j, req); got != want {
				t.Fatalf("pod %+v on node %+v (used %v): fitter says %t, Fit %t", p.Spec, n, used[n.Name], got, want)
			}
			if got, want := rooms.score(j, req), score(PodRequests(p), used[n.Name], n.Status.Allocatable); got != want {
				t.Fatalf("pod %+v on node %+v (used %v): score %v from the table, %v from the maps", p.Spec, n, used[n.Name], got, want)
			}
			if want {
				fitting++
				to = j
			}
			wantBlock := blocks(p, n)
			if got := blocked.block(n); got != wantBlock {
				t.Fatalf("pod %+v on node %+v: anti-affinity blocks %t, want %t", p.Spec.Affinity, n.Labels, got, wantBlock)
			}
			if wantBlock {
				blocking++
			}
		}
		// A pod that fits is bound, as the scheduler binds.
		if to >= 0 {
			n := nodes[to]
			p.Spec.NodeName = n.Name
			on[n.Name] = append(on[n.Name], p)
			inNS[p.Namespace] = append(inNS[p.Namespace], p)
			if used[n.Name] == nil {
				used[n.Name] = corev1.ResourceList{}
			}
			kube.AddResources(used[n.Name], PodRequests(p), 1)
			rooms.update(to, used[n.Name])
			bound++
		}
	}
	if fitting == 0 || fitting == 300*len(nodes) || blocking == 0 || blocking == 300*len(nodes) {
		t.Fatalf("%d of %d placements fit, %d blocked by anti-affinity: the random cases do not tell fitting from not", fitting, 300*len(nodes), blocking)
	}
	if bound < 10 {
		t.Fatalf("%d pods bound (%d fit): the table's updates are not tested", bound, fitting)
	}
	if shared == 0 || len(byKey) < 10 {
		t.Fatalf("%d pods shared a key, %d keys: the random cases do not test the key", shared, len(byKey))
	}
}

// TestTemplateComparisonsFollowWrites checks the Deployment controller's
// remembered comparisons of a ReplicaSet's template with its
// Deployment's (Sandbox.sameTemplate) against comparing them afresh,
// through random scaling, evictions and template changes (rollout
// restarts and their undoing, which make an old ReplicaSet current again).
func TestTemplateComparisonsFollowWrites(t *testing.T) {
	ctx := context.Background()
	s := load(t, churnInventory())
	differ := 0
	churn(t, s, 5, 200, func(step int) {
		rss, err := s.Kube().AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rss.Items {
			rs := &rss.Items[i]
			ref := metav1.GetControllerOfNoCopy(rs)
			if ref == nil {
				continue
			}
			d, err := s.Kube().AppsV1().Deployments(rs.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := sameTemplate(rs, d)
			if got := s.sameTemplate(rs, d); got != want {
				t.Fatalf("step %d: ReplicaSet %s/%s runs its Deployment's template: remembered %t, afresh %t", step, rs.Namespace, rs.Name, got, want)
			}
			if !want {
				differ++
			}
		}
	})
	if differ == 0 {
		t.Fatal("no ReplicaSet ever ran another template than its Deployment's: the churn checked nothing")
	}
}

// TestCachedListsAreTheTrackers checks the controllers' cached lists of
// workloads (cachedList) against the tracker's lists, through random
// evictions, scaling and template changes.
func TestCachedListsAreTheTrackers(t *testing.T) {
	ctx := context.Background()
	s := load(t, churnInventory())
	reused := 0
	churn(t, s, 9, 150, func(step int) {
		fresh, err := s.Kube().AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := s.lists["replicasets"]
		got, err := cachedList(s, "replicasets", func() (*appsv1.ReplicaSetList, error) {
			return s.Kube().AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if before.list == runtime.Object(got) {
			reused++
		}
		if !apiequality.Semantic.DeepEqual(got.Items, fresh.Items) {
			t.Fatalf("step %d: the cached list of ReplicaSets differs from the tracker's", step)
		}
		deploys, err := s.Kube().AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gotDeploys, err := cachedList(s, "deployments", func() (*appsv1.DeploymentList, error) {
			return s.Kube().AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(gotDeploys.Items, deploys.Items) {
			t.Fatalf("step %d: the cached list of Deployments differs from the tracker's", step)
		}
	})
	if reused == 0 {
		t.Fatal("no list was ever reused: the churn checked nothing")
	}
}

// TestOnWriteSaysWhereWritten checks what an OnWrite hook is told of the
// namespaces written since it last ran against the namespaces' objects:
// through random evictions, scaling and template changes, a namespace
// said unwritten has the pods, budgets and workloads the hook last saw
// there.
func TestOnWriteSaysWhereWritten(t *testing.T) {
	ctx := context.Background()
	s := load(t, churnInventory())
	// objects are a namespace's pods, budgets, Deployments, ReplicaSets
	// and StatefulSets.
	objects := func(ns string) []runtime.Object {
		var out []runtime.Object
		for _, list := range []func() (runtime.Object, error){
			func() (runtime.Object, error) { return s.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}) },
			func() (runtime.Object, error) {
				return s.Kube().PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
			},
			func() (runtime.Object, error) {
				return s.Kube().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			},
			func() (runtime.Object, error) {
				return s.Kube().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
			},
			func() (runtime.Object, error) {
				return s.Kube().AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
			},
		} {
			l, err := list()
			if err != nil {
				t.Error(err)
				return nil
			}
			// The items alone: a list's resource version is the cluster's.
			items, err := meta.ExtractList(l)
			if err != nil {
				t.Error(err)
				return nil
			}
			out = append(out, items...)
		}
		return out
	}
	seen := map[string][]runtime.Object{}
	unwritten, runs := 0, 0
	var failure error
	s.OnWrite(func(_ context.Context, written func(string) bool) error {
		runs++
		for i := range 4 {
			ns := fmt.Sprintf("ns%d", i)
			now := objects(ns)
			if !written(ns) {
				unwritten++
				if !apiequality.Semantic.DeepEqual(now, seen[ns]) && failure == nil {
					failure = fmt.Errorf("run %d: namespace %s said unwritten, but its objects changed since the hook last saw them", runs, ns)
				}
			}
			seen[ns] = now
		}
		return nil
	})
	churn(t, s, 11, 150, func(int) {
		if failure != nil {
			t.Fatal(failure)
		}
	})
	if unwritten == 0 || unwritten == 4*runs {
		t.Fatalf("%d of %d namespaces' looks said unwritten: the churn checked nothing", unwritten, 4*runs)
	}
}
