package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Env is the environment the demo generates overlays for and applies by
// default; DevEnv is the control plane's default (see Options.Environment).
const (
	Env    = "prod"
	DevEnv = "dev"
)

// stepGenerate runs the generate action as the generate command does
// (defaults, overlays dev, staging and prod), adapts the tree to the
// environment, and builds the run's overlay with kustomize, as apply does:
// those objects are what the demo applies.
func (r *runner) stepGenerate(ctx context.Context) (string, error) {
	dir := filepath.Join(r.opts.OutDir, "karpenter")
	rep, err := (&action.Generate{Options: generate.DefaultOptions(), Tree: generate.TreeOptions{Dir: dir, Envs: []string{"dev", "staging", "prod"}}}).Run(ctx, &r.inv)
	if err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	env := r.opts.Environment
	adapted, err := r.env.PrepareTree(dir, env)
	if err != nil {
		return "", err
	}
	objs, err := plan.OverlayDir{Dir: dir, Env: env}.Objects(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	for _, o := range objs {
		if o.GetKind() == apisv1.NodePoolKind {
			names = append(names, o.GetName())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("overlay %s built no NodePool", env)
	}
	detail := fmt.Sprintf("%d NodePools (%s), %d objects in overlay %s, %d files in %s, %d warnings",
		len(names), strings.Join(names, ", "), len(objs), env, len(rep.Tree.Files), dir, len(rep.Warnings))
	if adapted != "" {
		detail += "; " + adapted
	}
	return detail, nil
}
