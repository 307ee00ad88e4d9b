package engine

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// afterImprove runs Solve's steps up to the re-pack and returns the
// scheduler, so a test can look at the tightening pass on its own.
func afterImprove(t *testing.T, in Input) *scheduler {
	t.Helper()
	s := newScheduler(in.Options)
	if _, err := s.queue(in, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.improve()
	return s
}

// TestTightenKeepsZonesAndCounts: on the Karpenter mix the tightening pass
// makes the fleet cheaper by moving pods, zone-spread ones among them, and
// every moved pod that a zone-keyed group counts or that declares one stays
// in its zone, so every group's count per zone is what it was; no moved pod
// lands next to a pod whose hostname spread or anti-affinity counts it; and
// Solve's result (which includes the pass) passes Check.
func TestTightenKeepsZonesAndCounts(t *testing.T) {
	for _, n := range []int{2000, 3000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) { tightenKeepsZonesAndCounts(t, n) })
	}
}

func tightenKeepsZonesAndCounts(t *testing.T, pods int) {
	in := Input{Pods: karpenterMix(pods), NodePools: []NodePool{hugePool("default", fakeInstanceTypes(400))}}
	s := afterImprove(t, in)
	type where struct {
		n    *node
		zone string
	}
	before := map[*podData]where{}
	for _, n := range s.claims {
		if n.dead {
			continue
		}
		for _, pd := range n.pods {
			before[pd] = where{n, n.domain(catalog.LabelZone)}
		}
	}
	counts, owners := map[*topologyGroup]map[string]int32{}, map[*topologyGroup]map[string]int32{}
	for _, g := range s.groups {
		counts[g], owners[g] = maps.Clone(g.counts), maps.Clone(g.owners)
	}
	cost := s.totalCost()
	s.tighten()
	t.Logf("the pass saved $%.2f/h of $%.2f/h", cost-s.totalCost(), cost)
	if after := s.totalCost(); after > cost-1 {
		t.Fatalf("the pass saved $%.2f/h of $%.2f/h; want at least $1/h on this mix", cost-after, cost)
	}
	moved, movedSpread := 0, 0
	for _, n := range s.claims {
		if n.dead {
			continue
		}
		for _, pd := range n.pods {
			w := before[pd]
			if w.n == n {
				continue
			}
			moved++
			zoned := false
			for _, gs := range [][]*topologyGroup{pd.selectedBy, pd.owned} {
				for _, g := range gs {
					if g.key == catalog.LabelZone {
						zoned = true
						if g.kind == kindSpread && slices.Contains(pd.owned, g) {
							movedSpread++
						}
					}
				}
			}
			// Nor where a hostname term that counts it is declared: the
			// owner's skew or anti-affinity was judged without it.
			for _, g := range pd.selectedBy {
				if g.key != catalog.LabelHostname {
					continue
				}
				for _, o := range n.pods {
					if o != pd && slices.Contains(o.owned, g) && (g.kind == kindSpread || g.kind == kindAnti) {
						t.Errorf("%s moved to %s, next to %s whose hostname term counts it", pd.ref.Name, n.name, o.ref.Name)
					}
				}
			}
			if z := n.domain(catalog.LabelZone); zoned && z != w.zone {
				t.Errorf("%s moved from %s (%s) to %s (%s): a zone-keyed group counts it", pd.ref.Name, w.n.name, w.zone, n.name, z)
			}
		}
	}
	if moved == 0 || movedSpread == 0 {
		t.Fatalf("moved %d pods, %d of them zone-spread; want some of each", moved, movedSpread)
	}
	for _, g := range s.groups {
		if !maps.Equal(counts[g], g.counts) || !maps.Equal(owners[g], g.owners) {
			t.Errorf("group %s (%s): counts %v owners %v, were %v %v", g.key, g.selector, g.counts, g.owners, counts[g], owners[g])
		}
	}
	res, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	if errs := Check(in, res); len(errs) > 0 {
		t.Fatalf("Check: %d violations, first: %v", len(errs), errs[0])
	}
}
