package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Karpenter API groups and the kinds the tool writes or reads.
var (
	NodePoolGVK      = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}
	NodeClaimGVK     = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}
	EC2NodeClassGVK  = schema.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"}
	KWOKNodeClassGVK = schema.GroupVersionKind{Group: "karpenter.kwok.sh", Version: "v1alpha1", Kind: "KWOKNodeClass"}
)

// KarpenterMapper maps the Karpenter kinds (all cluster-scoped) to their
// resources without discovery, so applies also work against fake dynamic
// clients. Wrap a discovery mapper with meta.MultiRESTMapper for others.
func KarpenterMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{NodePoolGVK, NodeClaimGVK, EC2NodeClassGVK, KWOKNodeClassGVK} {
		m.Add(gvk, meta.RESTScopeRoot)
	}
	return m
}

// Applier server-side applies unstructured objects with the tool's field
// manager, labelling each with the environment it belongs to.
type Applier struct {
	Dynamic     dynamic.Interface
	Mapper      meta.RESTMapper
	Environment string
	// DryRun asks the API server to validate without persisting.
	DryRun bool
}

func (a *Applier) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: no API resource for this kind (are the CRDs installed?): %w", gvk.Kind, obj.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.Dynamic.Resource(m.Resource), nil
}

// Apply server-side applies obj (force-owning conflicting fields, as
// `kubectl apply --server-side --force-conflicts`) and returns the result.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = FieldManager
	if a.Environment != "" {
		labels[LabelEnvironment] = a.Environment
	}
	obj.SetLabels(labels)
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	ri, err := a.resource(obj)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if a.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := ri.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		return nil, fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return out, nil
}

// Delete deletes obj if it exists and carries our managed-by label; it
// never deletes what the tool did not create.
func (a *Applier) Delete(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := a.resource(obj)
	if err != nil {
		return err
	}
	cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	if cur.GetLabels()[LabelManagedBy] != FieldManager {
		return nil
	}
	opts := metav1.DeleteOptions{}
	if a.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if err := ri.Delete(ctx, obj.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
