package engine

import (
	"fmt"
	"sort"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// podData is the scheduler's cached view of a pod (Karpenter's PodData).
type podData struct {
	pod  *inventory.Pod
	ref  PodRef
	idx  int
	req  vec
	base Requirements // nodeSelector
	// alts are the required node-affinity OR terms; alt is the active one.
	alts []Requirements
	alt  int
	// prefs are preferred node-affinity terms, heaviest first; the first
	// is required until relaxed.
	prefs []Requirements
	// vol is what the pod's volumes require of a node (volumes.go): it
	// narrows the node, not the domains the pod's own topology counts.
	vol        Requirements
	reqs       Requirements // effective: base ∩ alts[alt] ∩ prefs[0] ∩ vol
	reqKey     string       // canonical form of reqs, for caches
	own        Requirements // reqs but vol: the pod's own node affinity
	ownKey     string       // canonical form of own
	pins       Requirements // domains a re-pack must keep (improvement pass)
	seq        int          // place in the order, kept by a re-pack
	tolerateNS bool         // PreferNoSchedule tolerated (relaxed)
	ports      []inventory.HostPort

	owned       []*topologyGroup // required (and respected soft) terms
	softAff     []*topologyGroup // preferred pod affinity, heaviest first
	softAnti    []*topologyGroup // preferred pod anti-affinity, heaviest first
	softSpreads []*topologyGroup // ScheduleAnyway
	selectedBy  []*topologyGroup
	invalid     error
}

func (s *scheduler) newPodData(p *inventory.Pod, idx int) *podData {
	pd := &podData{}
	s.initPodData(pd, p, idx)
	return pd
}

// initPodData fills pd, zero, for the pod (podsOf's are one allocation).
func (s *scheduler) initPodData(pd *podData, p *inventory.Pod, idx int) {
	*pd = podData{pod: p, ref: refOf(p), idx: idx, ports: p.HostPorts}
	v, err := s.ri.vec(p.Requests)
	if err != nil {
		pd.invalid = fmt.Errorf("requests: %w", err)
		return
	}
	v[rPods]++
	pd.req = v
	if len(p.NodeSelector) > 0 {
		pd.base = Requirements{}
		for k, val := range p.NodeSelector {
			pd.base.Add(mustIn(k, val))
		}
	}
	if a := p.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			for i, term := range r.NodeSelectorTerms {
				rs, err := FromNodeSelectorTerm(term.MatchExpressions)
				if err != nil {
					pd.invalid = fmt.Errorf("required node affinity term %d: %w", i, err)
					return
				}
				pd.alts = append(pd.alts, rs)
			}
		}
		if !s.opts.IgnorePreferences {
			prefs := slicesClone(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
			sort.SliceStable(prefs, func(i, j int) bool { return prefs[i].Weight > prefs[j].Weight })
			for _, t := range prefs {
				if rs, err := FromNodeSelectorTerm(t.Preference.MatchExpressions); err == nil {
					pd.prefs = append(pd.prefs, rs)
				}
			}
		}
	}
	if len(p.Volumes) > 0 {
		if pd.vol, err = volumeRequirements(p); err != nil {
			pd.invalid = err
			return
		}
	}
	pd.recompute()
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

func (pd *podData) recompute() {
	var alt, pref Requirements
	if pd.alt < len(pd.alts) {
		alt = pd.alts[pd.alt]
	}
	if len(pd.prefs) > 0 {
		pref = pd.prefs[0]
	}
	var rs Requirements // nil (read-only) when the pod requires nothing, as most
	if len(pd.base)+len(alt)+len(pref) > 0 {
		rs = pd.base.Clone()
		for _, r := range alt {
			rs.Add(r)
		}
		for _, r := range pref {
			rs.Add(r)
		}
	}
	pd.reqs = rs
	pd.reqKey = ""
	if len(rs) > 0 {
		pd.reqKey = describeReqs(rs)
	}
	pd.own, pd.ownKey = pd.reqs, pd.reqKey
	if len(pd.vol) > 0 {
		rs = Requirements{}
		for _, r := range pd.own {
			rs.Add(r)
		}
		for _, r := range pd.vol {
			rs.Add(r)
		}
		pd.reqs, pd.reqKey = rs, describeReqs(rs)
	}
}

// isSelectedBy reports whether one of the pod's own groups counts the pod.
func (pd *podData) isSelectedBy(g *topologyGroup) bool {
	for _, x := range pd.selectedBy {
		if x == g {
			return true
		}
	}
	return false
}

// podsOf is the scheduler's view of the pending pods, and those invalid.
func (s *scheduler) podsOf(pods []inventory.Pod) (valid, invalid []*podData) {
	valid = make([]*podData, 0, len(pods))
	all := make([]podData, len(pods))
	for i := range pods {
		pd := &all[i]
		s.initPodData(pd, &pods[i], i)
		if pd.invalid == nil {
			if err := s.buildTopology(pd); err != nil {
				pd.invalid = err
			}
		}
		if pd.invalid != nil {
			invalid = append(invalid, pd)
			continue
		}
		valid = append(valid, pd)
	}
	return valid, invalid
}
