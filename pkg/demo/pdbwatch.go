package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// pdbWatcher counts PodDisruptionBudget violations on its own: after every
// tick of the sandbox, or poll of a control plane, it counts each budget's healthy pods (Ready, not
// terminating, selected by the budget) and compares them with the healthy
// pods the budget requires (its status.desiredHealthy, as the cluster's
// disruption controller computes it). A violation is a budget going from
// satisfied to short. It trusts nothing the runner says.
type pdbWatcher struct {
	short      map[string]bool
	count      int
	violations []string
}

func (w *pdbWatcher) observe(ctx context.Context, kube kubernetes.Interface) error {
	pdbs, err := kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("PDB watcher: list PodDisruptionBudgets: %w", err)
	}
	if len(pdbs.Items) == 0 {
		return nil
	}
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("PDB watcher: list pods: %w", err)
	}
	if w.short == nil {
		w.short = map[string]bool{}
	}
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		key := pdb.Namespace + "/" + pdb.Name
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			return fmt.Errorf("PDB watcher: PodDisruptionBudget %s spec.selector: %w", key, err)
		}
		healthy := healthyPods(pods.Items, pdb.Namespace, sel)
		// A budget first seen short (its pods still starting, as when the
		// Karpenter controller is installed) was never satisfied.
		short := pdb.Status.ExpectedPods > 0 && healthy < pdb.Status.DesiredHealthy
		if was, seen := w.short[key]; short && seen && !was {
			w.count++
			w.violations = append(w.violations, fmt.Sprintf("%s: %d healthy pods, %d required", key, healthy, pdb.Status.DesiredHealthy))
		}
		w.short[key] = short
	}
	return nil
}

func healthyPods(pods []corev1.Pod, ns string, sel labels.Selector) int32 {
	var n int32
	for i := range pods {
		p := &pods[i]
		if p.Namespace != ns || p.DeletionTimestamp != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
