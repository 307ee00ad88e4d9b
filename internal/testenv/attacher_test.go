package testenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestAttacherMarksItsDriversAttachments: Sync marks the driver's
// VolumeAttachments attached, leaves another driver's alone, and annotates
// the nodes as a kubelet registering would (no control plane needed).
func TestAttacherMarksItsDriversAttachments(t *testing.T) {
	va := func(name, driver string) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driver, NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-" + name)}}}
	}
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		va("ours", "ebs.csi.aws.com"), va("theirs", "efs.csi.aws.com"))
	a := &Attacher{Client: c, Driver: "ebs.csi.aws.com"}
	marked, err := a.Sync(t.Context())
	if err != nil || marked != 1 {
		t.Fatalf("Sync: %d marked, %v; want 1 (the driver's one)", marked, err)
	}
	for name, want := range map[string]bool{"ours": true, "theirs": false} {
		got, err := c.StorageV1().VolumeAttachments().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || got.Status.Attached != want {
			t.Errorf("VolumeAttachment %s attached %t (%v), want %t", name, got.Status.Attached, err, want)
		}
	}
	n, err := c.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil || n.Annotations[AnnotationControllerManagedAttach] != "true" {
		t.Errorf("node annotations %v (%v), want %s=true", n.Annotations, err, AnnotationControllerManagedAttach)
	}
	if marked, err := a.Sync(t.Context()); err != nil || marked != 0 {
		t.Errorf("second Sync: %d marked, %v; want none", marked, err)
	}
}
