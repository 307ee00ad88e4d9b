package engine

import (
	"cmp"
	"slices"
	"strings"
)

// sortQueue orders the pods as Karpenter's Queue pops them: CPU then
// memory, descending, then namespace/name (the inventory has no creation
// time or UID).
func sortQueue(pods []*podData) {
	slices.SortFunc(pods, func(a, b *podData) int {
		if c := cmp.Compare(b.req[rCPU], a.req[rCPU]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.req[rMem], a.req[rMem]); c != 0 {
			return c
		}
		if c := strings.Compare(a.ref.Namespace, b.ref.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.ref.Name, b.ref.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx) // as a stable sort: input order
	})
}

// schedule pops the queue in order and requeues each pod that fails until
// a full pass makes no progress; it returns the pods left and why each of
// them failed last.
func (s *scheduler) schedule(queue []*podData) ([]*podData, map[*podData]map[string]string) {
	defer s.dropZeroSets()
	failures := map[*podData]map[string]string{}
	for len(queue) > 0 {
		var next []*podData
		for _, pd := range queue {
			if reasons := s.trySchedule(pd); reasons != nil {
				failures[pd] = reasons
				next = append(next, pd)
			} else {
				delete(failures, pd)
			}
		}
		if len(next) == len(queue) {
			return next, failures
		}
		queue = next
	}
	return queue, failures
}
