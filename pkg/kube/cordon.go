package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
)

// Cordon marks a node unschedulable (or schedulable again when cordon is
// false) with kubectl's CordonHelper, which patches only spec.unschedulable.
// It is a no-op when the node is already in the wanted state.
func Cordon(ctx context.Context, client kubernetes.Interface, nodeName string, cordon bool) error {
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", nodeName, err)
	}
	h := drain.NewCordonHelper(node)
	if !h.UpdateIfRequired(cordon) {
		return nil
	}
	err, patchErr := h.PatchOrReplaceWithContext(ctx, client, false)
	if patchErr != nil {
		err = patchErr
	}
	if err != nil {
		verb := "cordon"
		if !cordon {
			verb = "uncordon"
		}
		return fmt.Errorf("%s node %s: %w", verb, nodeName, err)
	}
	return nil
}
