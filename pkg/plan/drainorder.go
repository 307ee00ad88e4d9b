package plan

import (
	"math"
	"slices"
)

// DrainNode is a node a drain empties, as DrainOrder reads it: for each pod
// the drain evicts from it, the keys of the PodDisruptionBudgets selecting
// the pod (none for a pod without one).
type DrainNode struct {
	Name string
	Pods [][]string
}

// DrainOrder orders the nodes of one drain, concurrency at a time, and
// returns the time its last eviction happens from its start, as the
// duration model times it: a node's drain starts as a slot is free and
// evicts its pods at once, each as its budgets allow — a budget b lets
// allowed[b] go at once and one more each time a replacement is Ready,
// ready after an eviction (a budget allowing none, or not in allowed,
// holds nothing back: its pods are restarted with surge, or the drain
// pauses on them) — and it frees its slot with its last eviction. Each
// time a slot frees, the node that would finish first from then goes
// next, the given order deciding between equals: a node whose budget the
// nodes before it are using waits behind those whose pods can go at once,
// rather than holding its slot for a replacement while they wait
// (kubectl's drain takes the nodes in the order given: DrainNodes).
func DrainOrder(nodes []DrainNode, allowed map[string]int, ready float64, concurrency int) ([]string, float64) {
	// free holds, per budget, when each of the disruptions it allows is
	// free again.
	free := map[string][]float64{}
	for _, n := range nodes {
		for _, keys := range n.Pods {
			for _, k := range keys {
				if _, ok := free[k]; !ok && allowed[k] > 0 {
					free[k] = make([]float64, allowed[k])
				}
			}
		}
	}
	// finish is when node n's drain, started at t, evicts its last pod;
	// with commit it takes the budgets' disruptions it uses.
	finish := func(n DrainNode, t float64, commit bool) float64 {
		end := t
		taken := map[string][]float64{}
		slots := func(k string) []float64 {
			if s, ok := taken[k]; ok {
				return s
			}
			s := free[k]
			if !commit {
				s = slices.Clone(s)
			}
			taken[k] = s
			return s
		}
		for _, keys := range n.Pods {
			at := t
			for _, k := range keys {
				if s := slots(k); len(s) > 0 {
					at = max(at, slices.Min(s))
				}
			}
			for _, k := range keys {
				if s := slots(k); len(s) > 0 {
					s[slices.Index(s, slices.Min(s))] = at + ready
				}
			}
			end = max(end, at)
		}
		return end
	}
	order := make([]string, 0, len(nodes))
	left := slices.Clone(nodes)
	slots := make([]float64, max(1, concurrency))
	var last float64
	for len(left) > 0 {
		i := slices.Index(slots, slices.Min(slots))
		t := slots[i]
		best, end := 0, math.Inf(1)
		for j, n := range left {
			if e := finish(n, t, false); e < end {
				best, end = j, e
				if e == t {
					break // none finishes sooner
				}
			}
		}
		finish(left[best], t, true)
		order = append(order, left[best].Name)
		left = slices.Delete(left, best, best+1)
		slots[i] = end
		last = max(last, end)
	}
	return order, last
}
