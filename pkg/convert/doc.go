// Package convert turns legacy Karpenter manifests into current ones:
// v1alpha5 Provisioner and v1alpha1 AWSNodeTemplate into v1beta1 NodePool
// and EC2NodeClass, byte-compatible with aws/karpenter's karpenter-convert
// v0.32.x, and v1beta1 into v1 (the conversion Karpenter's webhooks did
// until v1.0.x). It also rewrites workloads that use the legacy label and
// annotation keys. Read parses the input, Convert converts, Encode prints.
package convert
