package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
)

// pdbWatcher counts PodDisruptionBudget violations on its own: after every
// pass of the sandbox's controllers, or poll of a control plane, it counts each budget's healthy pods (Ready, not
// terminating, selected by the budget) and compares them with the healthy
// pods the budget requires (its status.desiredHealthy, as the cluster's
// disruption controller computes it). A violation is a budget going from
// satisfied to short. It trusts nothing the runner says. A budget's count
// follows from its namespace's objects alone: where none was written since
// the last observation, it is as it was.
type pdbWatcher struct {
	mu sync.Mutex
	// at is what the demo was doing last (its last event), so that a
	// violation says when it happened.
	at string

	short      map[string]bool
	count      int
	violations []string
}

func (w *pdbWatcher) observe(ctx context.Context, kube kubernetes.Interface, written func(namespace string) bool) error {
	pdbs, err := kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("PDB watcher: list PodDisruptionBudgets: %w", err)
	}
	if len(pdbs.Items) == 0 {
		return nil
	}
	if w.short == nil {
		w.short = map[string]bool{}
	}
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		if !written(pdb.Namespace) {
			continue
		}
		key := pdb.Namespace + "/" + pdb.Name
		// Not yet computed by the disruption controller (a budget just
		// created says it expects no pods): no state to compare with.
		if pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.ExpectedPods == 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			return fmt.Errorf("PDB watcher: PodDisruptionBudget %s spec.selector: %w", key, err)
		}
		// The budget's pods only: a list of every pod for each budget
		// grew with budgets × pods on a thousand-node cluster.
		pods, err := kube.CoreV1().Pods(pdb.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return fmt.Errorf("PDB watcher: list the pods of PodDisruptionBudget %s: %w", key, err)
		}
		healthy, unhealthy := healthyPods(pods.Items, pdb.Namespace, sel)
		// A budget first seen short (its pods still starting, as when the
		// Karpenter controller is installed) was never satisfied.
		short := healthy < pdb.Status.DesiredHealthy
		if was, seen := w.short[key]; short && seen && !was {
			w.count++
			w.violations = append(w.violations, fmt.Sprintf("%s: %d healthy pods, %d required, during %s; not healthy: %s",
				key, healthy, pdb.Status.DesiredHealthy, w.when(), strings.Join(unhealthy, ", ")))
		}
		w.short[key] = short
	}
	return nil
}

// observed records what the demo is doing (its last event).
func (w *pdbWatcher) observed(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = what
}

func (w *pdbWatcher) when() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// healthyPods counts the budget's healthy pods and describes the others
// (where they are and why they do not count).
func healthyPods(pods []corev1.Pod, ns string, sel labels.Selector) (int32, []string) {
	var n int32
	var others []string
	for i := range pods {
		p := &pods[i]
		if p.Namespace != ns || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		why := "not Ready"
		switch {
		case p.DeletionTimestamp != nil:
			why = "terminating"
		case p.Spec.NodeName == "":
			why = "not scheduled"
		case podutils.IsPodReady(p):
			n++
			continue
		}
		others = append(others, fmt.Sprintf("%s on %q (%s)", p.Name, p.Spec.NodeName, why))
	}
	return n, others
}
