package migrations

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:          "09_cluster_autoscaler",
		Purpose:     "scale Cluster Autoscaler to zero replicas (replicas recorded)",
		Destructive: true,
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			return run{s}.ClusterAutoscalerAt(ctx, 0)
		},
		Up:   func(ctx context.Context, s *rollout.Session) error { return run{s}.ScaleClusterAutoscaler(ctx, 0) },
		Down: func(ctx context.Context, s *rollout.Session) error { return run{s}.RestoreClusterAutoscaler(ctx) },
	})
}

// ScaleClusterAutoscaler records Cluster Autoscaler's replicas (once) and
// scales it to replicas.
func (s run) ScaleClusterAutoscaler(ctx context.Context, replicas int32) error {
	ca := s.Plan.ClusterAutoscaler
	if ca == nil {
		return nil
	}
	scale, err := s.Kube.AppsV1().Deployments(ca.Namespace).GetScale(ctx, ca.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Cluster Autoscaler scale %s/%s: %w", ca.Namespace, ca.Name, err)
	}
	if s.Journal.Recorded.ClusterAutoscaler == nil && !s.Options.DryRun {
		s.Journal.Recorded.ClusterAutoscaler = &plan.CARef{Namespace: ca.Namespace, Name: ca.Name, Replicas: scale.Spec.Replicas}
		if err := s.Save(ctx); err != nil {
			return err
		}
	}
	return s.setCAReplicas(ctx, ca.Namespace, ca.Name, scale.Spec.Replicas, replicas)
}

func (s run) setCAReplicas(ctx context.Context, ns, name string, from, to int32) error {
	if from == to {
		return nil
	}
	s.Change("scale Deployment %s/%s replicas %d -> %d", ns, name, from, to)
	if s.Options.DryRun {
		return nil
	}
	_, err := s.Kube.AppsV1().Deployments(ns).UpdateScale(ctx, name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: to},
	}, metav1.UpdateOptions{FieldManager: kube.FieldManager})
	if err != nil {
		return fmt.Errorf("scale Deployment %s/%s to %d: %w", ns, name, to, err)
	}
	return nil
}

// ClusterAutoscalerAt reports whether Cluster Autoscaler runs replicas.
func (s run) ClusterAutoscalerAt(ctx context.Context, replicas int32) (bool, string, error) {
	ca := s.Plan.ClusterAutoscaler
	if ca == nil {
		return true, "the plan has no Cluster Autoscaler", nil
	}
	scale, err := s.Kube.AppsV1().Deployments(ca.Namespace).GetScale(ctx, ca.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, fmt.Sprintf("Deployment %s/%s not found", ca.Namespace, ca.Name), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read Cluster Autoscaler scale: %w", err)
	}
	return scale.Spec.Replicas == replicas, fmt.Sprintf("Cluster Autoscaler at %d replicas", scale.Spec.Replicas), nil
}

// RestoreClusterAutoscaler scales Cluster Autoscaler back to its recorded replicas.
func (s run) RestoreClusterAutoscaler(ctx context.Context) error {
	rec := s.Journal.Recorded.ClusterAutoscaler
	if rec == nil {
		return nil
	}
	scale, err := s.Kube.AppsV1().Deployments(rec.Namespace).GetScale(ctx, rec.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Cluster Autoscaler scale: %w", err)
	}
	return s.setCAReplicas(ctx, rec.Namespace, rec.Name, scale.Spec.Replicas, rec.Replicas)
}
