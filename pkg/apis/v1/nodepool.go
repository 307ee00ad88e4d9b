package v1

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool is karpenter.sh/v1 NodePool.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodePoolSpec `json:"spec"`
	// Status is kept opaque: it is written by the controller, never by us.
	Status json.RawMessage `json:"status,omitempty"`
}

// NodePoolSpec is the desired state of a NodePool.
type NodePoolSpec struct {
	Template   NodeClaimTemplate `json:"template"`
	Disruption Disruption        `json:"disruption,omitzero"`
	// Limits caps the resources the NodePool may provision (a "nodes" key is
	// allowed for static pools).
	Limits corev1.ResourceList `json:"limits,omitempty"`
	Weight *int32              `json:"weight,omitempty"`
	// Replicas makes the NodePool static (alpha, Karpenter v1.8+).
	Replicas *int64 `json:"replicas,omitempty"`
}

// Disruption says how and when Karpenter may disrupt the NodePool's nodes.
// ConsolidateAfter is required by the v1 CRD; the zero value marshals as
// "Never", so set it explicitly.
type Disruption struct {
	ConsolidateAfter    NillableDuration    `json:"consolidateAfter"`
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	Budgets             []Budget            `json:"budgets,omitempty"`
}

// IsZero lets an entirely unset Disruption be omitted (the CRD defaults it).
func (d Disruption) IsZero() bool {
	return d.ConsolidateAfter.Duration == nil && d.ConsolidationPolicy == "" && d.Budgets == nil
}

// Budget limits how many nodes may be disrupted at once.
type Budget struct {
	Reasons  []DisruptionReason `json:"reasons,omitempty"`
	Nodes    string             `json:"nodes"`
	Schedule *string            `json:"schedule,omitempty"`
	Duration *metav1.Duration   `json:"duration,omitempty"`
}

// ConsolidationPolicy is when Karpenter consolidates.
type ConsolidationPolicy string

// Consolidation policies of v1.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 ConsolidationPolicy = "Balanced"
)

// DisruptionReason is the reason a budget applies to.
type DisruptionReason string

// Disruption reasons of v1.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// NodeClaimTemplate is the template of the NodeClaims a NodePool creates.
type NodeClaimTemplate struct {
	ObjectMeta TemplateMetadata      `json:"metadata,omitzero"`
	Spec       NodeClaimTemplateSpec `json:"spec"`
}

// TemplateMetadata is the labels and annotations put on the nodes.
type TemplateMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// IsZero lets empty template metadata be omitted.
func (m TemplateMetadata) IsZero() bool { return len(m.Labels) == 0 && len(m.Annotations) == 0 }

// NodeClaimTemplateSpec is the spec of the template.
type NodeClaimTemplateSpec struct {
	Taints        []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements  []NodeSelectorRequirementWithMinValues `json:"requirements"`
	NodeClassRef  *NodeClassReference                    `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long a draining node may live.
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the node lifetime; nil omits it (CRD default 720h), a
	// NillableDuration with a nil Duration writes "Never".
	ExpireAfter *NillableDuration `json:"expireAfter,omitempty"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement with
// an optional minimum number of distinct values the scheduler must keep.
type NodeSelectorRequirementWithMinValues struct {
	Key       string                      `json:"key"`
	Operator  corev1.NodeSelectorOperator `json:"operator"`
	Values    []string                    `json:"values,omitempty"`
	MinValues *int                        `json:"minValues,omitempty"`
}

// NodeClassReference points at the cloud-provider node class.
type NodeClassReference struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}
