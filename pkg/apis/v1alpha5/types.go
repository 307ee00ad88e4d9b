package v1alpha5

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API versions and kinds of the legacy API.
const (
	APIVersion          = "karpenter.sh/v1alpha5"
	AWSAPIVersion       = "karpenter.k8s.aws/v1alpha1"
	ProvisionerKind     = "Provisioner"
	AWSNodeTemplateKind = "AWSNodeTemplate"
)

// Provisioner is karpenter.sh/v1alpha5 Provisioner.
type Provisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProvisionerSpec `json:"spec,omitempty"`
	Status json.RawMessage `json:"status,omitempty"`
}

// ProvisionerSpec is the desired state of a Provisioner.
type ProvisionerSpec struct {
	Annotations   map[string]string                `json:"annotations,omitempty"`
	Labels        map[string]string                `json:"labels,omitempty"`
	Taints        []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                   `json:"startupTaints,omitempty"`
	Requirements  []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	// KubeletConfiguration are kubelet flags for the nodes.
	KubeletConfiguration *KubeletConfiguration `json:"kubeletConfiguration,omitempty"`
	// Provider is the inline AWS provider block; decode it with DecodeProvider.
	Provider               json.RawMessage     `json:"provider,omitempty"`
	ProviderRef            *MachineTemplateRef `json:"providerRef,omitempty"`
	TTLSecondsAfterEmpty   *int64              `json:"ttlSecondsAfterEmpty,omitempty"`
	TTLSecondsUntilExpired *int64              `json:"ttlSecondsUntilExpired,omitempty"`
	Limits                 *Limits             `json:"limits,omitempty"`
	Weight                 *int32              `json:"weight,omitempty"`
	Consolidation          *Consolidation      `json:"consolidation,omitempty"`
}

// MachineTemplateRef points at an AWSNodeTemplate.
type MachineTemplateRef struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// Limits caps the resources a Provisioner may launch.
type Limits struct {
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// Consolidation turns consolidation on.
type Consolidation struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// KubeletConfiguration is the v1alpha5 kubelet block.
type KubeletConfiguration struct {
	ClusterDNS                  []string                   `json:"clusterDNS,omitempty"`
	ContainerRuntime            *string                    `json:"containerRuntime,omitempty"`
	MaxPods                     *int32                     `json:"maxPods,omitempty"`
	PodsPerCore                 *int32                     `json:"podsPerCore,omitempty"`
	SystemReserved              corev1.ResourceList        `json:"systemReserved,omitempty"`
	KubeReserved                corev1.ResourceList        `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string          `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string          `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32                     `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32                     `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32                     `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool                      `json:"cpuCFSQuota,omitempty"`
}

// AWSNodeTemplate is karpenter.k8s.aws/v1alpha1 AWSNodeTemplate.
type AWSNodeTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AWSNodeTemplateSpec `json:"spec,omitempty"`
	Status json.RawMessage     `json:"status,omitempty"`
}

// AWSNodeTemplateSpec is the AWS provider plus the template-only fields.
type AWSNodeTemplateSpec struct {
	UserData           *string           `json:"userData,omitempty"`
	AMISelector        map[string]string `json:"amiSelector,omitempty"`
	DetailedMonitoring *bool             `json:"detailedMonitoring,omitempty"`
	AWS                `json:",inline"`
}

// AWS is the AWS provider configuration: the inline Provisioner
// spec.provider block, and the shared part of an AWSNodeTemplate.
type AWS struct {
	APIVersion            string                `json:"apiVersion,omitempty"`
	Kind                  string                `json:"kind,omitempty"`
	AMIFamily             *string               `json:"amiFamily,omitempty"`
	Context               *string               `json:"context,omitempty"`
	InstanceProfile       *string               `json:"instanceProfile,omitempty"`
	SubnetSelector        map[string]string     `json:"subnetSelector,omitempty"`
	SecurityGroupSelector map[string]string     `json:"securityGroupSelector,omitempty"`
	Tags                  map[string]string     `json:"tags,omitempty"`
	LaunchTemplateName    *string               `json:"launchTemplate,omitempty"`
	MetadataOptions       *MetadataOptions      `json:"metadataOptions,omitempty"`
	BlockDeviceMappings   []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
}

// MetadataOptions are the IMDS settings.
type MetadataOptions struct {
	HTTPEndpoint            *string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        *string `json:"httpProtocolIPv6,omitempty"`
	HTTPPutResponseHopLimit *int64  `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping is one EBS volume attached at launch.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
}

// BlockDevice is the EBS configuration of a mapping.
type BlockDevice struct {
	DeleteOnTermination *bool              `json:"deleteOnTermination,omitempty"`
	Encrypted           *bool              `json:"encrypted,omitempty"`
	IOPS                *int64             `json:"iops,omitempty"`
	KMSKeyID            *string            `json:"kmsKeyID,omitempty"`
	SnapshotID          *string            `json:"snapshotID,omitempty"`
	Throughput          *int64             `json:"throughput,omitempty"`
	VolumeSize          *resource.Quantity `json:"volumeSize,omitempty"`
	VolumeType          *string            `json:"volumeType,omitempty"`
}
