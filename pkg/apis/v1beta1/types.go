package v1beta1

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups, versions and well-known values of v1beta1.
const (
	APIVersion       = "karpenter.sh/v1beta1"
	AWSAPIVersion    = "karpenter.k8s.aws/v1beta1"
	NodePoolKind     = "NodePool"
	EC2NodeClassKind = "EC2NodeClass"

	ConsolidationPolicyWhenEmpty         = "WhenEmpty"
	ConsolidationPolicyWhenUnderutilized = "WhenUnderutilized"

	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyUbuntu       = "Ubuntu"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"

	// Never disables expiry or consolidation.
	Never = "Never"
)

// NillableDuration is a Go duration or "Never" (Duration nil); it marshals
// the canonical Go form ("1m" becomes "1m0s") as Karpenter v0.32 did.
type NillableDuration struct {
	Duration *time.Duration
}

// NewNillableDuration returns a set duration.
func NewNillableDuration(d time.Duration) NillableDuration { return NillableDuration{Duration: &d} }

// UnmarshalJSON accepts "Never" or a Go duration string.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\" or %q, got %s", Never, b)
	}
	if s == Never {
		d.Duration = nil
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s or 720h, or %q: %w", Never, err)
	}
	d.Duration = &v
	return nil
}

// MarshalJSON writes the canonical duration or "Never".
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.Duration == nil {
		return json.Marshal(Never)
	}
	return json.Marshal(d.Duration.String())
}

// NodePool is karpenter.sh/v1beta1 NodePool.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodePoolSpec `json:"spec"`
	// Status is kept opaque; converters drop it.
	Status json.RawMessage `json:"status,omitempty"`
}

// NodePoolSpec is the desired state of a v1beta1 NodePool.
type NodePoolSpec struct {
	Template   NodeClaimTemplate   `json:"template"`
	Disruption Disruption          `json:"disruption"`
	Limits     corev1.ResourceList `json:"limits,omitempty"`
	Weight     *int32              `json:"weight,omitempty"`
}

// Disruption of v1beta1. Unset fields take the CRD defaults
// (WhenUnderutilized, expireAfter 720h, budgets [{nodes: 10%}]).
type Disruption struct {
	ConsolidateAfter    *NillableDuration `json:"consolidateAfter,omitempty"`
	ConsolidationPolicy string            `json:"consolidationPolicy,omitempty"`
	ExpireAfter         *NillableDuration `json:"expireAfter,omitempty"`
	Budgets             []Budget          `json:"budgets,omitempty"`
}

// Budget limits how many nodes may be disrupted at once (v0.33+).
type Budget struct {
	Nodes    string           `json:"nodes"`
	Schedule *string          `json:"schedule,omitempty"`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the NodeClaim template. Its metadata is always
// written (`metadata: {}` when empty), as v0.32 did.
type NodeClaimTemplate struct {
	ObjectMeta TemplateMetadata `json:"metadata"`
	Spec       NodeClaimSpec    `json:"spec"`
}

// TemplateMetadata is the labels and annotations put on the nodes.
type TemplateMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimSpec is the spec of the template.
type NodeClaimSpec struct {
	Taints        []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements  []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Resources     ResourceRequirements                   `json:"resources,omitzero"`
	Kubelet       *KubeletConfiguration                  `json:"kubelet,omitempty"`
	NodeClassRef  *NodeClassReference                    `json:"nodeClassRef"`
}

// NodeSelectorRequirementWithMinValues is a requirement with an optional
// minimum number of values (v0.35+).
type NodeSelectorRequirementWithMinValues struct {
	Key       string                      `json:"key"`
	Operator  corev1.NodeSelectorOperator `json:"operator"`
	Values    []string                    `json:"values,omitempty"`
	MinValues *int                        `json:"minValues,omitempty"`
}

// ResourceRequirements are the static resource requests of a NodeClaim.
type ResourceRequirements struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// IsZero lets empty requirements be omitted.
func (r ResourceRequirements) IsZero() bool { return len(r.Requests) == 0 }

// NodeClassReference points at the node class; Kind and APIVersion are optional.
type NodeClassReference struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// KubeletConfiguration is the v1beta1 kubelet block of a NodePool.
type KubeletConfiguration struct {
	ClusterDNS                  []string                   `json:"clusterDNS,omitempty"`
	MaxPods                     *int32                     `json:"maxPods,omitempty"`
	PodsPerCore                 *int32                     `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]string          `json:"systemReserved,omitempty"`
	KubeReserved                map[string]string          `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string          `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string          `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32                     `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32                     `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32                     `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool                      `json:"cpuCFSQuota,omitempty"`
}

// EC2NodeClass is karpenter.k8s.aws/v1beta1 EC2NodeClass.
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EC2NodeClassSpec `json:"spec"`
	Status json.RawMessage  `json:"status,omitempty"`
}

// EC2NodeClassSpec is the v1beta1 AWS node configuration.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms        []SubnetSelectorTerm        `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	AssociatePublicIPAddress   *bool                       `json:"associatePublicIPAddress,omitempty"`
	AMISelectorTerms           []AMISelectorTerm           `json:"amiSelectorTerms,omitempty"`
	AMIFamily                  *string                     `json:"amiFamily"`
	UserData                   *string                     `json:"userData,omitempty"`
	Role                       string                      `json:"role,omitempty"`
	InstanceProfile            *string                     `json:"instanceProfile,omitempty"`
	Tags                       map[string]string           `json:"tags,omitempty"`
	BlockDeviceMappings        []*BlockDeviceMapping       `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy        *string                     `json:"instanceStorePolicy,omitempty"`
	DetailedMonitoring         *bool                       `json:"detailedMonitoring,omitempty"`
	MetadataOptions            *MetadataOptions            `json:"metadataOptions,omitempty"`
	Context                    *string                     `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or id.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// AMISelectorTerm selects AMIs by tags, id, name and owner.
type AMISelectorTerm struct {
	Tags  map[string]string `json:"tags,omitempty"`
	ID    string            `json:"id,omitempty"`
	Name  string            `json:"name,omitempty"`
	Owner string            `json:"owner,omitempty"`
}

// MetadataOptions are the IMDS settings (default hop limit 2 in v1beta1).
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
	RootVolume bool         `json:"rootVolume,omitempty"`
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
