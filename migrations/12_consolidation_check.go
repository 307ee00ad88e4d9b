package migrations

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "12_consolidation_check",
		Purpose: "final check: no workload left on legacy nodes, nothing pending, every workload ready and PDB satisfied",
		Up:      func(ctx context.Context, s *rollout.Session) error { return run{s}.FinalCheck(ctx) },
		Down:    func(context.Context, *rollout.Session) error { return nil },
	})
}

// FinalCheck verifies the end state: no workload pod left on a legacy
// node (on the kept ones, only the controller's and critical add-ons),
// the controller's pods on the kept nodes, and the gate passing: every
// workload ready, nothing pending, every PDB satisfied, waited for up to
// the PDB wait gate as after a wave's drain (a replacement still
// starting), pausing only when that runs out.
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
	// A replacement still starting is waited for, as after a wave's drain.
	return s.gate(ctx, 0, "final check", fmt.Sprintf("%d Karpenter nodes; ", karpenter), time.Time{})
}

func isDaemon(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}
