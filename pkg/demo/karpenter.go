package demo

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// ControllerNamespace is where the demo installs the Karpenter controller.
const ControllerNamespace = "kube-system"

// ControllerSummary says where the Karpenter controller lives: the plan's
// decision, and the node (and group) of each replica before and after the
// migration.
type ControllerSummary struct {
	Home      string   `json:"home"`
	KeptGroup string   `json:"keptGroup,omitempty"`
	Size      int32    `json:"size,omitempty"`
	Before    []string `json:"before"`
	After     []string `json:"after"`
}

// karpenterStep is the runbook step that installs Karpenter: in the
// sandbox it starts the Karpenter stand-in and creates the controller's
// Deployment and PDB from generate's Helm values, as the chart would.
const karpenterStep = "07_karpenter"

// controllerInstalled records where the controller's replicas run once the
// Karpenter step has installed it.
func (r *runner) controllerInstalled(ctx context.Context) error {
	where, err := r.controllerPlacement(ctx)
	if err != nil {
		return err
	}
	r.sum.Controller = &ControllerSummary{Before: where}
	return nil
}

// controllerPlacement is "node (group)" for each running replica of the
// controller, sorted.
func (r *runner) controllerPlacement(ctx context.Context) ([]string, error) {
	pods, err := r.clients.Kube.CoreV1().Pods(ControllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(generate.ControllerLabels).String()})
	if err != nil {
		return nil, fmt.Errorf("list the Karpenter controller's pods: %w", err)
	}
	nodes, err := r.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	group := map[string]string{}
	for _, n := range nodes.Items {
		group[n.Name] = cmp.Or(inventory.NodeGroupOf(n.Labels), "NodePool "+n.Labels["karpenter.sh/nodepool"])
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			out = append(out, fmt.Sprintf("%s (%s)", p.Spec.NodeName, group[p.Spec.NodeName]))
		}
	}
	slices.Sort(out)
	return out, nil
}

// staysOnKeptNode reports whether a pod is one the rollout leaves on the
// nodes kept for the controller: the controller's own, or one tolerating
// the reservation.
func (r *runner) staysOnKeptNode(p *corev1.Pod) bool {
	h := r.plan.Controller
	if h == nil || !h.Kept || r.journal == nil || !slices.Contains(r.journal.Recorded.KeptNodes, p.Spec.NodeName) {
		return false
	}
	if p.Namespace == ControllerNamespace && labels.SelectorFromSet(generate.ControllerLabels).Matches(labels.Set(p.Labels)) {
		return true
	}
	for _, t := range p.Spec.Tolerations {
		if t.ToleratesTaint(klog.Background(), h.Reserve, false) {
			return true
		}
	}
	return false
}

// keptSize is the size the plan keeps a group at (0: scaled to zero).
func keptSize(p *rollout.Plan, group string) int32 {
	if h := p.Controller; h != nil && h.Kept && h.NodeGroup == group {
		return h.Size
	}
	return 0
}
