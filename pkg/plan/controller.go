package plan

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// Sources of the decision of where the Karpenter controller lives, in the
// order they are consulted (a Fargate profile that runs the controller
// wins over all: it is where the pods run, whatever is chosen).
const (
	ControllerOnFargate      = "fargate"
	ControllerFromFlag       = "flag"
	ControllerFromConfig     = "config"
	ControllerFromDeployment = "deployment"
	ControllerFromValues     = "values"
)

// ControllerHome is where the Karpenter controller lives once the legacy
// groups are gone. Plan decides it once and records it; apply, the
// wizard, the demo and the scripts read it from the plan.
type ControllerHome struct {
	// Source is what decided it (ControllerOnFargate, ...From...); empty
	// when nothing could, which the plan reports as a blocker.
	Source string `json:"source,omitempty"`
	// Why says how, in words.
	Why       string `json:"why"`
	Namespace string `json:"namespace"`
	// Deployment is the installed controller ("" before it is installed).
	Deployment string `json:"deployment,omitempty"`
	Replicas   int32  `json:"replicas"`
	// NodeGroup is the legacy group kept for the controller.
	NodeGroup string `json:"nodeGroup,omitempty"`
	// Kept is false when the group is outside the rollout's scope
	// (nodeGroups): it is left as it is, neither resized nor reserved.
	Kept bool `json:"kept,omitempty"`
	// Size is the kept group's final min = max = desired, spread over its
	// zones, never below Replicas.
	Size int32 `json:"size,omitempty"`
	// Reserve is the taint put on the kept group's config and nodes so
	// that only the controller and critical add-ons stay there.
	Reserve *corev1.Taint `json:"reserve,omitempty"`
	// Fargate is the profile that runs the controller; no group is kept.
	Fargate string `json:"fargate,omitempty"`
}

// String says where the controller lives, in one line.
func (h *ControllerHome) String() string {
	switch {
	case h == nil:
		return "not decided"
	case h.Fargate != "":
		return fmt.Sprintf("on Fargate (profile %s): no node group is kept", h.Fargate)
	case h.NodeGroup == "":
		return "nowhere: no node group is kept and no Fargate profile runs it"
	case !h.Kept:
		return fmt.Sprintf("on node group %s, outside the rollout (left as it is)", h.NodeGroup)
	}
	return fmt.Sprintf("on node group %s, kept at %d nodes reserved with %s", h.NodeGroup, h.Size, h.Reserve.ToString())
}

// ControllerOptions are the plan's inputs to the decision besides the
// inventory and the environment's config (controller.*).
type ControllerOptions struct {
	// NodeGroup is plan --controller-nodegroup.
	NodeGroup string
	// Values are the Karpenter Helm values generate wrote (the tree's, or
	// generated in memory); ValuesFrom names them in messages. Nil values
	// are the chart's defaults.
	Values     map[string]any
	ValuesFrom string
}

// controllerPlan is the decision and what checks it.
type controllerPlan struct {
	home *ControllerHome
	// check is the scheduling the controller must still satisfy.
	check readiness.Controller
	// keep are the kept group's nodes (as the scheduler sees them) and the
	// controller's pods, by namespace/name.
	keptNodes []corev1.Node
	pods      map[string]bool
}

// decideController decides where the Karpenter controller lives: a Fargate
// profile selecting it, else the group named by the flag, the config, the
// live Deployment's required scheduling (when it admits one group only),
// or generate's Helm values (the group they pin it to).
func decideController(inv *inventory.Inventory, cfg config.Config, o ControllerOptions) (*controllerPlan, error) {
	h := &ControllerHome{Namespace: cfg.Controller.Namespace}
	var spec corev1.PodSpec
	labels := generate.ControllerLabels
	live := inv.Karpenter != nil && inv.Karpenter.Installed && inv.Karpenter.Deployment != ""
	valuesSpec, valuesReplicas, err := generate.ControllerPodSpec(o.Values)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmp.Or(o.ValuesFrom, "Helm values"), err)
	}
	cp := &controllerPlan{home: h, pods: map[string]bool{}}
	if live {
		k := inv.Karpenter
		h.Namespace, h.Deployment, h.Replicas = k.Namespace, k.Deployment, max(k.ControllerReplicas, 1)
		spec = corev1.PodSpec{NodeSelector: k.ControllerNodeSelector, Affinity: k.ControllerAffinity, Tolerations: k.ControllerTolerations}
		labels = k.ControllerLabels
		cp.check.Source = "Deployment " + k.Namespace + "/" + k.Deployment
	} else {
		spec, h.Replicas = valuesSpec, valuesReplicas
		cp.check.Source = "the controller as " + cmp.Or(o.ValuesFrom, "the chart's defaults") + " installs it"
	}
	cp.check.Spec, cp.check.Namespace = spec, h.Namespace
	for _, p := range inv.Pods {
		if p.Namespace == h.Namespace && p.NodeName != "" && (live && p.OwnerName == h.Deployment || subset(labels, p.Labels)) {
			cp.pods[p.Namespace+"/"+p.Name] = true
		}
	}

	nodes, groupOf := readiness.InventoryNodes(inv), readiness.InventoryGroupOf(inv)
	named := func(g, from string) (string, error) {
		if _, ok := inv.NodeGroup(g); !ok {
			return "", fmt.Errorf("%s %q: no such node group; known groups are %s", from, g, strings.Join(groupNames(inv), ", "))
		}
		return g, nil
	}
	for _, fp := range inv.FargateProfiles {
		if fp.Selects(h.Namespace, labels) {
			h.Source, h.Fargate = ControllerOnFargate, fp.Name
			h.Why = fmt.Sprintf("Fargate profile %s selects its namespace %s", fp.Name, h.Namespace)
		}
	}
	switch {
	case h.Fargate != "":
	case o.NodeGroup != "":
		if h.NodeGroup, err = named(o.NodeGroup, "--controller-nodegroup"); err != nil {
			return nil, err
		}
		h.Source, h.Why = ControllerFromFlag, "chosen with --controller-nodegroup"
	case cfg.Controller.NodeGroup != "":
		if h.NodeGroup, err = named(cfg.Controller.NodeGroup, "controller.nodeGroup"); err != nil {
			return nil, err
		}
		h.Source, h.Why = ControllerFromConfig, "controller.nodeGroup in the environment's config"
	default:
		if g := admittedGroup(spec, nodes, groupOf); live && g != "" {
			h.NodeGroup, h.Source, h.Why = g, ControllerFromDeployment, "the only node group the installed controller's required scheduling admits ("+cp.check.Source+")"
		} else if g := admittedGroup(valuesSpec, nodes, groupOf); g != "" {
			h.NodeGroup, h.Source, h.Why = g, ControllerFromValues, "the node group named in "+cmp.Or(o.ValuesFrom, "generate's Helm values")
		}
	}
	cp.check.KeptGroup, cp.check.Fargate = h.NodeGroup, h.Fargate
	if h.NodeGroup != "" && groupInScope(h.NodeGroup, cfg.NodeGroups) {
		h.Kept, h.Size, h.Reserve = true, max(cfg.Controller.Size, h.Replicas), generate.ReservedTaint.DeepCopy()
		cp.check.KeptTaint = h.Reserve
		for i := range nodes {
			if groupOf(&nodes[i]) == h.NodeGroup && !strings.HasSuffix(nodes[i].Name, " (template)") {
				cp.keptNodes = append(cp.keptNodes, nodes[i])
			}
		}
	}
	for _, g := range inv.NodeGroups {
		if g.Name != h.NodeGroup && groupInScope(g.Name, cfg.NodeGroups) {
			cp.check.Removed = append(cp.check.Removed, g.Name)
		}
	}
	return cp, nil
}

// DecideController is plan's decision of where the Karpenter controller
// lives, for the commands that check it without planning (readiness): the
// home and the check of it (readiness.Options.Controller).
func DecideController(inv *inventory.Inventory, cfg config.Config, o ControllerOptions) (*ControllerHome, readiness.Controller, error) {
	cp, err := decideController(inv, cfg, o)
	if err != nil {
		return nil, readiness.Controller{}, err
	}
	return cp.home, cp.check, nil
}

// admittedGroup is the one legacy group whose nodes a pod spec's required
// node affinity admits, or "" when it admits none or several.
func admittedGroup(spec corev1.PodSpec, nodes []corev1.Node, groupOf func(*corev1.Node) string) string {
	req := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec})
	found := ""
	for i := range nodes {
		g := groupOf(&nodes[i])
		if g == "" || g == found {
			continue
		}
		if ok, err := req.Match(&nodes[i]); err == nil && ok {
			if found != "" {
				return ""
			}
			found = g
		}
	}
	return found
}

// findings are the plan's notes on the decision and its blocker, if any.
func (cp *controllerPlan) findings(inv *inventory.Inventory) []Finding {
	h := cp.home
	obj := "Karpenter controller"
	var out []Finding
	switch {
	case h.Fargate != "":
		out = append(out, Finding{Severity: "info", Object: obj, Message: "runs on Fargate (" + h.Why + "): no node group is kept; every group in scope is scaled to zero"})
	case h.NodeGroup != "" && h.Kept:
		out = append(out, Finding{Severity: "info", Object: obj, Message: fmt.Sprintf(
			"stays on node group %s (%s): the group is kept at %d nodes (min = max = desired, over its zones; nodes not running the controller go first), its Cluster Autoscaler tags are removed and its config and nodes get %s, so workload pods move to Karpenter; the controller's pods and DaemonSets stay. The kept nodes are labelled %s=%s, which the release's values require of the controller's nodes, so it runs on no node of the group a wave drains",
			h.NodeGroup, h.Why, h.Size, h.Reserve.ToString(), generate.KeptLabel, generate.KeptLabelValue)})
		if g, _ := inv.NodeGroup(h.NodeGroup); g != nil && g.Kind != inventory.Managed {
			label := generate.KeptLabel + "=" + generate.KeptLabelValue
			out = append(out, Finding{Severity: "warning", Object: "node group " + h.NodeGroup, Message: "is self-managed: its launch template cannot be given " + h.Reserve.ToString() + " nor the label " + label +
				", so nodes it launches after the rollout join without them (the controller cannot run there) until tainted and labelled by hand; add --register-with-taints=" + h.Reserve.ToString() + " --node-labels=" + label + " to its kubelet arguments"})
		}
	case h.NodeGroup != "":
		out = append(out, Finding{Severity: "info", Object: obj, Message: "stays on node group " + h.NodeGroup + " (" + h.Why + "), which nodeGroups leaves out of the rollout: it is left as it is"})
	}
	if f := readiness.CheckControllerHome(inv, cp.check); f != nil {
		out = append(out, Finding{Severity: string(f.Severity), Object: strings.Join(f.Objects, ", "), Message: fmt.Sprintf("%s (%s): %s Fix: %s", f.Title, f.ID, f.Why, f.Fix)})
	}
	return out
}

// keep marks which of the kept group's nodes stay: those running the
// controller first, then alternating zones, then by name, up to Size.
func (cp *controllerPlan) keep(nodes []inventory.Node, podsByNode map[string][]inventory.Pod) map[string]bool {
	h := cp.home
	out := map[string]bool{}
	if !h.Kept {
		return out
	}
	var runs, rest []inventory.Node
	for _, n := range nodes {
		if slices.ContainsFunc(podsByNode[n.Name], func(p inventory.Pod) bool { return cp.pods[p.Namespace+"/"+p.Name] }) {
			runs = append(runs, n)
		} else {
			rest = append(rest, n)
		}
	}
	for _, n := range append(ZoneBalanced(runs), ZoneBalanced(rest)...) {
		if len(out) < int(h.Size) {
			out[n.Name] = true
		}
	}
	return out
}

// stays reports whether a pod stays on a kept node: the controller's own,
// or one that tolerates the reservation (a critical add-on).
func (cp *controllerPlan) stays(p inventory.Pod) bool {
	if cp.pods[p.Namespace+"/"+p.Name] {
		return true
	}
	t := cp.home.Reserve
	return t != nil && Tolerates(p.Tolerations, t)
}

// admitsKept reports whether a pod may run on one of the kept group's
// nodes once they are reserved (then it need not fit a NodePool).
func (cp *controllerPlan) admitsKept(p inventory.Pod) bool {
	if cp.home.Reserve == nil {
		return false
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: p.NodeSelector, Affinity: p.Affinity, Tolerations: p.Tolerations}}
	req := nodeaffinity.GetRequiredNodeAffinity(pod)
	for i := range cp.keptNodes {
		if AdmitsReserved(req, p.Tolerations, &cp.keptNodes[i], *cp.home.Reserve) {
			return true
		}
	}
	return false
}

// AdmitsReserved reports whether a pod with required node affinity req and
// tolerations tols may run on node n once n carries reserve: req matches n
// and tols tolerate every NoSchedule and NoExecute taint there.
func AdmitsReserved(req nodeaffinity.RequiredNodeAffinity, tols []corev1.Toleration, n *corev1.Node, reserve corev1.Taint) bool {
	return admits(req, tols, n, append(slices.Clone(n.Spec.Taints), reserve))
}

// admits reports whether a pod with required node affinity req and
// tolerations tols may run on node n with taints: req matches n and tols
// tolerate every NoSchedule and NoExecute taint of them.
func admits(req nodeaffinity.RequiredNodeAffinity, tols []corev1.Toleration, n *corev1.Node, taints []corev1.Taint) bool {
	if ok, err := req.Match(n); err != nil || !ok {
		return false
	}
	_, bad := untolerated(taints, tols)
	return !bad
}

// Tolerates reports whether tols tolerate t (the scheduler's own test).
func Tolerates(tols []corev1.Toleration, t *corev1.Taint) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), tols, t, false)
}

// untolerated finds a NoSchedule or NoExecute taint tols do not tolerate.
func untolerated(taints []corev1.Taint, tols []corev1.Toleration) (corev1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, tols, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
}

func subset(want, have map[string]string) bool {
	if len(want) == 0 {
		return false
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func groupNames(inv *inventory.Inventory) []string {
	var out []string
	for _, g := range inv.NodeGroups {
		out = append(out, g.Name)
	}
	sort.Strings(out)
	return out
}

// podOf finds a pod of the list by reference.
func podOf(pods []inventory.Pod, ref engine.PodRef) inventory.Pod {
	for _, p := range pods {
		if p.Namespace == ref.Namespace && p.Name == ref.Name {
			return p
		}
	}
	return inventory.Pod{Namespace: ref.Namespace, Name: ref.Name}
}
