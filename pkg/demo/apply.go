package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Namespace is the tool's namespace in the sandbox: the runner's journal,
// lock and placeholder pods live there.
const Namespace = "karpenter-migrate"

// JournalFile is the copy of the runner's journal the demo writes after
// apply and rollback (what `status -o json` shows).
const JournalFile = "journal.json"

// newRunner builds the rollout runner as `apply --plan plan.yaml --dir
// karpenter --yes` does (action.Configuration.Runner), on the sandbox's
// clients: evictions go one node and one pod at a time (the plan's
// concurrency is 1, the sandbox configuration's PodConcurrency 1), so
// every wait of the runner steps the simulation from one goroutine and a
// seed gives one run.
func (r *runner) newRunner(obs rollout.Observer) (*rollout.Runner, error) {
	c := *r.cfg
	c.Observer = obs
	return c.Runner(r.plan, action.Run{Dir: filepath.Join(r.opts.OutDir, "karpenter")})
}

// stepApply is `apply --yes`: rollout.Runner.Apply with the journal and
// the lock in the sandbox cluster, its events as the demo's progress.
func (r *runner) stepApply(ctx context.Context) (string, error) {
	// Every pod on a node of a node group as apply starts, not a
	// DaemonSet's nor finished: all move but those left on the nodes kept
	// for the Karpenter controller.
	legacy, err := r.podsOnLegacyNodes(ctx)
	if err != nil {
		return "", err
	}
	obs := &observer{r: r, prefix: "apply", waves: map[int]*waveProgress{}}
	rr, err := r.newRunner(obs.observe)
	if err != nil {
		return "", err
	}
	err = cmp.Or(rr.Apply(ctx), obs.err)
	if werr := r.writeJournal(ctx); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return "", r.runError(ctx, err)
	}
	// Moves are the runner's evictions the API allowed plus the pods of
	// the Deployments the runner restarted; a pod evicted onto a node of a
	// later wave moves again.
	evicted := obs.evicted
	r.sum.Evictions = evicted
	r.sum.PodsMoved = evicted + obs.restarted
	r.sum.ControllerRoomEvictions = obs.roomEvicted
	after, err := r.podsOnLegacyNodes(ctx)
	if err != nil {
		return "", err
	}
	// The pods that had to move: those no longer where they were (a
	// replaced pod has a new name; a StatefulSet's keeps it).
	for pod, node := range legacy {
		if after[pod] != node {
			r.sum.PodsToMove++
		}
	}
	if r.sum.PodsToMove > 0 {
		r.sum.MovesPerPod = math.Round(float64(r.sum.PodsMoved)/float64(r.sum.PodsToMove)*1000) / 1000
	}
	return fmt.Sprintf("%d pods moved with %d moves (%.3f per pod: %d evictions, %d of them to make room for the Karpenter controller, %d by surge restart) in %d waves, %d of the %d pods on node groups stayed on the Karpenter controller's kept nodes; Cluster Autoscaler at 0, node groups scaled",
		r.sum.PodsToMove, r.sum.PodsMoved, r.sum.MovesPerPod, evicted, obs.roomEvicted, obs.restarted, len(r.plan.Waves), len(after), len(legacy)), nil
}

// runError names the simulation's failure when that is what stopped the
// runner.
func (r *runner) runError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("%w (%v)", err, cause)
		}
	}
	return err
}

// writeJournal copies the runner's journal from the sandbox cluster into
// the output directory.
func (r *runner) writeJournal(ctx context.Context) error {
	j, err := r.cfg.Status(ctx, r.opts.Environment)
	if err != nil {
		return fmt.Errorf("read the runner's journal: %w", err)
	}
	r.journal = j
	return writeJSON(filepath.Join(r.opts.OutDir, JournalFile), j)
}

// podsOnKarpenterNodes counts the active pods, not DaemonSets', on nodes
// a NodePool launched.
func (r *runner) podsOnKarpenterNodes(ctx context.Context) (int, error) {
	legacy, err := r.podsOnLegacyNodes(ctx)
	if err != nil {
		return 0, err
	}
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, ok := legacy[p.Namespace+"/"+p.Name]; ok || p.Spec.NodeName == "" || kube.IsDaemonSetPod(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n++
	}
	return n, nil
}

// podsOnLegacyNodes maps the pods on a node no NodePool launched, neither a
// DaemonSet's nor finished, to their node.
func (r *runner) podsOnLegacyNodes(ctx context.Context) (map[string]string, error) {
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	legacy := map[string]bool{}
	for _, n := range nodes.Items {
		if n.Labels[apisv1.NodePoolLabelKey] == "" {
			legacy[n.Name] = true
		}
	}
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !legacy[p.Spec.NodeName] || kube.IsDaemonSetPod(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[p.Namespace+"/"+p.Name] = p.Spec.NodeName
	}
	return out, nil
}

// waveProgress is one wave's progress in the demo's terms.
type waveProgress struct {
	id      string
	total   int
	evicted int
	done    bool
}

// observer turns the runner's typed events into the demo's progress and
// step results.
type observer struct {
	r      *runner
	prefix string
	waves  map[int]*waveProgress
	wave   *waveProgress
	// restarted counts the pods of the Deployments the runner moved by a
	// surge restart, evicted the evictions it made.
	restarted, evicted int
	// roomEvicted counts the evictions that made room for the Karpenter
	// controller on the kept nodes (step 07, before any wave).
	roomEvicted int
	// err is a failure to read what a step did (the controller's placement).
	err error
}

func (o *observer) observe(e rollout.Event) {
	r := o.r
	switch e.Kind {
	case rollout.EventStepStarted:
		r.emit(o.prefix, StatusRunning, e.Step+": "+e.Message, -1)
	case rollout.EventStepFinished:
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: o.prefix + "/" + e.Step, Status: StatusDone, Detail: e.Message})
		if o.prefix == "apply" && rollout.SameStep(e.Step, karpenterStep) {
			o.err = r.controllerInstalled(r.runCtx)
		}
	case rollout.EventStepSkipped:
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: o.prefix + "/" + e.Step, Status: StatusSkipped, Detail: e.Message})
		r.emit(o.prefix, StatusRunning, e.Step+" skipped: "+e.Message, -1)
	case rollout.EventStepFailed:
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: o.prefix + "/" + e.Step, Status: StatusFailed, Detail: e.Message})
	case rollout.EventWavePhase:
		o.wavePhase(e)
	case rollout.EventEviction:
		if e.Message != "evicted" {
			return
		}
		o.evicted++
		if o.wave == nil && rollout.SameStep(e.Step, karpenterStep) {
			o.roomEvicted++
		}
		if w := o.wave; w != nil {
			w.evicted++
			r.emit(w.id, StatusRunning, fmt.Sprintf("%d/%d pods evicted", w.evicted, w.total), float64(w.evicted)/float64(max(w.total, 1)))
		}
	case rollout.EventChange:
		if dep, ok := strings.CutPrefix(e.Message, "restart Deployment "); ok {
			o.restarted += o.replicas(dep)
		}
		id := o.prefix
		if o.wave != nil && !o.wave.done {
			id = o.wave.id
		}
		r.emit(id, StatusRunning, e.Message, -1)
	case rollout.EventWaiting:
		if e.Total > 0 {
			id := o.prefix
			if o.wave != nil && !o.wave.done {
				id = o.wave.id
			}
			r.emit(id, StatusRunning, fmt.Sprintf("waiting for %s (%d/%d)", e.Message, e.Done, e.Total), -1)
		}
	}
}

func (o *observer) wavePhase(e rollout.Event) {
	r := o.r
	w, ok := o.waves[e.Wave]
	if !ok {
		if e.Wave < 1 || e.Wave > len(r.plan.Waves) {
			return
		}
		pw := r.plan.Waves[e.Wave-1]
		w = &waveProgress{id: waveName(pw), total: pw.Pods}
		o.waves[e.Wave] = w
		r.emit(w.id, StatusRunning, fmt.Sprintf("%d nodes, %d pods, NodePools %s", len(pw.Nodes), pw.Pods, strings.Join(pw.NodePools, ",")), 0)
	}
	o.wave = w
	if e.Phase != rollout.PhaseDone {
		r.emit(w.id, StatusRunning, "phase "+e.Phase, float64(w.evicted)/float64(max(w.total, 1)))
		return
	}
	w.done = true
	detail := fmt.Sprintf("%d pods moved", w.evicted)
	r.emit(w.id, StatusDone, detail, 1)
	r.sum.Steps = append(r.sum.Steps, StepResult{ID: w.id, Status: StatusDone, Detail: detail})
}

// replicas is the replica count of "namespace/name (...)" as the runner
// names a Deployment it restarts.
func (o *observer) replicas(dep string) int {
	ref, _, _ := strings.Cut(dep, " ")
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return 0
	}
	d, err := o.r.cfg.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	return int(replicas(d.Spec.Replicas))
}

// stepRollback is `rollback --yes`: rollout.Runner.Rollback runs each
// applied step's Down — node groups back to the sizes the journal
// recorded, Karpenter's nodes drained back onto them, Cluster Autoscaler
// restored, NodePools and node classes deleted — then `iam down` removes
// what `iam apply` created, and the demo checks every recorded size came
// back.
func (r *runner) stepRollback(ctx context.Context) (string, error) {
	obs := &observer{r: r, prefix: "rollback", waves: map[int]*waveProgress{}}
	rr, err := r.newRunner(obs.observe)
	if err != nil {
		return "", err
	}
	onKarpenter, err := r.podsOnKarpenterNodes(ctx)
	if err != nil {
		return "", err
	}
	err = rr.Rollback(ctx, "")
	if werr := r.writeJournal(ctx); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return "", r.runError(ctx, err)
	}
	if err := r.env.Settle(ctx); err != nil {
		return "", fmt.Errorf("after rollback: %w", err)
	}
	deleted, err := r.iamDown(ctx)
	if err != nil {
		return "", err
	}
	rb, err := r.verifyRollback(ctx)
	if err != nil {
		return "", err
	}
	rb.PodsMoved = onKarpenter
	r.sum.Rollback = rb
	if !rb.Restored {
		return "", fmt.Errorf("rollback incomplete: %s", strings.Join(rb.Problems, "; "))
	}
	return fmt.Sprintf("%d pods moved back; %d groups at recorded sizes; %d IAM objects deleted; $%.4f/h", rb.PodsMoved, len(rb.Groups), deleted, rb.CostPerHour), nil
}

// verifyRollback compares the sandbox with what the runner's journal
// recorded before apply changed it.
func (r *runner) verifyRollback(ctx context.Context) (*RollbackSummary, error) {
	rb := &RollbackSummary{Restored: true}
	fail := func(format string, a ...any) {
		rb.Restored = false
		rb.Problems = append(rb.Problems, fmt.Sprintf(format, a...))
	}
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	readyBy := map[string]bool{}
	karpenter := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		readyBy[n.Name] = nodeReady(n)
		if n.Labels[apisv1.NodePoolLabelKey] != "" {
			karpenter[n.Name] = true
			rb.KarpenterNodes++
		}
		for _, t := range n.Spec.Taints {
			if t.MatchTaint(&migrations.SteerTaint) || (t.Key == "CriticalAddonsOnly" && r.plan.Controller != nil && r.plan.Controller.Kept) {
				fail("node %s keeps the taint %s the rollout added", n.Name, t.ToString())
			}
		}
	}
	readyIn := map[string]int{}
	instances, err := r.env.Instances(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := r.env.Groups(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range instances {
		if in.Group != "" && readyBy[in.NodeName] {
			readyIn[in.Group]++
		}
	}
	rec := r.journal.Recorded
	if len(rec.NodeGroups) == 0 {
		fail("the journal recorded no node group")
	}
	for _, want := range rec.NodeGroups {
		i := slices.IndexFunc(groups, func(g inventory.NodeGroup) bool { return g.Name == want.Name })
		if i < 0 {
			fail("node group %s is gone", want.Name)
			continue
		}
		g := groups[i]
		gs := GroupSize{Name: g.Name, Recorded: want.Desired, RecordedMin: want.Min, RecordedMax: want.Max,
			Desired: g.DesiredSize, InstanceCount: len(g.Instances), ReadyNodes: readyIn[g.Name]}
		rb.Groups = append(rb.Groups, gs)
		if g.DesiredSize != want.Desired || g.MinSize != want.Min || g.MaxSize != want.Max {
			fail("node group %s is %d/%d/%d (min/desired/max), recorded %d/%d/%d", g.Name, g.MinSize, g.DesiredSize, g.MaxSize, want.Min, want.Desired, want.Max)
		}
		if int32(readyIn[g.Name]) != want.Desired {
			fail("node group %s has %d Ready nodes, want %d", g.Name, readyIn[g.Name], want.Desired)
		}
		if len(want.Tags) > 0 {
			out, err := autoscaling.NewFromConfig(r.cfg.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{want.ASGName}})
			if err != nil || len(out.AutoScalingGroups) != 1 {
				return nil, fmt.Errorf("describe ASG %s: %v", want.ASGName, err)
			}
			for _, tag := range want.Tags {
				if !slices.ContainsFunc(out.AutoScalingGroups[0].Tags, func(x astypes.TagDescription) bool {
					return awssdk.ToString(x.Key) == tag.Key && awssdk.ToString(x.Value) == tag.Value
				}) {
					fail("node group %s lacks its Cluster Autoscaler tag %s=%s", g.Name, tag.Key, tag.Value)
				}
			}
		}
	}
	if rb.KarpenterNodes > 0 {
		fail("%d Karpenter nodes remain", rb.KarpenterNodes)
	}
	if ca := rec.ClusterAutoscaler; ca != nil {
		got, err := r.caReplicas(ctx)
		if err != nil {
			return nil, err
		}
		if got != ca.Replicas {
			fail("Cluster Autoscaler has %d replicas, recorded %d", got, ca.Replicas)
		}
	}
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if karpenter[p.Spec.NodeName] || p.Spec.NodeName == "" {
			fail("pod %s/%s is not on a node-group node", p.Namespace, p.Name)
		}
	}
	pl, err := r.cfg.Dynamic.Resource(sandbox.NodePoolGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list NodePools: %w", err)
	}
	if len(pl.Items) > 0 {
		fail("%d NodePools remain", len(pl.Items))
	}
	if rb.NodesAfter, rb.NodesAfterByType, rb.CostPerHour, err = r.fleet(ctx); err != nil {
		return nil, err
	}
	return rb, nil
}

// caReplicas is the Cluster Autoscaler deployment's replicas (0 when the
// cluster has none).
func (r *runner) caReplicas(ctx context.Context) (int32, error) {
	ca := r.inv.ClusterAutoscaler
	if ca == nil {
		return 0, nil
	}
	d, err := r.cfg.Kube.AppsV1().Deployments(ca.Namespace).Get(ctx, ca.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read Cluster Autoscaler deployment %s/%s: %w", ca.Namespace, ca.Name, err)
	}
	return replicas(d.Spec.Replicas), nil
}
