package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
)

// OverlayDir builds DIR/overlays/ENV with pkg/generate.
type OverlayDir struct{ Dir, Env string }

// Objects builds the overlay and decodes its objects.
func (o OverlayDir) Objects(context.Context) ([]*unstructured.Unstructured, error) {
	b, err := generate.BuildOverlay(o.Dir, o.Env)
	if err != nil {
		return nil, err
	}
	return DecodeObjects(b)
}

// StaticOverlay is a fixed list of objects (tests, the sandbox).
type StaticOverlay []*unstructured.Unstructured

// Objects returns the list.
func (o StaticOverlay) Objects(context.Context) ([]*unstructured.Unstructured, error) { return o, nil }

// DecodeObjects decodes a multi-document YAML stream.
func DecodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
