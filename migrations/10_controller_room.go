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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// roomForController makes room for the Karpenter controller on the kept
// nodes before the chart installs it. The controller runs at
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
		if err := s.taintNode(ctx, n, *s.Plan.Controller.Reserve); err != nil {
			return err
		}
	}
	stays, err := s.stays(ctx, kept)
	if err != nil {
		return err
	}
	d := &kube.Drainer{Client: s.Kube, Clock: s.Clock, Options: s.DrainOptions(), OnEvent: func(e kube.DrainEvent) {
		switch e.Type {
		case kube.DrainBlocked:
			s.Emit(rollout.Event{Kind: rollout.EventPDBWait, Step: s.Journal.Current.Step, Node: e.Node, Pod: e.Pod, PDB: e.PDB,
				Message: fmt.Sprintf("PodDisruptionBudget %s allows no more disruptions (attempt %d); waiting", e.PDB, e.Attempt)})
		case kube.DrainEvicted:
			s.Emit(rollout.Event{Kind: rollout.EventEviction, Step: s.Journal.Current.Step, Node: e.Node, Pod: e.Pod, Message: "evicted"})
		}
	}}
	err = MakeRoom(ctx, d, names, controller, stays, s.Options.DryRun, func(pod, node string) {
		s.Change("evict pod %s from kept node %s: room for the Karpenter controller", pod, node)
	})
	if nr := (*NoRoomError)(nil); errors.As(err, &nr) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: nr.Error()}
	}
	return err
}

// NoRoomError is a pod MakeRoom had to evict that the drain leaves.
type NoRoomError struct{ Pod, Node, Reason string }

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("pod %s on node %s must go to make room but a drain leaves it (%s); move it, or let the drain evict it (drain options), and resume", e.Pod, e.Node, e.Reason)
}

// MakeRoom evicts from each node the pods Evictees picks for pod to fit
// there, through d (the eviction API: budgets honoured, retried, waited
// for), and waits until they are gone. evicting is told each pod first;
// with dryRun nothing is evicted. The nodes should be reserved first (a
// taint the pod tolerates and the evicted pods' replacements do not), or
// the scheduler may give the room back to them.
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
		for _, p := range Evictees(node, pods.Items, pod, stays) {
			victims[p.Namespace+"/"+p.Name] = true
			evicting(p.Namespace+"/"+p.Name, n)
		}
	}
	if len(victims) == 0 || dryRun {
		return nil
	}
	drain := *d
	drain.Options.Stay = func(p *corev1.Pod) bool { return !victims[p.Namespace+"/"+p.Name] }
	results, err := drain.DrainNodes(ctx, nodes, 0)
	if err != nil {
		return fmt.Errorf("make room on nodes %s: %w", strings.Join(nodes, ", "), err)
	}
	for _, r := range results {
		for _, sk := range r.Skipped {
			if victims[sk.Pod] {
				return &NoRoomError{Pod: sk.Pod, Node: r.Node, Reason: sk.Reason}
			}
		}
	}
	return nil
}

// Evictees are the fewest pods to evict from node for pod to fit there
// (none when it fits): of the pods that do not stay, the lowest priority
// first and, among equals, the newest, as kube-scheduler's preemption picks
// its victims. DaemonSet pods and finished pods are never chosen. When
// evicting all of them would not make room, it returns them all: the
// drain then tells whether the controller fits.
func Evictees(node *corev1.Node, pods []corev1.Pod, pod *corev1.Pod, stays func(*corev1.Pod) bool) []corev1.Pod {
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	used := corev1.ResourceList{}
	count := 0
	var cands []corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		addTo(used, resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
		count++
		if !kube.IsDaemonSetPod(p) && p.DeletionTimestamp == nil && (stays == nil || !stays(p)) {
			cands = append(cands, *p)
		}
	}
	slices.SortStableFunc(cands, func(a, b corev1.Pod) int {
		if c := cmp.Compare(priorityOf(&a), priorityOf(&b)); c != 0 {
			return c
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	var out []corev1.Pod
	for _, c := range cands {
		if fits(want, used, count, node.Status.Allocatable) {
			break
		}
		subtractFrom(used, resourcehelper.PodRequests(&c, resourcehelper.PodResourcesOptions{}))
		count--
		out = append(out, c)
	}
	return out
}

func fits(want, used corev1.ResourceList, pods int, alloc corev1.ResourceList) bool {
	if max, ok := alloc[corev1.ResourcePods]; ok && int64(pods+1) > max.Value() {
		return false
	}
	for name, q := range want {
		free := alloc[name].DeepCopy()
		free.Sub(used[name])
		if free.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

func addTo(sum, add corev1.ResourceList) {
	for name, q := range add {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
}

func subtractFrom(sum, sub corev1.ResourceList) {
	for name, q := range sub {
		v := sum[name]
		v.Sub(q)
		sum[name] = v
	}
}

func priorityOf(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// releaseReservation takes the reservation off the nodes the rollout
// reserved (as its journal records them), for a rollback that does not
// reach the waves' Down.
func (s run) releaseReservation(ctx context.Context) error {
	if s.Plan.Controller == nil || s.Plan.Controller.Reserve == nil {
		return nil
	}
	reserve := *s.Plan.Controller.Reserve
	for _, rec := range s.Journal.Recorded.Tainted {
		if !rec.Taint.MatchTaint(&reserve) {
			continue
		}
		s.Change("remove taint %s from node %s", reserve.ToString(), rec.Node)
		if s.Options.DryRun {
			continue
		}
		if _, err := kube.SetTaint(ctx, s.Kube, rec.Node, reserve, false); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
			return err
		}
	}
	return nil
}
