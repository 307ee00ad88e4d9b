// Package v1 holds the Go types of Karpenter's current API: NodePool
// (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1), written from the
// official CRDs of aws/karpenter-provider-aws v1.14.1 (its Go module's
// pkg/apis/crds, which TestTypesCoverCRD reads through testenv.CRDDir), plus
// the well-known label, annotation and taint keys. The types marshal to
// minimal YAML (unset optional fields are omitted) and are what `convert`
// produces and `generate` writes.
package v1
