package kube

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// StateStore keeps one document (the rollout journal) under one key of a
// ConfigMap in the tool's namespace, so every machine that reaches the
// cluster sees the same state. Writers are expected to hold the Lease; a
// write therefore replaces the document, retrying on version conflicts.
type StateStore struct {
	Client      kubernetes.Interface
	Namespace   string
	Name        string
	Key         string
	Environment string

	// last is the ConfigMap as this store last read or wrote it: the next
	// write updates it without reading it first (a run saves its journal
	// about once per pod it moves); a conflict reads it again.
	mu   sync.Mutex
	last *corev1.ConfigMap
}

// Load returns the stored document, or nil when there is none yet.
func (s *StateStore) Load(ctx context.Context) ([]byte, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	s.mu.Lock()
	s.last = cm
	s.mu.Unlock()
	v, ok := cm.Data[s.Key]
	if !ok {
		return nil, nil
	}
	return []byte(v), nil
}

// Save writes the document, creating the ConfigMap (and the namespace) when
// missing.
func (s *StateStore) Save(ctx context.Context, doc []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
		cm, err := s.last, error(nil)
		s.last = nil // read again unless this write succeeds
		if cm == nil {
			cm, err = cms.Get(ctx, s.Name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			if err := EnsureNamespace(ctx, s.Client, s.Namespace); err != nil {
				return err
			}
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: s.Name, Namespace: s.Namespace,
				Labels: map[string]string{LabelManagedBy: FieldManager, LabelEnvironment: s.Environment, LabelComponent: "journal"},
			}, Data: map[string]string{s.Key: string(doc)}}
			created, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
			if err == nil {
				s.last = created
			}
			return err
		}
		if err != nil {
			return err
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[s.Key] = string(doc)
		updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			s.last = updated
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("write state ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// EnsureNamespace creates namespace if it does not exist.
func EnsureNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{LabelManagedBy: FieldManager}}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}
