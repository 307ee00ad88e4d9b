package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
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
	objs, err := rollout.DecodeObjects(built)
	if err != nil {
		return "", fmt.Errorf("overlay %s: %w", env, err)
	}
	r.pools = nil
	var names []string
	for _, o := range objs {
		if o.GetKind() != apisv1.NodePoolKind {
			continue
		}
		np, err := rollout.DecodeNodePool(o)
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
