package engine

import (
	"math"
	"math/bits"
	"sort"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// How pickClaim avoids trying every claim.
//
// The claims are partitioned by their domain for one topology key (the
// non-hostname key the most groups use, in practice the zone): one part per
// domain a claim is pinned to, and one for claims not pinned yet. A pod
// whose terms on that key rule out a domain skips its part without looking
// at a claim of it. Without this, a zone-spread pod that must go to the
// emptiest zone tried every claim of the other zones first, and the greedy
// pass grew with the square of the pods.

// maxParts bounds the partitions (a uint64 mask); a key with more domains
// is not partitioned.
const maxParts = 64

// indexParts picks the partition key once the groups are known.
func (s *scheduler) indexParts() {
	s.partKey, s.partOf = "", nil
	uses := map[string]int{}
	for _, g := range s.groups {
		if g.key != catalog.LabelHostname {
			uses[g.key]++
		}
	}
	keys := make([]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if uses[keys[i]] != uses[keys[j]] {
			return uses[keys[i]] > uses[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var ds []string
	if len(keys) > 0 {
		ds, _ = s.domainsOf(keys[0])
	}
	if len(keys) > 0 && len(ds)+1 <= maxParts {
		s.partKey = keys[0]
		s.partOf = map[string]int{}
		for i, d := range ds {
			s.partOf[d] = i
		}
	}
	s.parts = len(s.partOf) + 1
	s.rooms = make([]roomIndex, s.parts)
	s.byCount = make([][][]countEntry, s.parts)
}

// undetermined is the part of claims not pinned to a domain of the key
// (also those pinned outside the universe, which topology rejects anyway).
func (s *scheduler) undetermined() int { return s.parts - 1 }

// partOfClaim is the part a claim belongs in now.
func (s *scheduler) partOfClaim(n *node) int {
	if s.partKey == "" {
		return 0
	}
	if i, ok := s.partOf[n.domainIn(s.partKey, n.reqs)]; ok {
		return i
	}
	return s.undetermined()
}

// partsFor is the mask of parts where the pod may pass topology: the
// undetermined part always, and each domain that none of the pod's terms on
// the key rejects. The tests are topology's for a claim pinned to that
// domain, so a skipped part holds no claim the pod could join.
func (s *scheduler) partsFor(pd *podData) uint64 {
	all := uint64(math.MaxUint64) >> (64 - s.parts)
	if s.partKey == "" {
		return all
	}
	mask := all
	keep := func(ok func(d string) bool) {
		var m uint64
		for _, d := range s.domains(s.partKey, pd, nil) {
			if i, in := s.partOf[d]; in && ok(d) {
				m |= 1 << i
			}
		}
		mask &= m
	}
	for _, g := range pd.selectedBy {
		if g.kind == kindAnti && g.nOwners > 0 && g.key == s.partKey {
			keep(func(d string) bool { return g.owners[d] == 0 })
		}
	}
	for _, g := range pd.owned {
		if g.key != s.partKey {
			continue
		}
		self := pd.isSelectedBy(g)
		switch g.kind {
		case kindAnti:
			keep(func(d string) bool { return g.counts[d] == 0 })
		case kindAffinity:
			if g.total > 0 || !self {
				keep(func(d string) bool { return g.counts[d] > 0 })
			}
		case kindSpread:
			minCount := s.minCount(g, pd)
			keep(func(d string) bool {
				c := g.counts[d]
				if self {
					c++
				}
				return c-minCount <= g.maxSkew
			})
		}
	}
	return mask | 1<<s.undetermined()
}

// nextRoom is the first bucket ≥ b non-empty in one of the parts, or -1.
func (s *scheduler) nextRoom(mask uint64, b int) int {
	best := -1
	for m := mask; m != 0; m &= m - 1 {
		if nb := s.rooms[bits.TrailingZeros64(m)].next(b); nb >= 0 && (best < 0 || nb < best) {
			best = nb
		}
	}
	return best
}

// putRoom indexes a claim by the room on its current type, in its part
// (partOfClaim's).
func (s *scheduler) putRoom(n *node, part int) {
	n.roomPart = part
	s.rooms[n.roomPart].put(n)
}

func (s *scheduler) removeRoom(n *node) {
	if n.room >= 0 {
		s.rooms[n.roomPart].remove(n)
	}
}

// A pod that must be alone on a node among a group's pods (a hostname
// anti-affinity term, or a hostname spread with maxSkew 1 that counts the
// pod) can only join a claim the group has no pod on. Once the group's pods
// are on most claims, as with a one-per-node deployment, the few claims
// left are kept in a list (topologyGroup.zero) and pickAmong looks at
// those alone, instead of failing on every other claim first.

// fewThreshold: a list is used while it holds at most 1/fewThreshold of
// the claims (and there are at least fewMinClaims claims; a variable so
// that a test can compare with the scans alone).
const fewThreshold = 4

var fewMinClaims = 64

// fewClaims is the shortest list of claims one of the pod's hostname terms
// leaves, when short enough to beat the scan.
func (s *scheduler) fewClaims(pd *podData) ([]*node, bool) {
	claims := len(s.claims)
	if claims < fewMinClaims {
		return nil, false
	}
	var few []*node
	ok := false
	for _, g := range pd.owned {
		if g.key != catalog.LabelHostname || !(g.kind == kindAnti || g.kind == kindSpread && g.maxSkew == 1 && pd.isSelectedBy(g)) {
			continue
		}
		if !g.zeroKept {
			if int(int32(claims)-g.hcClaims)*fewThreshold > claims {
				continue
			}
			g.zeroKept = true
			for _, n := range s.claims {
				if g.hcount(n.id) == 0 {
					g.addZero(n)
				}
			}
			s.zeroGroups = append(s.zeroGroups, g)
		}
		if len(g.zero)*fewThreshold <= claims && (!ok || len(g.zero) < len(few)) {
			few, ok = g.zero, true
		}
	}
	return few, ok
}

func (s *scheduler) dropZeroSets() {
	for _, g := range s.zeroGroups {
		g.zero, g.zeroPos, g.zeroKept = nil, nil, false
	}
	s.zeroGroups = nil
}

// candidate is a claim of a short list with its place in the order
// pickClaim's scans would meet it.
type candidate struct {
	n                *node
	bucket, part, at int
	score            float64
}

// pickAmong is pickClaim restricted to cands: the same scans, in the same
// order, over the claims listed (every other claim fails the pod).
func (s *scheduler) pickAmong(pd *podData, mask uint64, cands []*node) (*node, Requirements) {
	byOrder := func(c []candidate) {
		sort.Slice(c, func(i, j int) bool {
			a, b := c[i], c[j]
			if a.bucket != b.bucket {
				return a.bucket < b.bucket
			}
			if a.part != b.part {
				return a.part < b.part
			}
			return a.at < b.at
		})
	}
	if !s.opts.KarpenterOnly {
		start := roomBucket(pd.req[rCPU])
		list := s.scratch[:0]
		for _, n := range cands {
			if n.room < start || mask&(1<<n.roomPart) == 0 {
				continue
			}
			e := &s.rooms[n.roomPart].buckets[n.room][n.roomPos]
			if pd.req.fits(e.free) {
				list = append(list, candidate{n: n, bucket: n.room, part: n.roomPart, at: n.roomPos, score: fitScore(pd, e)})
			}
		}
		byOrder(list)
		s.scratch = list
		var best *node
		var bestReqs Requirements
		bestScore := math.MaxFloat64
		found := -1
		for _, c := range list {
			if found >= 0 && c.bucket > found+1 {
				break
			}
			if c.score >= bestScore {
				continue
			}
			if narrowed, ok := s.canAdd(pd, c.n); ok {
				best, bestReqs, bestScore = c.n, narrowed, c.score
				if found < 0 {
					found = c.bucket
				}
			}
		}
		if best != nil {
			return best, bestReqs
		}
	}
	list := s.scratch[:0]
	for _, n := range cands {
		if n.bucket < 0 || mask&(1<<n.part) == 0 {
			continue
		}
		if pd.req.fits(s.byCount[n.part][len(n.pods)][n.bucket].head) {
			list = append(list, candidate{n: n, bucket: len(n.pods), part: n.part, at: n.bucket})
		}
	}
	byOrder(list)
	s.scratch = list
	for _, c := range list {
		if narrowed, ok := s.canAdd(pd, c.n); ok {
			return c.n, narrowed
		}
	}
	return nil, nil
}
