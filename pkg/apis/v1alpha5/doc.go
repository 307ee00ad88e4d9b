// Package v1alpha5 holds the Go types of Karpenter's legacy API (≤ v0.31):
// Provisioner (karpenter.sh/v1alpha5) and AWSNodeTemplate
// (karpenter.k8s.aws/v1alpha1), written from the official CRDs of
// aws/karpenter-provider-aws v0.31.5 (testdata/crds/v1alpha5).
package v1alpha5
