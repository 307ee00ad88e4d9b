package disruption

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
)

// Drift reasons (Karpenter's DriftReason values).
const (
	NodePoolDrifted     = "NodePoolDrifted"
	RequirementsDrifted = "RequirementsDrifted"
	NodeClassDrifted    = "NodeClassDrifted"
)

// drift reports the nodes Karpenter's drift method would roll: a node whose
// karpenter.sh/nodepool-hash differs from its live NodePool's, whose labels
// no longer satisfy its NodePool's requirements, or (what-if) whose
// NodePool's static fields or EC2NodeClass would change under
// Options.Proposed. Drift only reports here; it never acts.
func (st *state) drift(b *budgets) ([]DriftedNode, error) {
	proposed := map[string]*engine.NodePool{}
	for i := range st.opts.Proposed {
		proposed[st.opts.Proposed[i].Name] = &st.opts.Proposed[i]
	}
	left := b.clone()
	var out []DriftedNode
	for _, n := range st.nodes {
		if n.pool == nil || n.in.InFlight {
			continue
		}
		if n.drift == nil {
			reason, detail, err := st.drifted(n, proposed[n.pool.name])
			if err != nil {
				return nil, err
			}
			// Settle's cache keeps it with the node: the node, its pool and
			// the options are the same in every pass.
			n.drift = &driftVerdict{reason, detail}
		}
		reason, detail := n.drift.reason, n.drift.detail
		if reason == "" {
			continue
		}
		dn := DriftedNode{Node: n.ref, Reason: reason, Detail: detail}
		blockers := n.blockers
		if n.pool.np.Spec.Template.Spec.TerminationGracePeriod == nil {
			// Without terminationGracePeriod, pod-level blocks hold drift too.
			blockers = append(slices.Clip(blockers), n.podBlockers...)
		}
		switch {
		case len(blockers) > 0:
			dn.Blocked = strings.Join(blockers, "; ")
		case !left.allows(n.pool.name, apiv1.DisruptionReasonDrifted):
			dn.Blocked = fmt.Sprintf("NodePool %s's disruption budget for Drifted allows no more nodes now", n.pool.name)
		default:
			left.take(n.pool.name, apiv1.DisruptionReasonDrifted)
		}
		out = append(out, dn)
	}
	return out, nil
}

// driftVerdict is drifted's answer for a node.
type driftVerdict struct{ reason, detail string }

func (st *state) drifted(n *nodeInfo, proposed *engine.NodePool) (reason, detail string, err error) {
	nd := &n.in.Node
	if want, ok := st.opts.NodePoolHashes[n.pool.name]; ok {
		if have, ok := nd.Annotations[apiv1.NodePoolHashAnnotationKey]; ok && have != want {
			return NodePoolDrifted, fmt.Sprintf("node annotation %s=%s, NodePool %s has %s", apiv1.NodePoolHashAnnotationKey, have, n.pool.name, want), nil
		}
	}
	target := n.pool.np
	if proposed != nil {
		if changed := StaticFieldChanges(n.pool.np.Spec, proposed.Spec); len(changed) > 0 {
			return NodePoolDrifted, fmt.Sprintf("NodePool %s changes %s", n.pool.name, strings.Join(changed, ", ")), nil
		}
		if !reflect.DeepEqual(n.pool.np.Kubelet, proposed.Kubelet) {
			return NodeClassDrifted, fmt.Sprintf("EC2NodeClass of NodePool %s changes amiFamily or kubelet", n.pool.name), nil
		}
		target = proposed
	}
	for i, r := range target.Spec.Template.Spec.Requirements {
		req, err := engine.NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return "", "", fmt.Errorf("nodePool %s: spec.template.spec.requirements[%d]: %w", target.Name, i, err)
		}
		v, ok := nd.Labels[r.Key]
		if !ok {
			// A snapshot may lack the instance-type labels Karpenter puts on
			// its NodeClaims; the node's instance type supplies them.
			if t := n.pool.types[n.ref.InstanceType]; t != nil {
				v, ok = t.Labels[r.Key]
			} else if st.in.Catalog != nil {
				if t, found := st.in.Catalog.Get(n.ref.InstanceType); found {
					v, ok = t.Labels[r.Key]
				}
			}
		}
		if ok && !req.Has(v) {
			return RequirementsDrifted, fmt.Sprintf("label %s=%s does not satisfy %s", r.Key, v, req), nil
		}
		if !ok && r.Operator != corev1.NodeSelectorOpNotIn && r.Operator != corev1.NodeSelectorOpDoesNotExist {
			return RequirementsDrifted, fmt.Sprintf("label %s is missing but required (%s)", r.Key, req), nil
		}
	}
	return "", "", nil
}

// StaticFieldChanges lists the NodePool fields whose change drifts nodes
// (Karpenter hashes them into karpenter.sh/nodepool-hash): template labels,
// annotations, taints, startup taints and nodeClassRef. Requirements drift
// by label comparison instead; weight, limits, disruption, expireAfter and
// terminationGracePeriod never drift nodes.
func StaticFieldChanges(a, b apiv1.NodePoolSpec) []string {
	var out []string
	ta, tb := a.Template, b.Template
	if !maps.Equal(ta.ObjectMeta.Labels, tb.ObjectMeta.Labels) {
		out = append(out, "spec.template.metadata.labels")
	}
	if !maps.Equal(ta.ObjectMeta.Annotations, tb.ObjectMeta.Annotations) {
		out = append(out, "spec.template.metadata.annotations")
	}
	if !sameTaints(ta.Spec.Taints, tb.Spec.Taints) {
		out = append(out, "spec.template.spec.taints")
	}
	if !sameTaints(ta.Spec.StartupTaints, tb.Spec.StartupTaints) {
		out = append(out, "spec.template.spec.startupTaints")
	}
	if !reflect.DeepEqual(ta.Spec.NodeClassRef, tb.Spec.NodeClassRef) {
		out = append(out, "spec.template.spec.nodeClassRef")
	}
	return out
}

// sameTaints compares taints as sets (Karpenter hashes slices as sets).
func sameTaints(a, b []corev1.Taint) bool {
	key := func(ts []corev1.Taint) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.Key + "=" + t.Value + ":" + string(t.Effect)
		}
		sort.Strings(out)
		return slices.Compact(out)
	}
	return slices.Equal(key(a), key(b))
}
