package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// fieldManager names this package in server-side apply.
const fieldManager = "karpenter-migrate-testenv"

// pollInterval is how often the WaitFor helpers look again.
const pollInterval = 200 * time.Millisecond

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Namespace creates a namespace named after the test, waits until pods can
// be created in it, and deletes it when the test ends. Tests sharing a
// control plane keep apart by using one namespace each.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx := t.Context()
	name := namespaceName(t.Name())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	if err := e.waitServiceAccount(ctx, name); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	return name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName turns a test name into a unique DNS label.
func namespaceName(testName string) string {
	base := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return base + "-" + hex.EncodeToString(suffix)
}

// ApplyCRDs installs every *.yaml file in dir by server-side apply and waits
// until each CustomResourceDefinition is Established and served.
func (e *Env) ApplyCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("list CRDs in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.yaml CRDs in %s", dir)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read CRD: %w", err)
		}
		objs, err := e.ApplyYAML(ctx, "", data)
		if err != nil {
			return fmt.Errorf("apply CRDs from %s: %w", f, err)
		}
		for _, o := range objs {
			names = append(names, o.GetName())
		}
	}
	for _, name := range names {
		err := e.WaitFor(ctx, "CRD "+name+" established", func(ctx context.Context) (bool, error) {
			crd, err := e.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conditions {
				if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	e.mapper.Reset()
	return nil
}

// ApplyYAML server-side applies every object in data, a stream of YAML
// documents, and returns them as the server stored them. Namespaced objects
// without a namespace go to namespace ("" means default).
func (e *Env) ApplyYAML(ctx context.Context, namespace string, data []byte) ([]*unstructured.Unstructured, error) {
	objs, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i, obj := range objs {
		ri, err := e.resourceFor(ctx, obj, namespace)
		if err != nil {
			return out, fmt.Errorf("document %d: %w", i+1, err)
		}
		applied, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return out, fmt.Errorf("apply %s (document %d): %w", describe(obj), i+1, err)
		}
		out = append(out, applied)
	}
	return out, nil
}

// ServerDryRun sends every object in data, a stream of YAML documents, to
// the API server with dryRun=All and strict field validation, as a create
// (or an update when the object already exists), so that the OpenAPI schema,
// CEL rules and unknown fields are all checked while nothing is stored. The
// error names the failing document and wraps the server's
// *apierrors.StatusError: 422 Invalid for schema and CEL violations, 400
// BadRequest for unknown or duplicate fields.
func (e *Env) ServerDryRun(ctx context.Context, data []byte) error {
	objs, err := decodeYAML(data)
	if err != nil {
		return err
	}
	for i, obj := range objs {
		ri, err := e.resourceFor(ctx, obj, "")
		if err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
		if err := dryRun(ctx, ri, obj); err != nil {
			return fmt.Errorf("dry-run %s (document %d): %w", describe(obj), i+1, err)
		}
	}
	return nil
}

// dryRun validates obj by a dry-run create, or a dry-run update of the
// stored object's version when it already exists.
func dryRun(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	_, err := ri.Create(ctx, obj, metav1.CreateOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldManager:    fieldManager,
		FieldValidation: metav1.FieldValidationStrict,
	})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj = obj.DeepCopy()
	obj.SetResourceVersion(current.GetResourceVersion())
	_, err = ri.Update(ctx, obj, metav1.UpdateOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldManager:    fieldManager,
		FieldValidation: metav1.FieldValidationStrict,
	})
	return err
}

// resourceFor maps obj's kind to a dynamic client, rediscovering the API
// once when the kind is new (a CRD installed since the last lookup).
func (e *Env) resourceFor(ctx context.Context, obj *unstructured.Unstructured, namespace string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		e.mapper.Reset()
		mapping, err = e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("map %s to a resource: %w", gvk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return e.Dynamic.Resource(mapping.Resource), nil
	}
	if obj.GetNamespace() == "" {
		if namespace == "" {
			namespace = metav1.NamespaceDefault
		}
		obj.SetNamespace(namespace)
	}
	return e.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
}

// decodeYAML splits a YAML stream into objects, skipping empty documents.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read YAML document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", i, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
}

// describe names an object for error messages: Kind namespace/name.
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return obj.GetKind() + " " + name
}

// WaitFor polls cond until it reports true, returns an error, or ctx ends;
// what names the awaited state in the error. A NotFound error from cond
// means "not yet"; any other error ends the wait.
func (e *Env) WaitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var notFound error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		done, err := cond(ctx)
		if apierrors.IsNotFound(err) {
			notFound = err
			return false, nil
		}
		return done, err
	})
	switch {
	case err == nil:
		return nil
	case notFound != nil && ctx.Err() != nil:
		return fmt.Errorf("wait for %s: %w (last: %v)", what, err, notFound)
	default:
		return fmt.Errorf("wait for %s: %w", what, err)
	}
}

// WaitForNodesReady waits until every named node reports Ready.
func (e *Env) WaitForNodesReady(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := e.WaitFor(ctx, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
			n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return NodeReady(n), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// WaitForPodsRunning waits until exactly n pods in namespace match selector
// (a label selector) and all of them are Running and Ready, not being
// deleted, and returns them.
func (e *Env) WaitForPodsRunning(ctx context.Context, namespace, selector string, n int) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := e.WaitFor(ctx, fmt.Sprintf("%d running pods %q in %s", n, selector, namespace), func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == n && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return !PodHealthy(&p) }), nil
	})
	return pods, err
}

// NodeReady reports whether n's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodHealthy reports whether p counts towards a PodDisruptionBudget: Running,
// Ready, and not being deleted.
func PodHealthy(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
