package rollout_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
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
	return inv
}

func TestBuildPlan(t *testing.T) {
	cfg := config.Default("prod")
	cfg.Rollout.WaveSize = "3"
	prices := func(it, ct, zone string) (float64, bool) { return 0.192, it == "m5.xlarge" }
	p, err := rollout.BuildPlan(planInventory(), rollout.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Prices: prices, Now: time.Unix(100, 0)})
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
	// 3 movable pods of 3 CPU on 4-CPU nodes: one predicted node each; the
	// do-not-disrupt pod stays and needs no capacity.
	if got := len(p.Waves[0].PredictedNodes); got != 3 || p.Waves[0].Pods != 3 {
		t.Errorf("wave 1: %d pods, %d predicted nodes; want 3 pods to move, 3 nodes", p.Waves[0].Pods, got)
	}
	if got := len(p.Waves[0].PreProvision); got != 3 || p.Waves[0].PreProvision[0].CPU != "3" {
		t.Errorf("wave 1 placeholders = %+v, want 3 of 3 CPU", p.Waves[0].PreProvision)
	}
	if p.Cost.BeforePerHour != 1.15 || !p.Cost.Complete {
		t.Errorf("cost = %+v, want before 6 x 0.192 = 1.15, complete", p.Cost)
	}
	if b := p.Blockers(); len(b) != 1 || !strings.Contains(b[0].Object, "app/pinned") {
		t.Errorf("blockers = %+v, want the do-not-disrupt pod", b)
	}
	if p.PoolForGroup["general"] != "general" || len(p.Steps) != 11 {
		t.Errorf("pools %v steps %d", p.PoolForGroup, len(p.Steps))
	}

	// Same content, another time: same hash. Another wave size: another hash.
	again, _ := rollout.BuildPlan(planInventory(), rollout.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Prices: prices, Now: time.Unix(999, 0)})
	if again.Hash != p.Hash {
		t.Errorf("hash changed with CreatedAt only: %s vs %s", again.Hash, p.Hash)
	}
	cfg.Rollout.WaveSize = "2"
	other, _ := rollout.BuildPlan(planInventory(), rollout.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Prices: prices})
	if other.Hash == p.Hash {
		t.Error("hash did not change with the wave size")
	}
}

func TestParsePlan(t *testing.T) {
	p, err := rollout.BuildPlan(planInventory(), rollout.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := rollout.ParsePlan(b)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	if back.Hash != p.Hash || len(back.Waves) != len(p.Waves) {
		t.Errorf("round trip changed the plan")
	}
	tests := map[string]struct{ doc, want string }{
		"empty":      {"", "empty file"},
		"edited":     {strings.Replace(string(b), "concurrency: 2", "concurrency: 9", 1), "edited after planning"},
		"unknown":    {string(b) + "surprise: 1\n", `unknown field "surprise"`},
		"syntax":     {"apiVersion: [\n", "line"},
		"wrong kind": {"apiVersion: v1\nkind: Pod\n", `kind "Pod"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := rollout.ParsePlan([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParsePlan = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParsePlan(f *testing.F) {
	p, _ := rollout.BuildPlan(planInventory(), rollout.PlanOptions{Environment: "dev", Config: config.Default("dev"), Steps: migrations.Planned()})
	b, _ := p.Marshal()
	f.Add(b)
	f.Add([]byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: RolloutPlan\nenvironment: x\nwaves: [{index: 1, preProvision: [{cpu: x}]}]\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := rollout.ParsePlan(doc)
		if err == nil && p.Hash == "" {
			t.Fatal("accepted a plan without a hash")
		}
	})
}
