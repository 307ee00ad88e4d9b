package plan_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func planInventory() *inventory.Inventory {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "c1", Region: "us-east-1"}}
	inv.NodeGroups = []inventory.NodeGroup{{Name: "general", Kind: inventory.Managed, ASGName: "eks-general", MinSize: 1, MaxSize: 10, DesiredSize: 6}}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	for i, z := range []string{"a", "a", "a", "b", "b", "c"} {
		name := "n" + string(rune('1'+i))
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: name, NodeGroup: "general", Zone: "us-east-1" + z, InstanceID: "i-" + name, InstanceType: "m5.xlarge", Allocatable: alloc})
		inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: "p-" + name, NodeName: name, OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("2Gi")}})
	}
	inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: "pinned", NodeName: "n1", OwnerKind: inventory.OwnerDeployment, OwnerName: "pinned",
		Annotations: map[string]string{"karpenter.sh/do-not-disrupt": "true"}})
	// The Karpenter controller runs on Fargate: no group is kept.
	inv.FargateProfiles = []inventory.FargateProfile{{Name: "karpenter", Selectors: []inventory.FargateSelector{{Namespace: "kube-system"}}}}
	return inv
}

// generalPool is an on-demand m5.xlarge NodePool replacing group general.
func generalPool() *plan.Pools {
	np := &apiv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general-od"}}
	np.Spec.Template.Spec.Requirements = []apiv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}},
		{Key: apiv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{apiv1.CapacityTypeOnDemand}},
	}
	return &plan.Pools{NodePools: []engine.NodePool{engine.NodePoolFromV1(np, nil)}, ForGroup: map[string][]string{"general": {"general-od"}}}
}

func TestBuildPlan(t *testing.T) {
	cfg := config.Default("prod")
	cfg.Rollout.WaveSize = "3"
	prices := func(it, ct, zone string) (float64, bool) { return 0.192, it == "m5.xlarge" }
	pools := generalPool()
	p, err := plan.BuildPlan(planInventory(), plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Pools: pools, Prices: prices, Now: time.Unix(100, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var waves []string
	for _, w := range p.Waves {
		var zones []string
		for _, n := range w.Nodes {
			zones = append(zones, n.Name+"@"+strings.TrimPrefix(n.Zone, "us-east-1"))
		}
		waves = append(waves, strings.Join(zones, " "))
	}
	// Zones interleaved: a wave never takes a whole zone while others keep theirs.
	if got, want := strings.Join(waves, " | "), "n1@a n4@b n6@c | n2@a n5@b n3@a"; got != want {
		t.Errorf("waves = %q, want %q", got, want)
	}
	// 3 movable pods of 3 CPU on a pool of 4-CPU m5.xlarge: the engine
	// predicts one node each; the do-not-disrupt pod stays and needs no
	// capacity.
	if got := len(p.Waves[0].PredictedNodes); got != 3 || p.Waves[0].Pods != 3 {
		t.Errorf("wave 1: %d pods, %d predicted nodes; want 3 pods to move, 3 nodes", p.Waves[0].Pods, got)
	}
	for _, pn := range p.Waves[0].PredictedNodes {
		if pn.InstanceType != "m5.xlarge" || pn.NodePool != "general-od" || pn.Pods != 1 {
			t.Errorf("predicted %+v, want one pod on an m5.xlarge of general-od", pn)
		}
	}
	if got := len(p.Waves[0].PreProvision); got != 3 || p.Waves[0].PreProvision[0].CPU != "3" || p.Waves[0].PreProvision[0].Memory != "2Gi" {
		t.Errorf("wave 1 placeholders = %+v, want 3 of 3 CPU and 2Gi (the pods' requests, no DaemonSet overhead)", p.Waves[0].PreProvision)
	}
	if p.Cost.BeforePerHour != 1.152 || !p.Cost.Complete || p.Cost.AfterPerHour <= 0 {
		t.Errorf("cost = %+v, want before 6 x 0.192 = 1.152 (not rounded to cents), after priced by the engine, complete", p.Cost)
	}
	if b := p.Blockers(); len(b) != 1 || !strings.Contains(b[0].Object, "app/pinned") {
		t.Errorf("blockers = %+v, want the do-not-disrupt pod", b)
	}
	if p.PoolForGroup["general"] != "general-od" || len(p.Steps) != 12 || !slices.Equal(p.Waves[1].NodePools, []string{"general-od"}) {
		t.Errorf("pools %v (wave 2 %v) steps %d", p.PoolForGroup, p.Waves[1].NodePools, len(p.Steps))
	}

	// Same content, another time: same hash. Another wave size: another hash.
	again, _ := plan.BuildPlan(planInventory(), plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Pools: pools, Prices: prices, Now: time.Unix(999, 0)})
	if again.Hash != p.Hash {
		t.Errorf("hash changed with CreatedAt only: %s vs %s", again.Hash, p.Hash)
	}
	cfg.Rollout.WaveSize = "2"
	other, _ := plan.BuildPlan(planInventory(), plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Pools: pools, Prices: prices})
	if other.Hash == p.Hash {
		t.Error("hash did not change with the wave size")
	}
}

func TestParsePlan(t *testing.T) {
	p, err := plan.BuildPlan(planInventory(), plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := plan.ParsePlan(b)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	if back.Hash != p.Hash || len(back.Waves) != len(p.Waves) {
		t.Errorf("round trip changed the plan")
	}
	tests := map[string]struct{ doc, want string }{
		"empty":      {"", "empty file"},
		"edited":     {strings.Replace(string(b), "concurrency: 2", "concurrency: 9", 1), "edited after planning"},
		"unknown":    {string(b) + "surprise: 1\n", `unknown field "surprise" (a plan file is written by ` + "`karpenter-migrate plan`"},
		"mistyped":   {strings.Replace(string(b), "concurrency: 2", "concurrency: two", 1), "budget.concurrency: got a string, want int"},
		"syntax":     {"apiVersion: [\n", "line"},
		"tab":        {"apiVersion: v1\nmetadata:\n\tname: x\n", "line 3: a tab indents this line; YAML indents with spaces only"},
		"wrong kind": {"apiVersion: v1\nkind: Pod\n", `kind "Pod"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := plan.ParsePlan([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParsePlan = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParsePlan(f *testing.F) {
	p, _ := plan.BuildPlan(planInventory(), plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned()})
	b, _ := p.Marshal()
	f.Add(b)
	f.Add([]byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: RolloutPlan\nenvironment: x\nwaves: [{index: 1, preProvision: [{cpu: x}]}]\n"))
	f.Add([]byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: RolloutPlan\nwaves: [{index: one}]\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := plan.ParsePlan(doc)
		if err == nil && p.Hash == "" {
			t.Fatal("accepted a plan without a hash")
		}
		if err != nil && strings.Contains(err.Error(), "Go struct field") {
			t.Fatalf("error in Go's words, not the file's: %v", err)
		}
	})
}

// TestPoolsFromGeneratedTree writes a weighted tree with pkg/generate,
// builds an overlay and reads which NodePools replace each node group: the
// annotation generate writes is the one the planner reads.
func TestPoolsFromGeneratedTree(t *testing.T) {
	snap, err := inventory.ReadSnapshotFile("../generate/testdata/inventories/all.json")
	if err != nil {
		t.Fatal(err)
	}
	opts := generate.DefaultOptions()
	opts.Strategy = generate.StrategyWeighted
	dir := t.TempDir()
	rep, err := generate.Run(context.Background(), &snap.Inventory, opts, generate.TreeOptions{Dir: dir, Envs: []string{"prod"}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := plan.OverlayDir{Dir: dir, Env: "prod"}.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pools, err := plan.PoolsFromObjects(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(pools.NodePools) != len(rep.Pools) {
		t.Errorf("%d NodePools read, generate made %d", len(pools.NodePools), len(rep.Pools))
	}
	fromGenerate := plan.PoolsFromGenerate(rep.Result)
	for _, ps := range rep.Pools {
		for _, g := range ps.NodeGroups {
			if !slices.Contains(pools.ForGroup[g], ps.Name) || !slices.Contains(fromGenerate.ForGroup[g], ps.Name) {
				t.Errorf("group %s: overlay says %v, generate %v; want both to contain %s", g, pools.ForGroup[g], fromGenerate.ForGroup[g], ps.Name)
			}
		}
	}
	// Weighted pools: the heavier (preferred) pool comes first.
	weight := map[string]int32{}
	for _, ps := range rep.Pools {
		if ps.Weight != nil {
			weight[ps.Name] = *ps.Weight
		}
	}
	for g, names := range pools.ForGroup {
		for i := 1; i < len(names); i++ {
			if weight[names[i-1]] < weight[names[i]] {
				t.Errorf("group %s pools %v: not by weight (%v)", g, names, weight)
			}
		}
	}
	if _, err := plan.PoolsFromObjects(nil); err == nil {
		t.Error("no NodePools: want an error")
	}
}

func TestPlanFindingsFromPrediction(t *testing.T) {
	inv := planInventory()
	// A pod asking for more than any m5.xlarge has fits no NodePool.
	inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: "huge", NodeName: "n2", OwnerKind: inventory.OwnerDeployment, OwnerName: "huge",
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}})
	tests := map[string]struct {
		pools *plan.Pools
		want  string
	}{
		"unschedulable": {generalPool(), "Pod app/huge: fits no NodePool of wave"},
		"no pools":      {nil, "no NodePools were given"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned(), Pools: tt.pools})
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, f := range p.Findings {
				all = append(all, f.Object+": "+f.Message)
			}
			if !strings.Contains(strings.Join(all, "\n"), tt.want) {
				t.Errorf("findings %q, want one containing %q", all, tt.want)
			}
			if tt.pools == nil && (p.Cost.Complete || len(p.Waves[0].PreProvision) > 0) {
				t.Errorf("without pools: cost %+v, placeholders %v; want incomplete cost and none", p.Cost, p.Waves[0].PreProvision)
			}
		})
	}
}

func TestPlanIAM(t *testing.T) {
	inv := planInventory()
	p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned(), IAM: &plan.IAMOptions{Identity: "pod-identity"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.IAM == nil || p.IAM.Error == "" || !strings.Contains(p.IAM.Error, "accountID") {
		t.Fatalf("IAM = %+v, want an error naming the missing account ID", p.IAM)
	}
	inv.Cluster.ARN = "arn:aws:eks:us-east-1:111122223333:cluster/c1"
	p, err = plan.BuildPlan(inv, plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned(), IAM: &plan.IAMOptions{Identity: "pod-identity"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.IAM.Error != "" || p.IAM.NodeRole != "KarpenterNodeRole-c1" || p.IAM.NodeAccess != "aws-auth" || p.IAM.Target.AccountID != "111122223333" {
		t.Errorf("IAM = %+v", p.IAM)
	}
	d, err := p.IAM.Desired()
	if err != nil || d.ControllerRole != "KarpenterControllerRole-c1" {
		t.Errorf("Desired = %v, %v", d, err)
	}
}

func TestNodeGroupOf(t *testing.T) {
	tests := map[string]struct {
		labels map[string]string
		want   string
	}{
		"managed":    {map[string]string{"eks.amazonaws.com/nodegroup": "ng"}, "ng"},
		"eksctl":     {map[string]string{"alpha.eksctl.io/nodegroup-name": "ng"}, "ng"},
		"own label":  {map[string]string{"karpenter-migrate.io/node-group": "ng"}, "ng"},
		"karpenter":  {map[string]string{"eks.amazonaws.com/nodegroup": "ng", "karpenter.sh/nodepool": "ng"}, ""},
		"unlabelled": {nil, ""},
	}
	for name, tt := range tests {
		if got := rollout.NodeGroupOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}); got != tt.want {
			t.Errorf("%s: NodeGroupOf = %q, want %q", name, got, tt.want)
		}
	}
}

// TestPlanSaysWhyAGroupHasNoPool: a group generate wrote no NodePool for
// (a custom AMI without user data) fails the plan naming the group, why
// and what to do, not only the missing pool.
func TestPlanSaysWhyAGroupHasNoPool(t *testing.T) {
	inv := planInventory()
	inv.NodeGroups[0].AMIType, inv.NodeGroups[0].InstanceTypes = "AL2023_x86_64_STANDARD", []string{"m5.xlarge"}
	inv.NodeGroups = append(inv.NodeGroups, inventory.NodeGroup{Name: "db", Kind: inventory.SelfManaged, ASGName: "db", MaxSize: 2, DesiredSize: 1, InstanceTypes: []string{"r5.xlarge"},
		AMIID: "ami-0custom", LaunchTemplate: &inventory.LaunchTemplate{AMIID: "ami-0custom"}})
	inv.Nodes = append(inv.Nodes, inventory.Node{Name: "db-1", NodeGroup: "db", Zone: "us-east-1a", InstanceID: "i-db1", InstanceType: "r5.xlarge",
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi")}})
	inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: "db-0", NodeName: "db-1", OwnerKind: inventory.OwnerStatefulSet, OwnerName: "db",
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	res, err := generate.Generate(inv, generate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	pools := plan.PoolsFromGenerate(res)
	_, err = plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: config.Default("prod"), Steps: migrations.Planned(), Pools: &pools, Now: time.Unix(100, 0)})
	if err == nil {
		t.Fatal("plan succeeded without a NodePool for group db")
	}
	for _, want := range []string{"none of the NodePools [db]", "node group db: " + generate.NoPoolWritten, "custom AMI ami-0custom with no user data", "nodeGroups.exclude"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("plan error %q does not say %q", err, want)
		}
	}
}

// TestPlanLeavesWhatTheRunbookStops: Cluster Autoscaler's pod is not moved
// by any wave (step 09 scales it to zero first): the plan of a cluster
// running it has the same waves (pods, predicted nodes, placeholders) and
// the same forecast as the plan of that cluster without it.
func TestPlanLeavesWhatTheRunbookStops(t *testing.T) {
	cfg := config.Default("prod")
	cfg.Rollout.WaveSize = "3"
	build := func(inv *inventory.Inventory) *plan.Plan {
		t.Helper()
		p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Pools: generalPool(), Now: time.Unix(100, 0)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	without := planInventory()
	without.ClusterAutoscaler = &inventory.ClusterAutoscaler{Namespace: "kube-system", Name: "cluster-autoscaler", Replicas: 1}
	with := planInventory()
	with.ClusterAutoscaler = without.ClusterAutoscaler
	// On n6, whose 3-CPU pod leaves it no room on an m5.xlarge beside it.
	with.Pods = append(with.Pods, inventory.Pod{Namespace: "kube-system", Name: "cluster-autoscaler-7d9-x", NodeName: "n6", OwnerKind: inventory.OwnerDeployment, OwnerName: "cluster-autoscaler",
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("600Mi")}})
	pw, po := build(with), build(without)
	if !reflect.DeepEqual(pw.Waves, po.Waves) {
		t.Errorf("waves with Cluster Autoscaler's pod:\n%+v\nwithout:\n%+v", pw.Waves, po.Waves)
	}
	if !reflect.DeepEqual(pw.SteadyState, po.SteadyState) || pw.Cost.AfterPerHour != po.Cost.AfterPerHour {
		t.Errorf("forecast with Cluster Autoscaler's pod %+v ($%.4f/h after), without %+v ($%.4f/h)", pw.SteadyState, pw.Cost.AfterPerHour, po.SteadyState, po.Cost.AfterPerHour)
	}
	if !pw.Stops("kube-system", inventory.OwnerDeployment, "cluster-autoscaler") || pw.Stops("app", inventory.OwnerDeployment, "web") {
		t.Error("Stops does not name Cluster Autoscaler's Deployment alone")
	}
}
