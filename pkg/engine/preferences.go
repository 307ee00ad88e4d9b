package engine

// relax drops one preference in Karpenter's order; false when nothing is left.
func (pd *podData) relax(s *scheduler) bool {
	switch {
	case pd.alt+1 < len(pd.alts):
		pd.alt++
	case len(pd.softAff) > 0:
		pd.owned = without(pd.owned, pd.softAff[0])
		pd.softAff = pd.softAff[1:]
	case len(pd.softAnti) > 0:
		pd.owned = without(pd.owned, pd.softAnti[0])
		pd.softAnti = pd.softAnti[1:]
	case len(pd.prefs) > 0:
		pd.prefs = pd.prefs[1:]
	case len(pd.softSpreads) > 0:
		pd.owned = without(pd.owned, pd.softSpreads[0])
		pd.softSpreads = pd.softSpreads[1:]
	case !pd.tolerateNS && s.anyPreferNoSchedule:
		pd.tolerateNS = true
	default:
		return false
	}
	pd.recompute()
	return true
}

func without(gs []*topologyGroup, g *topologyGroup) []*topologyGroup {
	out := make([]*topologyGroup, 0, len(gs))
	for _, x := range gs {
		if x != g {
			out = append(out, x)
		}
	}
	return out
}
