package migrations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// SteerTaint is put on every legacy node the waves will drain, at the
// start of the drain step: kube-scheduler then prefers any other node
// (TaintToleration scores it down) and Karpenter does not count it as room
// (it tolerates PreferNoSchedule taints only as a last relaxation), so a
// pod evicted in one wave moves to Karpenter capacity, not to a legacy
// node of a later wave to be evicted again. It only prefers: a pod with no
// room elsewhere still runs there. Rollback removes it.
var SteerTaint = corev1.Taint{Key: "karpenter-migrate.io/legacy", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}

// keptGroup is the legacy group the rollout keeps for the Karpenter
// controller ("" when none is kept).
func (s run) keptGroup() string {
	if h := s.Plan.Controller; h != nil && h.Kept {
		return h.NodeGroup
	}
	return ""
}

// recordKeptGroup records the kept group's Cluster Autoscaler tags and, for
// a managed group, its config taints, before anything changes them.
func (s run) recordKeptGroup(ctx context.Context, asg *astypes.AutoScalingGroup, rec *rollout.GroupRecord) error {
	for _, t := range asg.Tags {
		if k := ptr.Deref(t.Key, ""); slices.Contains(inventory.CAAutoDiscoveryTags(s.Plan.Cluster), k) {
			rec.Tags = append(rec.Tags, rollout.GroupTag{Key: k, Value: ptr.Deref(t.Value, ""), PropagateAtLaunch: ptr.Deref(t.PropagateAtLaunch, false)})
		}
	}
	if rec.Kind != inventory.Managed || s.EKS == nil {
		return nil
	}
	out, err := s.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &s.Plan.Cluster, NodegroupName: &rec.Name})
	if err != nil {
		return fmt.Errorf("describe managed node group %s: %w", rec.Name, err)
	}
	if ng := out.Nodegroup; ng != nil {
		for _, t := range ng.Taints {
			rec.Taints = append(rec.Taints, kmaws.KubeTaint(t))
		}
		rec.Labels = maps.Clone(ng.Labels)
	}
	return nil
}

// removeCATags removes the kept group's Cluster Autoscaler tags, so that
// nothing scales it again.
func (s run) removeCATags(ctx context.Context, rec *rollout.GroupRecord) error {
	if len(rec.Tags) == 0 {
		return nil
	}
	var tags []astypes.Tag
	var keys []string
	for _, t := range rec.Tags {
		tags = append(tags, astypes.Tag{ResourceId: &rec.ASGName, ResourceType: ptr.To("auto-scaling-group"), Key: ptr.To(t.Key)})
		keys = append(keys, t.Key)
	}
	s.Change("remove Cluster Autoscaler tags %s from ASG %s", strings.Join(keys, ", "), rec.ASGName)
	if s.Options.DryRun {
		return nil
	}
	if _, err := s.ASG.DeleteTags(ctx, &autoscaling.DeleteTagsInput{Tags: tags}); err != nil {
		return fmt.Errorf("remove Cluster Autoscaler tags from ASG %s: %w", rec.ASGName, err)
	}
	return nil
}

// restoreKeptGroup puts the kept group's recorded tags and config taints
// back (nothing for another group).
func (s run) restoreKeptGroup(ctx context.Context, rec *rollout.GroupRecord) error {
	if rec.Name != s.keptGroup() {
		return nil
	}
	if len(rec.Tags) > 0 {
		asg, err := s.DescribeGroup(ctx, rec.ASGName)
		if err != nil {
			return err
		}
		var missing []astypes.Tag
		for _, t := range rec.Tags {
			if !slices.ContainsFunc(asg.Tags, func(x astypes.TagDescription) bool {
				return ptr.Deref(x.Key, "") == t.Key && ptr.Deref(x.Value, "") == t.Value
			}) {
				missing = append(missing, astypes.Tag{ResourceId: &rec.ASGName, ResourceType: ptr.To("auto-scaling-group"), Key: ptr.To(t.Key), Value: ptr.To(t.Value), PropagateAtLaunch: ptr.To(t.PropagateAtLaunch)})
			}
		}
		if len(missing) > 0 {
			s.Change("restore %d Cluster Autoscaler tags on ASG %s", len(missing), rec.ASGName)
			if !s.Options.DryRun {
				if _, err := s.ASG.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: missing}); err != nil {
					return fmt.Errorf("restore Cluster Autoscaler tags on ASG %s: %w", rec.ASGName, err)
				}
			}
		}
	}
	if !s.releaseRequiresLabel() {
		if err := s.restoreConfigLabel(ctx); err != nil {
			return err
		}
	}
	reserve := *s.Plan.Controller.Reserve
	i := slices.IndexFunc(rec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&reserve) })
	switch {
	case i >= 0 && rec.Taints[i].Value == reserve.Value:
		return nil // the group had it: the rollout changed nothing
	case i >= 0:
		return s.setConfigTaint(ctx, rec, rec.Taints[i], true)
	}
	return s.setConfigTaint(ctx, rec, reserve, false)
}

// releaseRequiresLabel reports whether the Karpenter step installed the
// plan's release (its Up ran), whose values require generate.KeptLabel of
// the controller's nodes: then the label stays until that step's Down.
func (s run) releaseRequiresLabel() bool {
	rec := s.Journal.Step("07_karpenter")
	return rec != nil && rec.State == rollout.StateDone
}

// restoreConfigLabel puts a managed kept group's config back as it was
// for generate.KeptLabel, which the scale step adds (setConfigLabel);
// nothing when the group was not recorded (the rollout did not reach it)
// or its config is as recorded.
func (s run) restoreConfigLabel(ctx context.Context) error {
	rec := s.Journal.Recorded.Group(s.keptGroup())
	if rec == nil || rec.Kind != inventory.Managed || s.EKS == nil {
		return nil
	}
	out, err := s.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &s.Plan.Cluster, NodegroupName: &rec.Name})
	if err != nil {
		return fmt.Errorf("describe managed node group %s: %w", rec.Name, err)
	}
	var now map[string]string
	if out.Nodegroup != nil {
		now = out.Nodegroup.Labels
	}
	v, had := rec.Labels[generate.KeptLabel]
	cur, has := now[generate.KeptLabel]
	switch {
	case had == has && v == cur:
		return nil // as recorded
	case had:
		return s.setConfigLabel(ctx, rec, v, true)
	}
	return s.setConfigLabel(ctx, rec, "", false)
}

// setConfigTaint adds (or removes) a taint on a managed group's config,
// which EKS applies to its nodes, present and future. A self-managed
// group's taints live in its launch template: left alone (plan warns).
func (s run) setConfigTaint(ctx context.Context, rec *rollout.GroupRecord, t corev1.Taint, present bool) error {
	verb, tc := "remove", &ekstypes.UpdateTaintsPayload{RemoveTaints: []ekstypes.Taint{kmaws.EKSTaint(t)}}
	if present {
		verb, tc = "add", &ekstypes.UpdateTaintsPayload{AddOrUpdateTaints: []ekstypes.Taint{kmaws.EKSTaint(t)}}
	}
	return s.updateNodegroupConfig(ctx, rec, fmt.Sprintf("%s taint %s", verb, t.ToString()), eks.UpdateNodegroupConfigInput{Taints: tc})
}

// setConfigLabel sets generate.KeptLabel to value on a managed group's
// config (or removes it), which EKS gives its nodes, so that a node the
// kept group launches later (a replacement) may run the controller. A
// self-managed group's labels live in its launch template: left alone
// (plan warns).
func (s run) setConfigLabel(ctx context.Context, rec *rollout.GroupRecord, value string, present bool) error {
	what, lc := "remove label "+generate.KeptLabel, &ekstypes.UpdateLabelsPayload{RemoveLabels: []string{generate.KeptLabel}}
	if present {
		what, lc = "add label "+generate.KeptLabel+"="+value, &ekstypes.UpdateLabelsPayload{AddOrUpdateLabels: map[string]string{generate.KeptLabel: value}}
	}
	return s.updateNodegroupConfig(ctx, rec, what, eks.UpdateNodegroupConfigInput{Labels: lc})
}

// updateNodegroupConfig makes one change (what, in words) to a managed
// group's config; nothing for a self-managed group.
func (s run) updateNodegroupConfig(ctx context.Context, rec *rollout.GroupRecord, what string, in eks.UpdateNodegroupConfigInput) error {
	if rec.Kind != inventory.Managed || s.EKS == nil {
		return nil
	}
	s.Change("%s on managed node group %s", what, rec.Name)
	if s.Options.DryRun {
		return nil
	}
	in.ClusterName, in.NodegroupName = &s.Plan.Cluster, &rec.Name
	// EKS runs one update of a node group at a time: wait for the last.
	err := s.Poll(ctx, s.Plan.Budget.Gates.NodeReadyTimeout.Duration, func() (bool, error) {
		_, err := s.EKS.UpdateNodegroupConfig(ctx, &in)
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ResourceInUseException" {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%s on managed node group %s: %w", what, rec.Name, err)
	}
	return nil
}

// controllerDeployment is the installed Karpenter controller the plan
// names (or the chart's "karpenter" in its namespace); nil when absent.
func (s run) controllerDeployment(ctx context.Context) (*appsv1.Deployment, error) {
	h := s.Plan.Controller
	if h == nil {
		return nil, nil
	}
	d, err := s.Kube.AppsV1().Deployments(h.Namespace).Get(ctx, cmp.Or(h.Deployment, "karpenter"), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the Karpenter controller Deployment: %w", err)
	}
	return d, nil
}

// controllerPod returns whether a pod is one of the controller's.
func (s run) controllerPod(ctx context.Context) (func(*corev1.Pod) bool, error) {
	d, err := s.controllerDeployment(ctx)
	if err != nil || d == nil {
		return func(*corev1.Pod) bool { return false }, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		return func(*corev1.Pod) bool { return false }, nil
	}
	return func(p *corev1.Pod) bool { return p.Namespace == d.Namespace && sel.Matches(labels.Set(p.Labels)) }, nil
}

// keptNodes returns the kept group's nodes that stay, choosing them once
// (recorded): the nodes running the controller first, then the plan's
// choice, spread over zones, up to the group's size.
func (s run) keptNodes(ctx context.Context) (map[string]bool, error) {
	kept := map[string]bool{}
	g := s.keptGroup()
	if g == "" {
		return kept, nil
	}
	if len(s.Journal.Recorded.KeptNodes) > 0 {
		for _, n := range s.Journal.Recorded.KeptNodes {
			kept[n] = true
		}
		return kept, nil
	}
	isController, err := s.controllerPod(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := s.Kube.CoreV1().Pods(s.Plan.Controller.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the Karpenter controller's pods: %w", err)
	}
	runs := map[string]bool{}
	for i := range pods.Items {
		if isController(&pods.Items[i]) {
			runs[pods.Items[i].Spec.NodeName] = true
		}
	}
	var first, planned, rest []inventory.Node
	for _, w := range s.Plan.Waves {
		for _, n := range w.Nodes {
			if n.NodeGroup != g {
				continue
			}
			if _, err := s.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				continue
			}
			node := inventory.Node{Name: n.Name, Zone: n.Zone}
			switch {
			case runs[n.Name]:
				first = append(first, node)
			case n.Keep:
				planned = append(planned, node)
			default:
				rest = append(rest, node)
			}
		}
	}
	var chosen []string
	for _, n := range slices.Concat(plan.ZoneBalanced(first), plan.ZoneBalanced(planned), plan.ZoneBalanced(rest)) {
		if len(chosen) < int(s.Plan.Controller.Size) {
			chosen = append(chosen, n.Name)
			kept[n.Name] = true
		}
	}
	sort.Strings(chosen)
	s.Change("keep nodes %s of group %s for the Karpenter controller", strings.Join(chosen, ", "), g)
	if !s.Options.DryRun {
		s.Journal.Recorded.KeptNodes = chosen
		if err := s.Save(ctx); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// taintNode adds a taint to a node, recording it first (rollback removes
// what is recorded); a node that already has it is left as it is.
func (s run) taintNode(ctx context.Context, node string, t corev1.Taint) error {
	rec := rollout.NodeTaint{Node: node, Taint: t}
	if slices.Contains(s.Journal.Recorded.Tainted, rec) {
		return nil
	}
	n, err := s.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	if slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
		return nil
	}
	s.Change("taint node %s with %s", node, t.ToString())
	if s.Options.DryRun {
		return nil
	}
	s.Journal.Recorded.Tainted = append(s.Journal.Recorded.Tainted, rec)
	if err := s.Save(ctx); err != nil {
		return err
	}
	_, err = kube.SetTaint(ctx, s.Kube, node, t, true)
	if apierrors.IsNotFound(errors.Unwrap(err)) {
		return nil
	}
	return err
}

// reserveKept reserves a node kept for the controller: the reservation
// taint, and generate.KeptLabel, which the plan's Helm values require of
// the controller's nodes.
func (s run) reserveKept(ctx context.Context, node string) error {
	if err := s.taintNode(ctx, node, *s.Plan.Controller.Reserve); err != nil {
		return err
	}
	return s.labelNode(ctx, node, generate.KeptLabel, generate.KeptLabelValue)
}

// labelNode adds a label to a node, recording it first (rollback removes
// what is recorded); a node that already has it is left as it is, and one
// that lost it since it was recorded gets it again.
func (s run) labelNode(ctx context.Context, node, key, value string) error {
	n, err := s.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	if v, ok := n.Labels[key]; ok && v == value {
		return nil
	}
	s.Change("label node %s with %s=%s", node, key, value)
	if s.Options.DryRun {
		return nil
	}
	if rec := (rollout.NodeLabel{Node: node, Key: key, Value: value}); !slices.Contains(s.Journal.Recorded.Labelled, rec) {
		s.Journal.Recorded.Labelled = append(s.Journal.Recorded.Labelled, rec)
		if err := s.Save(ctx); err != nil {
			return err
		}
	}
	err = kube.SetLabel(ctx, s.Kube, node, key, value, true)
	if apierrors.IsNotFound(errors.Unwrap(err)) {
		return nil
	}
	return err
}

// unlabel removes a label from a node (gone already is fine).
func (s run) unlabel(ctx context.Context, node, key string) error {
	s.Change("remove label %s from node %s", key, node)
	if s.Options.DryRun {
		return nil
	}
	if err := kube.SetLabel(ctx, s.Kube, node, key, "", false); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
		return err
	}
	return nil
}

// prepareNodes reserves the kept group (its config and the nodes that
// stay get Controller.Reserve) and steers evicted pods away from every
// other legacy node the waves drain (SteerTaint). It returns the kept nodes.
func (s run) prepareNodes(ctx context.Context) (map[string]bool, error) {
	kept, err := s.keptNodes(ctx)
	if err != nil {
		return nil, err
	}
	if g := s.keptGroup(); g != "" {
		if rec := s.Journal.Recorded.Group(g); rec != nil {
			if !slices.ContainsFunc(rec.Taints, func(t corev1.Taint) bool { return t == *s.Plan.Controller.Reserve }) {
				if err := s.setConfigTaint(ctx, rec, *s.Plan.Controller.Reserve, true); err != nil {
					return nil, err
				}
			}
		}
		for _, n := range slices.Sorted(maps.Keys(kept)) {
			if err := s.reserveKept(ctx, n); err != nil {
				return nil, err
			}
		}
	}
	for _, w := range s.Plan.Waves {
		for _, n := range w.Nodes {
			if !kept[n.Name] {
				if err := s.taintNode(ctx, n.Name, SteerTaint); err != nil {
					return nil, err
				}
			}
		}
	}
	return kept, nil
}

// stays returns which pods a drain leaves: on the kept nodes the
// controller's and those that tolerate the reservation (critical add-ons),
// and anywhere those of a workload the runbook stops (plan.Stops: Cluster
// Autoscaler, scaled to zero before the waves), which go by themselves.
func (s run) stays(ctx context.Context, kept map[string]bool) (func(*corev1.Pod) bool, error) {
	stopped := s.stoppedPod(ctx)
	if len(kept) == 0 {
		return stopped, nil
	}
	isController, err := s.controllerPod(ctx)
	if err != nil {
		return nil, err
	}
	reserve := s.Plan.Controller.Reserve
	return func(p *corev1.Pod) bool {
		return stopped(p) || kept[p.Spec.NodeName] && (isController(p) || plan.Tolerates(p.Spec.Tolerations, reserve))
	}, nil
}

// stoppedPod reports whether a pod is of a workload the runbook stops
// (plan.Stops); the drain may ask from several goroutines at once. Only a
// pod in a namespace where the runbook stops something has its owner looked
// up (a ReplicaSet read, one at a time), not every pod the drain filters.
func (s run) stoppedPod(ctx context.Context) func(*corev1.Pod) bool {
	var mu sync.Mutex
	rsCache := map[string]string{}
	return func(p *corev1.Pod) bool {
		if !s.Plan.StopsIn(p.Namespace) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		o, ok := s.ownerOf(ctx, p, rsCache)
		return ok && s.Plan.Stops(o.namespace, o.kind, o.name)
	}
}

// untaintForRollback removes from a node the taints the rollout adds:
// SteerTaint always, and the reservation from the kept group's nodes
// unless the group had it before (its recorded config). Their
// generate.KeptLabel goes too, unless the Karpenter step installed the
// release that requires it (then that step's Down removes it, after the
// uninstall: releaseReservation).
func (s run) untaintForRollback(ctx context.Context, n *corev1.Node, group string) error {
	drop := []corev1.Taint{SteerTaint}
	if g := s.keptGroup(); g != "" && group == g {
		reserve := *s.Plan.Controller.Reserve
		rec := s.Journal.Recorded.Group(g)
		if rec == nil || !slices.ContainsFunc(rec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&reserve) }) {
			drop = append(drop, reserve)
		}
		if hasKey(n.Labels, generate.KeptLabel) && (rec == nil || !hasKey(rec.Labels, generate.KeptLabel)) && !s.releaseRequiresLabel() {
			if err := s.unlabel(ctx, n.Name, generate.KeptLabel); err != nil {
				return err
			}
		}
	}
	for _, t := range drop {
		if !slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
			continue
		}
		if err := s.untaint(ctx, n.Name, t); err != nil {
			return err
		}
	}
	return nil
}

// untaint removes a taint from a node (gone already is fine).
func (s run) untaint(ctx context.Context, node string, t corev1.Taint) error {
	s.Change("remove taint %s from node %s", t.ToString(), node)
	if s.Options.DryRun {
		return nil
	}
	if _, err := kube.SetTaint(ctx, s.Kube, node, t, false); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
		return err
	}
	return nil
}

// waitKeptGroup waits until the kept group has its size of Ready nodes and
// reserves any that joined without the reservation or the label (a
// self-managed group's, whose launch template the rollout cannot change).
func (s run) waitKeptGroup(ctx context.Context) error {
	g := s.keptGroup()
	if g == "" || s.Options.DryRun {
		return nil
	}
	size := int(s.Plan.Controller.Size)
	removed := s.removedInstances()
	err := s.Poll(ctx, s.Plan.Budget.Gates.NodeReadyTimeout.Duration, func() (bool, error) {
		nodes, groupOf, err := s.listNodes(ctx)
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range nodes {
			n := &nodes[i]
			if groupOf[n.Name] != g || !nodeReady(n) || removed[plan.InstanceIDFromProviderID(n.Spec.ProviderID)] {
				continue
			}
			ready++
			if err := s.reserveKept(ctx, n.Name); err != nil {
				return false, err
			}
		}
		s.Waiting(ctx, fmt.Sprintf("node group %s at %d Ready nodes for the Karpenter controller", g, size), ready, size)
		return ready >= size, nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: fmt.Sprintf("node group %s has not %d Ready nodes within %s; check its ASG's activity history", g, size, s.Plan.Budget.Gates.NodeReadyTimeout.Duration)}
	}
	return err
}

// removedInstances are the instances the waves removed from their groups:
// their nodes may still be listed, even Ready, while they terminate, and
// count for no group.
func (s run) removedInstances() map[string]bool {
	removed := map[string]bool{}
	for _, w := range s.Journal.Waves {
		for _, id := range w.Removed {
			removed[id] = true
		}
	}
	return removed
}

// listNodes lists the cluster's nodes and names the planned legacy group
// of each that is in one: known by its labels, or as an instance of the
// group's ASG (a self-managed group's nodes need carry no label).
func (s run) listNodes(ctx context.Context) ([]corev1.Node, map[string]string, error) {
	list, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	var member map[string]string
	groupOf := map[string]string{}
	for i := range list.Items {
		n := &list.Items[i]
		g := rollout.NodeGroupOf(n)
		if g == "" && n.Labels["karpenter.sh/nodepool"] == "" && s.ASG != nil {
			if member == nil {
				if member, err = s.groupInstances(ctx); err != nil {
					return nil, nil, err
				}
			}
			g = member[plan.InstanceIDFromProviderID(n.Spec.ProviderID)]
		}
		if g != "" {
			groupOf[n.Name] = g
		}
	}
	return list.Items, groupOf, nil
}
