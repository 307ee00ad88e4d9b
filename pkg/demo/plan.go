package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

// Plan is what apply will do, with the predicted fleet and cost.
type Plan struct {
	Cluster           string            `json:"cluster"`
	Steps             []string          `json:"steps"`
	Waves             []Wave            `json:"waves"`
	Fleet             []sandbox.Claim   `json:"predictedFleet"`
	Unschedulable     map[string]string `json:"unschedulable,omitempty"`
	CostPerHourBefore float64           `json:"costPerHourBefore"`
	CostPerHourAfter  float64           `json:"costPerHourAfter"`
}

// Wave drains one node group.
type Wave struct {
	Group string   `json:"group"`
	Nodes []string `json:"nodes"`
	Pods  int      `json:"pods"`
}

// MakePlan predicts the Karpenter fleet for every movable pod with the
// provisioner's packing, and orders the waves: smallest group first, so a
// problem shows on few pods, and a group holding system-critical pods last.
func MakePlan(inv *inventory.Inventory, pools []apisv1.NodePool, cat *sandbox.Catalog, zones []string, costBefore float64) *Plan {
	p := &Plan{Cluster: inv.Cluster.Name, CostPerHourBefore: costBefore, Steps: []string{
		"apply EC2NodeClasses and NodePools",
		"scale Cluster Autoscaler to 0 (replicas recorded)",
		"cordon every node-group node",
		"per wave: pre-provision NodeClaims for the wave's pods, evict through the Eviction API (PDBs honoured, surge +1 where a PDB allows no disruption)",
		"scale every node group to 0 (sizes recorded for rollback)",
		"let Karpenter consolidate empty nodes",
	}}
	pvZones := map[string][]string{}
	for _, pv := range inv.PersistentVolumes {
		pvZones[pv.ClaimNamespace+"/"+pv.ClaimName] = pv.Zones
	}
	var pods []*corev1.Pod
	volumes := map[string][]*corev1.NodeSelector{}
	critical := map[string]bool{}
	podsIn := map[string]int{}
	groupOfNode := map[string]string{}
	for _, n := range inv.Nodes {
		groupOfNode[n.Name] = n.NodeGroup
	}
	for _, ip := range inv.Pods {
		if ip.OwnerKind == inventory.OwnerDaemonSet || ip.Phase == corev1.PodSucceeded {
			continue
		}
		pod := sandbox.PodObject(ip)
		pods = append(pods, pod)
		for _, v := range ip.Volumes {
			if z := pvZones[ip.Namespace+"/"+v.ClaimName]; v.Kind == inventory.VolumePVC && len(z) > 0 {
				volumes[ip.Namespace+"/"+ip.Name] = append(volumes[ip.Namespace+"/"+ip.Name], zoneSelector(z))
			}
		}
		g := groupOfNode[ip.NodeName]
		podsIn[g]++
		if ip.PriorityClassName == "system-cluster-critical" || ip.PriorityClassName == "system-node-critical" {
			critical[g] = true
		}
	}
	var dss []appsv1.DaemonSet
	for _, ds := range inv.DaemonSets {
		dss = append(dss, *sandbox.DaemonSetObject(ds))
	}
	res := cat.Provision(sandbox.ProvisionRequest{Pods: pods, NodePools: pools, DaemonSets: dss, Zones: zones, Region: inv.Cluster.Region,
		Volumes: func(p *corev1.Pod) []*corev1.NodeSelector { return volumes[p.Namespace+"/"+p.Name] }})
	p.Fleet, p.Unschedulable = res.Claims, res.Unschedulable
	p.CostPerHourAfter = round4(res.Cost())
	for _, g := range inv.NodeGroups {
		w := Wave{Group: g.Name, Pods: podsIn[g.Name]}
		for _, n := range inv.NodesOf(g.Name) {
			w.Nodes = append(w.Nodes, n.Name)
		}
		p.Waves = append(p.Waves, w)
	}
	sort.SliceStable(p.Waves, func(i, j int) bool {
		a, b := p.Waves[i], p.Waves[j]
		if critical[a.Group] != critical[b.Group] {
			return !critical[a.Group]
		}
		if a.Pods != b.Pods {
			return a.Pods < b.Pods
		}
		return a.Group < b.Group
	})
	return p
}

func zoneSelector(zones []string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones},
	}}}}
}

func (r *runner) stepPlan(_ context.Context) (string, error) {
	r.plan = MakePlan(&r.inv, r.pools, r.sb.Catalog(), r.sb.Zones(), r.sum.CostPerHourBefore)
	if len(r.plan.Unschedulable) > 0 {
		keys := sortedKeys(r.plan.Unschedulable)
		return "", fmt.Errorf("%d pods fit no generated NodePool, e.g. %s: %s", len(keys), keys[0], r.plan.Unschedulable[keys[0]])
	}
	r.sum.PlannedCostPerHour = r.plan.CostPerHourAfter
	b, err := yaml.Marshal(r.plan)
	if err != nil {
		return "", fmt.Errorf("render plan: %w", err)
	}
	path := filepath.Join(r.opts.OutDir, "plan.yaml")
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	order := make([]string, 0, len(r.plan.Waves))
	for _, w := range r.plan.Waves {
		order = append(order, w.Group)
	}
	return fmt.Sprintf("%d waves %v; predicted %d nodes, $%.4f/h → $%.4f/h", len(r.plan.Waves), order, len(r.plan.Fleet), r.plan.CostPerHourBefore, r.plan.CostPerHourAfter), nil
}
