package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
)

// Env is the environment the demo generates overlays for and applies by
// default; DevEnv is the control plane's default (see Options.Environment).
const (
	Env    = "prod"
	DevEnv = "dev"
)

// stepGenerate runs pkg/generate as the generate command does (defaults,
// overlays dev, staging and prod) and builds the prod overlay with
// kustomize, as apply does; those objects are what the demo applies.
func (r *runner) stepGenerate(ctx context.Context) (string, error) {
	dir := filepath.Join(r.opts.OutDir, "karpenter")
	rep, err := generate.Run(ctx, &r.inv, generate.DefaultOptions(), generate.TreeOptions{Dir: dir, Envs: []string{"dev", "staging", "prod"}})
	if err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	env := r.opts.Environment
	adapted, err := r.env.PrepareTree(dir, env)
	if err != nil {
		return "", err
	}
	built, err := generate.BuildOverlay(dir, env)
	if err != nil {
		return "", fmt.Errorf("build overlay %s: %w", env, err)
	}
	objs, err := decodeObjects(built)
	if err != nil {
		return "", fmt.Errorf("overlay %s: %w", env, err)
	}
	r.pools = nil
	var names []string
	for _, o := range objs {
		if o.GetKind() != apisv1.NodePoolKind {
			continue
		}
		np, err := decodeNodePool(o)
		if err != nil {
			return "", err
		}
		r.pools = append(r.pools, *np)
		names = append(names, np.Name)
	}
	if len(r.pools) == 0 {
		return "", fmt.Errorf("overlay %s built no NodePool", env)
	}
	detail := fmt.Sprintf("%d NodePools (%s), %d objects in overlay %s, %d files in %s, %d warnings",
		len(r.pools), strings.Join(names, ", "), len(objs), env, len(rep.Tree.Files), dir, len(rep.Warnings))
	if adapted != "" {
		detail += "; " + adapted
	}
	return detail, nil
}

func decodeNodePool(u *unstructured.Unstructured) (*apisv1.NodePool, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", u.GetName(), err)
	}
	var np apisv1.NodePool
	if err := json.Unmarshal(b, &np); err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", u.GetName(), err)
	}
	return &np, nil
}

// decodeObjects splits a built multi-document YAML stream into objects.
func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}
