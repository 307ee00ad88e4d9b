package demo

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestVolumePlacement: a pod whose claim is bound to a volume pinned to a
// zone counts as pinned, and is named when its node is in another zone; a
// pod without a claim, or whose volume pins nothing, is not counted.
func TestVolumePlacement(t *testing.T) {
	pv := func(name, zone string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if zone != "" {
			v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}
		}
		return v
	}
	pvc := func(name, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	node := func(name, zone string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	}
	pod := func(name, node, claim string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if claim != "" {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		}
		return p
	}
	kube := fake.NewClientset(pv("pv-a", "us-east-1a"), pv("pv-b", "us-east-1b"), pv("pv-any", ""),
		pvc("data-0", "pv-a"), pvc("data-1", "pv-b"), pvc("data-2", "pv-any"))
	nodes := []corev1.Node{node("n-a", "us-east-1a"), node("n-b", "us-east-1b")}
	pods := []corev1.Pod{pod("db-0", "n-a", "data-0"), pod("db-1", "n-a", "data-1"), pod("db-2", "n-b", "data-2"), pod("web", "n-b", "")}
	pinned, misplaced, err := volumePlacement(t.Context(), kube, pods, nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"db/db-1 on n-a (zone us-east-1a), volume pv-b"}
	if pinned != 2 || !slices.Equal(misplaced, want) {
		t.Errorf("pinned %d, misplaced %v; want 2 and %v", pinned, misplaced, want)
	}
}
