package plan_test

import (
	"slices"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// TestDrainOrderWorkedByHand: P = 5s, each budget allowing one disruption
// unless said otherwise; a node's drain ends with its last eviction.
func TestDrainOrderWorkedByHand(t *testing.T) {
	const P = 5.0
	node := func(name string, pods ...[]string) plan.DrainNode { return plan.DrainNode{Name: name, Pods: pods} }
	a, b, c := []string{"a"}, []string{"b"}, []string{"c"}
	tests := []struct {
		name        string
		nodes       []plan.DrainNode
		allowed     map[string]int
		concurrency int
		want        []string
		wantLast    float64
	}{{
		// In the given order B would wait P for A's replacement of a,
		// and D as long for C's of b: D's eviction at 2P. Each time
		// the one that can go at once goes: A, C at 0; B, D at P.
		name:  "two budgets over four nodes, one at a time",
		nodes: []plan.DrainNode{node("A", a), node("B", a), node("C", b), node("D", b)}, allowed: map[string]int{"a": 1, "b": 1}, concurrency: 1,
		want: []string{"A", "C", "B", "D"}, wantLast: P,
	}, {
		// A's two pods of a go at 0 and P (A ends at P); B's one of b
		// at once: B first, then A.
		name:  "a node waiting on its own budget goes after one that does not",
		nodes: []plan.DrainNode{node("A", a, a), node("B", b)}, allowed: map[string]int{"a": 1, "b": 1}, concurrency: 1,
		want: []string{"B", "A"}, wantLast: P,
	}, {
		// a allows 2: A's two pods go at once (A first), B's waits P
		// for a, and C's pod, of a and c, as long for a: B and C at P,
		// in the given order.
		name:  "a budget allowing two, and a pod of two budgets",
		nodes: []plan.DrainNode{node("A", a, a), node("B", a), node("C", []string{"a", "c"})}, allowed: map[string]int{"a": 2, "c": 1}, concurrency: 1,
		want: []string{"A", "B", "C"}, wantLast: P,
	}, {
		// Two at a time: B (ends at once) and A (its second pod of a at
		// P) start at 0; C takes B's slot at 0 and waits P for B's
		// replacement of b.
		name:  "two at a time",
		nodes: []plan.DrainNode{node("A", a, a), node("B", b), node("C", b)}, allowed: map[string]int{"a": 1, "b": 1}, concurrency: 2,
		want: []string{"B", "A", "C"}, wantLast: P,
	}, {
		// A budget allowing none holds nothing back (its pods are
		// restarted with surge, or the drain pauses on them); pods
		// without a budget go at once.
		name:  "a budget allowing none, and no budget",
		nodes: []plan.DrainNode{node("A", c, c), node("B", nil, nil)}, allowed: map[string]int{"c": 0}, concurrency: 1,
		want: []string{"A", "B"}, wantLast: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, last := plan.DrainOrder(tt.nodes, tt.allowed, P, tt.concurrency)
			if !slices.Equal(got, tt.want) || last != tt.wantLast {
				t.Errorf("DrainOrder = %q, last eviction at %vs; want %q at %vs", got, last, tt.want, tt.wantLast)
			}
		})
	}
}
