package migrations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// ScaleClusterAutoscaler records Cluster Autoscaler's replicas (once) and
// scales it to replicas.
func (s run) ScaleClusterAutoscaler(ctx context.Context, replicas int32) error {
	ca := s.Plan.ClusterAutoscaler
	if ca == nil {
		return nil
	}
	scale, err := s.Kube.AppsV1().Deployments(ca.Namespace).GetScale(ctx, ca.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Cluster Autoscaler scale %s/%s: %w", ca.Namespace, ca.Name, err)
	}
	if s.Journal.Recorded.ClusterAutoscaler == nil && !s.Options.DryRun {
		s.Journal.Recorded.ClusterAutoscaler = &plan.CARef{Namespace: ca.Namespace, Name: ca.Name, Replicas: scale.Spec.Replicas}
		if err := s.Save(ctx); err != nil {
			return err
		}
	}
	return s.setCAReplicas(ctx, ca.Namespace, ca.Name, scale.Spec.Replicas, replicas)
}

func (s run) setCAReplicas(ctx context.Context, ns, name string, from, to int32) error {
	if from == to {
		return nil
	}
	s.Change("scale Deployment %s/%s replicas %d -> %d", ns, name, from, to)
	if s.Options.DryRun {
		return nil
	}
	_, err := s.Kube.AppsV1().Deployments(ns).UpdateScale(ctx, name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: to},
	}, metav1.UpdateOptions{FieldManager: kube.FieldManager})
	if err != nil {
		return fmt.Errorf("scale Deployment %s/%s to %d: %w", ns, name, to, err)
	}
	return nil
}

// ClusterAutoscalerAt reports whether Cluster Autoscaler runs replicas.
func (s run) ClusterAutoscalerAt(ctx context.Context, replicas int32) (bool, string, error) {
	ca := s.Plan.ClusterAutoscaler
	if ca == nil {
		return true, "the plan has no Cluster Autoscaler", nil
	}
	scale, err := s.Kube.AppsV1().Deployments(ca.Namespace).GetScale(ctx, ca.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, fmt.Sprintf("Deployment %s/%s not found", ca.Namespace, ca.Name), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read Cluster Autoscaler scale: %w", err)
	}
	return scale.Spec.Replicas == replicas, fmt.Sprintf("Cluster Autoscaler at %d replicas", scale.Spec.Replicas), nil
}

// RestoreClusterAutoscaler scales Cluster Autoscaler back to its recorded replicas.
func (s run) RestoreClusterAutoscaler(ctx context.Context) error {
	rec := s.Journal.Recorded.ClusterAutoscaler
	if rec == nil {
		return nil
	}
	scale, err := s.Kube.AppsV1().Deployments(rec.Namespace).GetScale(ctx, rec.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Cluster Autoscaler scale: %w", err)
	}
	return s.setCAReplicas(ctx, rec.Namespace, rec.Name, scale.Spec.Replicas, rec.Replicas)
}

func (s run) applier() *kube.Applier {
	return &kube.Applier{Dynamic: s.Dynamic, Mapper: s.Mapper, Environment: s.Plan.Environment, DryRun: s.Options.DryRun}
}

// ApplyOverlay server-side applies the environment's NodePools and node
// classes and records what it applied.
func (s run) ApplyOverlay(ctx context.Context) error {
	objs, err := s.Overlay.Objects(ctx)
	if err != nil {
		return fmt.Errorf("build the environment's overlay: %w", err)
	}
	// Node classes first: NodePools reference them.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolInt(a.GetKind() == "NodePool") - boolInt(b.GetKind() == "NodePool")
	})
	a := s.applier()
	for _, o := range objs {
		s.Change("apply %s %s", o.GetKind(), o.GetName())
		if _, err := a.Apply(ctx, o); err != nil {
			return err
		}
		ref := rollout.ObjectRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), Namespace: o.GetNamespace()}
		if !s.Options.DryRun && !slices.Contains(s.Journal.Recorded.Objects, ref) {
			s.Journal.Recorded.Objects = append(s.Journal.Recorded.Objects, ref)
			if err := s.Save(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// OverlayApplied reports whether every overlay object exists and is ours.
func (s run) OverlayApplied(ctx context.Context) (bool, string, error) {
	objs, err := s.Overlay.Objects(ctx)
	if err != nil {
		return false, "", fmt.Errorf("build the environment's overlay: %w", err)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false, "", fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri = s.Dynamic.Resource(m.Resource)
		var cur *unstructured.Unstructured
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			cur, err = ri.Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		} else {
			cur, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return false, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("get %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if cur.GetLabels()[kube.LabelManagedBy] != kube.FieldManager {
			return false, "", nil
		}
	}
	return true, fmt.Sprintf("%d objects already applied", len(objs)), nil
}

// RemoveOverlay undoes ApplyOverlay: it stops our NodePools from
// launching (limits cpu 0), drains their nodes (PDB-safe, pods go back to
// the legacy nodes), then deletes the objects that carry our label.
func (s run) RemoveOverlay(ctx context.Context) error {
	var pools []string
	for _, o := range s.Journal.Recorded.Objects {
		if o.Kind == "NodePool" {
			pools = append(pools, o.Name)
		}
	}
	np := s.Dynamic.Resource(kube.NodePoolGVK.GroupVersion().WithResource("nodepools"))
	for _, p := range pools {
		s.Change("set NodePool %s limits.cpu=0 (no new nodes)", p)
		if !s.Options.DryRun {
			_, err := np.Patch(ctx, p, types.MergePatchType, []byte(`{"spec":{"limits":{"cpu":"0"}}}`), metav1.PatchOptions{FieldManager: kube.FieldManager})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("limit NodePool %s: %w", p, err)
			}
		}
	}
	if len(pools) > 0 {
		nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool in (" + strings.Join(pools, ",") + ")"})
		if err != nil {
			return fmt.Errorf("list Karpenter nodes: %w", err)
		}
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
			s.Change("cordon and drain Karpenter node %s", n.Name)
			if !s.Options.DryRun {
				if err := kube.Cordon(ctx, s.Kube, n.Name, true); err != nil {
					return err
				}
			}
		}
		if !s.Options.DryRun && len(names) > 0 {
			d := &kube.Drainer{Client: s.Kube, Clock: s.Clock, Options: s.DrainOptions()}
			// A pod whose PDB allows no disruption moves back by a surge
			// restart, as in the waves.
			if s.Plan.Budget.RestartBlocked {
				if err := s.restartBlocked(ctx, 0, names, d); err != nil {
					return err
				}
			}
			res, err := d.DrainNodes(ctx, names, s.Plan.Budget.Concurrency)
			if err != nil {
				return fmt.Errorf("drain Karpenter nodes: %w", err)
			}
			for _, r := range res {
				if !r.Complete() {
					return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: fmt.Sprintf("node %s still has pods that may not be evicted: %v; NodePools are kept until their nodes are empty", r.Node, r.Skipped)}
				}
			}
		}
	}
	a := s.applier()
	refs := slices.Clone(s.Journal.Recorded.Objects)
	slices.SortStableFunc(refs, func(x, y rollout.ObjectRef) int { return boolInt(x.Kind != "NodePool") - boolInt(y.Kind != "NodePool") })
	for _, o := range refs {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.APIVersion)
		u.SetKind(o.Kind)
		u.SetName(o.Name)
		u.SetNamespace(o.Namespace)
		s.Change("delete %s %s", o.Kind, o.Name)
		if err := a.Delete(ctx, u); err != nil {
			return err
		}
	}
	if !s.Options.DryRun {
		s.Journal.Recorded.Objects = nil
		return s.Save(ctx)
	}
	return nil
}

// RestoreLegacyNodes uncordons the planned groups' nodes that are left,
// removes the taints the rollout put on them, deletes leftover
// placeholders and waits until each group has its recorded desired count
// of Ready nodes.
func (s run) RestoreLegacyNodes(ctx context.Context) error {
	if err := s.deletePlaceholders(ctx, 0); err != nil {
		return err
	}
	want := map[string]int{}
	total := 0
	for _, g := range s.Journal.Recorded.NodeGroups {
		want[g.Name] = int(g.Desired)
		total += int(g.Desired)
	}
	err := s.Poll(ctx, s.Plan.Budget.Gates.NodeReadyTimeout.Duration, func() (bool, error) {
		nodes, groupOf, err := s.listNodes(ctx)
		if err != nil {
			return false, err
		}
		ready := map[string]int{}
		n := 0
		for i := range nodes {
			node := &nodes[i]
			g := groupOf[node.Name]
			if _, ok := want[g]; !ok {
				continue
			}
			if node.Spec.Unschedulable {
				s.Change("uncordon node %s", node.Name)
				if !s.Options.DryRun {
					if err := kube.Cordon(ctx, s.Kube, node.Name, false); err != nil {
						return false, err
					}
				}
			}
			if err := s.untaintForRollback(ctx, node, g); err != nil {
				return false, err
			}
			if nodeReady(node) {
				ready[g]++
				n++
			}
		}
		if s.Options.DryRun {
			return true, nil
		}
		s.Waiting(ctx, "legacy nodes Ready after restoring the groups' sizes", n, total)
		for g, w := range want {
			if ready[g] < w {
				return false, nil
			}
		}
		return true, nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: fmt.Sprintf("legacy nodes not Ready within %s after restoring group sizes; check the ASGs' activity history", s.Plan.Budget.Gates.NodeReadyTimeout.Duration)}
	}
	return err
}

// groupInstances maps the instances of the planned groups' ASGs to the
// group's name.
func (s run) groupInstances(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, g := range s.Plan.NodeGroups {
		if g.ASGName == "" {
			continue
		}
		asg, err := s.DescribeGroup(ctx, g.ASGName)
		if err != nil {
			return nil, err
		}
		for _, in := range asg.Instances {
			if in.InstanceId != nil {
				out[*in.InstanceId] = g.Name
			}
		}
	}
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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

// FinalCheck verifies the end state: no workload pod left on a legacy
// node (on the kept ones, only the controller's and critical add-ons),
// the controller's pods on the kept nodes, nothing pending, and the gate
// passing.
func (s run) FinalCheck(ctx context.Context) error {
	if s.Options.DryRun {
		return nil
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	legacy := map[string]bool{}
	karpenter := 0
	for _, n := range nodes.Items {
		if rollout.NodeGroupOf(&n) != "" {
			legacy[n.Name] = true
		}
		if n.Labels["karpenter.sh/nodepool"] != "" {
			karpenter++
		}
	}
	pods, err := s.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	kept := map[string]bool{}
	for _, n := range s.Journal.Recorded.KeptNodes {
		kept[n] = true
	}
	stays, err := s.stays(ctx, kept)
	if err != nil {
		return err
	}
	isController, err := s.controllerPod(ctx)
	if err != nil {
		return err
	}
	var left, misplaced []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if legacy[p.Spec.NodeName] && !isDaemon(p) && (stays == nil || !stays(p)) {
			left = append(left, p.Namespace+"/"+p.Name+" on "+p.Spec.NodeName)
		}
		if isController(p) && s.keptGroup() != "" && !kept[p.Spec.NodeName] {
			misplaced = append(misplaced, p.Name+" on "+cmp.Or(p.Spec.NodeName, "no node"))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("pods still on legacy nodes: %s", strings.Join(left, ", "))
	}
	if len(misplaced) > 0 {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: "Karpenter controller pods not on the nodes kept for it: " + strings.Join(misplaced, ", ")}
	}
	res, err := s.EvaluateGate(ctx)
	if err != nil {
		return err
	}
	s.Emit(rollout.Event{Kind: rollout.EventGate, Step: s.Journal.Current.Step, Gate: &res, Message: fmt.Sprintf("%d Karpenter nodes; %s", karpenter, res.String())})
	if !res.Passed {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: "final check: " + res.String()}
	}
	return nil
}

func isDaemon(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}
