package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// volumePlacement counts the pods whose claims are bound to a volume that
// pins its nodes (a PersistentVolume's required node affinity: an EBS
// volume's zone) and, of them, those running on a node the affinity does
// not admit, naming each: after a migration every such pod must be where
// its volume is.
func volumePlacement(ctx context.Context, kube kubernetes.Interface, pods []corev1.Pod, nodes []corev1.Node) (pinned int, misplaced []string, err error) {
	cl, err := kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	vl, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	claims, volumes := map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.PersistentVolume{}
	for i := range cl.Items {
		claims[cl.Items[i].Namespace+"/"+cl.Items[i].Name] = &cl.Items[i]
	}
	for i := range vl.Items {
		volumes[vl.Items[i].Name] = &vl.Items[i]
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		counted := false
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			c := claims[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]
			if c == nil || volumes[c.Spec.VolumeName] == nil {
				continue
			}
			na := volumes[c.Spec.VolumeName].Spec.NodeAffinity
			if na == nil || na.Required == nil {
				continue
			}
			if !counted {
				pinned++
				counted = true
			}
			n := byName[p.Spec.NodeName]
			if n == nil {
				misplaced = append(misplaced, fmt.Sprintf("%s/%s on %s (node gone), volume %s", p.Namespace, p.Name, p.Spec.NodeName, c.Spec.VolumeName))
				break
			}
			if ok, err := corev1helpers.MatchNodeSelectorTerms(n, na.Required); err != nil || !ok {
				misplaced = append(misplaced, fmt.Sprintf("%s/%s on %s (zone %s), volume %s", p.Namespace, p.Name, n.Name, n.Labels[corev1.LabelTopologyZone], c.Spec.VolumeName))
				break
			}
		}
	}
	return pinned, misplaced, nil
}
