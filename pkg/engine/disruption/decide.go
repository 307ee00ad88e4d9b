package disruption

import (
	"fmt"
	"time"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// Decide runs one disruption pass at in.Now: Emptiness, Drift (reported,
// never acting), MultiNodeConsolidation, SingleNodeConsolidation, in
// Karpenter's order; the first method that produces commands acts. It
// explains every node and reports the budgets. It is pure and deterministic.
func Decide(in Input) (Decision, error) { return decide(in, nil) }

// decide is Decide with Settle's cache of what earlier passes derived;
// with a cache it leaves out the nodes' explanations, which Settle does
// not read.
func decide(in Input, cache *nodeCache) (Decision, error) {
	st, err := newState(&in, cache)
	if err != nil {
		return Decision{}, err
	}
	b, err := st.buildBudgets()
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Now: in.Now, Budgets: b.status}
	if d.Drifted, err = st.drift(b); err != nil {
		return Decision{}, err
	}
	// Candidacy common to the consolidation methods.
	var empty, underutilized []*nodeInfo
	for _, n := range st.nodes {
		e := n.expl
		e.Node, e.Empty, e.SavingsRatio = n.ref, len(n.resched) == 0, n.savingsRatio
		e.Reasons = append(append(e.Reasons, n.blockers...), n.podBlockers...)
		if len(e.Reasons) > 0 {
			continue
		}
		pd := n.pool.np.Spec.Disruption
		switch {
		case n.never:
			e.Reasons = append(e.Reasons, fmt.Sprintf("NodePool %s has consolidateAfter: Never", n.pool.name))
		case st.now.Before(n.consolidatableAt):
			e.Reasons = append(e.Reasons, fmt.Sprintf("consolidateAfter %s not reached (consolidatable at %s)", pd.ConsolidateAfter.String(), n.consolidatableAt.UTC().Format(time.RFC3339)))
		case e.Empty:
			e.Candidate = true
			empty = append(empty, n)
		case pd.ConsolidationPolicy == apiv1.ConsolidationPolicyWhenEmpty:
			e.Reasons = append(e.Reasons, fmt.Sprintf("NodePool %s has consolidationPolicy WhenEmpty and the node runs %d reschedulable pods", n.pool.name, len(n.resched)))
		default:
			e.Candidate = true
			underutilized = append(underutilized, n)
		}
	}
	sortCandidates(empty)
	sortCandidates(underutilized)

	acted := func(m Method, cmds []Command) {
		d.Method, d.Commands = m, cmds
		for i, c := range cmds {
			d.Savings += c.Savings
			for _, nr := range c.Nodes {
				e := st.byNm[nr.Name].expl
				switch c.Action {
				case ActionDelete:
					e.Outcome = fmt.Sprintf("deleted by %s (command %d): %s", m, i+1, c.Why)
				default:
					e.Outcome = fmt.Sprintf("replaced by %s (command %d): %s", m, i+1, c.Why)
				}
			}
		}
	}
	if cmd := st.emptiness(empty, b.clone()); cmd != nil {
		acted(MethodEmptiness, []Command{*cmd})
	} else if cmd, err := st.consolidate(underutilized, b); err != nil {
		return Decision{}, err
	} else if cmd != nil {
		acted(cmd.Method, []Command{*cmd})
	}
	if in.Options.ExplainAll {
		for _, n := range underutilized {
			if n.expl.Outcome != "" || len(n.expl.Reasons) > 0 {
				continue
			}
			c, err := st.computeConsolidation([]*nodeInfo{n}, MethodSingleNode, st.opts.KarpenterOnly)
			if err != nil {
				return Decision{}, err
			}
			st.explainSingle(n, c)
		}
	}
	if cache == nil {
		d.Nodes = make([]Candidacy, 0, len(st.nodes))
		for _, n := range st.nodes {
			d.Nodes = append(d.Nodes, *n.expl)
		}
	}
	return d, nil
}

func (st *state) explainSingle(n *nodeInfo, c consolidation) {
	if c.cmd == nil {
		n.expl.Reasons = append(n.expl.Reasons, "cannot be consolidated on its own: "+c.why)
		return
	}
	verb := "deleted"
	if c.cmd.Action == ActionReplace {
		verb = "replaced"
	}
	n.expl.Reasons = append(n.expl.Reasons, fmt.Sprintf("could be %s on its own (saves $%.4f/h): %s", verb, c.cmd.Savings, c.cmd.Why))
}

// emptiness deletes every empty candidate the Empty budget allows, in one
// command.
func (st *state) emptiness(cands []*nodeInfo, b *budgets) *Command {
	var cmd *Command
	for _, n := range cands {
		if !b.allows(n.pool.name, apiv1.DisruptionReasonEmpty) {
			n.expl.Reasons = append(n.expl.Reasons, fmt.Sprintf("NodePool %s's disruption budget for Empty allows no more nodes now", n.pool.name))
			continue
		}
		if st.balancedRejects([]*nodeInfo{n}, n.ref.Price) != "" {
			continue
		}
		b.take(n.pool.name, apiv1.DisruptionReasonEmpty)
		if cmd == nil {
			cmd = &Command{Method: MethodEmptiness, Reason: apiv1.DisruptionReasonEmpty, Action: ActionDelete, Why: "no reschedulable pods"}
		}
		cmd.Nodes = append(cmd.Nodes, n.ref)
		cmd.Price += n.ref.Price
	}
	if cmd != nil {
		cmd.Savings = cmd.Price
	}
	return cmd
}

// consolidate runs MultiNodeConsolidation, then SingleNodeConsolidation if
// it found nothing. Unless KarpenterOnly, multi-node is also searched with
// the improved packing, and the command that saves most among Karpenter's
// own and the improved ones is kept, so it never saves less than
// Karpenter's.
func (st *state) consolidate(cands []*nodeInfo, b *budgets) (*Command, error) {
	var eligible, within []*nodeInfo
	left := b.clone()
	for _, n := range cands {
		if !b.allows(n.pool.name, apiv1.DisruptionReasonUnderutilized) {
			n.expl.Reasons = append(n.expl.Reasons, fmt.Sprintf("NodePool %s's disruption budget for Underutilized allows no nodes now", n.pool.name))
			continue
		}
		eligible = append(eligible, n)
		// Multi-node takes candidates in order while the budget lasts.
		if left.allows(n.pool.name, apiv1.DisruptionReasonUnderutilized) {
			left.take(n.pool.name, apiv1.DisruptionReasonUnderutilized)
			within = append(within, n)
		}
	}
	best, size, err := st.firstN(within, true, 1)
	if err != nil {
		return nil, err
	}
	if !st.opts.KarpenterOnly && len(within) >= 2 {
		// The improved packing, at the prefix Karpenter settled on (a
		// cheaper replacement, or a delete), then searching longer prefixes.
		if size > 0 {
			c, err := st.computeConsolidation(within[:size], MethodMultiNode, false)
			if err != nil {
				return nil, err
			}
			if better(c.cmd, best) {
				best = c.cmd
			}
		}
		longer, _, err := st.firstN(within, false, max(size, 1))
		if err != nil {
			return nil, err
		}
		if better(longer, best) {
			best = longer
		}
	}
	if size > 0 { // Karpenter's multi-node acts: single-node does not run

		return best, nil
	}
	single, err := st.singleNode(eligible)
	if err != nil {
		return nil, err
	}
	if better(single, best) {
		best = single
	}
	return best, nil
}

// firstN is Karpenter's firstNConsolidationOption: a binary search for the
// longest prefix (of at least two candidates) that consolidates, with
// prefixes of mid+1 candidates for mid in [lo, hi]. It returns the last
// valid command and its prefix length (0: none).
func (st *state) firstN(cands []*nodeInfo, karpenterOnly bool, lo int) (*Command, int, error) {
	if len(cands) < 2 {
		return nil, 0, nil
	}
	hi := st.opts.MaxCandidates
	if len(cands) <= hi {
		hi = len(cands) - 1
	}
	var last *Command
	size := 0
	for lo <= hi {
		mid := (lo + hi) / 2
		c, err := st.computeConsolidation(cands[:mid+1], MethodMultiNode, karpenterOnly)
		if err != nil {
			return nil, 0, err
		}
		if c.cmd != nil {
			last, size = c.cmd, mid+1
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return last, size, nil
}

// singleNode is SingleNodeConsolidation: candidates round-robin across
// NodePools, the first that consolidates wins. Unless KarpenterOnly, each
// candidate up to that one is also simulated with the improved packing and
// the command that saves most is kept.
func (st *state) singleNode(cands []*nodeInfo) (*Command, error) {
	var best *Command
	for _, n := range interleave(cands) {
		cf, err := st.computeConsolidation([]*nodeInfo{n}, MethodSingleNode, true)
		if err != nil {
			return nil, err
		}
		shown := cf
		if !st.opts.KarpenterOnly {
			ci, err := st.computeConsolidation([]*nodeInfo{n}, MethodSingleNode, false)
			if err != nil {
				return nil, err
			}
			if better(ci.cmd, best) {
				best = ci.cmd
			}
			if cf.cmd == nil && ci.cmd != nil {
				shown = ci
			}
		}
		st.explainSingle(n, shown)
		if better(cf.cmd, best) {
			best = cf.cmd
		}
		// Stop where Karpenter stops: at the first candidate its own
		// simulation consolidates.
		if cf.cmd != nil {
			return best, nil
		}
	}
	return best, nil
}

// interleave orders candidates round-robin across NodePools, pools in the
// order their best candidate appears.
func interleave(cands []*nodeInfo) []*nodeInfo {
	var order []string
	byPool := map[string][]*nodeInfo{}
	for _, c := range cands {
		if _, ok := byPool[c.pool.name]; !ok {
			order = append(order, c.pool.name)
		}
		byPool[c.pool.name] = append(byPool[c.pool.name], c)
	}
	out := make([]*nodeInfo, 0, len(cands))
	for i := 0; len(out) < len(cands); i++ {
		for _, p := range order {
			if i < len(byPool[p]) {
				out = append(out, byPool[p][i])
			}
		}
	}
	return out
}
