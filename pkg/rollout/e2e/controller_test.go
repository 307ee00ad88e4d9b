package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// controllerNS is where the scenario installs the Karpenter controller.
const controllerNS = "kube-system"

var controllerSelector = labels.SelectorFromSet(generate.ControllerLabels)

// installController installs the Karpenter controller as `helm upgrade
// --install karpenter` would from the values generate wrote in tree: its
// Deployment (replicas, system-cluster-critical, required affinity to the
// pinned group, one per host, zone spread) and its PDB (maxUnavailable 1).
// The real Karpenter (kwok provider) runs outside the cluster; these pods
// stand for it where the migration must keep them running.
func installController(ctx context.Context, t testing.TB, w *world, tree string) {
	t.Helper()
	values, err := generate.ReadHelmValues(tree)
	if err != nil {
		t.Fatal(err)
	}
	dep, pdb, err := generate.ControllerObjects(values, controllerNS, "registry.k8s.io/pause:3.10")
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	if _, err := w.env.Client.AppsV1().Deployments(controllerNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.env.Client.PolicyV1().PodDisruptionBudgets(controllerNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.env.WaitForPodsRunning(ctx, controllerNS, controllerSelector.String(), int(*dep.Spec.Replicas)); err != nil {
		t.Fatal(err)
	}
}

// controllerPlacement is "node (group)" of each Running and Ready replica
// of the controller, sorted, and the nodes they run on.
func controllerPlacement(ctx context.Context, t testing.TB, w *world) ([]string, map[string]bool) {
	t.Helper()
	pods, err := w.env.Client.CoreV1().Pods(controllerNS).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector.String()})
	if err != nil {
		t.Fatal(err)
	}
	var where []string
	on := map[string]bool{}
	for _, p := range pods.Items {
		if !healthy(&p) {
			continue
		}
		n, err := w.env.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		where = append(where, fmt.Sprintf("%s (%s)", n.Name, inventory.NodeGroupOf(n.Labels)))
		on[n.Name] = true
	}
	sort.Strings(where)
	return where, on
}

// groupRow is what the closing table shows of a node group at one moment.
type groupRow struct {
	asgState
	CATags []string
	// Taints are the managed group's config taints and its nodes' taints.
	ConfigTaints, NodeTaints []string
}

func (r groupRow) String() string {
	return fmt.Sprintf("min/max/desired %d/%d/%d, %d instances; CA tags [%s]; config taints [%s]; node taints [%s]",
		r.Min, r.Max, r.Desired, r.Instances, strings.Join(r.CATags, " "), strings.Join(r.ConfigTaints, " "), strings.Join(r.NodeTaints, " "))
}

// groupRows reads every group's sizes and Cluster Autoscaler tags from the
// fake, its config taints (managed groups) and the taints of its nodes.
func groupRows(ctx context.Context, t testing.TB, w *world) map[string]groupRow {
	t.Helper()
	sizes := w.asgs()
	rows := map[string]groupRow{}
	w.aws.Account(func(a *awsfake.Account) {
		for _, g := range w.groups {
			r := groupRow{asgState: sizes[g.asg]}
			for _, asg := range a.AutoScaling.Groups {
				if ptr.Deref(asg.AutoScalingGroupName, "") != g.asg {
					continue
				}
				for _, tag := range asg.Tags {
					if k := ptr.Deref(tag.Key, ""); strings.HasPrefix(k, "k8s.io/cluster-autoscaler/") {
						r.CATags = append(r.CATags, k+"="+ptr.Deref(tag.Value, ""))
					}
				}
			}
			for _, c := range a.EKS.Clusters {
				for _, ng := range c.Nodegroups {
					if ptr.Deref(ng.NodegroupName, "") == g.name {
						for _, tt := range ng.Taints {
							r.ConfigTaints = append(r.ConfigTaints, fmt.Sprintf("%s=%s:%s", ptr.Deref(tt.Key, ""), ptr.Deref(tt.Value, ""), tt.Effect))
						}
					}
				}
			}
			sort.Strings(r.CATags)
			rows[g.name] = r
		}
	})
	nodes, err := w.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!karpenter.sh/nodepool"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		g := inventory.NodeGroupOf(n.Labels)
		r := rows[g]
		for _, tt := range n.Spec.Taints {
			if s := n.Name + ":" + tt.ToString(); !slices.Contains(r.NodeTaints, s) {
				r.NodeTaints = append(r.NodeTaints, s)
			}
		}
		sort.Strings(r.NodeTaints)
		rows[g] = r
	}
	return rows
}

// logGroups logs the table of groups at each moment of the run.
func logGroups(t testing.TB, moments []string, rows []map[string]groupRow, groups []legacyGroup) {
	t.Helper()
	var b strings.Builder
	for _, g := range groups {
		for i, m := range moments {
			fmt.Fprintf(&b, "  %-10s %-14s %s\n", g.name, m, rows[i][g.name])
		}
	}
	t.Logf("node groups:\n%s", b.String())
}

// podsToMove counts the pods of namespace ns apply must move: on a legacy
// node, not a DaemonSet's.
func podsToMove(ctx context.Context, t testing.TB, w *world, ns string) int {
	t.Helper()
	pods, err := w.env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := w.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!karpenter.sh/nodepool"})
	if err != nil {
		t.Fatal(err)
	}
	legacy := map[string]bool{}
	for _, n := range nodes.Items {
		legacy[n.Name] = true
	}
	count := 0
	for _, p := range pods.Items {
		daemon := slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
		if legacy[p.Spec.NodeName] && !daemon && p.Status.Phase == corev1.PodRunning {
			count++
		}
	}
	return count
}

// checkControllerPlan asserts the plan's decision: the controller pinned to
// group (by the live Deployment's required scheduling, or by the values
// step 07 installs), kept at 2.
func checkControllerPlan(t *testing.T, p *plan.Plan, source, group string) {
	t.Helper()
	h := p.Controller
	if h == nil || h.Source != source || h.NodeGroup != group || !h.Kept || h.Size != 2 || h.Replicas != 2 ||
		h.Reserve == nil || *h.Reserve != generate.ReservedTaint {
		t.Errorf("controller home %+v; want %s (%s), kept at 2 with %s", h, group, source, generate.ReservedTaint.ToString())
	}
}
