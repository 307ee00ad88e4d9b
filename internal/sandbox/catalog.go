package sandbox

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// ResourceGPU is the extended resource NVIDIA's device plugin advertises.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// price is the USD/hour of a type in a zone for a capacity type from the
// sandbox's catalogue (pkg/catalog: us-east-1 list prices, spot at its
// default ratio), so the sandbox bills exactly what the planner predicts;
// 0 for a type it does not know.
func (s *Sandbox) price(instanceType, zone, capacityType string) float64 {
	p, _ := s.cat.Price(instanceType, capacityType, zone)
	return p
}

// allocatable is pkg/catalog's Karpenter allocatable math for the type
// with default kubelet settings (its capacity if that fails).
func allocatable(it *catalog.InstanceType) corev1.ResourceList {
	a, err := it.Allocatable(catalog.Kubelet{})
	if err != nil {
		return it.Capacity(catalog.Kubelet{})
	}
	return a
}
