package plan_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// steadyTypes: a 2-CPU type at $0.15/h and an 8-CPU one at $0.20/h, on
// demand in one zone, no overhead — two half-used small nodes cost more
// than one big node holding both.
func steadyTypes() []engine.InstanceType {
	var out []engine.InstanceType
	for _, t := range []struct {
		name  string
		cpu   int64
		price float64
	}{{"small", 2, 0.15}, {"big", 8, 0.20}} {
		out = append(out, engine.InstanceType{
			Name:   t.name,
			Labels: map[string]string{catalog.LabelInstanceType: t.name, catalog.LabelArch: "amd64", catalog.LabelOS: "linux"},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(t.cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(t.cpu*4<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
			},
			Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: catalog.CapacityTypeOnDemand, Price: t.price}},
		})
	}
	return out
}

// steadyPools is NodePool "general" replacing group "general", with
// consolidateAfter 1m, WhenEmptyOrUnderutilized and a 100 % budget.
func steadyPools() *plan.Pools {
	np := engine.NodePool{Name: "general", InstanceTypes: steadyTypes(), Spec: apiv1.NodePoolSpec{
		Disruption: apiv1.Disruption{ConsolidationPolicy: apiv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
			ConsolidateAfter: apiv1.NewNillableDuration(time.Minute), Budgets: []apiv1.Budget{{Nodes: "100%"}}},
		Template: apiv1.NodeClaimTemplate{Spec: apiv1.NodeClaimTemplateSpec{Requirements: []apiv1.NodeSelectorRequirementWithMinValues{
			{Key: catalog.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{catalog.CapacityTypeOnDemand}},
		}}},
	}}
	return &plan.Pools{NodePools: []engine.NodePool{np}, ForGroup: map[string][]string{"general": {"general"}}}
}

// steadyInventory: group general, one legacy node per pod, each pod asking
// for cpu.
func steadyInventory(cpus ...string) *inventory.Inventory {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "c1", Region: "us-east-1"}}
	inv.NodeGroups = []inventory.NodeGroup{{Name: "general", Kind: inventory.Managed, ASGName: "eks-general", MinSize: 0, MaxSize: 10, DesiredSize: int32(len(cpus))}}
	for i, cpu := range cpus {
		name := fmt.Sprintf("legacy-%d", i)
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: name, NodeGroup: "general", Zone: "us-east-1a", InstanceID: "i-" + name, InstanceType: "m5.xlarge"})
		inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: fmt.Sprintf("p-%d", i), NodeName: name, Phase: corev1.PodRunning,
			OwnerKind: inventory.OwnerDeployment, OwnerName: fmt.Sprintf("app-%d", i),
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}})
	}
	return inv
}

func steadyPlan(t *testing.T, inv *inventory.Inventory, now time.Time) *plan.Plan {
	t.Helper()
	cfg := config.Default("prod")
	cfg.Rollout.WaveSize = "1" // one wave per node: the engine predicts each wave's node on its own
	prices := func(string, string, string) (float64, bool) { return 0.192, true }
	p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Pools: steadyPools(), Prices: prices, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlanSteadyState(t *testing.T) {
	tests := map[string]struct {
		cpus []string
		// want: the command's method, action, replacement type and the
		// settled fleet's $/h; no method means no command.
		method      disruption.Method
		action      disruption.Action
		replacement string
		after       float64
	}{
		// Each wave's 1.5-CPU pod gets its own cheapest node (small, $0.15);
		// after the last wave both fit one big node ($0.20 < $0.30).
		"two half-used nodes": {cpus: []string{"1500m", "1500m"}, method: disruption.MethodMultiNode, action: disruption.ActionReplace, replacement: "big", after: 0.20},
		// 6-CPU pods fill a big node each: nothing fits elsewhere and no
		// cheaper type holds one.
		"tight fleet": {cpus: []string{"6", "6"}, after: 0.40},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := steadyPlan(t, steadyInventory(tt.cpus...), time.Unix(100, 0))
			ss := p.SteadyState
			if ss == nil {
				t.Fatalf("no steady state; findings %+v", p.Findings)
			}
			var predicted []string
			for _, w := range p.Waves {
				for _, pn := range w.PredictedNodes {
					predicted = append(predicted, pn.Name)
				}
			}
			if ss.AfterMigration.Nodes != len(predicted) || ss.AfterMigration.PricePerHour != p.Cost.AfterPerHour {
				t.Errorf("after migration %d nodes at $%v/h; want the %d predicted nodes %v at the plan's $%v/h", ss.AfterMigration.Nodes, ss.AfterMigration.PricePerHour, len(predicted), predicted, p.Cost.AfterPerHour)
			}
			if ss.AfterConsolidation.PricePerHour != tt.after || ss.SavingsPerHour != round4(ss.AfterMigration.PricePerHour-tt.after) {
				t.Errorf("after consolidation $%v/h saving $%v/h; want $%v/h", ss.AfterConsolidation.PricePerHour, ss.SavingsPerHour, tt.after)
			}
			if tt.method == "" {
				if len(ss.Commands) != 0 || ss.AfterConsolidation.Nodes != ss.AfterMigration.Nodes {
					t.Errorf("commands %+v on a tight fleet; want none and the same fleet", ss.Commands)
				}
				return
			}
			if len(ss.Commands) != 1 {
				t.Fatalf("commands %+v, want one", ss.Commands)
			}
			c := ss.Commands[0]
			if c.Method != tt.method || c.Action != tt.action || c.Replacement == nil || c.Replacement.InstanceType != tt.replacement {
				t.Errorf("command %s %s replacement %+v; want %s %s with a %s", c.Method, c.Action, c.Replacement, tt.method, tt.action, tt.replacement)
			}
			var removed []string
			for _, n := range c.Nodes {
				removed = append(removed, n.Name)
			}
			slices.Sort(removed)
			if !slices.Equal(removed, predicted) {
				t.Errorf("command removes %v, want the predicted nodes %v", removed, predicted)
			}
			// Not before the nodes' consolidateAfter (1m) has passed.
			if c.After.Duration < time.Minute || c.SavingsPerHour <= 0 || c.Why == "" {
				t.Errorf("command after %s saving $%v/h (%q); want after >= 1m, a saving and a reason", c.After, c.SavingsPerHour, c.Why)
			}
			if got := ss.AfterConsolidation.Types; len(got) != 1 || got[0].InstanceType != "big" || got[0].Nodes != 1 {
				t.Errorf("settled types %+v, want one big node", got)
			}
		})
	}
}

// TestPlanSteadyStateDeterministic: the forecast runs on a fixed reference
// time, so the plan's content and hash do not depend on when it was made,
// and it survives the plan file's round trip.
func TestPlanSteadyStateDeterministic(t *testing.T) {
	a := steadyPlan(t, steadyInventory("1500m", "1500m"), time.Unix(100, 0))
	b := steadyPlan(t, steadyInventory("1500m", "1500m"), time.Date(2031, 7, 15, 13, 0, 0, 0, time.UTC))
	if a.Hash != b.Hash {
		t.Errorf("hash depends on the planning time: %s vs %s", a.Hash, b.Hash)
	}
	doc, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := plan.ParsePlan(doc)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, doc)
	}
	if back.SteadyState == nil || len(back.SteadyState.Commands) != 1 || back.SteadyState.Commands[0].After != a.SteadyState.Commands[0].After {
		t.Errorf("steady state after the round trip: %+v", back.SteadyState)
	}
}

func round4(v float64) float64 { return float64(int64(v*1e4+0.5)) / 1e4 }
