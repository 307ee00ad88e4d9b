package readiness

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// IDControllerHomeRemoved: the Karpenter controller would have no node
// left once the rollout removes the legacy groups.
const IDControllerHomeRemoved = "karpenter-controller-home-removed"

// Controller is where the Karpenter controller must still be able to run
// once the rollout has removed the legacy groups: the plan's decision and
// the scheduling it is checked against.
type Controller struct {
	// Source names the scheduling checked: the live Deployment, or the
	// generated Helm values when the controller is not installed yet.
	Source string
	// Spec is that scheduling: nodeSelector, required node affinity and
	// tolerations (the rest of the pod spec is not read).
	Spec corev1.PodSpec
	// Namespace is where the controller runs, for the fix of a missing home.
	Namespace string
	// KeptGroup is the legacy group kept for it ("" when none); Fargate the
	// profile that runs it instead ("" when none).
	KeptGroup string
	Fargate   string
	// KeptTaint, when set, reserves the kept group's nodes: the controller
	// must tolerate it.
	KeptTaint *corev1.Taint
	// Removed are the legacy groups the rollout scales to zero.
	Removed []string
}

// ControllerHomeProblem says why the controller could not run once the
// removed groups are gone ("" when it can): its required scheduling must
// admit a node that stays — a node of the kept group, with that group's
// reservation taint tolerated, or a node in no removed group — or a
// Fargate profile must run it. Karpenter's own nodes do not count: a
// controller that may run there is the karpenter-can-run-on-own-nodes
// blocker. nodes are the cluster's nodes (for a group with none, a node
// made from its template); groupOf names a node's legacy group. fix says
// what to do.
func ControllerHomeProblem(c Controller, nodes []corev1.Node, groupOf func(*corev1.Node) string) (problem, fix string) {
	if c.Fargate != "" {
		return "", ""
	}
	fixGroup := "keep a group it may run on (plan --controller-nodegroup GROUP or controller.nodeGroup in the environment's config), " +
		"or create a Fargate profile for namespace " + c.Namespace
	if c.KeptGroup == "" {
		return "no node group is kept for it and no Fargate profile selects its namespace " + c.Namespace +
			": the rollout would remove every node it may run on", fixGroup
	}
	pod := &corev1.Pod{Spec: c.Spec}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	admittedBy := map[string]bool{} // legacy groups with a node the scheduling admits
	untolerated := ""
	for i := range nodes {
		n := &nodes[i]
		if n.Labels["karpenter.sh/nodepool"] != "" {
			continue
		}
		if ok, err := required.Match(n); err != nil || !ok {
			continue
		}
		if t, bad := untoleratedTaint(n.Spec.Taints, c.Spec.Tolerations); bad {
			if g := groupOf(n); g == c.KeptGroup && untolerated == "" {
				untolerated = taintString(t)
			}
			continue
		}
		g := groupOf(n)
		if g == c.KeptGroup && c.KeptTaint != nil && !corev1helpers.TolerationsTolerateTaint(klog.Background(), c.Spec.Tolerations, c.KeptTaint, false) {
			untolerated = taintString(*c.KeptTaint)
			continue
		}
		if g == c.KeptGroup || !slices.Contains(c.Removed, g) {
			return "", ""
		}
		admittedBy[g] = true
	}
	if untolerated != "" {
		return fmt.Sprintf("it does not tolerate the taint %s of the kept group %s, and admits no other node that stays", untolerated, c.KeptGroup),
			"add the toleration to the controller (the chart's default tolerations include CriticalAddonsOnly: Exists), or " + fixGroup
	}
	groups := make([]string, 0, len(admittedBy))
	for g := range admittedBy {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	if len(groups) == 0 {
		return fmt.Sprintf("its required scheduling admits no node of the kept group %s, nor any node that stays", c.KeptGroup),
			"pin it to the kept group (eks.amazonaws.com/nodegroup In [" + c.KeptGroup + "], as generate's Helm values do), or " + fixGroup
	}
	return fmt.Sprintf("its required scheduling admits only nodes of %s, which the plan removes, and none of the kept group %s", strings.Join(groups, ", "), c.KeptGroup),
		"reinstall it with the generated Helm values (pinned to " + c.KeptGroup + "), or " + fixGroup
}

func untoleratedTaint(taints []corev1.Taint, tols []corev1.Toleration) (corev1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, tols, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// InventoryNodes are the inventory's nodes as the scheduler sees them
// (labels, taints), plus, for each node group without a node, one made
// from its template (labels, taints, zone, OS and architecture), so that
// a check of where a pod may run sees every group.
func InventoryNodes(inv *inventory.Inventory) []corev1.Node {
	var out []corev1.Node
	has := map[string]bool{}
	for _, n := range inv.Nodes {
		has[n.NodeGroup] = true
		out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Spec: corev1.NodeSpec{Taints: n.Taints}})
	}
	for _, g := range inv.NodeGroups {
		if has[g.Name] {
			continue
		}
		labels := map[string]string{corev1.LabelOSStable: cmp.Or(g.OS, "linux"), corev1.LabelArchStable: cmp.Or(g.Arch, "amd64")}
		for k, v := range g.Labels {
			labels[k] = v
		}
		if g.Kind == inventory.Managed {
			labels["eks.amazonaws.com/nodegroup"] = g.Name
		}
		if len(g.Zones) > 0 {
			labels[corev1.LabelTopologyZone] = g.Zones[0]
		}
		out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: g.Name + " (template)", Labels: labels}, Spec: corev1.NodeSpec{Taints: g.Taints}})
	}
	return out
}

// InventoryGroupOf names the legacy group of a node InventoryNodes made.
func InventoryGroupOf(inv *inventory.Inventory) func(*corev1.Node) string {
	byName := map[string]string{}
	for _, n := range inv.Nodes {
		byName[n.Name] = n.NodeGroup
	}
	for _, g := range inv.NodeGroups {
		byName[g.Name+" (template)"] = g.Name
	}
	return func(n *corev1.Node) string { return byName[n.Name] }
}

// CheckControllerHome is the karpenter-controller-home-removed check of
// the inventory (ControllerHomeProblem on its nodes): a blocker, or nil.
func CheckControllerHome(inv *inventory.Inventory, c Controller) *Finding {
	problem, fix := ControllerHomeProblem(c, InventoryNodes(inv), InventoryGroupOf(inv))
	if problem == "" {
		return nil
	}
	return &Finding{ID: IDControllerHomeRemoved, Severity: Blocker, Title: "The Karpenter controller would lose every node it may run on",
		Why: "once the rollout removes the legacy groups, " + problem + ": Karpenter would be down, and nothing would provision, consolidate or handle interruptions",
		Fix: fix, Objects: []string{c.Source}}
}

func (e *eval) controllerHome() {
	if e.opts.Controller == nil {
		return
	}
	if f := CheckControllerHome(e.inv, *e.opts.Controller); f != nil {
		e.add(f.ID, f.Severity, f.Title, f.Why, f.Fix, f.Objects...)
	}
}
