package engine

import (
	"slices"
	"sort"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// The improvement pass. After the greedy pass, pods that declare no
// topology terms or host ports and that no pod affinity counts ("movable"
// pods) are taken off every claim; claims keep the rest and shrink to the
// cheapest type that holds it. The movable pods are then packed again,
// priced with the LP's dual prices of CPU and memory (what a milli-CPU and
// a byte cost in the cheapest fractional fleet):
//
//  1. every remaining claim may be topped up, on its current type or on a
//     bigger one, whichever holds the most value per dollar;
//  2. the rest go to new claims, each opened on the type (one candidate per
//     size and CPU:memory band) whose best first-fit fill has the most value
//     per dollar, so a claim's type matches the mix it carries.
//
// Moved pods keep their place in the order (Seq) and the zone of every
// zone-keyed group that counts them, so every zone count is the same at
// every moment; they do not land where a placed pod's required
// anti-affinity forbids them, nor next to a pod whose hostname spread counts
// them. So each constraint judged at placement time still holds. The pass
// is kept only when the fleet gets cheaper.

// movable reports whether a pod can be re-packed: it declares no topology
// terms or host ports and no pod affinity counts it.
func movable(pd *podData) bool {
	if len(pd.owned) > 0 || len(pd.ports) > 0 {
		return false
	}
	for _, g := range pd.selectedBy {
		if g.kind == kindAffinity {
			return false
		}
	}
	return true
}

type claimState struct {
	n    *node
	copy node
}

type groupState struct {
	g                  *topologyGroup
	counts, owners     map[string]int32
	hc, ho             []int32
	total, nOwners     int32
	hcClaims, hoClaims int32
}

type repackSnapshot struct {
	claims  []*node
	states  []claimState
	groups  []groupState
	poolSeq []int
	seq     int
	nextID  int
}

func (s *scheduler) snapshotState() repackSnapshot {
	snap := repackSnapshot{claims: slices.Clone(s.claims), seq: s.seq, nextID: s.nextID,
		states: make([]claimState, 0, len(s.claims)), groups: make([]groupState, 0, len(s.groups)), poolSeq: make([]int, 0, len(s.pools))}
	for _, n := range s.claims {
		snap.states = append(snap.states, claimState{n: n, copy: *n})
	}
	for _, g := range s.groups {
		snap.groups = append(snap.groups, groupState{g: g, counts: cloneCounts(g.counts), owners: cloneCounts(g.owners),
			hc: slices.Clone(g.hc), ho: slices.Clone(g.ho), total: g.total, nOwners: g.nOwners, hcClaims: g.hcClaims, hoClaims: g.hoClaims})
	}
	for _, p := range s.pools {
		snap.poolSeq = append(snap.poolSeq, s.claimsNamed(p))
	}
	return snap
}

func cloneCounts(m map[string]int32) map[string]int32 {
	out := make(map[string]int32, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *scheduler) restore(snap repackSnapshot) {
	s.claims = snap.claims
	for _, st := range snap.states {
		*st.n = st.copy
	}
	for _, gs := range snap.groups {
		gs.g.counts, gs.g.owners, gs.g.hc, gs.g.ho, gs.g.total, gs.g.nOwners = gs.counts, gs.owners, gs.hc, gs.ho, gs.total, gs.nOwners
		gs.g.hcClaims, gs.g.hoClaims = gs.hcClaims, gs.hoClaims
	}
	for i, u := range s.uses {
		if u != nil {
			u.seq = snap.poolSeq[i]
		}
	}
	s.seq, s.nextID = snap.seq, snap.nextID
}

// improve runs the re-pack and keeps it only when the fleet gets cheaper
// without more nodes, or at least 5 % cheaper. When the first re-pack needs
// more nodes, a second one grows existing claims before opening new ones.
// Both start from the same preparation (pods taken off, claims shrunk,
// classes priced), done once: the second restores it from a snapshot
// instead of redoing it from the greedy result.
func (s *scheduler) improve() {
	before, nodes := s.totalCost(), s.liveClaims()
	snap := s.snapshotState()
	prep, ok := s.prepareRepack()
	if !ok || len(prep.classes) == 0 {
		s.restore(snap) // no class found a pool, or nothing to move
		return
	}
	prepared := s.snapshotState()
	prep.save()
	for _, absorb := range []bool{false, true} {
		ok := s.repack(prep, absorb)
		cost, n := s.totalCost(), s.liveClaims()
		if ok && cost < before-1e-9 && (n <= nodes || cost <= 0.95*before) {
			return
		}
		if absorb || !ok || n <= nodes {
			s.restore(snap)
			return
		}
		if redoPrepare {
			// Tests: the second re-pack from the greedy result, as if
			// nothing had been kept of the first.
			s.restore(snap)
			prep, _ = s.prepareRepack()
			continue
		}
		s.restore(prepared)
		prep.reset()
	}
}

// redoPrepare is set only by tests, which compare the second re-pack with
// one prepared afresh.
var redoPrepare = false

func (s *scheduler) liveClaims() int {
	n := 0
	for _, c := range s.claims {
		if !c.dead && len(c.pods) > 0 {
			n++
		}
	}
	return n
}

// repackPrep is what a re-pack starts from: the remaining claims (by CPU
// used, descending) and the movable pods taken off them, classed and
// priced; saved and reset restore what a re-pack changes of it.
type repackPrep struct {
	live    []*node
	classes []*looseClass
	duals   map[*pool]*poolDuals
	budgets map[*pool]*budget

	left    []int        // by class
	pods    [][]*podData // by size group, class by class
	budgetV map[*pool]budget
}

func (p *repackPrep) save() {
	p.left, p.pods, p.budgetV = nil, nil, map[*pool]budget{}
	for _, c := range p.classes {
		p.left = append(p.left, c.left)
		for _, sg := range c.sizes {
			p.pods = append(p.pods, sg.pods)
		}
	}
	for k, b := range p.budgets {
		p.budgetV[k] = *b
	}
}

func (p *repackPrep) reset() {
	i := 0
	for ci, c := range p.classes {
		c.left = p.left[ci]
		for _, sg := range c.sizes {
			sg.pods = p.pods[i]
			i++
		}
	}
	for k, b := range p.budgets {
		*b = p.budgetV[k]
	}
}

// prepareRepack takes the movable pods off every claim and shrinks the
// claims to what is left; false when some class of them has no pool.
func (s *scheduler) prepareRepack() (*repackPrep, bool) {
	var loose []*podData
	var live []*node
	for _, n := range s.claims {
		if n.dead || len(n.pods) == 0 {
			continue
		}
		var pods []*podData
		var seqs []int
		removed := false
		for i, pd := range n.pods {
			if movable(pd) {
				loose = append(loose, pd)
				pd.pins, pd.seq = s.pinsOf(pd, n), n.seqs[i]
				s.record(pd, n, -1)
				n.used = n.used.sub(pd.req)
				removed = true
				continue
			}
			pods = append(pods, pd)
			seqs = append(seqs, n.seqs[i])
		}
		if !removed {
			live = append(live, n)
			continue
		}
		n.pods, n.seqs = pods, seqs
		if len(pods) == 0 {
			n.dead = true
			continue
		}
		s.shrink(n)
		live = append(live, n)
	}
	if len(loose) == 0 {
		return &repackPrep{}, true
	}
	classes, ok := s.classify(loose)
	if !ok {
		return nil, false
	}
	prep := &repackPrep{live: live, classes: classes, duals: s.duals(live, classes), budgets: s.limitBudgets(live)}
	sort.SliceStable(live, func(i, j int) bool { return live[i].used[rCPU] > live[j].used[rCPU] })
	return prep, true
}

// repack packs the loose pods again; false when some pod found no place
// (the caller restores the greedy result). absorb grows existing claims
// whenever that holds more pods, before any new claim is opened.
func (s *scheduler) repack(prep *repackPrep, absorb bool) bool {
	live, classes, duals, budget := prep.live, prep.classes, prep.duals, prep.budgets
	for _, current := range []bool{true, false} {
		for _, n := range live {
			s.topUp(n, classes, duals[n.pool], budget, current, absorb)
		}
	}
	for _, c := range classes {
		for c.left > 0 {
			if !s.openBin(c, duals[c.pool], budget) {
				return false
			}
		}
	}
	return s.minValuesHold()
}

// pinsOf is the zone (or other non-hostname domain) of every group that
// counts the pod, which a move must keep.
func (s *scheduler) pinsOf(pd *podData, n *node) Requirements {
	var pins Requirements
	for _, g := range pd.selectedBy {
		if g.key == catalog.LabelHostname {
			continue
		}
		if d := n.domain(g.key); d != "" {
			if pins == nil {
				pins = Requirements{}
			}
			pins[g.key] = mustIn(g.key, d)
		}
	}
	return pins
}

// shrink recomputes a claim's types after pods left it: every pool type
// compatible with its requirements that holds what is left.
func (s *scheduler) shrink(n *node) {
	// n.types is a subsequence of the pool's types (every filter keeps their
	// order), so one walk finds which were options already.
	old, j := n.types, 0
	compat := s.reqsCompat(n.pool, n.reqs)
	n.types = s.fitting(n.pool.types, n.used, func(t *itype) bool {
		wasOption := j < len(old) && old[j] == t
		if wasOption {
			j++
		}
		return wasOption || compat[t.idx]
	}, n, false)
	n.cur = s.cheapestIndex(n)
}
