package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// volumeRequirements are the node requirements a pod's volumes add
// (Karpenter's VolumeTopology.GetRequirements): each claim's topology terms
// are its alternatives, the pod's alternatives are their cross product,
// keeping only compatible combinations when some are (all of them when
// none is). Karpenter tries the alternatives in turn; the engine keeps one
// Requirements: the single alternative, or, when every alternative is one
// In requirement on the same key (zones of a volume, a class's allowed
// zones), their union, which admits exactly the nodes some alternative
// admits; otherwise the first alternative. Nil when no volume constrains.
func volumeRequirements(p *inventory.Pod) (Requirements, error) {
	alts := []Requirements{nil}
	for _, v := range p.Volumes {
		if len(v.Topology) == 0 {
			continue
		}
		var vol []Requirements
		for i, term := range v.Topology {
			rs, err := FromNodeSelectorTerm(term.MatchExpressions)
			if err != nil {
				return nil, fmt.Errorf("volume %s (claim %s) topology term %d: %w", v.Name, v.ClaimName, i, err)
			}
			if len(rs) > 0 {
				vol = append(vol, rs)
			}
		}
		if len(vol) > 0 {
			alts = mergeVolumeAlternatives(alts, vol)
		}
	}
	switch {
	case len(alts) == 1:
		return alts[0], nil
	case unionable(alts):
		var key string
		var values []string
		for _, a := range alts {
			for k, r := range a {
				key = k
				values = append(values, r.Values()...)
			}
		}
		return Requirements{key: mustIn(key, values...)}, nil
	}
	return alts[0], nil
}

// mergeVolumeAlternatives is Karpenter's mergeVolumeRequirementAlternatives.
func mergeVolumeAlternatives(alts, vol []Requirements) []Requirements {
	merge := func(a, b Requirements) Requirements {
		out := Requirements{}
		for _, r := range a {
			out.Add(r)
		}
		for _, r := range b {
			out.Add(r)
		}
		return out
	}
	var compatible, all []Requirements
	for _, a := range alts {
		for _, v := range vol {
			m := merge(a, v)
			all = append(all, m)
			if a == nil || a.intersect(v) {
				compatible = append(compatible, m)
			}
		}
	}
	if len(compatible) > 0 {
		return compatible
	}
	return all
}

// unionable: every alternative is one In requirement on the same key.
func unionable(alts []Requirements) bool {
	key := ""
	for _, a := range alts {
		if len(a) != 1 {
			return false
		}
		for k, r := range a {
			if r.Operator() != corev1.NodeSelectorOpIn || key != "" && k != key {
				return false
			}
			key = k
		}
	}
	return true
}

// attachedVolumes is an existing node's volume usage against its CSINode
// limits (Karpenter's scheduling.VolumeUsage): per CSI driver, the claims
// attached. Only nodes with limits keep one.
type attachedVolumes struct {
	limits map[string]int32
	claims map[string]map[string]bool // driver → namespace/claim
}

func newAttached(limits map[string]int32) *attachedVolumes {
	if len(limits) == 0 {
		return nil
	}
	return &attachedVolumes{limits: limits, claims: map[string]map[string]bool{}}
}

func (a *attachedVolumes) clone() *attachedVolumes {
	if a == nil {
		return nil
	}
	out := &attachedVolumes{limits: a.limits, claims: make(map[string]map[string]bool, len(a.claims))}
	for d, cs := range a.claims {
		out.claims[d] = make(map[string]bool, len(cs))
		for c := range cs {
			out.claims[d][c] = true
		}
	}
	return out
}

// add records the pod's claims (Karpenter's VolumeUsage.Add).
func (a *attachedVolumes) add(p *inventory.Pod) {
	if a == nil {
		return
	}
	for _, v := range p.Volumes {
		if v.Driver == "" || v.ClaimName == "" {
			continue
		}
		if a.claims[v.Driver] == nil {
			a.claims[v.Driver] = map[string]bool{}
		}
		a.claims[v.Driver][p.Namespace+"/"+v.ClaimName] = true
	}
}

// exceeds reports whether the pod's claims would take a driver past its
// limit (Karpenter's VolumeUsage.ExceedsLimits: the union of the node's
// claims and the pod's, per driver, against the driver's limit).
func (a *attachedVolumes) exceeds(p *inventory.Pod) bool {
	if a == nil {
		return false
	}
	var added map[string]int32
	for i, v := range p.Volumes {
		limit, ok := a.limits[v.Driver]
		if !ok || v.ClaimName == "" {
			continue
		}
		id := p.Namespace + "/" + v.ClaimName
		if a.claims[v.Driver][id] || sharedEarlier(p.Volumes[:i], v) {
			continue
		}
		if added == nil {
			added = map[string]int32{}
		}
		added[v.Driver]++
		if int32(len(a.claims[v.Driver]))+added[v.Driver] > limit {
			return true
		}
	}
	return false
}

// sharedEarlier: an earlier volume of the pod mounts the same claim.
func sharedEarlier(earlier []inventory.Volume, v inventory.Volume) bool {
	for _, e := range earlier {
		if e.Driver == v.Driver && e.ClaimName == v.ClaimName {
			return true
		}
	}
	return false
}
