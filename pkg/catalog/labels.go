package catalog

// Well-known node labels, as Kubernetes and Karpenter spell them. Every
// instance type carries the ones its data defines; see WellKnownLabels for the
// keys a type leaves undefined on purpose (for example the GPU labels of a
// type without GPUs), which requirements must read as DoesNotExist.
const (
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelArch         = "kubernetes.io/arch"
	LabelOS           = "kubernetes.io/os"
	LabelHostname     = "kubernetes.io/hostname"
	LabelZone         = "topology.kubernetes.io/zone"
	LabelRegion       = "topology.kubernetes.io/region"
	LabelCapacityType = "karpenter.sh/capacity-type"
	LabelNodePool     = "karpenter.sh/nodepool"

	LabelInstanceCategory                = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily                  = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration              = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize                    = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU                     = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceMemory                  = "karpenter.k8s.aws/instance-memory"
	LabelInstanceHypervisor              = "karpenter.k8s.aws/instance-hypervisor"
	LabelInstanceCapabilityFlex          = "karpenter.k8s.aws/instance-capability-flex"
	LabelInstanceGPUCount                = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUName                 = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUManufacturer         = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUMemory               = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAcceleratorName         = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount        = "karpenter.k8s.aws/instance-accelerator-count"
)

// Capacity types, as Karpenter spells them.
const (
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
)

// Extended resources that instance types expose.
const (
	ResourceNVIDIAGPU   = "nvidia.com/gpu"
	ResourceAMDGPU      = "amd.com/gpu"
	ResourceHabanaGaudi = "habana.ai/gaudi"
	ResourceNeuron      = "aws.amazon.com/neuron"
)

// WellKnownLabels returns the instance-type label keys the catalogue models.
// A key in this list that is missing from InstanceType.Labels is undefined
// for that type (Karpenter's DoesNotExist): a NodePool requiring
// instance-gpu-count Gt 0 excludes it, one requiring instance-gpu-count
// DoesNotExist keeps it. Zone and capacity type vary per offering and are not
// in this list.
func WellKnownLabels() []string {
	return []string{
		LabelInstanceType, LabelArch, LabelOS, LabelRegion,
		LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGeneration, LabelInstanceSize,
		LabelInstanceCPU, LabelInstanceMemory, LabelInstanceHypervisor, LabelInstanceCapabilityFlex,
		LabelInstanceGPUCount, LabelInstanceGPUName, LabelInstanceGPUManufacturer, LabelInstanceGPUMemory,
		LabelInstanceAcceleratorName, LabelInstanceAcceleratorManufacturer, LabelInstanceAcceleratorCount,
	}
}
