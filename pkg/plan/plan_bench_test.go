package plan_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// BenchmarkBuildPlan plans 500 legacy nodes / 5,000 pods in four groups on
// generate's NodePools: waves, the engine's prediction per wave and the
// consolidation forecast on the predicted fleet.
//
//	go test ./pkg/plan -run '^$' -bench BuildPlan -benchtime 5x
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
	pools := plan.PoolsFromGenerate(res)
	b.ResetTimer()
	for range b.N {
		p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: config.Default("prod"), Steps: migrations.Planned(), Pools: &pools})
		if err != nil {
			b.Fatal(err)
		}
		if p.SteadyState == nil {
			b.Fatalf("no steady state: %+v", p.Findings)
		}
		b.ReportMetric(float64(p.SteadyState.AfterMigration.Nodes), "predicted-nodes")
	}
}

// BenchmarkPlanDemoReplicated plans the demo's snapshot replicated N times
// (internal/bigcluster: N copies of its 23 nodes and 294 pods, the node
// groups raised N times) through the whole path `plan --env prod --snapshot
// snapshot.json --dir karpenter --config prod.yaml` runs: the snapshot read,
// the NodePools of the generated tree, readiness, each wave's prediction,
// the consolidation forecast, findings, the hash and plan.yaml written. It
// reports seconds and peak heap per plan, and the predicted nodes.
//
//	SLOT_EXCLUSIVE=1 slot go test ./pkg/plan -run '^$' -bench PlanDemoReplicated -benchtime 1x -timeout 30m
func BenchmarkPlanDemoReplicated(b *testing.B) {
	for _, n := range []int{10, 30, 100, 200} {
		b.Run(fmt.Sprintf("N%d", n), func(b *testing.B) { benchPlanDemo(b, n, bigcluster.Options{}) })
	}
}

// BenchmarkPlanClusterScale is the plan at cluster scale: the demo
// replicated 218 times with its 4 node groups in 50 sets (200 node groups,
// 5,014 nodes, about 64,000 pods), on BenchmarkPlanDemoReplicated's path.
//
//	SLOT_EXCLUSIVE=1 slot go test ./pkg/plan -run '^$' -bench PlanClusterScale -benchtime 1x -timeout 30m
func BenchmarkPlanClusterScale(b *testing.B) {
	benchPlanDemo(b, 218, bigcluster.Options{GroupSets: 50})
}

func benchPlanDemo(b *testing.B, n int, o bigcluster.Options) {
	ctx := context.Background()
	dir := b.TempDir()
	f, err := bigcluster.WriteDemo(ctx, dir, n, o)
	if err != nil {
		b.Fatal(err)
	}
	req, err := cliPlanRequest(f)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var peak uint64
	predicted, hash := 0, ""
	b.ResetTimer()
	for range b.N {
		stop := bigcluster.SamplePeakHeap()
		p, err := plan.MakePlan(ctx, req)
		if err == nil {
			err = p.WriteFile(filepath.Join(dir, "plan.yaml"))
		}
		peak = max(peak, stop())
		if err != nil {
			b.Fatal(err)
		}
		predicted, hash = 0, p.Hash
		for _, w := range p.Waves {
			predicted += len(w.PredictedNodes)
		}
	}
	// The hash says whether a faster planner still plans the same.
	b.Logf("plan %s", hash)
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/plan")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(predicted), "predicted-nodes")
	b.ReportMetric(float64(f.Nodes), "nodes")
	b.ReportMetric(float64(f.Pods), "pods")
	b.ReportMetric(float64(f.NodeGroups), "node-groups")
}

// cliPlanRequest is the request `plan --env prod --snapshot --dir --config`
// makes of MakePlan for the files (IAM steps planned with the defaults).
func cliPlanRequest(f bigcluster.Files) (plan.PlanRequest, error) {
	cfg, err := config.Load(f.Config)
	if err != nil {
		return plan.PlanRequest{}, err
	}
	return plan.PlanRequest{
		Environment: demo.Env, Config: *cfg, Steps: migrations.Planned(), Dir: f.Tree,
		Inventory: func(context.Context) (*inventory.Inventory, error) {
			snap, err := inventory.ReadSnapshotFile(f.Snapshot)
			if err != nil {
				return nil, err
			}
			return &snap.Inventory, nil
		},
		IAM: &plan.IAMOptions{KarpenterVersion: desired.DefaultKarpenterVersion}, Now: time.Now(),
	}, nil
}
