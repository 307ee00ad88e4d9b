package generate

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Legacy node labels that workloads may select.
const (
	labelEKSNodeGroup    = "eks.amazonaws.com/nodegroup"
	labelEKSCapacityType = "eks.amazonaws.com/capacityType"
	labelBetaInstance    = "beta.kubernetes.io/instance-type"
)

// workloadUsage is what the inventory's pods ask of nodes, as far as it
// decides how a pool may be shaped.
type workloadUsage struct {
	// pinnedToGroup lists, per node group, the pods that select it by
	// eks.amazonaws.com/nodegroup.
	pinnedToGroup map[string][]string
	// selectedKeys are the node-label keys any pod selects.
	selectedKeys map[string]bool
	// pinsInstanceType lists, per node group, the pods running there that
	// select an instance type (minValues would make them unschedulable).
	pinsInstanceType map[string][]string
	// maxRequest is, per node group, the largest CPU and memory request of
	// the pods running there.
	maxRequest map[string]corev1.ResourceList
}

func analyseWorkloads(inv *inventory.Inventory) *workloadUsage {
	u := &workloadUsage{
		pinnedToGroup:    map[string][]string{},
		selectedKeys:     map[string]bool{},
		pinsInstanceType: map[string][]string{},
		maxRequest:       map[string]corev1.ResourceList{},
	}
	nodeGroup := map[string]string{}
	for _, n := range inv.Nodes {
		nodeGroup[n.Name] = n.NodeGroup
	}
	for _, p := range inv.Pods {
		if p.OwnerKind == inventory.OwnerDaemonSet {
			continue
		}
		id := p.Namespace + "/" + p.Name
		sel := podSelections(&p)
		for key, values := range sel {
			u.selectedKeys[key] = true
			if key == labelEKSNodeGroup {
				for _, v := range values {
					u.pinnedToGroup[v] = append(u.pinnedToGroup[v], id)
				}
			}
		}
		g := nodeGroup[p.NodeName]
		if g == "" {
			continue
		}
		if _, ok := sel[corev1.LabelInstanceTypeStable]; ok {
			u.pinsInstanceType[g] = append(u.pinsInstanceType[g], id)
		} else if _, ok := sel[labelBetaInstance]; ok {
			u.pinsInstanceType[g] = append(u.pinsInstanceType[g], id)
		}
		maxReq := u.maxRequest[g]
		if maxReq == nil {
			maxReq = corev1.ResourceList{}
			u.maxRequest[g] = maxReq
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := p.Requests[r]; ok {
				if cur, ok := maxReq[r]; !ok || q.Cmp(cur) > 0 {
					maxReq[r] = q.DeepCopy()
				}
			}
		}
	}
	for _, m := range []map[string][]string{u.pinnedToGroup, u.pinsInstanceType} {
		for k := range m {
			sort.Strings(m[k])
		}
	}
	return u
}

// podSelections returns the node-label keys a pod requires, with the values
// it accepts (nil for Exists and negative operators): its nodeSelector and
// the terms of its required node affinity.
func podSelections(p *inventory.Pod) map[string][]string {
	out := map[string][]string{}
	for k, v := range p.NodeSelector {
		out[k] = append(out[k], v)
	}
	if p.Affinity == nil || p.Affinity.NodeAffinity == nil || p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return out
	}
	for _, term := range p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Operator == corev1.NodeSelectorOpIn {
				out[e.Key] = append(out[e.Key], e.Values...)
			} else if _, ok := out[e.Key]; !ok {
				out[e.Key] = nil
			}
		}
	}
	return out
}

// largerOf returns the element-wise maximum of CPU and memory.
func largerOf(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		qa, oka := a[r]
		qb, okb := b[r]
		switch {
		case oka && okb && qa.Cmp(qb) >= 0, oka && !okb:
			out[r] = qa.DeepCopy()
		case okb:
			out[r] = qb.DeepCopy()
		}
	}
	return out
}
