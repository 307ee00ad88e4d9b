package engine

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// termKey names a topology key, a set of namespaces and a selector.
type termKey struct{ key, ns, sel string }

func keyOf(key string, ns map[string]bool, sel labels.Selector) termKey {
	names := make([]string, 0, len(ns))
	for n := range ns {
		names = append(names, n)
	}
	sort.Strings(names)
	return termKey{key: key, ns: strings.Join(names, ","), sel: sel.String()}
}

type counted struct {
	seen   int // c.placed[:seen] are counted
	counts map[string]int32
}

// antiTerm is one required anti-affinity term of placed pods: the first
// such pod in each domain.
type antiTerm struct {
	key   string
	ns    map[string]bool
	sel   labels.Selector
	first map[string]cplaced
}

// placeAnti records a placed pod's required anti-affinity terms.
func (c *checker) placeAnti(q cplaced) {
	if q.pod.Affinity == nil || q.pod.Affinity.PodAntiAffinity == nil {
		return
	}
	for _, t := range q.pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		d, ok := q.node.labels[t.TopologyKey]
		if !ok {
			continue
		}
		sel, ns := selectorWith(t.LabelSelector, q.pod, t.MatchLabelKeys), nsOf(q.pod, t)
		k := keyOf(t.TopologyKey, ns, sel)
		at := c.antiBy[k]
		if at == nil {
			at = &antiTerm{key: t.TopologyKey, ns: ns, sel: sel, first: map[string]cplaced{}}
			if c.antiBy == nil {
				c.antiBy = map[termKey]*antiTerm{}
			}
			c.antiBy[k] = at
			c.anti = append(c.anti, at)
		}
		if _, seen := at.first[d]; !seen {
			at.first[d] = q
		}
	}
}

// countBy counts the placed pods the selector picks in each domain of key.
// The map is shared with later calls: read it, do not change it.
func (c *checker) countBy(key string, ns map[string]bool, sel labels.Selector) map[string]int32 {
	k := keyOf(key, ns, sel)
	e := c.counted[k]
	if e == nil {
		e = &counted{counts: map[string]int32{}}
		if c.counted == nil {
			c.counted = map[termKey]*counted{}
		}
		c.counted[k] = e
	}
	for _, q := range c.placed[e.seen:] {
		if !(ns[q.pod.Namespace] || ns["*"]) || !sel.Matches(labels.Set(q.pod.Labels)) {
			continue
		}
		if d, ok := q.node.labels[key]; ok {
			e.counts[d]++
		}
	}
	e.seen = len(c.placed)
	return e.counts
}

// globalMin is the minimum count over the domains the pod could use: every
// zone a NodePool or node offers (Karpenter counts empty domains it can
// create), filtered by the pod's own requirement on the key.
func (c *checker) globalMin(tsc corev1.TopologySpreadConstraint, p *inventory.Pod, counts map[string]int32) int32 {
	var domains []string
	if tsc.TopologyKey == catalog.LabelZone {
		for z := range c.zones {
			domains = append(domains, z)
		}
	} else {
		for _, n := range c.nodes {
			if d, ok := n.labels[tsc.TopologyKey]; ok {
				domains = append(domains, d)
			}
		}
	}
	honor := tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
	honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
	m, n := int32(-1), int32(0)
	seen := map[string]bool{}
	for _, d := range domains {
		if seen[d] {
			continue
		}
		seen[d] = true
		if honor && !podAllowsValue(p, tsc.TopologyKey, d) {
			continue
		}
		if honorTaints && tsc.TopologyKey == catalog.LabelZone && !c.someSourceTolerated(p, d) {
			continue
		}
		n++
		if m < 0 || counts[d] < m {
			m = counts[d]
		}
	}
	if m < 0 || (tsc.MinDomains != nil && n < *tsc.MinDomains) {
		return 0
	}
	return m
}
