package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "01_preflight",
		Purpose: "cluster reachable, Karpenter CRDs installed (unless step 07 installs Karpenter), its controller kept off its own nodes, plan blockers resolved or acknowledged",
		// No Check: preflight always runs.
		Up:   func(ctx context.Context, s *rollout.Session) error { return run{s}.Preflight(ctx) },
		Down: func(context.Context, *rollout.Session) error { return nil },
	})
}

// Preflight checks the cluster is reachable, the tool may do its work,
// Karpenter's CRDs are installed (unless the run installs Karpenter), its controller cannot run on its own
// nodes and can still run somewhere once the plan's groups are removed,
// and the plan has no unacknowledged blockers.
func (s run) Preflight(ctx context.Context) error {
	var problems []string
	if _, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("cluster unreachable or nodes not listable: %w", err)
	}
	// The Karpenter step installs the CRDs with the chart when the plan
	// installs Karpenter; otherwise they must be there already.
	if s.Dynamic != nil && !s.InstallsKarpenter() {
		if _, err := s.Dynamic.Resource(kube.NodePoolGVK.GroupVersion().WithResource("nodepools")).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			problems = append(problems, "Karpenter v1 NodePool CRD not usable ("+err.Error()+"); install Karpenter first, or plan without --skip-karpenter so that apply installs it")
		}
	}
	if problem, err := s.controllerHomeProblem(ctx); err != nil {
		return err
	} else if problem != "" {
		problems = append(problems, problem)
	}
	for _, dep := range []struct{ ns, name string }{{"kube-system", "karpenter"}, {"karpenter", "karpenter"}} {
		d, err := s.Kube.AppsV1().Deployments(dep.ns).Get(ctx, dep.name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if d.Status.AvailableReplicas < 1 {
			problems = append(problems, fmt.Sprintf("Karpenter Deployment %s/%s has no available replica", dep.ns, dep.name))
		}
		if !avoidsKarpenterNodes(d.Spec.Template.Spec.Affinity) {
			problems = append(problems, fmt.Sprintf("Karpenter Deployment %s/%s may be scheduled on nodes it manages: add required node affinity karpenter.sh/nodepool DoesNotExist", dep.ns, dep.name))
		}
	}
	if b := s.Plan.Blockers(); len(b) > 0 && !s.Options.AckBlockers {
		for _, f := range b {
			problems = append(problems, "blocker: "+f.Object+": "+f.Message)
		}
		problems = append(problems, "resolve the blockers or pass --ack-blockers")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n  "))
	}
	return nil
}

// controllerHomeProblem checks the installed controller against the live
// nodes (readiness.ControllerHomeProblem): its required scheduling must
// admit a node that stays once the plan's groups are removed. Not
// acknowledgeable: apply refuses to start rather than strand Karpenter.
func (s run) controllerHomeProblem(ctx context.Context) (string, error) {
	h := s.Plan.Controller
	if h == nil {
		return "", nil
	}
	d, err := s.controllerDeployment(ctx)
	if err != nil || d == nil {
		return "", err
	}
	c := readiness.Controller{Source: "Deployment " + d.Namespace + "/" + d.Name, Spec: d.Spec.Template.Spec, Namespace: h.Namespace,
		KeptGroup: h.NodeGroup, Fargate: h.Fargate}
	if h.Kept {
		c.KeptTaint = h.Reserve
	}
	for _, g := range s.Plan.NodeGroups {
		if g.Name != s.keptGroup() {
			c.Removed = append(c.Removed, g.Name)
		}
	}
	nodes, groupOf, err := s.listNodes(ctx)
	if err != nil {
		return "", err
	}
	problem, fix := readiness.ControllerHomeProblem(c, nodes, func(n *corev1.Node) string { return groupOf[n.Name] })
	if problem == "" {
		return "", nil
	}
	return fmt.Sprintf("blocker: the Karpenter controller (%s) would lose every node it may run on: %s; fix: %s", c.Source, problem, fix), nil
}

func avoidsKarpenterNodes(a *corev1.Affinity) bool {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := false
		for _, e := range t.MatchExpressions {
			if e.Key == "karpenter.sh/nodepool" && e.Operator == corev1.NodeSelectorOpDoesNotExist {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
