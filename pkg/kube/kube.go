// Package kube holds the client-go helpers the rollout needs: cordon and
// PDB-safe drain (k8s.io/kubectl/pkg/drain), server-side apply of
// unstructured objects, the per-environment state ConfigMap and the
// coordination.k8s.io Lease that keeps two runs from interleaving.
//
// Every wait takes its time from an injected k8s.io/utils/clock so the
// sandbox can run the same code under simulated time.
package kube

// FieldManager is the server-side apply field manager and the value of the
// managed-by label on every object the tool writes.
const FieldManager = "karpenter-migrate"

// Labels the tool puts on the objects it creates.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	LabelEnvironment = "karpenter-migrate.io/environment"
	LabelComponent   = "karpenter-migrate.io/component"
)
