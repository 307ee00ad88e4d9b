package engine

import "fmt"

// minValues is Karpenter's rule (--min-values-policy Strict) that a
// NodeClaim of a pool whose requirements carry minValues keeps, among its
// instance-type options, at least minValues distinct values of each such
// key: a pod that would narrow the options below that does not join the
// claim, and a claim whose options already fall short is not opened.

// minValueReqs are the pool requirements that carry minValues, by key.
func minValueReqs(rs Requirements) []Requirement {
	var out []Requirement
	for _, k := range rs.sortedKeys() {
		if r := rs[k]; r.MinValues > 0 {
			out = append(out, r)
		}
	}
	return out
}

// typeValues are the values an instance type has for a key (several for
// multi-valued labels; none when the type does not define the key).
func typeValues(t *itype, key string) []string {
	r, ok := t.reqs[key]
	if !ok {
		return nil
	}
	return r.Values()
}

// minValuesShort reports the first minValues requirement of the pool that
// the types do not meet, and how many distinct values they span for it.
func minValuesShort(p *pool, types []*itype) (Requirement, int, bool) {
	for _, r := range p.minValues {
		seen := make(map[string]struct{}, r.MinValues)
		for _, t := range types {
			for _, v := range typeValues(t, r.Key) {
				seen[v] = struct{}{}
			}
			if len(seen) >= r.MinValues {
				break
			}
		}
		if len(seen) < r.MinValues {
			return r, len(seen), true
		}
	}
	return Requirement{}, 0, false
}

// minValuesReason explains a claim the pool cannot open because its
// remaining instance types span too few values of a minValues key.
func minValuesReason(r Requirement, got int) string {
	return fmt.Sprintf("minValues: NodePool requires %d distinct values of %s among a NodeClaim's instance types, but the types that fit this pod span %d", r.MinValues, r.Key, got)
}

// minValuesHold reports whether every live claim of a pool with minValues
// still meets them (the re-pack is undone when it does not).
func (s *scheduler) minValuesHold() bool {
	for _, n := range s.claims {
		if n.dead || len(n.pods) == 0 || len(n.pool.minValues) == 0 {
			continue
		}
		if _, _, short := minValuesShort(n.pool, n.types); short {
			return false
		}
	}
	return true
}

// launchOptions truncates a claim's options (cheapest first) to at most
// limit, keeping the pool's minValues met when the options allow it:
// once the slots left only just cover the values still missing, only an
// option that adds a missing value is taken. Without minValues it is the
// first limit options, as Karpenter's OrderByPrice and truncation give.
func launchOptions[T any](opts []T, limit int, mins []Requirement, values func(T, string) []string) []T {
	if len(opts) <= limit {
		return opts
	}
	if len(mins) == 0 {
		return opts[:limit]
	}
	seen := make([]map[string]struct{}, len(mins))
	for i := range seen {
		seen[i] = map[string]struct{}{}
	}
	missing := func() int {
		m := 0
		for i, r := range mins {
			m += max(r.MinValues-len(seen[i]), 0)
		}
		return m
	}
	out := make([]T, 0, limit)
	for _, o := range opts {
		if len(out) == limit {
			break
		}
		adds := false
		for i, r := range mins {
			if len(seen[i]) >= r.MinValues {
				continue
			}
			for _, v := range values(o, r.Key) {
				if _, ok := seen[i][v]; !ok {
					adds = true
				}
			}
		}
		if !adds && limit-len(out) <= missing() {
			continue
		}
		for i := range mins {
			for _, v := range values(o, mins[i].Key) {
				seen[i][v] = struct{}{}
			}
		}
		out = append(out, o)
	}
	return out
}
