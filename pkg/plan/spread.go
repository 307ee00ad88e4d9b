package plan

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// spreadRounds bounds headroom's simulations of a wave: the demo's
// waves, replicated up to 4 times, need at most 3.
const spreadRounds = 8

// room is CPU (millicores) and memory (bytes).
type room struct{ cpu, mem int64 }

func roomOf(rl corev1.ResourceList) room {
	c, m := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory]
	return room{c.MilliValue(), m.Value()}
}

func (r room) add(o room) room   { return room{r.cpu + o.cpu, r.mem + o.mem} }
func (r room) sub(o room) room   { return room{r.cpu - o.cpu, r.mem - o.mem} }
func (r room) holds(o room) bool { return r.cpu >= o.cpu && r.mem >= o.mem }

// spreadBin is a node of the wave's spread simulation: its pool and zone,
// what its pods may use (allocatable less the DaemonSets'), what its
// placeholder holds until it is released, and what is free.
type spreadBin struct {
	pool, zone string
	// pinned: the node's placeholder is held in its zone (a pod on it
	// has a zonal volume), and so is headroom modelled on it.
	pinned bool
	usable room
	held   room
	free   room
}

// spreadPod is a pod the wave moves, in drain order: the pool of the new
// node the engine put it on ("" when it put it on an earlier wave's node:
// any), and its zone when a volume pins it.
type spreadPod struct {
	pool, zone string
	req        room
	// node is the legacy node it leaves: the drain evicts a node's pods
	// at once, before kube-scheduler places any of them.
	node string
}

// headroom is the room a wave's placeholders must hold beyond its
// predicted nodes' pods for kube-scheduler to place every pod the drain
// evicts. The engine packs the wave's pods as Karpenter does, each node
// full on its binding resource, and puts some on the room earlier waves'
// nodes left; kube-scheduler instead puts each replacement on the
// emptiest node that fits (LeastAllocated), which is a node a placeholder
// of the wave just left (placeholderRelease releases them in plan order as
// the pods they hold room for are evicted). The room ends up spread in
// fragments smaller than the last pods, which then wait for a node
// Karpenter launches after their eviction (the demo replicated 4 times: a
// 400m pod of wave 7 waited 65s with 1830m free on 8 system nodes, none
// with 400m). It simulates that placement of every pod the wave moves, in
// drain order, onto its new nodes, and adds room for the pods left over,
// modelled on the largest predicted node that may take them, until every
// pod is placed. The headroom comes first among the wave's placeholders,
// released with the first evictions. newNodes are the wave's predicted
// nodes as the predictor keeps them (nodes[i] is newNodes[i]).
func headroom(pods []inventory.Pod, unschedulable []engine.Unschedulable, nodes []PredictedNode, newNodes, earlier []engine.ExistingNode) []Placeholder {
	unplaced := map[engine.PodRef]bool{}
	for _, u := range unschedulable {
		unplaced[u.Pod] = true
	}
	moving := make(map[engine.PodRef]bool, len(pods))
	for _, p := range pods {
		moving[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = true
	}
	// The room earlier waves' nodes the engine gave pods of this wave had
	// left, open to those pods (and to any other). Other nodes' room is
	// not counted on: the simulation stays as small as the wave.
	var open []spreadBin
	for _, n := range earlier {
		b := spreadBin{pool: n.Node.NodePool, zone: n.Node.Zone, usable: roomOf(n.Node.Allocatable)}
		b.free = b.usable
		given := false
		for _, p := range n.Pods {
			if moving[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] {
				given = true
			} else {
				b.free = b.free.sub(roomOf(p.Requests))
			}
		}
		if given {
			open = append(open, b)
		}
	}
	onNew := map[engine.PodRef]*spreadBin{}
	bins := make([]spreadBin, len(nodes))
	for i, n := range nodes {
		bins[i] = spreadBin{pool: n.NodePool, zone: n.Zone, pinned: n.zonal, usable: roomOf(newNodes[i].Node.Allocatable)}
		for _, p := range newNodes[i].Pods {
			bins[i].held = bins[i].held.add(roomOf(p.Requests))
			onNew[engine.PodRef{Namespace: p.Namespace, Name: p.Name}] = &bins[i]
		}
	}
	var moved []spreadPod
	for _, p := range pods {
		ref := engine.PodRef{Namespace: p.Namespace, Name: p.Name}
		if unplaced[ref] {
			continue
		}
		sp := spreadPod{req: roomOf(p.Requests), node: p.NodeName}
		pinned := false
		for _, v := range p.Volumes {
			pinned = pinned || len(v.Topology) > 0
		}
		if b := onNew[ref]; b != nil {
			sp.pool = b.pool
			if pinned {
				sp.zone = b.zone
			}
		} else if pinned {
			continue // its volume's node is an earlier wave's
		}
		moved = append(moved, sp)
	}
	var extra []spreadBin
	// Each round adds room for the pods left over, and the next places
	// them all again; a pod that would not fit its model node even empty
	// ends it, and so does the last round (the room its pods were left
	// over for is added all the same).
	for range spreadRounds {
		left := spread(append(append([]spreadBin(nil), extra...), bins...), append([]spreadBin(nil), open...), moved)
		if len(left) == 0 {
			break
		}
		added := false
		for _, p := range left {
			model := largest(bins, p)
			if model == nil || !model.usable.holds(p.req) {
				continue
			}
			zone, pinned := "", p.zone != "" || model.pinned
			if pinned {
				zone = model.zone
			}
			fitted := false
			for i := range extra {
				if e := &extra[i]; e.pool == model.pool && e.zone == zone && e.usable.holds(e.held.add(p.req)) {
					e.held = e.held.add(p.req)
					fitted = true
					break
				}
			}
			if !fitted {
				extra = append(extra, spreadBin{pool: model.pool, zone: zone, pinned: pinned, usable: model.usable, held: p.req})
			}
			added = true
		}
		if !added {
			break
		}
	}
	out := make([]Placeholder, 0, len(extra))
	for _, e := range extra {
		out = append(out, Placeholder{NodePool: e.pool, Zone: e.zone, Headroom: true,
			CPU:    resource.NewMilliQuantity(e.held.cpu, resource.DecimalSI).String(),
			Memory: resource.NewQuantity(e.held.mem, resource.BinarySI).String()})
	}
	return out
}

// largest is the bin that may take p (its pool, or any; its zone, when
// pinned) whose pods may use the most CPU.
func largest(bins []spreadBin, p spreadPod) *spreadBin {
	var best *spreadBin
	for i := range bins {
		b := &bins[i]
		if b.admits(p) && (best == nil || b.usable.cpu > best.usable.cpu) {
			best = b
		}
	}
	return best
}

// admits reports whether p may go to b: its pool (any, for a pod the
// engine put on an earlier wave's node) and zone.
func (b *spreadBin) admits(p spreadPod) bool {
	return (p.pool == "" || b.pool == p.pool) && (p.zone == "" || b.zone == p.zone)
}

// spread places pods, in order, as kube-scheduler would onto bins whose
// placeholders are released in order as the pods are evicted, and onto
// the open bins' free room: the drain evicts a legacy node's pods at once,
// placeholders going until the room released covers every pod so far, and
// then kube-scheduler places them, each on the bin that admits it with
// the most room left, CPU and memory averaged (LeastAllocated). It
// returns the pods no bin could take.
func spread(bins, open []spreadBin, pods []spreadPod) []spreadPod {
	for i := range bins {
		bins[i].free = bins[i].usable.sub(bins[i].held)
	}
	all := make([]*spreadBin, 0, len(bins)+len(open))
	for i := range bins {
		all = append(all, &bins[i])
	}
	for i := range open {
		all = append(all, &open[i])
	}
	var taken, freed room
	next := 0
	var left []spreadPod
	for start := 0; start < len(pods); {
		end := start + 1
		for end < len(pods) && pods[end].node == pods[start].node {
			end++
		}
		for _, p := range pods[start:end] {
			taken = taken.add(p.req)
			for next < len(bins) && !freed.holds(taken) {
				bins[next].free = bins[next].free.add(bins[next].held)
				freed = freed.add(bins[next].held)
				next++
			}
		}
		for _, p := range pods[start:end] {
			var best *spreadBin
			bestScore := -1.0
			for _, b := range all {
				if !b.admits(p) || !b.free.holds(p.req) {
					continue
				}
				if s := leastAllocated(b.free.sub(p.req), b.usable); s > bestScore {
					best, bestScore = b, s
				}
			}
			if best == nil {
				left = append(left, p)
				continue
			}
			best.free = best.free.sub(p.req)
		}
		start = end
	}
	return left
}

// leastAllocated is kube-scheduler's LeastAllocated score of a node with
// free room left of usable: the mean of its free CPU and memory fractions.
func leastAllocated(free, usable room) float64 {
	frac := func(f, u int64) float64 {
		if u <= 0 {
			return 0
		}
		return float64(f) / float64(u)
	}
	return (frac(free.cpu, usable.cpu) + frac(free.mem, usable.mem)) / 2
}
