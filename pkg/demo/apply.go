package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/drain"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

// Simulated-time budgets.
const (
	tick          = 5 * time.Second
	settleTimeout = 30 * time.Minute
	drainTimeout  = 30 * time.Minute
)

// State is what apply records so rollback can undo it (state.json).
type State struct {
	CAReplicas int32       `json:"clusterAutoscalerReplicas"`
	Groups     []GroupSize `json:"groups"`
	Surged     []Surge     `json:"surged,omitempty"`
}

// Surge is a workload scaled up by one while a PDB that allows no
// disruption is drained, and scaled back after its wave.
type Surge struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Replicas  int32  `json:"replicas"`
}

func (r *runner) writeState() error {
	return writeJSON(filepath.Join(r.opts.OutDir, "state.json"), r.state)
}

func (r *runner) stepApply(ctx context.Context) (string, error) {
	const id = "apply"
	applied, err := r.applyObjects(ctx)
	if err != nil {
		return "", err
	}
	r.emit(id, StatusRunning, fmt.Sprintf("applied %d objects of overlay %s (%d NodePools)", applied, Env, len(r.pools)), -1)

	ca, err := r.caReplicas(ctx)
	if err != nil {
		return "", err
	}
	r.state.CAReplicas = ca
	if err := r.writeState(); err != nil {
		return "", err
	}
	if err := r.scaleCA(ctx, 0); err != nil {
		return "", err
	}
	r.emit(id, StatusRunning, fmt.Sprintf("Cluster Autoscaler scaled %d → 0", ca), -1)

	legacy, err := r.nodes(ctx, func(n *corev1.Node) bool { return n.Labels[apisv1.NodePoolLabelKey] == "" })
	if err != nil {
		return "", err
	}
	h := r.drainer(ctx)
	for _, n := range legacy {
		if err := drain.RunCordonOrUncordon(h, n, true); err != nil {
			return "", fmt.Errorf("cordon %s: %w", n.Name, err)
		}
	}
	r.emit(id, StatusRunning, fmt.Sprintf("cordoned %d node-group nodes", len(legacy)), -1)

	moved := 0
	for _, w := range r.plan.Waves {
		step := waveName(w)
		nodes := make([]string, 0, len(w.Nodes))
		for _, n := range w.Nodes {
			nodes = append(nodes, n.Name)
		}
		r.emit(step, StatusRunning, fmt.Sprintf("%d nodes, %d pods", len(nodes), w.Pods), 0)
		claims, err := r.preProvision(ctx, nodes)
		if err != nil {
			return "", fmt.Errorf("%s: %w", step, err)
		}
		n, err := r.evictAll(ctx, step, nodes)
		moved += n
		if err != nil {
			return "", fmt.Errorf("%s: %w", step, err)
		}
		if err := r.unsurge(ctx); err != nil {
			return "", fmt.Errorf("%s: %w", step, err)
		}
		if err := r.releaseClaims(ctx, claims); err != nil {
			return "", fmt.Errorf("%s: %w", step, err)
		}
		r.emit(step, StatusDone, fmt.Sprintf("%d pods moved onto %d pre-provisioned nodes", n, len(claims)), 1)
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: step, Status: StatusDone, Detail: fmt.Sprintf("%d pods moved", n)})
	}
	r.sum.PodsMoved = moved

	r.state.Groups = nil
	for _, g := range r.sb.Cloud().Groups() {
		r.state.Groups = append(r.state.Groups, GroupSize{Name: g.Name, Recorded: g.DesiredSize, RecordedMin: g.MinSize, RecordedMax: g.MaxSize})
	}
	if err := r.writeState(); err != nil {
		return "", err
	}
	for _, g := range r.state.Groups {
		if err := r.sb.Cloud().UpdateGroupSize(ctx, g.Name, 0, g.RecordedMax, 0); err != nil {
			return "", err
		}
	}
	if err := r.sb.Settle(ctx, settleTimeout); err != nil {
		return "", fmt.Errorf("scale node groups to zero: %w", err)
	}
	r.emit(id, StatusRunning, fmt.Sprintf("%d node groups scaled to 0 (sizes recorded in state.json)", len(r.state.Groups)), -1)

	if err := r.sb.Step(ctx, r.maxConsolidateAfter()+3*tick); err != nil {
		return "", err
	}
	if err := r.sb.Settle(ctx, settleTimeout); err != nil {
		return "", fmt.Errorf("consolidation: %w", err)
	}
	return fmt.Sprintf("%d pods moved in %d waves; Cluster Autoscaler and %d node groups at 0", moved, len(r.plan.Waves), len(r.state.Groups)), nil
}

// applyObjects creates or updates the overlay's objects that the sandbox
// serves (NodePools and EC2NodeClasses).
func (r *runner) applyObjects(ctx context.Context) (int, error) {
	n := 0
	for _, o := range r.objects {
		var gvr schema.GroupVersionResource
		switch o.GetKind() {
		case apisv1.NodePoolKind:
			gvr = sandbox.NodePoolGVR
		case apisv1.EC2NodeClassKind:
			gvr = sandbox.EC2NodeClassGVR
		default:
			continue
		}
		res := r.sb.Dynamic().Resource(gvr)
		u := o.DeepCopy()
		cur, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = res.Create(ctx, u, metav1.CreateOptions{})
		case err == nil:
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			return n, fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		n++
	}
	return n, nil
}

// deleteObjects deletes the overlay's NodePools and EC2NodeClasses.
func (r *runner) deleteObjects(ctx context.Context) error {
	for _, o := range r.objects {
		gvr := sandbox.EC2NodeClassGVR
		switch o.GetKind() {
		case apisv1.NodePoolKind:
			gvr = sandbox.NodePoolGVR
		case apisv1.EC2NodeClassKind:
		default:
			continue
		}
		if err := r.sb.Dynamic().Resource(gvr).Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

func (r *runner) caReplicas(ctx context.Context) (int32, error) {
	if r.inv.ClusterAutoscaler == nil {
		return 0, nil
	}
	ca := r.inv.ClusterAutoscaler
	d, err := r.sb.Kube().AppsV1().Deployments(ca.Namespace).Get(ctx, ca.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read Cluster Autoscaler deployment %s/%s: %w", ca.Namespace, ca.Name, err)
	}
	return replicas(d.Spec.Replicas), nil
}

func (r *runner) scaleCA(ctx context.Context, n int32) error {
	if r.inv.ClusterAutoscaler == nil {
		return nil
	}
	ca := r.inv.ClusterAutoscaler
	return r.scale(ctx, "Deployment", ca.Namespace, ca.Name, n)
}

func (r *runner) scale(ctx context.Context, kind, ns, name string, n int32) error {
	apps := r.sb.Kube().AppsV1()
	switch kind {
	case "Deployment":
		d, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("scale Deployment %s/%s: %w", ns, name, err)
		}
		d.Spec.Replicas = &n
		if _, err := apps.Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("scale Deployment %s/%s to %d: %w", ns, name, n, err)
		}
	case "StatefulSet":
		s, err := apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("scale StatefulSet %s/%s: %w", ns, name, err)
		}
		s.Spec.Replicas = &n
		if _, err := apps.StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("scale StatefulSet %s/%s to %d: %w", ns, name, n, err)
		}
	default:
		return fmt.Errorf("cannot scale %s %s/%s", kind, ns, name)
	}
	return r.sb.Step(ctx, tick)
}

func (r *runner) nodes(ctx context.Context, keep func(*corev1.Node) bool) ([]*corev1.Node, error) {
	l, err := r.sb.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []*corev1.Node
	for i := range l.Items {
		if keep(&l.Items[i]) {
			out = append(out, &l.Items[i])
		}
	}
	return out, nil
}

func (r *runner) drainer(ctx context.Context) *drain.Helper {
	return &drain.Helper{
		Ctx: ctx, Client: r.sb.Kube(), GracePeriodSeconds: -1, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		Out: io.Discard, ErrOut: io.Discard,
	}
}

// preProvision creates NodeClaims for the pods on the wave's nodes, marked
// do-not-disrupt until the wave is over, and waits until they are nodes.
func (r *runner) preProvision(ctx context.Context, nodeNames []string) ([]string, error) {
	on := map[string]bool{}
	for _, n := range nodeNames {
		on[n] = true
	}
	pods, err := r.sb.Kube().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var want []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if on[p.Spec.NodeName] && !isDaemonSetPod(p) {
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	dss, err := r.sb.Kube().AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list DaemonSets: %w", err)
	}
	res := r.sb.Provision(sandbox.ProvisionRequest{Pods: want, NodePools: r.pools, DaemonSets: dss.Items, Zones: r.sb.Zones(), Region: r.sb.Region(),
		Volumes: func(p *corev1.Pod) []*corev1.NodeSelector { return r.sb.VolumeSelectors(ctx, p) }})
	if len(res.Unschedulable) > 0 {
		k := sortedKeys(res.Unschedulable)[0]
		return nil, fmt.Errorf("%d pods fit no NodePool, e.g. %s: %s", len(res.Unschedulable), k, res.Unschedulable[k])
	}
	byName := map[string]*apisv1.NodePool{}
	for i := range r.pools {
		byName[r.pools[i].Name] = &r.pools[i]
	}
	var names []string
	for _, c := range res.Claims {
		u, err := r.sb.Dynamic().Resource(sandbox.NodeClaimGVR).Create(ctx,
			sandbox.NewNodeClaim(byName[c.NodePool], c.Offering, map[string]string{apisv1.DoNotDisruptAnnotationKey: "true"}), metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("pre-provision NodeClaim in NodePool %s: %w", c.NodePool, err)
		}
		names = append(names, u.GetName())
	}
	deadline := r.sb.Now().Add(settleTimeout)
	for {
		ready := 0
		for _, n := range names {
			u, err := r.sb.Dynamic().Resource(sandbox.NodeClaimGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("get NodeClaim %s: %w", n, err)
			}
			if node, _, _ := unstructured.NestedString(u.Object, "status", "nodeName"); node != "" {
				ready++
			}
		}
		if ready == len(names) {
			return names, nil
		}
		if !r.sb.Now().Before(deadline) {
			return nil, fmt.Errorf("%d of %d pre-provisioned NodeClaims did not become nodes in %s", len(names)-ready, len(names), settleTimeout)
		}
		if err := r.sb.Step(ctx, tick); err != nil {
			return nil, err
		}
	}
}

// releaseClaims removes the do-not-disrupt mark so Karpenter may
// consolidate what the wave left empty.
func (r *runner) releaseClaims(ctx context.Context, names []string) error {
	for _, n := range names {
		res := r.sb.Dynamic().Resource(sandbox.NodeClaimGVR)
		u, err := res.Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get NodeClaim %s: %w", n, err)
		}
		a := u.GetAnnotations()
		delete(a, apisv1.DoNotDisruptAnnotationKey)
		u.SetAnnotations(a)
		if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("release NodeClaim %s: %w", n, err)
		}
	}
	return nil
}

// evictAll drains the nodes through the Eviction API with kubectl's drain
// helper: DaemonSet pods stay, emptyDir data is accepted as lost, a 429
// waits (simulated time moves on) and retries, and a PDB that can never
// allow a disruption gets its workload surged by one replica.
func (r *runner) evictAll(ctx context.Context, step string, nodeNames []string) (int, error) {
	h := r.drainer(ctx)
	gv, err := drain.CheckEvictionSupport(r.sb.Kube())
	if err != nil {
		return 0, fmt.Errorf("check eviction support: %w", err)
	}
	if gv != policyv1.SchemeGroupVersion {
		return 0, fmt.Errorf("the API server offers eviction as %q, want policy/v1", gv)
	}
	var queue []corev1.Pod
	for _, n := range nodeNames {
		list, errs := h.GetPodsForDeletion(n)
		if len(errs) > 0 {
			return 0, fmt.Errorf("drain %s: %w", n, errs[0])
		}
		queue = append(queue, list.Pods()...)
	}
	total := len(queue)
	moved := 0
	deadline := r.sb.Now().Add(drainTimeout)
	var lastRefusal string
	for len(queue) > 0 {
		var retry []corev1.Pod
		for _, p := range queue {
			err := h.EvictPod(p, gv)
			switch {
			case err == nil || apierrors.IsNotFound(err):
				moved++
			case apierrors.IsTooManyRequests(err):
				lastRefusal = fmt.Sprintf("%s/%s: %v", p.Namespace, p.Name, refusal(err))
				if err := r.surgeIfStuck(ctx, &p); err != nil {
					return moved, err
				}
				retry = append(retry, p)
			default:
				return moved, fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		r.emit(step, StatusRunning, fmt.Sprintf("%d/%d pods evicted", moved, total), float64(moved)/float64(max(total, 1)))
		queue = retry
		if len(queue) == 0 {
			break
		}
		if !r.sb.Now().Before(deadline) {
			return moved, fmt.Errorf("%d pods still refused eviction after %s; last: %s", len(queue), drainTimeout, lastRefusal)
		}
		if err := r.sb.Step(ctx, tick); err != nil {
			return moved, err
		}
	}
	if err := r.sb.Settle(ctx, settleTimeout); err != nil {
		return moved, err
	}
	return moved, nil
}

func refusal(err error) string {
	if se, ok := err.(apierrors.APIStatus); ok {
		if d := se.Status().Details; d != nil && len(d.Causes) > 0 {
			return d.Causes[0].Message
		}
	}
	return err.Error()
}

// surgeIfStuck scales the pod's workload up by one when a PDB selecting it
// can never allow a disruption at its current size.
func (r *runner) surgeIfStuck(ctx context.Context, p *corev1.Pod) error {
	pdbs, err := r.sb.Kube().PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list PDBs in %s: %w", p.Namespace, err)
	}
	stuck := false
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if pdb.Status.ExpectedPods > 0 && pdb.Status.DesiredHealthy >= pdb.Status.ExpectedPods {
			stuck = true
		}
	}
	if !stuck {
		return nil
	}
	kind, name, err := r.workloadOf(ctx, p)
	if err != nil || kind == "" {
		return err
	}
	for _, s := range r.state.Surged {
		if s.Kind == kind && s.Namespace == p.Namespace && s.Name == name {
			return nil
		}
	}
	cur, err := r.replicasOf(ctx, kind, p.Namespace, name)
	if err != nil {
		return err
	}
	r.state.Surged = append(r.state.Surged, Surge{Kind: kind, Namespace: p.Namespace, Name: name, Replicas: cur})
	if err := r.writeState(); err != nil {
		return err
	}
	return r.scale(ctx, kind, p.Namespace, name, cur+1)
}

func (r *runner) unsurge(ctx context.Context) error {
	if len(r.state.Surged) == 0 {
		return nil
	}
	for _, s := range r.state.Surged {
		if err := r.scale(ctx, s.Kind, s.Namespace, s.Name, s.Replicas); err != nil {
			return err
		}
	}
	r.state.Surged = nil
	if err := r.writeState(); err != nil {
		return err
	}
	return r.sb.Settle(ctx, settleTimeout)
}

func (r *runner) workloadOf(ctx context.Context, p *corev1.Pod) (string, string, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return "", "", nil
	}
	switch ref.Kind {
	case "StatefulSet":
		return "StatefulSet", ref.Name, nil
	case "ReplicaSet":
		rs, err := r.sb.Kube().AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", "", fmt.Errorf("get ReplicaSet %s/%s: %w", p.Namespace, ref.Name, err)
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			return "Deployment", d.Name, nil
		}
	}
	return "", "", nil
}

func (r *runner) replicasOf(ctx context.Context, kind, ns, name string) (int32, error) {
	if kind == "StatefulSet" {
		s, err := r.sb.Kube().AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, fmt.Errorf("get StatefulSet %s/%s: %w", ns, name, err)
		}
		return replicas(s.Spec.Replicas), nil
	}
	d, err := r.sb.Kube().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get Deployment %s/%s: %w", ns, name, err)
	}
	return replicas(d.Spec.Replicas), nil
}

// stepRollback undoes apply: node groups back to their recorded sizes,
// Karpenter's nodes cordoned and drained back onto them, Cluster Autoscaler
// restored, NodePools and EC2NodeClasses deleted, the IAM objects the tool
// created deleted; then it checks every recorded size came back.
func (r *runner) stepRollback(ctx context.Context) (string, error) {
	const id = "rollback"
	for _, g := range r.state.Groups {
		if err := r.sb.Cloud().UpdateGroupSize(ctx, g.Name, g.RecordedMin, g.RecordedMax, g.Recorded); err != nil {
			return "", err
		}
	}
	if err := r.sb.Settle(ctx, settleTimeout); err != nil {
		return "", fmt.Errorf("restore node groups: %w", err)
	}
	r.emit(id, StatusRunning, fmt.Sprintf("%d node groups restored to their recorded sizes", len(r.state.Groups)), -1)
	// NodePool limits at zero stop Karpenter launching while its nodes drain.
	for _, o := range r.objects {
		if o.GetKind() == apisv1.NodePoolKind {
			if err := unstructured.SetNestedStringMap(o.Object, map[string]string{"cpu": "0"}, "spec", "limits"); err != nil {
				return "", fmt.Errorf("NodePool %s: %w", o.GetName(), err)
			}
		}
	}
	if _, err := r.applyObjects(ctx); err != nil {
		return "", err
	}
	kn, err := r.nodes(ctx, func(n *corev1.Node) bool { return n.Labels[apisv1.NodePoolLabelKey] != "" })
	if err != nil {
		return "", err
	}
	h := r.drainer(ctx)
	names := make([]string, 0, len(kn))
	for _, n := range kn {
		if err := drain.RunCordonOrUncordon(h, n, true); err != nil {
			return "", fmt.Errorf("cordon %s: %w", n.Name, err)
		}
		names = append(names, n.Name)
	}
	if err := r.scaleCA(ctx, r.state.CAReplicas); err != nil {
		return "", err
	}
	moved, err := r.evictAll(ctx, "rollback-drain", names)
	if err != nil {
		return "", err
	}
	if err := r.unsurge(ctx); err != nil {
		return "", err
	}
	if err := r.deleteObjects(ctx); err != nil {
		return "", err
	}
	if err := r.sb.Settle(ctx, settleTimeout); err != nil {
		return "", fmt.Errorf("remove Karpenter nodes: %w", err)
	}
	deleted, err := r.iamDown(ctx)
	if err != nil {
		return "", err
	}
	rb, err := r.verifyRollback(ctx)
	if err != nil {
		return "", err
	}
	rb.PodsMoved = moved
	r.sum.Rollback = rb
	if !rb.Restored {
		return "", fmt.Errorf("rollback incomplete: %s", strings.Join(rb.Problems, "; "))
	}
	return fmt.Sprintf("%d pods moved back; %d groups at recorded sizes; %d IAM objects deleted; $%.4f/h", moved, len(rb.Groups), deleted, rb.CostPerHour), nil
}

func (r *runner) verifyRollback(ctx context.Context) (*RollbackSummary, error) {
	rb := &RollbackSummary{Restored: true}
	fail := func(format string, a ...any) {
		rb.Restored = false
		rb.Problems = append(rb.Problems, fmt.Sprintf(format, a...))
	}
	nodes, err := r.nodes(ctx, func(*corev1.Node) bool { return true })
	if err != nil {
		return nil, err
	}
	readyBy := map[string]bool{}
	karpenter := map[string]bool{}
	for _, n := range nodes {
		readyBy[n.Name] = nodeReady(n)
		if n.Labels[apisv1.NodePoolLabelKey] != "" {
			karpenter[n.Name] = true
			rb.KarpenterNodes++
		}
	}
	readyIn := map[string]int{}
	for _, in := range r.sb.Cloud().Instances() {
		if in.Group != "" && readyBy[in.NodeName] {
			readyIn[in.Group]++
		}
	}
	for _, rec := range r.state.Groups {
		g, ok := r.sb.Cloud().Group(rec.Name)
		if !ok {
			fail("node group %s is gone", rec.Name)
			continue
		}
		gs := rec
		gs.Desired, gs.InstanceCount, gs.ReadyNodes = g.DesiredSize, len(g.Instances), readyIn[g.Name]
		rb.Groups = append(rb.Groups, gs)
		if g.DesiredSize != rec.Recorded || g.MinSize != rec.RecordedMin || g.MaxSize != rec.RecordedMax {
			fail("node group %s is %d/%d/%d (min/desired/max), recorded %d/%d/%d", g.Name, g.MinSize, g.DesiredSize, g.MaxSize, rec.RecordedMin, rec.Recorded, rec.RecordedMax)
		}
		if int32(readyIn[g.Name]) != rec.Recorded {
			fail("node group %s has %d Ready nodes, want %d", g.Name, readyIn[g.Name], rec.Recorded)
		}
	}
	if rb.KarpenterNodes > 0 {
		fail("%d Karpenter nodes remain", rb.KarpenterNodes)
	}
	ca, err := r.caReplicas(ctx)
	if err != nil {
		return nil, err
	}
	if ca != r.state.CAReplicas {
		fail("Cluster Autoscaler has %d replicas, recorded %d", ca, r.state.CAReplicas)
	}
	pods, err := r.sb.Kube().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if karpenter[p.Spec.NodeName] || p.Spec.NodeName == "" {
			fail("pod %s/%s is not on a node-group node", p.Namespace, p.Name)
		}
	}
	pl, err := r.sb.Dynamic().Resource(sandbox.NodePoolGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list NodePools: %w", err)
	}
	if len(pl.Items) > 0 {
		fail("%d NodePools remain", len(pl.Items))
	}
	rb.NodesAfter, rb.NodesAfterByType, rb.CostPerHour = r.fleet()
	return rb, nil
}
