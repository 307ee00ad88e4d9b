package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Cordon marks a node unschedulable (or schedulable again when cordon is
// false): a merge patch of spec.unschedulable alone, as kubectl's
// CordonHelper sends, without reading the node first (a node already in
// the wanted state is left as it is). Errors wrap the API's, so a node that
// is gone reads as not found.
func Cordon(ctx context.Context, client kubernetes.Interface, nodeName string, cordon bool) error {
	var v any // false is spec.unschedulable's default: the field goes
	verb := "uncordon"
	if cordon {
		v, verb = true, "cordon"
	}
	if err := patchNode(ctx, client, nodeName, map[string]any{"spec": map[string]any{"unschedulable": v}}); err != nil {
		return fmt.Errorf("%s node %s: %w", verb, nodeName, err)
	}
	return nil
}

// patchNode sends patch to the node as a JSON merge patch (a nil value
// removes its field), as the tool's field manager.
func patchNode(ctx context.Context, client kubernetes.Interface, nodeName string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, b, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

// SetTaint adds taint to a node (present) or removes every taint with its
// key and effect (!present): a merge patch of spec.taints guarded by the
// node's resourceVersion, retried on conflicts (RBAC: nodes patch, as for
// cordoning). It reports whether the node changed; a node already in the
// wanted state is left untouched.
func SetTaint(ctx context.Context, client kubernetes.Interface, nodeName string, taint corev1.Taint, present bool) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		has := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
		if has == present {
			return nil
		}
		taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
		if present {
			taints = append(taints, taint)
		}
		if err := patchNode(ctx, client, nodeName, map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		}); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		verb := "taint"
		if !present {
			verb = "untaint"
		}
		return false, fmt.Errorf("%s node %s with %s: %w", verb, nodeName, taint.ToString(), err)
	}
	return changed, nil
}

// SetLabel sets a label on a node (present) or removes it (!present): a
// merge patch of that one label, which leaves the node's others alone
// (RBAC: nodes patch, as for cordoning). Errors wrap the API's, so a node
// that is gone reads as not found.
func SetLabel(ctx context.Context, client kubernetes.Interface, nodeName, key, value string, present bool) error {
	var v any
	verb := "remove label " + key + " from"
	if present {
		v, verb = value, "label"
	}
	if err := patchNode(ctx, client, nodeName, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}}); err != nil {
		if present {
			return fmt.Errorf("%s node %s with %s=%s: %w", verb, nodeName, key, value, err)
		}
		return fmt.Errorf("%s node %s: %w", verb, nodeName, err)
	}
	return nil
}
