package disruption

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// compactPods prepares each node's pods for simulations. A pod that
// declares no topology term, binds no host port, has no volume that pins
// it to a zone or counts against an attach limit, and is selected by no
// topology term of any pod in the cluster only takes room on its node, so
// the pods of that kind on a node are folded into one stand-in pod with
// their summed requests (its "pods" request keeps the pod count). The
// scheduler then parses a fraction of the pods on every simulation, with
// the same outcome. Any selector that does not parse disables folding.
// A cache whose nodes were folded against the same selectors keeps their
// simPods.
func (st *state) compactPods(cache *nodeCache) {
	var sels []labels.Selector
	seen := map[string]bool{}
	ok := true
	add := func(ts topologySelectors) {
		ok = ok && ts.ok
		for i, k := range ts.keys {
			if !seen[k] {
				seen[k] = true
				sels = append(sels, ts.sels[i])
			}
		}
	}
	for _, n := range st.nodes {
		if n.selectors == nil {
			// Settle's cache keeps them with the node.
			n.selectors = selectorsOf(n.in.Pods)
		}
		add(*n.selectors)
	}
	add(*selectorsOf(st.in.Pending))
	folding := fmt.Sprint(ok, slices.Sorted(maps.Keys(seen)))
	reuse := cache != nil && cache.folding == folding
	if cache != nil {
		cache.folding = folding
	}
	for _, n := range st.nodes {
		if reuse && n.simPods != nil {
			continue
		}
		n.simPods, n.derived = n.in.Pods, st.gen
		if !ok {
			continue
		}
		var kept []inventory.Pod
		sum := corev1.ResourceList{}
		folded := 0
		for i := range n.in.Pods {
			p := &n.in.Pods[i]
			if foldable(p, sels) {
				addList(sum, p.Requests)
				folded++
				continue
			}
			kept = append(kept, *p)
		}
		if folded < 2 {
			continue
		}
		// The scheduler adds one pod per pod; the stand-in carries the rest.
		sum[corev1.ResourcePods] = *resource.NewQuantity(int64(folded-1), resource.DecimalSI)
		kept = append(kept, inventory.Pod{Namespace: "karpenter-migrate.io", Name: fmt.Sprintf("%s-folded-pods", n.ref.Name),
			NodeName: n.ref.Name, Phase: corev1.PodRunning, OwnerKind: inventory.OwnerDaemonSet, Requests: sum})
		n.simPods = kept
	}
}

// topologySelectors are the label selectors of the pods' topology spread
// constraints and pod (anti-)affinity terms, each once, with their
// String() keys; ok is false when one does not parse (nothing is folded).
type topologySelectors struct {
	sels []labels.Selector
	keys []string
	ok   bool
}

func selectorsOf(pods []inventory.Pod) *topologySelectors {
	ts := &topologySelectors{ok: true}
	addSel := func(ls *metav1.LabelSelector) bool {
		if ls == nil {
			return true
		}
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return false
		}
		if k := s.String(); !slices.Contains(ts.keys, k) {
			ts.keys = append(ts.keys, k)
			ts.sels = append(ts.sels, s)
		}
		return true
	}
	scan := func(p *inventory.Pod) bool {
		for _, c := range p.TopologySpreadConstraints {
			if !addSel(c.LabelSelector) {
				return false
			}
		}
		for _, t := range engine.PodAffinityTerms(p.Affinity) {
			if !addSel(t.LabelSelector) {
				return false
			}
		}
		return true
	}
	for i := range pods {
		if ts.ok = scan(&pods[i]); !ts.ok {
			break
		}
	}
	return ts
}

func foldable(p *inventory.Pod, sels []labels.Selector) bool {
	if len(p.TopologySpreadConstraints) > 0 || len(p.HostPorts) > 0 || p.VolumesConstrain() {
		return false
	}
	if a := p.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return false
	}
	if _, ok := p.Requests[corev1.ResourcePods]; ok {
		return false
	}
	set := labels.Set(p.Labels)
	for _, s := range sels {
		if s.Matches(set) {
			return false
		}
	}
	return true
}
