package engine

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

type domKey struct {
	key, reqs   string
	honorTaints bool
	ignoreAff   bool
	tols        string
}

type domainSource struct {
	domain string
	taints []corev1.Taint
}

func (s *scheduler) computeSelected(pd *podData) {
	// Which groups select a pod depends on its namespace and labels only,
	// which most pods share with many others: kept per such form (and the
	// number of groups, which only grows).
	b := strconv.AppendInt(s.keyBuf[:0], int64(len(s.groups)), 10)
	b = appendStr(b, pd.pod.Namespace)
	var scratch [4]string
	for _, k := range appendSortedKeys(scratch[:0], pd.pod.Labels) {
		b = appendStr(append(b, 0), k)
		b = appendStr(append(b, 1), pd.pod.Labels[k])
	}
	s.keyBuf = b
	if sel, ok := s.selectedByForm[string(b)]; ok {
		pd.selectedBy = slices.Clip(sel) // shared, read-only: an append copies
		return
	}
	pd.selectedBy = nil // it may share the cache's
	for _, g := range s.groups {
		if g.selects(pd.pod) {
			pd.selectedBy = append(pd.selectedBy, g)
		}
	}
	if s.selectedByForm == nil {
		s.selectedByForm = map[string][]*topologyGroup{}
	}
	s.selectedByForm[string(b)] = slices.Clone(pd.selectedBy)
}

// hostnameRejectsEveryClaim reports that hostnameOK fails on every claim:
// the pod's own hostname anti-affinity, or that of placed pods selecting
// it, already has a pod on each (the anti-affinity pods of a large mix would
// otherwise scan every claim, one by one, before opening their own).
func (s *scheduler) hostnameRejectsEveryClaim(pd *podData) bool {
	claims := int32(len(s.claims))
	if claims == 0 {
		return false
	}
	for _, g := range pd.owned {
		if g.kind == kindAnti && g.key == catalog.LabelHostname && g.hcClaims == claims {
			return true
		}
	}
	for _, g := range pd.selectedBy {
		if g.kind == kindAnti && g.key == catalog.LabelHostname && g.hoClaims == claims {
			return true
		}
	}
	return false
}

// hostnameOK is the cheap part of topology: the pod's own hostname-keyed
// anti-affinity and spread terms, and placed pods' hostname anti-affinity
// against it, which reject most nodes for pods that must be alone or spread
// per node.
func hostnameOK(pd *podData, n *node) bool {
	for _, g := range pd.owned {
		if g.key != catalog.LabelHostname {
			continue
		}
		c := g.hcount(n.id)
		switch g.kind {
		case kindAnti:
			if c > 0 {
				return false
			}
		case kindSpread:
			if pd.isSelectedBy(g) {
				c++
			}
			if c > g.maxSkew {
				return false
			}
		}
	}
	for _, g := range pd.selectedBy {
		if g.kind == kindAnti && g.key == catalog.LabelHostname && g.howner(n.id) > 0 {
			return false
		}
	}
	return true
}

// topology checks the pod's own terms, the inverse anti-affinity of placed
// pods, and pins undetermined domains a counted key needs. For claims it
// returns reqs narrowed to the chosen domains (copied on write).
// Hostname-keyed terms are checked by hostnameOK.
func (s *scheduler) topology(pd *podData, n *node, reqs Requirements) (Requirements, bool) {
	if len(pd.owned) == 0 && len(pd.selectedBy) == 0 {
		return reqs, true
	}
	copied := false
	narrow := func(key, d string) {
		if r, ok := reqs[key]; ok && r.isIn(d) {
			return // already so: no copy (most pods join claims already pinned)
		}
		if !copied {
			reqs = reqs.Clone()
			copied = true
		}
		reqs[key] = mustIn(key, d)
	}
	choose := func(key string, g *topologyGroup) []string {
		return s.allowed(n, reqs, key, s.domains(key, pd, g))
	}
	// Hostname-keyed affinity needs a matching pod on this very node.
	for _, g := range pd.owned {
		if g.key == catalog.LabelHostname && g.kind == kindAffinity && (g.total > 0 || !pd.isSelectedBy(g)) && g.hcount(n.id) == 0 {
			return nil, false
		}
	}
	// Inverse anti-affinity: placed owners forbid their domains.
	for _, g := range pd.selectedBy {
		if g.kind != kindAnti || g.nOwners == 0 || g.key == catalog.LabelHostname {
			continue
		}
		cands := filter(choose(g.key, nil), func(d string) bool { return g.owners[d] == 0 })
		if len(cands) == 0 {
			return nil, false
		}
		if !n.existing {
			narrow(g.key, cands[0])
		}
	}
	for _, g := range pd.owned {
		if g.key == catalog.LabelHostname {
			continue
		}
		cands := choose(g.key, nil)
		self := pd.isSelectedBy(g)
		switch g.kind {
		case kindAnti:
			cands = filter(cands, func(d string) bool { return g.counts[d] == 0 })
		case kindAffinity:
			if g.total > 0 || !self {
				cands = filter(cands, func(d string) bool { return g.counts[d] > 0 })
			}
		case kindSpread:
			minCount := s.minCount(g, pd)
			best, bestCount := "", int32(math.MaxInt32)
			for _, d := range cands {
				c := g.counts[d]
				if self {
					c++
				}
				if c-minCount <= g.maxSkew && c < bestCount {
					best, bestCount = d, c
				}
			}
			cands = nil
			if best != "" {
				cands = []string{best}
			}
		}
		if len(cands) == 0 {
			return nil, false
		}
		if !n.existing {
			narrow(g.key, cands[0])
		}
	}
	// A pod counted by a group needs a determined domain for that key.
	if !n.existing {
		for _, g := range pd.selectedBy {
			if g.key == catalog.LabelHostname || n.domainIn(g.key, reqs) != "" {
				continue
			}
			cands := choose(g.key, nil)
			if len(cands) > 0 {
				narrow(g.key, cands[0])
			}
		}
	}
	return reqs, true
}

// allowed is the values of universe the node may take for key: an existing
// node's label, or what a claim's requirements allow.
func (s *scheduler) allowed(n *node, reqs Requirements, key string, universe []string) []string {
	if n.existing {
		if v, ok := n.labels[key]; ok {
			return []string{v}
		}
		return nil
	}
	r, ok := reqs[key]
	if !ok {
		return universe
	}
	if r.Operator() == corev1.NodeSelectorOpIn && len(r.values) == 1 {
		if slices.Contains(universe, r.values[0]) {
			return r.values
		}
		return nil
	}
	var out []string
	for _, d := range universe {
		if r.Has(d) {
			out = append(out, d)
		}
	}
	return out
}

// domains is the universe of a key eligible for the pod (nodeAffinityPolicy
// Honor: the pod's own requirement on the key; nodeTaintsPolicy Honor: only
// sources whose taints it tolerates). Results are cached; callers must not
// modify them.
func (s *scheduler) domains(key string, pd *podData, g *topologyGroup) []string {
	_, hasReq := pd.own[key]
	honorTaints := g != nil && g.honorTaints
	if !hasReq && !honorTaints {
		if u, ok := s.domainsOf(key); ok {
			return u
		}
	}
	dk := domKey{key: key, reqs: pd.ownKey, honorTaints: honorTaints, ignoreAff: g != nil && g.ignoreAff}
	if honorTaints {
		dk.tols = tolKey(pd.pod.Tolerations)
	}
	if out, ok := s.domCache[dk]; ok {
		return out
	}
	seen := map[string]bool{}
	out := []string{}
	r, hasR := pd.own[key]
	for _, src := range s.universe[key] {
		if seen[src.domain] {
			continue
		}
		if hasR && !dk.ignoreAff && !r.Has(src.domain) {
			continue
		}
		if honorTaints {
			if _, ok := tolerates(pd.pod.Tolerations, src.taints, true); !ok {
				continue
			}
		}
		seen[src.domain] = true
		out = append(out, src.domain)
	}
	sort.Strings(out)
	s.domCache[dk] = out
	return out
}

func (s *scheduler) minCount(g *topologyGroup, pd *podData) int32 {
	ds := s.domains(g.key, pd, g)
	if int32(len(ds)) < g.minDomains {
		return 0
	}
	m := int32(math.MaxInt32)
	for _, d := range ds {
		m = min(m, g.counts[d])
	}
	if m == math.MaxInt32 {
		return 0
	}
	return m
}

// record counts a placed pod (delta 1) or forgets it (delta −1) in every
// group that selects it, and, for required anti-affinity, as an owner.
func (s *scheduler) record(pd *podData, n *node, delta int32) {
	for _, g := range pd.selectedBy {
		if g.key == catalog.LabelHostname {
			g.hc = bump(g.hc, n.id, delta, !n.existing, &g.hcClaims)
			g.total += delta
			if g.zeroKept && !n.existing {
				if g.hcount(n.id) == 0 {
					g.addZero(n)
				} else {
					g.removeZero(n)
				}
			}
		} else if d := n.domain(g.key); d != "" {
			g.counts[d] += delta
			g.total += delta
		}
	}
	for _, g := range pd.owned {
		// Only required anti-affinity is symmetric (as in kube-scheduler).
		if g.kind != kindAnti || slices.Contains(pd.softAnti, g) {
			continue
		}
		if g.key == catalog.LabelHostname {
			g.ho = bump(g.ho, n.id, delta, !n.existing, &g.hoClaims)
			g.nOwners += delta
		} else if d := n.domain(g.key); d != "" {
			g.owners[d] += delta
			g.nOwners += delta
		}
	}
}

func (s *scheduler) topologyReason(pd *podData, explain bool) string {
	if !explain {
		return ""
	}
	var parts []string
	for _, g := range pd.owned {
		parts = append(parts, g.desc)
	}
	for _, g := range pd.selectedBy {
		if g.kind == kindAnti && g.nOwners > 0 {
			parts = append(parts, "inverse "+g.desc)
		}
	}
	return "topology cannot be satisfied: " + strings.Join(parts, "; ")
}

func (s *scheduler) termNamespaces(p *inventory.Pod, term corev1.PodAffinityTerm) map[string]bool {
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		return s.podNamespace(p.Namespace)
	}
	ns := map[string]bool{}
	for _, n := range term.Namespaces {
		ns[n] = true
	}
	// A namespace selector cannot be evaluated without namespace labels; an
	// empty selector means all namespaces, which the pods we know of span.
	if term.NamespaceSelector != nil && len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0 {
		ns["*"] = true
	}
	return ns
}

// podNamespace is {ns: true}, the namespaces of a term that names none,
// one map per namespace: groups keep it and only read it.
func (s *scheduler) podNamespace(ns string) map[string]bool {
	m, ok := s.nsSets[ns]
	if !ok {
		if s.nsSets == nil {
			s.nsSets = map[string]map[string]bool{}
		}
		m = map[string]bool{ns: true}
		s.nsSets[ns] = m
	}
	return m
}

// buildTopology creates the groups each pod owns.
func (s *scheduler) buildTopology(pd *podData) error {
	p := pd.pod
	for _, c := range p.TopologySpreadConstraints {
		var extra map[string]string // nil or empty name one group (parseGroup)
		for _, k := range c.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				if extra == nil {
					extra = map[string]string{}
				}
				extra[k] = v
			}
		}
		var minDomains int32
		if c.MinDomains != nil {
			minDomains = *c.MinDomains
		}
		honorTaints := c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		ignoreAff := c.NodeAffinityPolicy != nil && *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore
		g, err := s.group(kindSpread, c.TopologyKey, s.podNamespace(p.Namespace), c.LabelSelector, extra, max(c.MaxSkew, 1), minDomains, honorTaints, ignoreAff)
		if err != nil {
			return fmt.Errorf("topology spread on %s: %w", c.TopologyKey, err)
		}
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			if s.opts.IgnorePreferences {
				continue
			}
			pd.softSpreads = append(pd.softSpreads, g)
		}
		pd.owned = append(pd.owned, g)
	}
	a := p.Affinity
	if a == nil {
		return nil
	}
	addTerms := func(kind int, req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) error {
		for _, t := range req {
			g, err := s.group(kind, t.TopologyKey, s.termNamespaces(p, t), t.LabelSelector, matchKeys(p, t), 0, 0, false, false)
			if err != nil {
				return err
			}
			pd.owned = append(pd.owned, g)
		}
		if s.opts.IgnorePreferences {
			return nil
		}
		if len(pref) > 1 {
			pref = slicesClone(pref)
			sort.SliceStable(pref, func(i, j int) bool { return pref[i].Weight > pref[j].Weight })
		}
		for _, w := range pref {
			t := w.PodAffinityTerm
			g, err := s.group(kind, t.TopologyKey, s.termNamespaces(p, t), t.LabelSelector, matchKeys(p, t), 0, 0, false, false)
			if err != nil {
				return err
			}
			pd.owned = append(pd.owned, g)
			if kind == kindAffinity {
				pd.softAff = append(pd.softAff, g)
			} else {
				pd.softAnti = append(pd.softAnti, g)
			}
		}
		return nil
	}
	if a.PodAffinity != nil {
		if err := addTerms(kindAffinity, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return fmt.Errorf("pod affinity: %w", err)
		}
	}
	if a.PodAntiAffinity != nil {
		if err := addTerms(kindAnti, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return fmt.Errorf("pod anti-affinity: %w", err)
		}
	}
	return nil
}

func matchKeys(p *inventory.Pod, t corev1.PodAffinityTerm) map[string]string {
	if len(t.MatchLabelKeys) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, k := range t.MatchLabelKeys {
		if v, ok := p.Labels[k]; ok {
			out[k] = v
		}
	}
	return out
}
