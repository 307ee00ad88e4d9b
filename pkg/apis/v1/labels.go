package v1

// API groups, versions and kinds.
const (
	Group                 = "karpenter.sh"
	AWSGroup              = "karpenter.k8s.aws"
	Version               = "v1"
	APIVersion            = Group + "/" + Version
	AWSAPIVersion         = AWSGroup + "/" + Version
	NodePoolKind          = "NodePool"
	EC2NodeClassKind      = "EC2NodeClass"
	CompatibilityGroup    = "compatibility." + Group
	AWSCompatibilityGroup = "compatibility." + AWSGroup
)

// Capacity types (values of CapacityTypeLabelKey).
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// AMI families of v1 (spec.amiFamily).
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
)

// Well-known keys of karpenter.sh (core).
const (
	NodePoolLabelKey            = Group + "/nodepool"
	CapacityTypeLabelKey        = Group + "/capacity-type"
	NodeInitializedLabelKey     = Group + "/initialized"
	NodeRegisteredLabelKey      = Group + "/registered"
	NodeDoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"

	DoNotDisruptAnnotationKey        = Group + "/do-not-disrupt"
	NodePoolHashAnnotationKey        = Group + "/nodepool-hash"
	NodePoolHashVersionAnnotationKey = Group + "/nodepool-hash-version"
	TerminationFinalizer             = Group + "/termination"

	// DisruptedTaintKey is put on nodes being disrupted (NoSchedule).
	DisruptedTaintKey = Group + "/disrupted"
	// UnregisteredTaintKey is put on nodes until they register (NoExecute).
	UnregisteredTaintKey = Group + "/unregistered"

	// KubeletCompatibilityAnnotationKey holds a v1beta1 NodePool's kubelet as
	// JSON after conversion to v1; it wins over EC2NodeClass.spec.kubelet.
	KubeletCompatibilityAnnotationKey = CompatibilityGroup + "/v1beta1-kubelet-conversion"
	// NodeClassReferenceAnnotationKey holds a v1beta1 NodePool's original nodeClassRef.
	NodeClassReferenceAnnotationKey = CompatibilityGroup + "/v1beta1-nodeclass-reference"
	// UbuntuCompatibilityAnnotationKey marks an EC2NodeClass converted from amiFamily Ubuntu.
	UbuntuCompatibilityAnnotationKey = AWSCompatibilityGroup + "/v1beta1-ubuntu"
)

// Well-known keys of karpenter.k8s.aws (the AWS provider).
const (
	LabelInstanceHypervisor                   = AWSGroup + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = AWSGroup + "/instance-encryption-in-transit-supported"
	LabelInstanceCategory                     = AWSGroup + "/instance-category"
	LabelInstanceFamily                       = AWSGroup + "/instance-family"
	LabelInstanceGeneration                   = AWSGroup + "/instance-generation"
	LabelInstanceSize                         = AWSGroup + "/instance-size"
	LabelInstanceCPU                          = AWSGroup + "/instance-cpu"
	LabelInstanceCPUManufacturer              = AWSGroup + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz    = AWSGroup + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                       = AWSGroup + "/instance-memory"
	LabelInstanceEBSBandwidth                 = AWSGroup + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = AWSGroup + "/instance-network-bandwidth"
	LabelInstanceLocalNVME                    = AWSGroup + "/instance-local-nvme"
	LabelInstanceGPUName                      = AWSGroup + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = AWSGroup + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = AWSGroup + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = AWSGroup + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = AWSGroup + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = AWSGroup + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = AWSGroup + "/instance-accelerator-count"
	LabelInstanceCapabilityFlex               = AWSGroup + "/instance-capability-flex"
	LabelInstanceTenancy                      = AWSGroup + "/instance-tenancy"
	LabelCapacityReservationID                = AWSGroup + "/capacity-reservation-id"
	LabelCapacityReservationType              = AWSGroup + "/capacity-reservation-type"
	LabelCapacityReservationInterruptible     = AWSGroup + "/capacity-reservation-interruptible"
	LabelPlacementGroupID                     = AWSGroup + "/placement-group-id"
	LabelPlacementGroupPartition              = AWSGroup + "/placement-group-partition"
	LabelNodeClass                            = AWSGroup + "/ec2nodeclass"
	LabelTopologyZoneID                       = "topology.k8s.aws/zone-id"

	// EC2NodeClassHashAnnotationKey is the drift hash of the EC2NodeClass.
	EC2NodeClassHashAnnotationKey = AWSGroup + "/ec2nodeclass-hash"
)

// Keys of the legacy APIs that v1 replaced (what `convert --workloads` rewrites).
const (
	LegacyProvisionerNameLabelKey       = Group + "/provisioner-name"
	LegacyDoNotEvictAnnotationKey       = Group + "/do-not-evict"
	LegacyDoNotConsolidateAnnotationKey = Group + "/do-not-consolidate"
)
