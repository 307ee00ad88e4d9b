package migrations

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// placeholderRelease gives a wave's placeholders' room to the pods it was
// reserved for, just in time: as a pod is about to be evicted (or replaced
// by a surge restart), placeholders are deleted, in order, until the room
// they freed covers the requests of every pod the drain moved so far. The
// pod's replacement then finds free room on prepared capacity —
// kube-scheduler puts it on the emptiest node that fits, the one a
// placeholder just left — while the nodes prepared for pods the budgets
// let go later stay held (their placeholders carry do-not-disrupt) instead
// of standing empty for Karpenter to consolidate away before those pods
// come, which would leave them waiting for a node launched after their
// eviction. Whatever is left once the drain ends is released then.
type placeholderRelease struct {
	s    run
	wave int

	mu sync.Mutex
	// left are the placeholders not released yet, in their plan order.
	left []corev1.Pod
	// freed is the room released so far, taken the requests of the pods
	// moved so far (CPU and memory).
	freed, taken corev1.ResourceList
	// requests are the requests of the pods the drain moves, by
	// namespace/name; moved those already counted.
	requests map[string]corev1.ResourceList
	moved    map[string]bool
	err      error
}

// newPlaceholderRelease lists the wave's placeholders that are left (none
// in a dry run or without pre-provisioning) for the pods the drain moves.
func (s run) newPlaceholderRelease(ctx context.Context, wave int, pods []podOn) (*placeholderRelease, error) {
	r := &placeholderRelease{s: s, wave: wave, freed: corev1.ResourceList{}, taken: corev1.ResourceList{},
		requests: map[string]corev1.ResourceList{}, moved: map[string]bool{}}
	for i := range pods {
		p := &pods[i].pod
		r.requests[p.Namespace+"/"+p.Name] = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	}
	if s.Options.DryRun {
		return r, nil
	}
	list, err := s.Kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: placeholderSelector(s.Plan.Environment, wave)})
	if err != nil {
		return nil, fmt.Errorf("list placeholder pods of wave %d: %w", wave, err)
	}
	r.left = list.Items
	// km-placeholder-<env>-w<wave>-<i>: by i, as the plan lists them.
	index := func(p corev1.Pod) int {
		n, _ := strconv.Atoi(p.Name[strings.LastIndexByte(p.Name, '-')+1:])
		return n
	}
	slices.SortFunc(r.left, func(a, b corev1.Pod) int { return index(a) - index(b) })
	return r, nil
}

// moving releases placeholders until the room freed covers the pods moved
// so far and pod (namespace/name); a pod already counted is not counted
// again (an eviction asked again after a 429). A nil release (a drain
// without placeholders: the rollback's) does nothing.
func (r *placeholderRelease) moving(ctx context.Context, pod string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved[pod] || r.err != nil {
		return
	}
	r.moved[pod] = true
	for name, q := range r.requests[pod] {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			t := r.taken[name]
			t.Add(q)
			r.taken[name] = t
		}
	}
	for len(r.left) > 0 && r.short() {
		r.err = r.release(ctx, &r.left[0], "for pod "+pod)
		r.left = r.left[1:]
		if r.err != nil {
			return
		}
	}
}

// short reports whether the pods moved so far request more than the room
// released.
func (r *placeholderRelease) short() bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		t, f := r.taken[name], r.freed[name]
		if t.Cmp(f) > 0 {
			return true
		}
	}
	return false
}

func (r *placeholderRelease) release(ctx context.Context, p *corev1.Pod, why string) error {
	r.s.Change("release placeholder pod %s/%s of wave %d %s", p.Namespace, p.Name, r.wave, why)
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			f := r.freed[name]
			f.Add(q)
			r.freed[name] = f
		}
	}
	err := r.s.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release placeholder pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if p.Spec.NodeName == "" {
		return nil
	}
	return r.s.guard(ctx, p.Spec.NodeName, r.wave)
}

// guardLabel marks a guard pod (guard).
const guardLabel = "karpenter-migrate.io/guard"

// guard keeps Karpenter from consolidating the node a released placeholder
// of wave ran on until the waves are over (deleteGuards): a pod bound to
// it, requesting nothing, annotated do-not-disrupt, labelled as the wave's
// placeholders are (so that another wave's placeholders do not land there,
// nothing waits on it and Down deletes it) and as a guard. The room the
// waves' plan leaves on a wave's nodes is what later waves' pods beyond
// their own placeholders land on; with a short consolidateAfter (the
// demo's dev overlay: 30s) Karpenter consolidated such a node between two
// waves, so a pod of the later wave waited 65s for a node launched after
// its eviction, and a pod the consolidation evicted preempted a later
// wave's placeholder, whose node that wave then waited for. A node
// holding one is guarded once.
func (s run) guard(ctx context.Context, node string, wave int) error {
	name := "km-guard-" + s.Plan.Environment + "-" + node
	labels := s.placeholderLabels(wave)
	labels[guardLabel] = "true"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: labels,
			Annotations: map[string]string{apisv1.DoNotDisruptAnnotationKey: "true"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			PriorityClassName:             PlaceholderPriorityClass,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:                    []corev1.Container{{Name: "pause", Image: PlaceholderImage}},
		},
	}
	s.Change("create guard pod %s/%s on node %s: Karpenter leaves the node to the later waves until they are done", s.Namespace, name, node)
	_, err := s.Kube.CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: kube.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create guard pod %s: %w", name, err)
	}
	return nil
}

// deleteGuards deletes the guard pods (guard) once the waves are done, so
// that Karpenter consolidates their nodes as it would.
func (s run) deleteGuards(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: placeholderSelector(s.Plan.Environment, 0) + "," + guardLabel}
	if s.Options.DryRun {
		return nil
	}
	left, err := s.Kube.CoreV1().Pods(s.Namespace).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list guard pods: %w", err)
	}
	if len(left.Items) == 0 {
		return nil
	}
	s.Change("delete the %d guard pods: the waves are done, Karpenter may consolidate their nodes", len(left.Items))
	err = s.Kube.CoreV1().Pods(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, sel)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete guard pods: %w", err)
	}
	return nil
}

// failed is the first error a release met.
func (r *placeholderRelease) failed() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// rest releases the placeholders left (the drain moved fewer pods than
// the plan reserved room for) and returns the first error a release met.
func (r *placeholderRelease) rest(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.err == nil && len(r.left) > 0 {
		r.err = r.release(ctx, &r.left[0], "(the drain is over)")
		r.left = r.left[1:]
	}
	return r.err
}
