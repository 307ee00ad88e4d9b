package generate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// Over-provisioning objects.
const (
	OverprovisioningPriorityClass = "karpenter-migrate-overprovisioning"
	overprovisioningPriority      = -10
	pauseImage                    = "registry.k8s.io/pause:3.10"
)

// overprovisioning returns pause-pod objects that keep one spare pod's
// worth of capacity warm in every pool: a Namespace, a negative
// PriorityClass (real pods preempt the pause pods, Karpenter then launches
// a node for the evicted pause pod), and one Deployment per NodePool sized
// like the largest pod its groups ran (1 CPU / 1Gi when none is known).
func overprovisioning(nps []*karpv1.NodePool, pools []*poolPlan, opts *Options) []map[string]any {
	byName := map[string]*poolPlan{}
	for _, pp := range pools {
		byName[pp.name] = pp
	}
	out := []map[string]any{
		{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": opts.Namespace, "labels": map[string]any{managedByLabel: managedByValue}},
		},
		{
			"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
			"metadata":         map[string]any{"name": OverprovisioningPriorityClass, "labels": map[string]any{managedByLabel: managedByValue}},
			"value":            overprovisioningPriority,
			"globalDefault":    false,
			"preemptionPolicy": "Never",
			"description":      "Pause pods that keep spare capacity warm; any other pod preempts them.",
		},
	}
	for _, np := range nps {
		req := corev1.ResourceList{}
		if pp := byName[np.Name]; pp != nil {
			for _, p := range pp.plans {
				req = largerOf(req, p.maxRequest)
			}
		}
		if _, ok := req[corev1.ResourceCPU]; !ok {
			req[corev1.ResourceCPU] = resource.MustParse("1")
		}
		if _, ok := req[corev1.ResourceMemory]; !ok {
			req[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}
		var tolerations []map[string]any
		for _, t := range np.Spec.Template.Spec.Taints {
			tol := map[string]any{"key": t.Key, "effect": string(t.Effect), "operator": "Exists"}
			if t.Value != "" {
				tol["operator"], tol["value"] = "Equal", t.Value
			}
			tolerations = append(tolerations, tol)
		}
		labels := map[string]any{"app.kubernetes.io/name": "overprovisioning", "karpenter-migrate.io/nodepool": np.Name}
		podSpec := map[string]any{
			"priorityClassName":             OverprovisioningPriorityClass,
			"terminationGracePeriodSeconds": 0,
			"nodeSelector":                  map[string]any{karpv1.NodePoolLabelKey: np.Name},
			"containers": []map[string]any{{
				"name":  "pause",
				"image": pauseImage,
				"resources": map[string]any{"requests": map[string]any{
					"cpu":    req.Cpu().String(),
					"memory": req.Memory().String(),
				}},
			}},
		}
		if len(tolerations) > 0 {
			podSpec["tolerations"] = tolerations
		}
		out = append(out, map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "overprovisioning-" + np.Name, "namespace": opts.Namespace,
				"labels": map[string]any{managedByLabel: managedByValue, "app.kubernetes.io/name": "overprovisioning"}},
			"spec": map[string]any{
				"replicas": 1,
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": podSpec},
			},
		})
	}
	return out
}
