package plan_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// homeInventory: a managed group "system" (3 nodes over 3 zones, the
// Karpenter controller's two replicas on system-a and system-c) and a
// self-managed group "apps" (2 nodes, labelled role=apps), a workload
// pod on every node.
func homeInventory() *inventory.Inventory {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "c1", Region: "us-east-1", AccountID: "111122223333"}}
	inv.NodeGroups = []inventory.NodeGroup{
		{Name: "apps", Kind: inventory.SelfManaged, ASGName: "apps", MinSize: 1, MaxSize: 4, DesiredSize: 2, InstanceTypes: []string{"m5.xlarge"},
			CapacityType: inventory.CapacityOnDemand, Zones: []string{"us-east-1a"}, Labels: map[string]string{"role": "apps"}, Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_STANDARD"},
		{Name: "system", Kind: inventory.Managed, ASGName: "eks-system", MinSize: 3, MaxSize: 3, DesiredSize: 3, InstanceTypes: []string{"m5.large"},
			CapacityType: inventory.CapacityOnDemand, Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_STANDARD"},
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7Gi")}
	node := func(name, group, zone, it string, labels map[string]string) {
		l := map[string]string{corev1.LabelOSStable: "linux", corev1.LabelTopologyZone: zone, corev1.LabelHostname: name}
		for k, v := range labels {
			l[k] = v
		}
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: name, NodeGroup: group, Zone: zone, InstanceID: "i-" + name, InstanceType: it, Allocatable: alloc, Labels: l, Ready: true})
		inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: "web-" + name, NodeName: name, OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}})
	}
	node("apps-1", "apps", "us-east-1a", "m5.xlarge", map[string]string{"role": "apps"})
	node("apps-2", "apps", "us-east-1a", "m5.xlarge", map[string]string{"role": "apps"})
	for _, z := range []string{"a", "b", "c"} {
		node("system-"+z, "system", "us-east-1"+z, "m5.large", map[string]string{"eks.amazonaws.com/nodegroup": "system"})
	}
	for _, n := range []string{"system-a", "system-c"} {
		inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "kube-system", Name: "karpenter-" + n, NodeName: n, Labels: generate.ControllerLabels,
			OwnerKind: inventory.OwnerDeployment, OwnerName: "karpenter", Tolerations: []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}})
	}
	return inv
}

// installed is the controller as discover reads it, pinned by a
// nodeSelector (nil: admits any node but Karpenter's).
func installed(inv *inventory.Inventory, replicas int32, nodeSelector map[string]string) {
	spec, _, _ := generate.ControllerPodSpec(nil)
	inv.Karpenter = &inventory.KarpenterInstall{Installed: true, Namespace: "kube-system", Deployment: "karpenter", ControllerReplicas: replicas,
		ControllerAffinity: spec.Affinity, ControllerNodeSelector: nodeSelector, ControllerTolerations: spec.Tolerations, ControllerLabels: generate.ControllerLabels}
}

func generatedValues(t *testing.T, inv *inventory.Inventory) map[string]any {
	t.Helper()
	res, err := generate.Generate(inv, generate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return res.HelmValues
}

// TestControllerHome plans the same cluster with each source of the
// decision of where the Karpenter controller lives, and with a controller
// whose required scheduling admits only nodes the plan removes.
func TestControllerHome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions)
		source  string
		group   string
		size    int32
		fargate string
		// kept are the nodes that stay; blocker the text of the blocker.
		kept    []string
		blocker string
	}{{
		name: "flag",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			o.NodeGroup, o.Values = "apps", generatedValues(t, inv)
			cfg.Controller.NodeGroup = "system" // the flag wins
		},
		// The generated values pin the controller to system: keeping apps
		// would strand it.
		source: plan.ControllerFromFlag, group: "apps", size: 2, kept: []string{"apps-1", "apps-2"},
		blocker: "admits only nodes of system, which the plan removes, and none of the kept group apps",
	}, {
		name: "config",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			cfg.Controller.NodeGroup, cfg.Controller.Size = "system", 3
		},
		source: plan.ControllerFromConfig, group: "system", size: 3, kept: []string{"system-a", "system-b", "system-c"},
	}, {
		name: "values",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			o.Values, o.ValuesFrom = generatedValues(t, inv), "karpenter/helm/karpenter-values.yaml"
		},
		// Size 2 of 3: the two nodes running the controller stay.
		source: plan.ControllerFromValues, group: "system", size: 2, kept: []string{"system-a", "system-c"},
	}, {
		name: "live deployment",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			installed(inv, 3, map[string]string{"eks.amazonaws.com/nodegroup": "system"})
			o.Values = generatedValues(t, inv)
		},
		// Never below the controller's 3 replicas.
		source: plan.ControllerFromDeployment, group: "system", size: 3, kept: []string{"system-a", "system-b", "system-c"},
	}, {
		name: "fargate profile",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			inv.FargateProfiles = []inventory.FargateProfile{{Name: "karpenter", Status: "ACTIVE", Selectors: []inventory.FargateSelector{
				{Namespace: "kube-system", Labels: map[string]string{"app.kubernetes.io/name": "karpenter"}}}}}
			o.NodeGroup, o.Values = "system", generatedValues(t, inv) // Fargate runs it whatever is chosen
		},
		source: plan.ControllerOnFargate, fargate: "karpenter",
	}, {
		name: "live deployment pinned to a removed group",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			installed(inv, 2, map[string]string{"role": "apps"})
			cfg.Controller.NodeGroup = "system"
		},
		source: plan.ControllerFromConfig, group: "system", size: 2, kept: []string{"system-a", "system-c"},
		blocker: "admits only nodes of apps, which the plan removes, and none of the kept group system",
	}, {
		name: "live deployment not tolerating the reservation",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			installed(inv, 2, map[string]string{"eks.amazonaws.com/nodegroup": "system"})
			inv.Karpenter.ControllerTolerations = nil
		},
		source: plan.ControllerFromDeployment, group: "system", size: 2, kept: []string{"system-a", "system-c"},
		blocker: "does not tolerate the taint CriticalAddonsOnly=true:NoSchedule of the kept group system",
	}, {
		name: "nowhere",
		prepare: func(t *testing.T, inv *inventory.Inventory, cfg *config.Config, o *plan.ControllerOptions) {
			installed(inv, 2, nil) // any legacy node: no group of its own
		},
		blocker: "no node group is kept for it and no Fargate profile selects its namespace kube-system",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			inv := homeInventory()
			cfg := config.Default("prod")
			cfg.Rollout.WaveSize = "3"
			var o plan.ControllerOptions
			tc.prepare(t, inv, &cfg, &o)
			p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Controller: o, Now: time.Unix(0, 0),
				Karpenter: &plan.PlanKarpenter{Version: "1.14.1"}})
			if err != nil {
				t.Fatal(err)
			}
			h := p.Controller
			if h.Source != tc.source || h.NodeGroup != tc.group || h.Size != tc.size || h.Fargate != tc.fargate || h.Kept != (tc.group != "") {
				t.Errorf("controller home %+v; want source %q group %q size %d fargate %q", h, tc.source, tc.group, tc.size, tc.fargate)
			}
			// The release's values keep the chart's pods on the kept nodes:
			// every nodeSelectorTerm requires their label (#31); with no
			// kept group they are generate's as written.
			spec, _, err := generate.ControllerPodSpec(p.Karpenter.Values)
			if err != nil {
				t.Fatal(err)
			}
			for i, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				pinned := slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
					return r.Key == generate.KeptLabel && r.Operator == corev1.NodeSelectorOpExists
				})
				if pinned != h.Kept {
					t.Errorf("the release's nodeSelectorTerms[%d] %+v requires %s: %t, want %t (the group is kept: %t)", i, term, generate.KeptLabel, pinned, h.Kept, h.Kept)
				}
			}
			if !h.Kept && !reflect.DeepEqual(p.Karpenter.Values, o.Values) {
				t.Errorf("no group kept, the release's values %v; want generate's %v", p.Karpenter.Values, o.Values)
			}
			var kept []string
			for _, w := range p.Waves {
				for _, n := range w.Nodes {
					if n.Keep {
						kept = append(kept, n.Name)
					}
				}
			}
			if fmt.Sprint(kept) != fmt.Sprint(tc.kept) {
				t.Errorf("nodes kept %v, want %v", kept, tc.kept)
			}
			var blockers []string
			for _, f := range p.Blockers() {
				if strings.Contains(f.Message, "karpenter-controller-home-removed") {
					blockers = append(blockers, f.Message)
				}
			}
			switch {
			case tc.blocker == "" && len(blockers) > 0:
				t.Errorf("unexpected blocker: %v", blockers)
			case tc.blocker != "" && (len(blockers) != 1 || !strings.Contains(blockers[0], tc.blocker) || !strings.Contains(blockers[0], "Fix: ")):
				t.Errorf("blockers %v; want one saying %q and naming the fix", blockers, tc.blocker)
			}
		})
	}
}

// TestControllerHomeWaves: the kept nodes' pods that stay (the controller's,
// those tolerating the reservation) are not counted as moving nor
// predicted; the kept nodes are priced after the migration too.
func TestControllerHomeWaves(t *testing.T) {
	inv := homeInventory()
	cfg := config.Default("prod")
	cfg.Rollout.WaveSize = "5"
	prices := func(it, _, _ string) (float64, bool) {
		return map[string]float64{"m5.large": 0.096, "m5.xlarge": 0.192}[it], true
	}
	p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Prices: prices,
		Controller: plan.ControllerOptions{Values: generatedValues(t, inv)}})
	if err != nil {
		t.Fatal(err)
	}
	moving := 0
	for _, w := range p.Waves {
		moving += w.Pods
	}
	if moving != 5 {
		t.Errorf("%d pods moving, want the 5 workload pods (the controller's 2 stay)", moving)
	}
	if p.Cost.AfterPerHour != 0.192 || p.Cost.BeforePerHour != 0.672 {
		t.Errorf("cost %+v; want 0.672 before and the two kept m5.large (0.192) after, no NodePool predicted", p.Cost)
	}
	if !strings.Contains(p.Controller.String(), "system, kept at 2 nodes reserved with CriticalAddonsOnly=true:NoSchedule") {
		t.Errorf("home = %q", p.Controller)
	}
}

// TestControllerRoomPredicted: the plan sees the room the Karpenter step
// makes for the controller on a full kept node — the fewest pods (one
// large, not the newer small ones), on the emptiest other node that takes
// it (another group's; not a cordoned one) — and moves that pod in the
// waves: the kept group's wave no longer counts it, the apps wave does.
func TestControllerRoomPredicted(t *testing.T) {
	inv := homeInventory()
	pod := func(name, node, cpu string) inventory.Pod {
		return inventory.Pod{Namespace: "app", Name: name, NodeName: node, OwnerKind: inventory.OwnerDeployment, OwnerName: name,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	}
	inv.Pods = append(inv.Pods, pod("large", "system-a", "900m"), pod("small-1", "system-a", "100m"), pod("small-2", "system-a", "100m"),
		pod("busy-1", "apps-1", "600m"), pod("busy-b", "system-b", "600m"))
	cfg := config.Default("prod")
	cfg.Rollout.WaveSize = "5"
	build := func(k *plan.PlanKarpenter) *plan.Plan {
		t.Helper()
		p, err := plan.BuildPlan(inv, plan.PlanOptions{Environment: "prod", Config: cfg, Steps: migrations.Planned(), Now: time.Unix(0, 0),
			Controller: plan.ControllerOptions{Values: generatedValues(t, inv)}, Karpenter: k})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	podsOf := func(p *plan.Plan) map[string]int {
		out := map[string]int{}
		for _, w := range p.Waves {
			out[w.Nodes[0].NodeGroup] += w.Pods
		}
		return out
	}
	without := build(nil)
	p := build(&plan.PlanKarpenter{Version: "1.14.1"})
	want := []plan.RoomEviction{{Pod: "app/large", From: "system-a", To: "apps-2"}}
	if !reflect.DeepEqual(p.Karpenter.Room, want) {
		t.Errorf("room = %+v, want %+v", p.Karpenter.Room, want)
	}
	before, after := podsOf(without), podsOf(p)
	if after["apps"] != before["apps"]+1 || after["system"] != before["system"]-1 {
		t.Errorf("pods moved by the waves %v, want one more in apps and one fewer in system than without the install (%v)", after, before)
	}
	// A cordoned node takes none: apps-1 and system-b tie, the first by name.
	for i := range inv.Nodes {
		inv.Nodes[i].Unschedulable = inv.Nodes[i].Name == "apps-2"
	}
	if room := build(&plan.PlanKarpenter{Version: "1.14.1"}).Karpenter.Room; len(room) != 1 || room[0].To != "apps-1" {
		t.Errorf("with apps-2 cordoned, room = %+v; want app/large on apps-1", room)
	}
}
