package rollout_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// BenchmarkBuildPlan plans 500 legacy nodes / 5,000 pods in four groups on
// generate's NodePools: waves, the engine's prediction per wave and the
// consolidation forecast on the predicted fleet.
//
//	go test ./pkg/rollout/ -run '^$' -bench BuildPlan -benchtime 5x
func BenchmarkBuildPlan(b *testing.B) {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "c1", Region: "us-east-1"}}
	zones := []string{"us-east-1a", "us-east-1b"}
	for g := range 4 {
		group := fmt.Sprintf("g%d", g)
		inv.NodeGroups = append(inv.NodeGroups, inventory.NodeGroup{Name: group, Kind: inventory.Managed, ASGName: "asg-" + group, MaxSize: 200, DesiredSize: 125,
			InstanceTypes: []string{"m5.2xlarge"}, CapacityType: "on-demand", Zones: zones})
		for i := range 125 {
			node := fmt.Sprintf("%s-n%d", group, i)
			inv.Nodes = append(inv.Nodes, inventory.Node{Name: node, NodeGroup: group, Zone: zones[i%2], InstanceType: "m5.2xlarge", Ready: true})
			for j := range 10 {
				inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: fmt.Sprintf("%s-p%d", node, j), NodeName: node, Phase: corev1.PodRunning,
					OwnerKind: inventory.OwnerDeployment, OwnerName: fmt.Sprintf("d%d", j),
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse([]string{"250m", "500m", "1", "300m", "700m"}[(i+j)%5]), corev1.ResourceMemory: resource.MustParse("1Gi")}})
			}
		}
	}
	res, err := generate.Generate(inv, generate.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	pools := rollout.PoolsFromGenerate(res)
	b.ResetTimer()
	for range b.N {
		p, err := rollout.BuildPlan(inv, rollout.PlanOptions{Environment: "prod", Config: config.Default("prod"), Steps: migrations.Planned(), Pools: &pools})
		if err != nil {
			b.Fatal(err)
		}
		if p.SteadyState == nil {
			b.Fatalf("no steady state: %+v", p.Findings)
		}
		b.ReportMetric(float64(p.SteadyState.AfterMigration.Nodes), "predicted-nodes")
	}
}
