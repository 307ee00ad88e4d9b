// Package v1beta1 holds the Go types of Karpenter's v1beta1 API (v0.32–v0.37):
// NodePool (karpenter.sh/v1beta1) and EC2NodeClass (karpenter.k8s.aws/v1beta1),
// written from the official CRDs of aws/karpenter-provider-aws v0.37.8
// (checked against the v0.36.2 module's pkg/apis/crds, the newest v1beta1
// module the proxy serves, by TestTypesCoverCRD). Fields that v0.32 did not have are omitempty, so a
// v1alpha5 conversion marshals exactly as karpenter-convert v0.32.x printed it.
package v1beta1
