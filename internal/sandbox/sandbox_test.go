package sandbox

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// smallInventory is one group of two m5.xlarge nodes and a Deployment.
func smallInventory(replicas int32, pdb *inventory.PDB, mut func(*inventory.Inventory)) inventory.Inventory {
	inv := inventory.Inventory{
		Cluster: inventory.Cluster{Name: "small", Region: "us-east-1", AccountID: "111122223333"},
		NodeGroups: []inventory.NodeGroup{{Name: "ng", Kind: inventory.Managed, MinSize: 0, MaxSize: 5, DesiredSize: 2,
			InstanceTypes: []string{"m5.xlarge"}, CapacityType: inventory.CapacityOnDemand, Zones: []string{"us-east-1a"}}},
		Workloads: []inventory.Workload{{Kind: inventory.OwnerDeployment, Namespace: "app", Name: "web", Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		Pods: []inventory.Pod{{Namespace: "app", Name: "web-0", OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
			Labels: map[string]string{"app": "web"}, Requests: requests("500m", "512Mi")}},
	}
	if pdb != nil {
		pdb.Namespace, pdb.Name = "app", "web"
		pdb.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		inv.PDBs = []inventory.PDB{*pdb}
	}
	if mut != nil {
		mut(&inv)
	}
	return inv
}

func load(t *testing.T, inv inventory.Inventory) *Sandbox {
	t.Helper()
	s, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Load(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	s.StartTracking()
	return s
}

func pods(t *testing.T, s *Sandbox, ns string) []corev1.Pod {
	t.Helper()
	l, err := s.Kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func evict(s *Sandbox, p corev1.Pod) error {
	return s.Kube().PolicyV1().Evictions(p.Namespace).Evict(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
}

func TestEvictionHonoursPDB(t *testing.T) {
	i := func(v int) *intstr.IntOrString { x := intstr.FromInt32(int32(v)); return &x }
	p := func(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
	tests := []struct {
		name    string
		pdb     *inventory.PDB
		allowed int // evictions accepted back to back before the first 429
	}{
		{"no PDB", nil, 3},
		{"minAvailable 2 of 3", &inventory.PDB{MinAvailable: i(2)}, 1},
		{"maxUnavailable 0", &inventory.PDB{MaxUnavailable: i(0)}, 0},
		{"minAvailable 100%", &inventory.PDB{MinAvailable: p("100%")}, 0},
		{"maxUnavailable 50% rounds up", &inventory.PDB{MaxUnavailable: p("50%")}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := load(t, smallInventory(3, tt.pdb, nil))
			ps := pods(t, s, "app")
			if len(ps) != 3 {
				t.Fatalf("got %d pods, want 3", len(ps))
			}
			accepted := 0
			var refusal error
			for _, pod := range ps {
				if err := evict(s, pod); err != nil {
					refusal = err
					break
				}
				accepted++
			}
			if accepted != tt.allowed {
				t.Fatalf("accepted %d evictions, want %d (last error %v)", accepted, tt.allowed, refusal)
			}
			if tt.allowed < 3 {
				if !apierrors.IsTooManyRequests(refusal) {
					t.Fatalf("refusal = %v, want 429 TooManyRequests", refusal)
				}
				if !strings.Contains(refusalCause(refusal), "disruption budget web") {
					t.Errorf("429 does not name the PDB: %q", refusalCause(refusal))
				}
				if s.Stats().Rejected != 1 {
					t.Errorf("Stats.Rejected = %d, want 1", s.Stats().Rejected)
				}
			}
			if s.Stats().PDBViolations != 0 {
				t.Errorf("PDB violations = %d, want 0 (evictions never break a budget)", s.Stats().PDBViolations)
			}
		})
	}
}

func refusalCause(err error) string {
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Details != nil && len(se.Status().Details.Causes) > 0 {
		return se.Status().Details.Causes[0].Message
	}
	return ""
}

func TestReplicaSetRecreatesEvictedPod(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(2, nil, nil))
	before := pods(t, s, "app")
	victim := before[0]
	if err := evict(s, victim); err != nil {
		t.Fatal(err)
	}
	if got := len(pods(t, s, "app")); got != 1 {
		t.Fatalf("after eviction %d pods, want 1", got)
	}
	if err := s.Settle(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	after := pods(t, s, "app")
	if len(after) != 2 {
		t.Fatalf("after settling %d pods, want 2", len(after))
	}
	for _, p := range after {
		if p.Name == victim.Name || p.UID == victim.UID {
			t.Errorf("evicted pod %s came back with the same name or UID", p.Name)
		}
		if p.Spec.NodeName == "" || !podutils.IsPodReady(&p) {
			t.Errorf("pod %s is not bound and Ready", p.Name)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "ReplicaSet" {
			t.Errorf("pod %s is not owned by the ReplicaSet", p.Name)
		}
	}
}

func TestSchedulerRespectsTaintsCordonAndSelectors(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name      string
		groupMut  func(*inventory.NodeGroup)
		podMut    func(*inventory.Pod)
		cordon    bool
		wantBound bool
	}{
		{"plain", nil, nil, false, true},
		{"untolerated taint", func(g *inventory.NodeGroup) { g.Taints = []corev1.Taint{taint} }, nil, false, false},
		{"tolerated taint", func(g *inventory.NodeGroup) { g.Taints = []corev1.Taint{taint} }, func(p *inventory.Pod) {
			p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, false, true},
		{"cordoned", nil, nil, true, false},
		{"nodeSelector mismatch", nil, func(p *inventory.Pod) { p.NodeSelector = map[string]string{"role": "db"} }, false, false},
		{"nodeSelector match", func(g *inventory.NodeGroup) { g.Labels = map[string]string{"role": "db"} },
			func(p *inventory.Pod) { p.NodeSelector = map[string]string{"role": "db"} }, false, true},
		{"too big", nil, func(p *inventory.Pod) { p.Requests = requests("16", "1Gi") }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			inv := smallInventory(1, nil, func(inv *inventory.Inventory) {
				inv.Workloads = nil
				inv.Pods = nil
				if tt.groupMut != nil {
					tt.groupMut(&inv.NodeGroups[0])
				}
			})
			s := load(t, inv)
			if tt.cordon {
				nodes, _ := s.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				h := &drain.Helper{Ctx: ctx, Client: s.Kube()}
				for i := range nodes.Items {
					if err := drain.RunCordonOrUncordon(h, &nodes.Items[i], true); err != nil {
						t.Fatal(err)
					}
				}
			}
			ip := inventory.Pod{Namespace: "default", Name: "probe", Requests: requests("100m", "64Mi")}
			if tt.podMut != nil {
				tt.podMut(&ip)
			}
			if _, err := s.Kube().CoreV1().Pods("default").Create(ctx, PodObject(ip), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Step(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			p, err := s.Kube().CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if bound := p.Spec.NodeName != ""; bound != tt.wantBound {
				t.Errorf("bound = %t (node %q), want %t", bound, p.Spec.NodeName, tt.wantBound)
			}
		})
	}
}

func TestDiscoveryAndFieldSelectorsServeKubectlDrain(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(4, nil, nil))
	gv, err := drain.CheckEvictionSupport(s.Kube())
	if err != nil || gv != policyv1.SchemeGroupVersion {
		t.Fatalf("CheckEvictionSupport = %v, %v; want policy/v1", gv, err)
	}
	v, err := s.Kube().Discovery().ServerVersion()
	if err != nil || v.Minor != "35" {
		t.Fatalf("ServerVersion = %v, %v; want 1.35", v, err)
	}
	nodes, _ := s.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	total := 0
	for _, n := range nodes.Items {
		h := &drain.Helper{Ctx: ctx, Client: s.Kube(), IgnoreAllDaemonSets: true}
		list, errs := h.GetPodsForDeletion(n.Name)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, p := range list.Pods() {
			if p.Spec.NodeName != n.Name {
				t.Errorf("drain of %s listed pod %s on %s", n.Name, p.Name, p.Spec.NodeName)
			}
		}
		total += len(list.Pods())
	}
	if total != 4 {
		t.Errorf("drain listed %d pods over all nodes, want 4", total)
	}
}

func TestKarpenterStandInProvisionsAndConsolidates(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(0, nil, func(inv *inventory.Inventory) { inv.NodeGroups[0].DesiredSize = 0 }))
	pool := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{
		Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimTemplateSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}},
			{Key: apisv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
		}}},
		Disruption: apisv1.Disruption{ConsolidateAfter: apisv1.NewNillableDuration(time.Minute)},
	}}
	u, err := toUnstructuredForTest(pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Dynamic().Resource(NodePoolGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scaleDeployment(ctx, s, "app", "web", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	in := s.Cloud().Instances()
	if len(in) != 1 || in[0].NodePool != "default" || in[0].CapacityType != inventory.CapacitySpot {
		t.Fatalf("instances = %+v, want one spot instance of NodePool default", in)
	}
	// The pods waited for the node launched for them: bound (PodScheduled)
	// no sooner than the launch delay after they were created.
	pods, err := s.Kube().CoreV1().Pods("app").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if got := c.LastTransitionTime.Sub(p.CreationTimestamp.Time); c.Type == corev1.PodScheduled && got < s.opts.LaunchDelay {
				t.Errorf("pod %s bound %s after its creation, want at least the launch delay %s", p.Name, got, s.opts.LaunchDelay)
			}
		}
	}
	if err := scaleDeployment(ctx, s, "app", "web", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Cloud().Instances()); n != 1 {
		t.Fatalf("empty node removed after 30s, before consolidateAfter (1m): %d instances", n)
	}
	// consolidateAfter, then a disruption pass and ConsolidationTTL.
	if err := s.Step(ctx, time.Minute+DisruptionPollPeriod+ConsolidationTTL); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Cloud().Instances()); n != 0 {
		t.Fatalf("%d instances left after consolidateAfter, want 0; commands %+v", n, s.Consolidations())
	}
}

func scaleDeployment(ctx context.Context, s *Sandbox, ns, name string, n int32) error {
	d, err := s.Kube().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Replicas = &n
	_, err = s.Kube().AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

// TestNodeGroupsFollowTheAWSFake checks the cloud side: sizes set through
// the AWS API (as the rollout does) launch and terminate instances in the
// fake, and the cluster's nodes follow, with pods moving off removed nodes;
// the pods running on a node when its instance went are counted lost.
func TestNodeGroupsFollowTheAWSFake(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(4, nil, func(inv *inventory.Inventory) { inv.NodeGroups[0].DesiredSize = 3 }))
	asg := autoscaling.NewFromConfig(s.AWSConfig())
	describe := func() []string {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"ng"}})
		if err != nil || len(out.AutoScalingGroups) != 1 {
			t.Fatalf("DescribeAutoScalingGroups through the SDK: %v, %v", out, err)
		}
		var ids []string
		for _, in := range out.AutoScalingGroups[0].Instances {
			ids = append(ids, *in.InstanceId)
		}
		sort.Strings(ids)
		return ids
	}
	nodeIDs := func() []string {
		nodes, _ := s.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		var ids []string
		for _, n := range nodes.Items {
			ids = append(ids, n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:])
		}
		sort.Strings(ids)
		return ids
	}
	if got, want := nodeIDs(), describe(); strings.Join(got, ",") != strings.Join(want, ",") || len(got) != 3 {
		t.Fatalf("nodes %v, ASG instances %v; want the same 3", got, want)
	}
	var wantLost []string
	for _, tc := range []struct{ min, desired int32 }{{0, 1}, {0, 2}, {0, 0}} {
		running := map[string][]string{}
		for _, p := range pods(t, s, "") {
			if p.Spec.NodeName != "" {
				running[p.Spec.NodeName] = append(running[p.Spec.NodeName], p.Namespace+"/"+p.Name+" on "+p.Spec.NodeName)
			}
		}
		if err := s.Cloud().UpdateGroupSize(ctx, "ng", tc.min, 5, tc.desired); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(ctx, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		got, want := nodeIDs(), describe()
		if strings.Join(got, ",") != strings.Join(want, ",") || len(got) != int(tc.desired) {
			t.Fatalf("desired %d: nodes %v, ASG instances %v", tc.desired, got, want)
		}
		for node, ps := range running {
			if _, err := s.Kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
				wantLost = append(wantLost, ps...)
			}
		}
	}
	lost := s.Stats().LostPods
	slices.Sort(lost)
	slices.Sort(wantLost)
	if len(wantLost) == 0 || !slices.Equal(lost, wantLost) {
		t.Errorf("LostPods %v, want the pods that ran on the removed nodes %v", lost, wantLost)
	}
	if err := s.Cloud().UpdateGroupSize(ctx, "ng", 3, 5, 2); err == nil {
		t.Error("UpdateGroupSize accepted min > desired")
	}
}

func TestSeedMakesRunsReproducible(t *testing.T) {
	names := func(seed uint64) (nodes, podNames string) {
		s, err := New(Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Load(context.Background(), DemoInventory()); err != nil {
			t.Fatal(err)
		}
		var ns, ps []string
		for _, in := range s.Cloud().Instances() {
			ns = append(ns, in.ID+"="+in.NodeName+"/"+in.InstanceType+"/"+in.CapacityType)
		}
		for _, p := range pods(t, s, "") {
			ps = append(ps, p.Namespace+"/"+p.Name+"@"+p.Spec.NodeName)
		}
		sort.Strings(ns)
		sort.Strings(ps)
		return strings.Join(ns, ","), strings.Join(ps, ",")
	}
	n1, p1 := names(42)
	n2, p2 := names(42)
	if n1 != n2 || p1 != p2 {
		t.Error("two loads with seed 42 differ")
	}
	n3, p3 := names(43)
	if n1 == n3 || p1 == p3 {
		t.Error("seeds 42 and 43 gave the same instance IDs or pod names")
	}
	if got := strings.Count(p1, ",") + 1; got < 280 || got > 320 {
		t.Errorf("demo account has %d pods, want about 300", got)
	}
}

// TestGeneratedNamesRetryWhenTaken: a pod created with generateName gets
// the API server's 5-character suffix, and a suffix already taken is drawn
// again, as the API server retries a generated name (RetryGenerateName).
// Seed 870's 253rd name repeats its 210th: the sandbox answered
// AlreadyExists there, which stopped a thousand-node DaemonSet from
// loading (BenchmarkApplyBigCluster/N44). The names stay the seed's.
func TestGeneratedNamesRetryWhenTaken(t *testing.T) {
	create := func() []string {
		s, err := New(Options{Seed: 870})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var names []string
		for i := range 300 {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", GenerateName: "node-agent-"}}
			got, err := s.Kube().CoreV1().Pods("kube-system").Create(context.Background(), p, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("pod %d of 300 with generateName node-agent-: %v", i+1, err)
			}
			if !strings.HasPrefix(got.Name, "node-agent-") || len(got.Name) != len("node-agent-")+5 {
				t.Fatalf("generated name %q, want node-agent- and 5 characters", got.Name)
			}
			names = append(names, got.Name)
		}
		return names
	}
	first := create()
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(first)))); distinct != len(first) {
		t.Errorf("%d distinct names of %d", distinct, len(first))
	}
	if again := create(); !slices.Equal(first, again) {
		t.Error("seed 870 generated other names in a second run")
	}
}

// TestPodCacheFollowsTheTracker: the pod and node caches the controllers
// and the clientset's pod lists read are kept current write by write; at
// every tick of a run with evictions, drains, a delete-collection, a
// cordon, a terminated instance and Karpenter's provisioning, they hold
// what the tracker holds — the same pods, equal, oldest first, by
// namespace and name and by node, at the tracker's resource version, and
// the same nodes.
func TestPodCacheFollowsTheTracker(t *testing.T) {
	ctx := context.Background()
	s := load(t, DemoInventory())
	ticks := 0
	check := func(context.Context) error {
		ticks++
		tr := s.tracker.(*podTracker).ObjectTracker
		obj, err := tr.List(podsGVR, podGVK, "")
		if err != nil {
			return err
		}
		l := obj.(*corev1.PodList)
		want := make([]*corev1.Pod, len(l.Items))
		for i := range l.Items {
			want[i] = &l.Items[i]
		}
		sortPods(want)
		got := s.listPods()
		if len(got) != len(want) {
			t.Fatalf("tick %d: the cache has %d pods, the tracker %d", ticks, len(got), len(want))
		}
		for i := range want {
			if !apiequality.Semantic.DeepEqual(got[i], want[i]) {
				t.Fatalf("tick %d: pod %d of the cache is %s, the tracker's %s (or they differ)", ticks, i, podKey(got[i]), podKey(want[i]))
			}
		}
		byName := s.podsIn("")
		for i := 1; i < len(byName); i++ {
			if a, b := byName[i-1], byName[i]; a.Namespace > b.Namespace || (a.Namespace == b.Namespace && a.Name >= b.Name) {
				t.Fatalf("tick %d: podsIn lists %s before %s", ticks, podKey(a), podKey(b))
			}
		}
		if s.pods.resourceVersion() != l.ResourceVersion {
			t.Fatalf("tick %d: the cache is at resource version %s, the tracker at %s", ticks, s.pods.resourceVersion(), l.ResourceVersion)
		}
		// Each node's pods, by namespace and name: the tracker's, in its order.
		onNode := map[string][]*corev1.Pod{}
		for i := range l.Items {
			onNode[l.Items[i].Spec.NodeName] = append(onNode[l.Items[i].Spec.NodeName], &l.Items[i])
		}
		for node, want := range onNode {
			if got := s.pods.on(node); !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("tick %d: the cache has %d pods on node %q, the tracker %d (or they differ)", ticks, len(got), node, len(want))
			}
		}
		if len(s.pods.byNode) != len(onNode) {
			t.Fatalf("tick %d: the cache indexes %d nodes' pods, the tracker has pods on %d", ticks, len(s.pods.byNode), len(onNode))
		}
		// Each controller's pods, oldest first: the tracker's, in that order.
		owned := map[types.UID][]*corev1.Pod{}
		for _, p := range want {
			if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
				owned[ref.UID] = append(owned[ref.UID], p)
			}
		}
		for uid, want := range owned {
			if got := s.pods.owned(uid); !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("tick %d: the cache has %d pods of controller %s, the tracker %d (or they differ)", ticks, len(got), uid, len(want))
			}
		}
		if len(s.pods.byOwner) != len(owned) {
			t.Fatalf("tick %d: the cache indexes %d controllers' pods, the tracker has pods of %d", ticks, len(s.pods.byOwner), len(owned))
		}
		// The nodes, equal to the tracker's.
		obj, err = tr.List(nodesGVR, corev1.SchemeGroupVersion.WithKind("Node"), "")
		if err != nil {
			return err
		}
		nl := obj.(*corev1.NodeList)
		nodes := s.nodesByName()
		if len(nodes) != len(nl.Items) {
			t.Fatalf("tick %d: the cache has %d nodes, the tracker %d", ticks, len(nodes), len(nl.Items))
		}
		for i := range nl.Items {
			if n := nodes[nl.Items[i].Name]; !apiequality.Semantic.DeepEqual(n, &nl.Items[i]) {
				t.Fatalf("tick %d: node %s of the cache differs from the tracker's", ticks, nl.Items[i].Name)
			}
		}
		return nil
	}
	s.OnTick(check)
	nodes := map[string]bool{}
	for _, p := range pods(t, s, "") {
		if p.Spec.NodeName != "" && len(nodes) < 3 {
			nodes[p.Spec.NodeName] = true
		}
	}
	for _, p := range pods(t, s, "") {
		if nodes[p.Spec.NodeName] {
			_ = evict(s, p) // a budget may refuse: the next tick's state is checked all the same
		}
	}
	if err := s.Step(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Kube().CoreV1().Pods("kube-system").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for node := range nodes {
		// The runner cordons through a merge patch; the node goes with its instance.
		if _, err := s.Kube().CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.terminate(ctx, s.instanceOfNode(node).ID); err != nil {
			t.Fatal(err)
		}
		break
	}
	if err := s.Settle(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ticks < 12 {
		t.Errorf("checked %d ticks, want at least 12", ticks)
	}
}

// TestDaemonSetPodsStayOnNoScheduleTaints: as Kubernetes' DaemonSet
// controller does, a DaemonSet pod that does not tolerate a NoSchedule
// taint added to its node (karpenter.sh/disrupted, the rollout's
// CriticalAddonsOnly reservation) keeps running there; a NoExecute taint
// it does not tolerate removes it; and a node tainted NoSchedule from the
// start gets no new pod.
func TestDaemonSetPodsStayOnNoScheduleTaints(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(1, nil, func(inv *inventory.Inventory) {
		inv.DaemonSets = []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: requests("10m", "20Mi")}}
	}))
	agentNodes := func() []string {
		var out []string
		for _, p := range pods(t, s, "kube-system") {
			if strings.HasPrefix(p.Name, "agent-") && p.DeletionTimestamp == nil {
				out = append(out, p.Spec.NodeName)
			}
		}
		sort.Strings(out)
		return out
	}
	before := agentNodes()
	if len(before) != 2 {
		t.Fatalf("agent pods on %v, want one on each of the 2 nodes", before)
	}
	taint := func(node string, tn corev1.Taint) {
		t.Helper()
		n, err := s.Kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = append(n.Spec.Taints, tn)
		if _, err := s.Kube().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	taint(before[0], corev1.Taint{Key: apisv1.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule})
	taint(before[1], corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	if got := agentNodes(); !equalStrings(got, before) {
		t.Errorf("after NoSchedule taints the agent pods are on %v, want them kept on %v", got, before)
	}
	taint(before[0], corev1.Taint{Key: "node.kubernetes.io/out-of-service", Effect: corev1.TaintEffectNoExecute})
	if got := agentNodes(); !equalStrings(got, before[1:]) {
		t.Errorf("after a NoExecute taint on %s the agent pods are on %v, want only %v", before[0], got, before[1:])
	}
}

// A PV's zone constrains the sandbox's scheduler: every replica mounting
// a claim whose volume is in us-east-1b lands on the group's us-east-1b
// node, where the least-allocated score alone would spread them.
func TestVolumeZoneConstrainsScheduler(t *testing.T) {
	inv := smallInventory(4, nil, func(inv *inventory.Inventory) {
		inv.NodeGroups[0].Zones = []string{"us-east-1a", "us-east-1b"}
		inv.Pods[0].Volumes = []inventory.Volume{{Name: "data", Kind: inventory.VolumePVC, ClaimName: "data"}}
		inv.PersistentVolumes = []inventory.PersistentVolume{{Name: "pv-data", ClaimNamespace: "app", ClaimName: "data", Zones: []string{"us-east-1b"}}}
	})
	s := load(t, inv)
	nodes, err := s.Kube().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zone := map[string]string{}
	for _, n := range nodes.Items {
		zone[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	ps := pods(t, s, "app")
	if len(ps) != 4 {
		t.Fatalf("%d pods, want 4", len(ps))
	}
	for _, p := range ps {
		if zone[p.Spec.NodeName] != "us-east-1b" {
			t.Errorf("pod %s on %q in %q, want us-east-1b (its volume's zone); nodes %v", p.Name, p.Spec.NodeName, zone[p.Spec.NodeName], zone)
		}
	}
}

// TestControllersReactInTheirTick: the controllers of a tick see what the
// earlier ones did in it, as a cluster's controllers react within
// milliseconds of each other. A Deployment's status counts the replacement
// the kubelet starts in the same tick (it lagged a tick: the workloads
// controller ran before the kubelet, so every gate waiting for a
// Deployment's ready replicas took a tick more).
func TestControllersReactInTheirTick(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(2, nil, nil))
	if err := evict(s, pods(t, s, "app")[0]); err != nil {
		t.Fatal(err)
	}
	for tick := 1; tick <= 4; tick++ {
		if err := s.Step(ctx, s.opts.Tick); err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, p := range pods(t, s, "app") {
			if podutils.IsPodReady(&p) {
				ready++
			}
		}
		d, err := s.Kube().AppsV1().Deployments("app").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if int(d.Status.ReadyReplicas) != ready {
			t.Errorf("tick %d: %d pods Ready, the Deployment's status says %d", tick, ready, d.Status.ReadyReplicas)
		}
	}
}

// TestControllersReactAtTheInstant: the controllers that react to writes
// (workloads, scheduler, DaemonSets, Karpenter's provisioner and NodeClaim
// launch, the budgets' status) react to a program's write at the instant
// it was made, before the clock moves on, and to each other's writes in
// that instant; a pod starts PodStartDelay after it was bound. They waited
// for the next tick: an evicted pod's replacement was created and bound a
// tick after the eviction and Ready a tick later, so each round of a
// PodDisruptionBudget and each wave's gate took two ticks where a cluster
// takes the pod start; a NodeClaim was launched a tick after its pod was
// created, a Deployment's restart started its new pod a tick late, and a
// pod created bound (a DaemonSet's) started a tick after PodStartDelay.
func TestControllersReactAtTheInstant(t *testing.T) {
	ctx := context.Background()
	created := func(t *testing.T, s *Sandbox, ns string, old map[string]bool) []corev1.Pod {
		t.Helper()
		var out []corev1.Pod
		for _, p := range pods(t, s, ns) {
			if !old[p.Name] {
				out = append(out, p)
			}
		}
		return out
	}
	names := func(ps []corev1.Pod) map[string]bool {
		m := map[string]bool{}
		for _, p := range ps {
			m[p.Name] = true
		}
		return m
	}
	t.Run("replacement of an evicted pod", func(t *testing.T) {
		one := intstr.FromInt32(1)
		s := load(t, smallInventory(3, &inventory.PDB{MaxUnavailable: &one}, nil))
		before := pods(t, s, "app")
		evicted := s.Now()
		if err := evict(s, before[0]); err != nil {
			t.Fatal(err)
		}
		if err := evict(s, before[1]); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("second eviction: %v, want 429 (the budget allows one)", err)
		}
		if err := s.Step(ctx, s.opts.PodStartDelay); err != nil {
			t.Fatal(err)
		}
		repl := created(t, s, "app", names(before))
		if len(repl) != 1 {
			t.Fatalf("%d replacements after the pod start delay, want 1", len(repl))
		}
		r := repl[0]
		var bound time.Time
		for _, c := range r.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				bound = c.LastTransitionTime.Time
			}
		}
		if !r.CreationTimestamp.Time.Equal(evicted) || !bound.Equal(evicted) || r.Spec.NodeName == "" {
			t.Errorf("replacement %s created %s, bound to %q at %s; want created and bound at the eviction, %s",
				r.Name, r.CreationTimestamp.Format(time.TimeOnly), r.Spec.NodeName, bound.Format(time.TimeOnly), evicted.Format(time.TimeOnly))
		}
		if !podutils.IsPodReady(&r) {
			t.Errorf("replacement %s not Ready %s after the eviction (the pod start delay)", r.Name, s.opts.PodStartDelay)
		}
		// The budget's next round starts as the replacement is Ready.
		if err := evict(s, before[1]); err != nil {
			t.Errorf("eviction %s after the eviction, once the replacement is Ready: %v", s.opts.PodStartDelay, err)
		}
	})
	t.Run("launch of a NodeClaim", func(t *testing.T) {
		s := load(t, smallInventory(0, nil, func(inv *inventory.Inventory) { inv.NodeGroups[0].DesiredSize = 0 }))
		pool := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{
			Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimTemplateSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}},
			}}}}}
		u, err := toUnstructuredForTest(pool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Dynamic().Resource(NodePoolGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		scaled := s.Now()
		if err := scaleDeployment(ctx, s, "app", "web", 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(ctx, s.opts.Tick); err != nil {
			t.Fatal(err)
		}
		in := s.Cloud().Instances()
		if len(in) != 1 || !in[0].LaunchedAt.Equal(scaled) {
			t.Fatalf("instances %+v; want one, launched as the Deployment was scaled up, at %s", in, scaled.Format(time.TimeOnly))
		}
		if err := s.Step(ctx, s.opts.LaunchDelay+s.opts.PodStartDelay-s.opts.Tick); err != nil {
			t.Fatal(err)
		}
		ps := pods(t, s, "app")
		if len(ps) != 1 || !podutils.IsPodReady(&ps[0]) {
			t.Errorf("pods %v %s after the scale-up; want its one pod Ready (the launch delay, then the pod start)", names(ps), s.opts.LaunchDelay+s.opts.PodStartDelay)
		}
	})
	t.Run("restart of a Deployment", func(t *testing.T) {
		s := load(t, smallInventory(1, nil, nil))
		before := pods(t, s, "app")
		d, err := s.Kube().AppsV1().Deployments("app").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": s.Now().Format(time.RFC3339)}
		restarted := s.Now()
		if _, err := s.Kube().AppsV1().Deployments("app").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(ctx, s.opts.PodStartDelay); err != nil {
			t.Fatal(err)
		}
		after := pods(t, s, "app")
		repl := created(t, s, "app", names(before))
		if len(repl) != 1 || !repl[0].CreationTimestamp.Time.Equal(restarted) || !podutils.IsPodReady(&repl[0]) {
			t.Fatalf("pods %v %s after the restart; want the new one created at the restart, %s, and Ready", names(after), s.opts.PodStartDelay, restarted.Format(time.TimeOnly))
		}
		if len(after) != 1 {
			t.Errorf("pods %v once the new one is Ready; want the old one gone", names(after))
		}
	})
	t.Run("start of a pod created bound", func(t *testing.T) {
		s := load(t, smallInventory(1, nil, nil))
		node := pods(t, s, "app")[0].Spec.NodeName
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "bound"}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
		if _, err := s.Kube().CoreV1().Pods("app").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(ctx, s.opts.PodStartDelay); err != nil {
			t.Fatal(err)
		}
		got, err := s.Kube().CoreV1().Pods("app").Get(ctx, "bound", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !podutils.IsPodReady(got) {
			t.Errorf("pod created bound to %s not Ready %s after its creation (the pod start delay)", node, s.opts.PodStartDelay)
		}
	})
}

// TestControllersIdleUntilAWrite: on a settled cluster the controllers
// that act on its objects alone (DaemonSets, workloads, the scheduler, the
// PDBs' status) are not run again — a thousand-node cluster paid for them
// every tick of a four-hour settle — nor is a pass reacting at the instant
// of a write (only the ticks' passes run), and a write wakes them: a
// Deployment scaled up gets its pods created and bound at the instant,
// started, and its budget's status follows.
func TestControllersIdleUntilAWrite(t *testing.T) {
	ctx := context.Background()
	one := intstr.FromInt32(1)
	s := load(t, smallInventory(2, &inventory.PDB{MinAvailable: &one}, func(inv *inventory.Inventory) {
		inv.DaemonSets = []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: requests("10m", "20Mi")}}
	}))
	if err := s.Settle(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Step(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"daemonsets", "workloads", "scheduler", "disruption"} {
		if got, ok := s.idle[c]; !ok || got.changes != s.changes.count {
			t.Errorf("controller %s: idle %+v (ok %t), want idle at the %d writes so far", c, got, ok, s.changes.count)
		}
	}
	passes, written := 0, 0
	s.OnTick(func(context.Context) error { passes++; return nil })
	s.OnWrite(func(context.Context, func(string) bool) error { written++; return nil })
	if err := s.Step(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if want := int(time.Minute / s.opts.Tick); passes != want || written != 1 {
		t.Errorf("%d passes of the controllers in a minute without a write, %d OnWrite hook runs; want %d (the ticks') and 1 (the first pass it saw)", passes, written, want)
	}
	if err := scaleDeployment(ctx, s, "app", "web", 4); err != nil {
		t.Fatal(err)
	}
	passes, written = 0, 0
	if err := s.Step(ctx, s.opts.Tick); err != nil {
		t.Fatal(err)
	}
	if passes != 2 || written != 2 {
		t.Errorf("%d passes of the controllers in the tick after a write, %d OnWrite hook runs; want 2 (the write's instant, the tick) and 2 (each followed a write)", passes, written)
	}
	if err := s.Settle(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods(t, s, "app") {
		if p.Spec.NodeName != "" && podutils.IsPodReady(&p) {
			ready++
		}
	}
	pdb, err := s.Kube().PolicyV1().PodDisruptionBudgets("app").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ready != 4 || pdb.Status.CurrentHealthy != 4 || pdb.Status.DisruptionsAllowed != 3 {
		t.Errorf("%d web pods Ready, budget status %+v; want 4 Ready and the budget counting them (3 disruptions allowed)", ready, pdb.Status)
	}
}
