package engine

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// podAllowsValue: could some term of the pod's node selection accept the
// value for the key (ignoring other keys)?
func podAllowsValue(p *inventory.Pod, key, v string) bool {
	if sv, ok := p.NodeSelector[key]; ok && sv != v {
		return false
	}
	a := p.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := true
		for _, e := range term.MatchExpressions {
			if e.Key == key && !exprMatches(e, v, true) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func nsOf(p *inventory.Pod, t corev1.PodAffinityTerm) map[string]bool {
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		return map[string]bool{p.Namespace: true}
	}
	m := map[string]bool{}
	for _, n := range t.Namespaces {
		m[n] = true
	}
	if t.NamespaceSelector != nil && len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
		m["*"] = true
	}
	return m
}

func selectorWith(ls *metav1.LabelSelector, p *inventory.Pod, keys []string) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	for _, k := range keys {
		if v, ok := p.Labels[k]; ok {
			if r, err := labels.NewRequirement(k, "=", []string{v}); err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	return sel
}

func tolerated(tols []corev1.Toleration, taints []corev1.Taint) bool {
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for _, tol := range tols {
			keyOK := tol.Key == "" || tol.Key == t.Key
			effOK := tol.Effect == "" || tol.Effect == t.Effect
			valOK := tol.Operator == corev1.TolerationOpExists || (tol.Key != "" && tol.Value == t.Value)
			if keyOK && effOK && valOK {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func matchesNode(sel map[string]string, a *corev1.Affinity, l map[string]string) bool {
	for k, v := range sel {
		if l[k] != v {
			return false
		}
	}
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := true
		for _, e := range term.MatchExpressions {
			v, has := l[e.Key]
			if !exprMatches(e, v, has) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func exprMatches(e corev1.NodeSelectorRequirement, v string, has bool) bool {
	in := func() bool {
		for _, x := range e.Values {
			if x == v {
				return true
			}
		}
		return false
	}
	num := func(cmp func(a, b int64) bool) bool {
		if !has || len(e.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(v, 10, 64)
		b, err2 := strconv.ParseInt(e.Values[0], 10, 64)
		return err1 == nil && err2 == nil && cmp(a, b)
	}
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		return has && in()
	case corev1.NodeSelectorOpNotIn:
		return !has || !in()
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt:
		return num(func(a, b int64) bool { return a > b })
	case corev1.NodeSelectorOpLt:
		return num(func(a, b int64) bool { return a < b })
	case "Gte":
		return num(func(a, b int64) bool { return a >= b })
	case "Lte":
		return num(func(a, b int64) bool { return a <= b })
	}
	return false
}

func (c *checker) someSourceTolerated(p *inventory.Pod, zone string) bool {
	for _, taints := range c.zoneTaints[zone] {
		if tolerated(p.Tolerations, taints) {
			return true
		}
	}
	return false
}

// poolAllowsZone: the NodePool's zone requirements (In / NotIn) admit zone.
func poolAllowsZone(np *NodePool, zone string) bool {
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == catalog.LabelZone && !exprMatches(corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}, zone, true) {
			return false
		}
	}
	return true
}

// checkMinValues verifies that a NodeClaim's instance-type options span at
// least minValues distinct values of every NodePool requirement that sets
// minValues (Karpenter's Strict policy), counting each option's label (all
// values of a multi-valued label).
func (c *checker) checkMinValues(nc NodeClaim, np *NodePool) {
	var mins []apiv1.NodeSelectorRequirementWithMinValues
	var idx []int
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues != nil && *r.MinValues > 0 {
			mins, idx = append(mins, r), append(idx, i)
		}
	}
	if len(mins) == 0 {
		return
	}
	if c.typesByPool == nil {
		c.typesByPool = map[string]map[string]*InstanceType{}
	}
	byName, ok := c.typesByPool[np.Name]
	if !ok {
		types := c.poolTypes(np)
		byName = make(map[string]*InstanceType, len(types))
		for i := range types {
			byName[types[i].Name] = &types[i]
		}
		c.typesByPool[np.Name] = byName
	}
	distinct := map[string]map[string]bool{}
	for _, name := range nc.InstanceTypes {
		t, ok := byName[name]
		if !ok {
			c.fail("nodeclaim %s: instance-type option %q is not available to NodePool %s", nc.Name, name, np.Name)
			continue
		}
		for _, r := range mins {
			if distinct[r.Key] == nil {
				distinct[r.Key] = map[string]bool{}
			}
			if v, ok := t.Labels[r.Key]; ok {
				distinct[r.Key][v] = true
			}
			for _, v := range t.MultiLabels[r.Key] {
				distinct[r.Key][v] = true
			}
		}
	}
	for i, r := range mins {
		if got := len(distinct[r.Key]); got < *r.MinValues {
			c.fail("nodeclaim %s: its %d instance-type options span %d distinct values of %s, but NodePool %s spec.template.spec.requirements[%d] asks minValues %d",
				nc.Name, len(nc.InstanceTypes), got, r.Key, np.Name, idx[i], *r.MinValues)
		}
	}
}
