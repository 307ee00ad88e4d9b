package migrations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// roomForController makes room for the Karpenter controller on the kept
// nodes before the chart installs it, and labels them with
// generate.KeptLabel, which the plan's values require of its nodes (so it
// runs there, not on another node of the group a wave drains). It runs at
// system-cluster-critical: on a full node kube-scheduler would preempt
// workload pods to place it, and preemption honours a PodDisruptionBudget
// only when it has another choice. So the kept nodes are reserved first
// (their taint, recorded, which the evicted pods' replacements do not
// tolerate) and each that could not take a replica gets the fewest pods
// that do not stay there evicted through the eviction API, lowest priority
// and newest first (as preemption would pick them), budgets honoured.
func (s run) roomForController(ctx context.Context) error {
	if s.keptGroup() == "" || s.Plan.Karpenter == nil {
		return nil
	}
	dep, _, err := generate.ControllerObjects(s.Plan.Karpenter.Values, s.Plan.Karpenter.Namespace, "")
	if err != nil {
		return err
	}
	controller := &corev1.Pod{Spec: dep.Spec.Template.Spec}
	kept, err := s.keptNodes(ctx)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(kept))
	for _, n := range names {
		if err := s.reserveKept(ctx, n); err != nil {
			return err
		}
	}
	stays, err := s.stays(ctx, kept)
	if err != nil {
		return err
	}
	d := &kube.Drainer{Client: s.Kube, Clock: s.Clock, Options: s.DrainOptions(), OnEvent: s.drainEvents(0, nil)}
	err = MakeRoom(ctx, d, names, controller, stays, s.Options.DryRun, func(pod, node string) {
		s.Change("evict pod %s from kept node %s: room for the Karpenter controller", pod, node)
	})
	if nr := (*NoRoomError)(nil); errors.As(err, &nr) {
		if s.Options.DryRun {
			s.Change("would pause: %v", nr)
			return nil
		}
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: nr.Error()}
	}
	return err
}

// NoRoomError is a node that cannot take the pod even with every pod a
// drain may evict from it gone.
type NoRoomError struct {
	Node string
	// Left are the pods the drain leaves there, and why.
	Left []kube.SkippedPod
}

func (e *NoRoomError) Error() string {
	left := make([]string, len(e.Left))
	for i, p := range e.Left {
		left[i] = fmt.Sprintf("%s (%s)", p.Pod, p.Reason)
	}
	return fmt.Sprintf("node %s has no room for the Karpenter controller even without every pod a drain may evict; the drain leaves %s: move them, or let the drain evict them (rollout.allowEmptyDir, --force-evict), and resume",
		e.Node, cmp.Or(strings.Join(left, ", "), "none (the node is too small)"))
}

// MakeRoom evicts from each node the pods Evictees picks for pod to fit
// there, among those a drain by d may evict and stays does not keep,
// through d (the eviction API: budgets honoured, retried, waited for), and
// waits until they are gone. evicting is told each pod first; with dryRun
// nothing is evicted. The nodes should be reserved first (a taint the pod
// tolerates and the evicted pods' replacements do not), or the scheduler
// may give the room back to them.
func MakeRoom(ctx context.Context, d *kube.Drainer, nodes []string, pod *corev1.Pod, stays func(*corev1.Pod) bool, dryRun bool, evicting func(pod, node string)) error {
	victims := map[string]bool{}
	for _, n := range nodes {
		node, err := d.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", n, err)
		}
		pods, err := d.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			return fmt.Errorf("list the pods on node %s: %w", n, err)
		}
		evictable, left, err := d.Pods(ctx, n)
		if err != nil {
			return err
		}
		movable := map[string]bool{}
		for i := range evictable {
			if p := &evictable[i]; stays == nil || !stays(p) {
				movable[p.Namespace+"/"+p.Name] = true
			}
		}
		out, ok := plan.Evictees(node, pods.Items, pod, func(p *corev1.Pod) bool { return movable[p.Namespace+"/"+p.Name] })
		if !ok {
			return &NoRoomError{Node: n, Left: left}
		}
		for _, p := range out {
			victims[p.Namespace+"/"+p.Name] = true
			evicting(p.Namespace+"/"+p.Name, n)
		}
	}
	if len(victims) == 0 || dryRun {
		return nil
	}
	drain := &kube.Drainer{Client: d.Client, Clock: d.Clock, Options: d.Options, OnEvent: d.OnEvent}
	drain.Options.Stay = func(p *corev1.Pod) bool { return !victims[p.Namespace+"/"+p.Name] }
	if _, err := drain.DrainNodes(ctx, nodes, 0); err != nil {
		return fmt.Errorf("make room on nodes %s: %w", strings.Join(nodes, ", "), err)
	}
	return nil
}

// releaseReservation takes the reservation off the nodes the rollout
// reserved (as its journal records them), for a rollback that does not
// reach the waves' Down, and generate.KeptLabel off them, off the kept
// group's config and off the nodes that config labelled (those the group
// launched since the scale step), unless the group had it: the label
// stays while the release that requires it of the controller's nodes may
// run (a rollback --to a later step keeps it), so only this step's Down,
// after the uninstall, removes it.
func (s run) releaseReservation(ctx context.Context) error {
	for _, rec := range s.Journal.Recorded.Labelled {
		if err := s.unlabel(ctx, rec.Node, rec.Key); err != nil {
			return err
		}
	}
	if s.Plan.Controller == nil || s.Plan.Controller.Reserve == nil {
		return nil
	}
	if err := s.restoreConfigLabel(ctx); err != nil {
		return err
	}
	if rec := s.Journal.Recorded.Group(s.keptGroup()); rec != nil && !hasKey(rec.Labels, generate.KeptLabel) {
		nodes, groupOf, err := s.listNodes(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if hasKey(n.Labels, generate.KeptLabel) && groupOf[n.Name] == rec.Name {
				if err := s.unlabel(ctx, n.Name, generate.KeptLabel); err != nil {
					return err
				}
			}
		}
	}
	reserve := *s.Plan.Controller.Reserve
	for _, rec := range s.Journal.Recorded.Tainted {
		if !rec.Taint.MatchTaint(&reserve) {
			continue
		}
		if err := s.untaint(ctx, rec.Node, reserve); err != nil {
			return err
		}
	}
	return nil
}

func hasKey(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}
