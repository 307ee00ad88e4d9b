package engine

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Topology kinds.
const (
	kindSpread = iota
	kindAffinity
	kindAnti
)

// topologyGroup is Karpenter's TopologyGroup: one spread constraint or pod
// (anti-)affinity term shared by every pod that declares it, with counts of
// the pods it selects per domain.
type topologyGroup struct {
	kind        int
	key         string
	namespaces  map[string]bool
	selector    labels.Selector
	maxSkew     int32
	minDomains  int32
	honorTaints bool // nodeTaintsPolicy Honor
	ignoreAff   bool // nodeAffinityPolicy Ignore
	counts      map[string]int32
	total       int32
	owners      map[string]int32 // domains of owner pods (inverse anti-affinity)
	nOwners     int32
	// hc and ho are counts and owners of hostname-keyed groups, indexed by
	// node id (a node is its own hostname domain).
	hc, ho []int32
	// hcClaims and hoClaims count the claims (not existing nodes) with a
	// non-zero hc or ho: when they reach every claim, a pod the group keeps
	// off such nodes can skip the scan of the claims.
	hcClaims, hoClaims int32
	// zero lists the claims with hc 0, kept (zeroKept) only during the
	// greedy pass and only once the group's pods are on most claims
	// (fewClaims); zeroPos is each claim's position in it + 1, by node id.
	zero     []*node
	zeroPos  []int32
	zeroKept bool
	desc     string
}

func (g *topologyGroup) addZero(n *node) {
	for len(g.zeroPos) <= n.id {
		g.zeroPos = append(g.zeroPos, 0)
	}
	if g.zeroPos[n.id] == 0 {
		g.zero = append(g.zero, n)
		g.zeroPos[n.id] = int32(len(g.zero))
	}
}

func (g *topologyGroup) removeZero(n *node) {
	if n.id >= len(g.zeroPos) || g.zeroPos[n.id] == 0 {
		return
	}
	i := g.zeroPos[n.id] - 1
	last := g.zero[len(g.zero)-1]
	g.zero[i] = last
	g.zeroPos[last.id] = i + 1
	g.zero = g.zero[:len(g.zero)-1]
	g.zeroPos[n.id] = 0
}

func (g *topologyGroup) hcount(id int) int32 {
	if id < len(g.hc) {
		return g.hc[id]
	}
	return 0
}

func (g *topologyGroup) howner(id int) int32 {
	if id < len(g.ho) {
		return g.ho[id]
	}
	return 0
}

// bump adds d to s[id]; on a claim it also counts in *nonZero whether
// s[id] turned non-zero or zero.
func bump(s []int32, id int, d int32, claim bool, nonZero *int32) []int32 {
	if id >= len(s) {
		s = append(s, make([]int32, id+1-len(s))...)
	}
	was := s[id]
	s[id] += d
	if claim && (was == 0) != (s[id] == 0) {
		if was == 0 {
			*nonZero++
		} else {
			*nonZero--
		}
	}
	return s
}

func (g *topologyGroup) selects(p *inventory.Pod) bool {
	return (g.namespaces[p.Namespace] || g.namespaces["*"]) && g.selector.Matches(labels.Set(p.Labels))
}

func (s *scheduler) group(kind int, key string, ns map[string]bool, sel *metav1.LabelSelector, extra map[string]string, maxSkew, minDomains int32, honorTaints, ignoreAff bool) (*topologyGroup, error) {
	// Pods of one workload declare the same term: parsing its selector for
	// each of them was most of podsOf. The term as written finds the group
	// it gave before; a new form is parsed and named as below, so forms
	// that parse alike still share one group.
	s.keyBuf = appendTermKey(s.keyBuf[:0], kind, key, ns, sel, extra, maxSkew, minDomains, honorTaints, ignoreAff)
	if g, ok := s.groupsByRaw[string(s.keyBuf)]; ok {
		return g, nil
	}
	g, err := s.parseGroup(kind, key, ns, sel, extra, maxSkew, minDomains, honorTaints, ignoreAff)
	if err != nil {
		return nil, err
	}
	if s.groupsByRaw == nil {
		s.groupsByRaw = map[string]*topologyGroup{}
	}
	s.groupsByRaw[string(s.keyBuf)] = g
	return g, nil
}

// appendTermKey appends a term as written; every string is length-prefixed,
// so two terms with one key are one term.
func appendTermKey(b []byte, kind int, key string, ns map[string]bool, sel *metav1.LabelSelector, extra map[string]string, maxSkew, minDomains int32, honorTaints, ignoreAff bool) []byte {
	b = strconv.AppendInt(b, int64(kind), 10)
	b = append(b, 0)
	b = appendStr(b, key)
	b = append(b, 0)
	var scratch [4]string // the keys of one map at a time: most have one
	for _, k := range appendSortedKeys(scratch[:0], ns) {
		b = appendStr(b, k)
		b = strconv.AppendBool(append(b, 2), ns[k])
		b = append(b, 1)
	}
	b = append(b, 0)
	writeMap := func(m map[string]string) {
		for _, k := range appendSortedKeys(scratch[:0], m) {
			b = appendStr(b, k)
			b = append(b, 2)
			b = appendStr(b, m[k])
			b = append(b, 1)
		}
		b = append(b, 0)
	}
	if sel == nil {
		b = append(b, 3, 0)
	} else {
		writeMap(sel.MatchLabels)
		for _, e := range sel.MatchExpressions {
			b = appendStr(b, e.Key)
			b = append(b, 2)
			b = appendStr(b, string(e.Operator))
			for _, v := range e.Values {
				b = append(b, 2)
				b = appendStr(b, v)
			}
			b = append(b, 1)
		}
		b = append(b, 0)
	}
	if extra == nil {
		b = append(b, 3, 0)
	} else {
		writeMap(extra)
	}
	b = strconv.AppendInt(b, int64(maxSkew), 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(minDomains), 10)
	b = strconv.AppendBool(append(b, 0), honorTaints)
	b = strconv.AppendBool(append(b, 0), ignoreAff)
	return b
}

// appendStr appends s with its length before it.
func appendStr(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// appendSortedKeys appends m's keys, sorted, to keys: with a caller's
// array as keys, the one-key maps of most pods and selectors allocate
// nothing.
func appendSortedKeys[V any](keys []string, m map[string]V) []string {
	n := len(keys)
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys)-n > 1 {
		slices.Sort(keys[n:])
	}
	return keys
}

// parseGroup is group for a term not seen yet: it parses the selector and
// finds or makes the group by its parsed form.
func (s *scheduler) parseGroup(kind int, key string, ns map[string]bool, sel *metav1.LabelSelector, extra map[string]string, maxSkew, minDomains int32, honorTaints, ignoreAff bool) (*topologyGroup, error) {
	ls := sel
	if len(extra) > 0 {
		ls = sel.DeepCopy()
		if ls == nil {
			ls = &metav1.LabelSelector{}
		}
		if ls.MatchLabels == nil {
			ls.MatchLabels = map[string]string{}
		}
		for k, v := range extra {
			ls.MatchLabels[k] = v
		}
	}
	var selector labels.Selector
	if ls == nil {
		selector = labels.Nothing()
	} else {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(ls); err != nil {
			return nil, fmt.Errorf("label selector: %w", err)
		}
	}
	nsKeys := make([]string, 0, len(ns))
	for n := range ns {
		nsKeys = append(nsKeys, n)
	}
	sort.Strings(nsKeys)
	id := fmt.Sprintf("%d|%s|%s|%s|%d|%d|%v|%v", kind, key, strings.Join(nsKeys, ","), selector.String(), maxSkew, minDomains, honorTaints, ignoreAff)
	if g, ok := s.groupsByID[id]; ok {
		return g, nil
	}
	kindName := [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[kind]
	g := &topologyGroup{kind: kind, key: key, namespaces: ns, selector: selector, maxSkew: maxSkew, minDomains: minDomains,
		honorTaints: honorTaints, ignoreAff: ignoreAff, counts: map[string]int32{}, owners: map[string]int32{},
		desc: fmt.Sprintf("%s on %s for pods matching %q", kindName, key, selector.String())}
	s.groupsByID[id] = g
	s.groups = append(s.groups, g)
	return g, nil
}
