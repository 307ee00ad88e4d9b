package demo

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
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

// stepKarpenter, on the control plane, installs Karpenter's official chart
// (the provider module's, prepared as its release prepares it:
// testenv.KarpenterChart) with Helm from the values generate wrote (helm
// upgrade --install karpenter ... -f karpenter/helm/karpenter-values.yaml)
// and waits for its replicas to run, after making their room as the
// runbook's Karpenter step does. kwok runs the chart's Deployment; the real
// Karpenter runs beside that control plane (testenv). No registry is
// reachable offline, so the plan leaves step 07 out there.
func (r *runner) stepKarpenter(ctx context.Context) (string, error) {
	values, err := generate.ReadHelmValues(filepath.Join(r.opts.OutDir, "karpenter"))
	if err != nil {
		return "", err
	}
	// The controller's pod as the chart renders it (pkg/helm's
	// TestOfficialChartRendersGeneratedValues holds them equal).
	dep, _, err := generate.ControllerObjects(values, ControllerNamespace, "")
	if err != nil {
		return "", err
	}
	if dep.Spec.Template.Spec.PriorityClassName == "system-cluster-critical" {
		dep.Spec.Template.Spec.Priority = ptr.To(systemClusterCritical)
	}
	if err := r.roomForController(ctx, &corev1.Pod{Spec: dep.Spec.Template.Spec}, int(*dep.Spec.Replicas)); err != nil {
		return "", err
	}
	// As the plan's release requires of the controller's nodes: the label
	// the room's nodes now carry.
	if values, err = generate.OnKeptNodes(values); err != nil {
		return "", err
	}
	chart, err := testenv.KarpenterChart(ctx, desired.DefaultKarpenterVersion)
	if err != nil {
		return "", fmt.Errorf("the Karpenter chart: %w", err)
	}
	k := plan.PlanKarpenter{Release: "karpenter", Namespace: ControllerNamespace, Chart: chart, Version: desired.DefaultKarpenterVersion, Values: values}
	if _, err := r.cfg.KarpenterInstaller.Install(ctx, k); err != nil {
		return "", fmt.Errorf("install the Karpenter controller: %w", err)
	}
	if err := r.env.Settle(ctx); err != nil {
		return "", fmt.Errorf("the Karpenter controller: %w", err)
	}
	if err := r.controllerInstalled(ctx); err != nil {
		return "", err
	}
	where := r.sum.Controller.Before
	return fmt.Sprintf("%d replicas running on %s", len(where), strings.Join(where, ", ")), nil
}

// roomForController does on the control plane what the runbook's Karpenter
// step does before it installs the chart (migrations.MakeRoom), so that
// the controller preempts nothing: it reserves as many of the nodes the
// controller may run on as it has replicas, spread over zones (the
// reservation taint and generate.KeptLabel, which the values installed then
// require), and evicts (budgets honoured) the pods that leave a replica no
// room there.
func (r *runner) roomForController(ctx context.Context, pod *corev1.Pod, replicas int) error {
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var eligible []inventory.Node
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.Unschedulable || !plan.AdmitsReserved(affinity, pod.Spec.Tolerations, n, generate.ReservedTaint) {
			continue
		}
		eligible = append(eligible, inventory.Node{Name: n.Name, Zone: n.Labels[corev1.LabelTopologyZone]})
	}
	slices.SortFunc(eligible, func(a, b inventory.Node) int { return cmp.Compare(a.Name, b.Name) })
	var chosen []string
	for _, n := range plan.ZoneBalanced(eligible) {
		if len(chosen) < replicas {
			chosen = append(chosen, n.Name)
		}
	}
	for _, n := range chosen {
		if _, err := kube.SetTaint(ctx, r.cfg.Kube, n, generate.ReservedTaint, true); err != nil {
			return err
		}
		if err := kube.SetLabel(ctx, r.cfg.Kube, n, generate.KeptLabel, generate.KeptLabelValue, true); err != nil {
			return err
		}
	}
	d := &kube.Drainer{Client: r.cfg.Kube, Clock: clock.RealClock{}, Options: kube.DefaultDrainOptions()}
	// As the demo's plan drains (planConfig).
	d.Options.Timeout, d.Options.Watch, d.Options.ForceEvict, d.Options.DeleteEmptyDirData = cpSettleTimeout, true, true, true
	stays := func(p *corev1.Pod) bool { return plan.Tolerates(p.Spec.Tolerations, &generate.ReservedTaint) }
	return migrations.MakeRoom(ctx, d, chosen, pod, stays, false, func(pod, node string) {
		klog.V(2).InfoS("evicting to make room for the Karpenter controller", "pod", pod, "node", node)
	})
}

// systemClusterCritical is the value of the system-cluster-critical
// PriorityClass, set on the Deployment's pods as admission would.
const systemClusterCritical = int32(2000000000)

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
	pods, err := r.cfg.Kube.CoreV1().Pods(ControllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(generate.ControllerLabels).String()})
	if err != nil {
		return nil, fmt.Errorf("list the Karpenter controller's pods: %w", err)
	}
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
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
func keptSize(p *plan.Plan, group string) int32 {
	if h := p.Controller; h != nil && h.Kept && h.NodeGroup == group {
		return h.Size
	}
	return 0
}
