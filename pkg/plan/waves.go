package plan

import (
	"fmt"
	"strings"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// planner is BuildPlan at work on the waves and the forecast: the plan so
// far, the inventory indexed, where the controller lives, and what the
// waves add up (cost, the kept fleet, the predicted fleet, findings).
type planner struct {
	p            *Plan
	inv          *inventory.Inventory
	o            PlanOptions
	cp           *controllerPlan
	podsByNode   map[string][]inventory.Pod
	nodesByGroup map[string][]inventory.Node
	poolsOf      map[string][]string
	prices       PriceFunc
	cost         Cost
	// keptFleet are the controller's kept nodes (those that stay and those
	// its group grows by): part of the fleet after the waves, which
	// consolidation leaves alone.
	keptFleet []disruption.TypeCount
	// pred predicts each wave's Karpenter nodes; nil without NodePools.
	pred *predictor
	// timer predicts each wave's duration and the bound over them all.
	timer    *timer
	findings []Finding
	// stopped is the error Progress stopped the plan with.
	stopped error
}

func newPlanner(p *Plan, inv *inventory.Inventory, o PlanOptions, cp *controllerPlan, podsByNode map[string][]inventory.Pod, nodesByGroup map[string][]inventory.Node, poolsOf map[string][]string) *planner {
	cat := o.Catalog
	if cat == nil {
		cat = catalog.Default()
	}
	pl := &planner{p: p, inv: inv, o: o, cp: cp, podsByNode: podsByNode, nodesByGroup: nodesByGroup, poolsOf: poolsOf,
		prices: o.Prices, cost: Cost{Complete: true, Prices: o.PriceSource}, timer: newTimer(inv, p.Budget, p.Timing)}
	if pl.prices == nil {
		pl.prices = cat.Price
	}
	if o.Pools != nil && len(o.Pools.NodePools) > 0 {
		pl.pred = newPredictor(o.Pools.NodePools, cat, inv.DaemonSets)
	} else {
		pl.cost.Complete = false
		pl.findings = append(pl.findings, Finding{Severity: "warning", Message: "no NodePools were given (plan --dir with the generated tree): Karpenter nodes are not predicted and nothing is pre-provisioned before a drain"})
	}
	return pl
}

// price is an instance's $/h; a type or price it does not know leaves the
// cost incomplete.
func (pl *planner) price(it, ct, zone string) float64 {
	if it == "" {
		pl.cost.Complete = false
		return 0
	}
	v, ok := pl.prices(it, ct, zone)
	if !ok {
		pl.cost.Complete = false
	}
	return v
}

// progress tells Progress where the plan is; the first error it returns
// stops the plan.
func (pl *planner) progress(pp PlanProgress) error {
	if pl.o.Progress != nil && pl.stopped == nil {
		pl.stopped = pl.o.Progress(pp)
	}
	return pl.stopped
}

// planWaves cuts each group in scope into waves of Budget.WaveSize nodes,
// zone-balanced, in the groups' order.
func (pl *planner) planWaves() error {
	waves := 0
	for _, g := range pl.p.NodeGroups {
		waves += len(chunk(pl.nodesByGroup[g.Name], pl.p.Budget.WaveSize))
	}
	// The kept nodes first: the room made there for the controller moves
	// pods onto other groups' nodes before any wave.
	keptNodes := pl.cp.keep(pl.nodesByGroup[pl.cp.home.NodeGroup], pl.podsByNode)
	if pl.p.Karpenter != nil {
		room, err := pl.controllerRoom(keptNodes)
		if err != nil {
			return err
		}
		pl.p.Karpenter.Room = room
	}
	var moved [][]inventory.Pod // each wave's pods, for its timing
	for _, g := range pl.p.NodeGroups {
		var kept map[string]bool
		if g.Name == pl.cp.home.NodeGroup {
			kept = keptNodes
		}
		for _, nodes := range chunk(ZoneBalanced(pl.nodesByGroup[g.Name]), pl.p.Budget.WaveSize) {
			w, pods := pl.newWave(g.Name, nodes, kept)
			if err := pl.progress(PlanProgress{Wave: w.Index, Waves: waves, Nodes: len(w.Nodes), Pods: w.Pods}); err != nil {
				return err
			}
			if err := pl.predictWave(&w, pods); err != nil {
				return err
			}
			pl.priceWave(&w)
			pl.p.Waves = append(pl.p.Waves, w)
			moved = append(moved, pods)
		}
		if kept != nil {
			pl.growKeptGroup(g.Name, len(kept))
		}
	}
	for _, g := range pl.timer.drainGroups(pl.p.Waves, moved, pl.p.Budget.DrainTogether) {
		pl.timeGroup(g, moved)
	}
	return nil
}

// newWave is the next wave of a group's nodes and the pods it moves: all
// but those that stay put (do-not-disrupt without ForceEvict, and those
// the controller's kept nodes keep). It adds the nodes to the cost before
// and the kept ones to the cost after and the kept fleet.
func (pl *planner) newWave(group string, nodes []inventory.Node, kept map[string]bool) (Wave, []inventory.Pod) {
	w := Wave{Index: len(pl.p.Waves) + 1, NodePools: pl.poolsOf[group]}
	var pods []inventory.Pod
	for _, n := range nodes {
		w.Nodes = append(w.Nodes, WaveNode{Name: n.Name, NodeGroup: n.NodeGroup, InstanceID: instanceID(n), Zone: n.Zone, Keep: kept[n.Name]})
		for _, pod := range pl.podsByNode[n.Name] {
			// Pods that will stay put need no new capacity.
			if (inventory.DisruptionBlocked(pod.Annotations) == "" || pl.p.Budget.ForceEvict) && !(kept[n.Name] && pl.cp.stays(pod)) {
				pods = append(pods, pod)
			}
		}
		pl.cost.BeforePerHour += pl.price(n.InstanceType, capacityOr(n.CapacityType), n.Zone)
		if kept[n.Name] {
			pr := pl.price(n.InstanceType, capacityOr(n.CapacityType), n.Zone)
			pl.cost.AfterPerHour += pr
			pl.keptFleet = append(pl.keptFleet, disruption.TypeCount{InstanceType: n.InstanceType, CapacityType: capacityOr(n.CapacityType), Nodes: 1, PricePerHour: pr})
		}
	}
	w.Pods = len(pods)
	return w, pods
}

// predictWave predicts the Karpenter nodes the wave's pods land on; a pod
// that fits none of its NodePools, nor the controller's kept nodes, is a
// blocker.
func (pl *planner) predictWave(w *Wave, pods []inventory.Pod) error {
	if pl.pred == nil {
		return nil
	}
	predicted, unschedulable, err := pl.pred.predict(pods, w.NodePools)
	if err != nil {
		if why := pl.o.Pools.Unmapped[w.Nodes[0].NodeGroup]; why != "" {
			return fmt.Errorf("plan wave %d: predict Karpenter nodes: %w: node group %s: %s", w.Index, err, w.Nodes[0].NodeGroup, why)
		}
		return fmt.Errorf("plan wave %d: predict Karpenter nodes: %w", w.Index, err)
	}
	w.PredictedNodes = predicted
	if pl.p.Budget.PreProvision {
		k := len(pl.pred.fleet) - len(predicted)
		ordered := pods
		if pl.timer != nil {
			ordered = pl.timer.drainOrdered(w.Nodes, pods)
		}
		w.PreProvision = headroom(ordered, unschedulable, predicted, pl.pred.fleet[k:], pl.pred.fleet[:k])
	}
	for _, u := range unschedulable {
		if pl.cp.admitsKept(podOf(pods, u.Pod)) {
			continue // it moves to the controller's kept nodes
		}
		pl.findings = append(pl.findings, Finding{Severity: "blocker", Object: "Pod " + u.Pod.String(),
			Message: fmt.Sprintf("fits no NodePool of wave %d (%s), so it would stay Pending after its eviction:%s", w.Index, strings.Join(w.NodePools, ", "), strings.TrimPrefix(u.String(), u.Pod.String()+":"))})
	}
	return nil
}

// priceWave adds the wave's predicted nodes to the cost after (priced by
// the plan's prices where the engine gave none) and, with PreProvision,
// a placeholder for each node that takes pods, after the wave's headroom
// (predictWave).
func (pl *planner) priceWave(w *Wave) {
	for i := range w.PredictedNodes {
		pn := &w.PredictedNodes[i]
		if pn.PricePerHour == 0 {
			pn.PricePerHour = pl.price(pn.InstanceType, capacityOr(pn.CapacityType), pn.Zone)
		}
		pl.cost.AfterPerHour += pn.PricePerHour
		if pl.pred != nil {
			pl.pred.price[pn.Name] = pn.PricePerHour
		}
		if pl.p.Budget.PreProvision && pn.Pods > 0 {
			ph := Placeholder{NodePool: pn.NodePool, CPU: pn.CPU, Memory: pn.Memory}
			if pn.zonal {
				ph.Zone = pn.Zone
			}
			w.PreProvision = append(w.PreProvision, ph)
		}
	}
}

// timeGroup predicts the duration of a drain group (the waves g, from 0,
// drained together; one wave alone is a group of one) and adds it to the
// plan's once: each of its waves has the group's timing (WaveTiming) and
// predicted seconds, and the waves of a group of several their first's
// index as DrainGroup. A wave launches capacity when it predicts new
// nodes, or when nothing is predicted (no NodePools): its pods are
// assumed to need them.
func (pl *planner) timeGroup(g []int, moved [][]inventory.Pod) {
	ws := make([]waveIn, len(g))
	for k, i := range g {
		w := &pl.p.Waves[i]
		ws[k] = waveIn{nodes: w.Nodes, pods: moved[i], hasNodes: len(w.PredictedNodes) > 0 || pl.pred == nil,
			preProvision: pl.p.Budget.PreProvision && len(w.PreProvision) > 0}
	}
	wt := pl.timer.group(ws)
	for _, i := range g {
		w := &pl.p.Waves[i]
		w.Timing = new(wt)
		w.PredictedSeconds = wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds
		if len(g) > 1 {
			w.DrainGroup = pl.p.Waves[g[0]].Index
		}
	}
	pl.p.Timing.PredictedSeconds += wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds - wt.EarlySeconds
}

// growKeptGroup adds the nodes the controller's kept group grows by, from
// the nodes it keeps to its size, to the cost after and the kept fleet.
func (pl *planner) growKeptGroup(group string, kept int) {
	ng, _ := pl.inv.NodeGroup(group)
	if ng == nil || len(ng.InstanceTypes) == 0 || len(ng.Zones) == 0 {
		return
	}
	for range int(pl.cp.home.Size) - kept {
		pr := pl.price(ng.InstanceTypes[0], capacityOr(ng.CapacityType), ng.Zones[0])
		pl.cost.AfterPerHour += pr
		pl.keptFleet = append(pl.keptFleet, disruption.TypeCount{InstanceType: ng.InstanceTypes[0], CapacityType: capacityOr(ng.CapacityType), Nodes: 1, PricePerHour: pr})
	}
}

// settle forecasts the fleet consolidation makes of the predicted one (the
// plan's SteadyState, with the kept fleet); a forecast that fails is a
// warning, a plan stopped by Progress an error.
func (pl *planner) settle() error {
	if pl.pred == nil || len(pl.pred.fleet) == 0 {
		return nil
	}
	ss, err := steadyState(pl.pred, pl.inv.PDBs, func(pass, nodes int) error {
		return pl.progress(PlanProgress{SettlePass: pass, Nodes: nodes})
	})
	if pl.stopped != nil {
		return pl.stopped
	}
	if err != nil {
		pl.findings = append(pl.findings, Finding{Severity: "warning", Object: "consolidation", Message: "the fleet after Karpenter's consolidation is not predicted: " + err.Error()})
	}
	if ss != nil {
		ss.addKept(pl.keptFleet)
	}
	pl.p.SteadyState = ss
	return nil
}
