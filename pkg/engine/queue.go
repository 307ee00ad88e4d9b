package engine

import "sort"

// sortQueue orders the pods as Karpenter's Queue pops them: CPU then
// memory, descending, then namespace/name (the inventory has no creation
// time or UID).
func sortQueue(pods []*podData) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.req[rCPU] != b.req[rCPU] {
			return a.req[rCPU] > b.req[rCPU]
		}
		if a.req[rMem] != b.req[rMem] {
			return a.req[rMem] > b.req[rMem]
		}
		if a.ref.Namespace != b.ref.Namespace {
			return a.ref.Namespace < b.ref.Namespace
		}
		return a.ref.Name < b.ref.Name
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
