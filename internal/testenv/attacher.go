package testenv

import (
	"context"
	"fmt"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// AnnotationControllerManagedAttach is what a kubelet sets on its node when
// it registers (enableControllerAttachDetach, the default): the
// attach/detach controller in kube-controller-manager attaches and detaches
// volumes only for the pods of nodes that carry it.
const AnnotationControllerManagedAttach = "volumes.kubernetes.io/controller-managed-attach-detach"

// Attacher plays, for one CSI driver, the parts of attach and detach that
// are not kube-controller-manager's on a control plane where kwok runs the
// nodes: the driver's external-attacher, which marks the VolumeAttachments
// the attach/detach controller creates attached (status.attached=true), and
// the kubelet's registration, which annotates its node as
// controller-managed (AnnotationControllerManagedAttach). Detaching is the
// attach/detach controller's own: it deletes a VolumeAttachment once no pod
// on the node uses the volume (no kubelet reports it in use).
type Attacher struct {
	Client kubernetes.Interface
	// Driver is the CSI driver whose attachments are marked.
	Driver string
}

// Sync annotates every node that lacks AnnotationControllerManagedAttach
// and marks every VolumeAttachment of the driver not yet attached; it
// returns how many it marked.
func (a *Attacher) Sync(ctx context.Context) (int, error) {
	nodes, err := a.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("attacher: list nodes: %w", err)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, AnnotationControllerManagedAttach))
	for _, n := range nodes.Items {
		if n.DeletionTimestamp != nil || n.Annotations[AnnotationControllerManagedAttach] == "true" {
			continue
		}
		if _, err := a.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !isGone(err) {
			return 0, fmt.Errorf("attacher: annotate node %s: %w", n.Name, err)
		}
	}
	vas, err := a.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("attacher: list VolumeAttachments: %w", err)
	}
	marked := 0
	for i := range vas.Items {
		va := &vas.Items[i]
		if va.Spec.Attacher != a.Driver || va.Status.Attached || va.DeletionTimestamp != nil {
			continue
		}
		va.Status = storagev1.VolumeAttachmentStatus{Attached: true}
		if _, err := a.Client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil && !isGone(err) {
			return marked, fmt.Errorf("attacher: mark VolumeAttachment %s attached: %w", va.Name, err)
		}
		marked++
	}
	return marked, nil
}

// Run syncs every NodeHookInterval until ctx ends, telling logf of errors.
func (a *Attacher) Run(ctx context.Context, logf func(format string, args ...any)) {
	tick := time.NewTicker(NodeHookInterval)
	defer tick.Stop()
	for {
		if _, err := a.Sync(ctx); err != nil && ctx.Err() == nil {
			logf("%v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// isGone: the object went, or changed, since it was listed; the next Sync
// sees it afresh.
func isGone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
