package aws

import (
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
)

// KubeTaint is a managed node group's taint as Kubernetes spells it
// (EKS: NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE).
func KubeTaint(t ekstypes.Taint) corev1.Taint {
	e := corev1.TaintEffectNoSchedule
	switch t.Effect {
	case ekstypes.TaintEffectNoExecute:
		e = corev1.TaintEffectNoExecute
	case ekstypes.TaintEffectPreferNoSchedule:
		e = corev1.TaintEffectPreferNoSchedule
	}
	return corev1.Taint{Key: awssdk.ToString(t.Key), Value: awssdk.ToString(t.Value), Effect: e}
}

// EKSTaint is a Kubernetes taint as a managed node group's config spells it.
func EKSTaint(t corev1.Taint) ekstypes.Taint {
	e := ekstypes.TaintEffectNoSchedule
	switch t.Effect {
	case corev1.TaintEffectNoExecute:
		e = ekstypes.TaintEffectNoExecute
	case corev1.TaintEffectPreferNoSchedule:
		e = ekstypes.TaintEffectPreferNoSchedule
	}
	return ekstypes.Taint{Key: &t.Key, Value: &t.Value, Effect: e}
}
