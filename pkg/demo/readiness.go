package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// stepReadiness runs pkg/readiness over the discovered inventory, telling
// it which node-group labels the generated NodePools keep (so pods pinned
// to them are not reported), as the readiness command does after generate.
func (r *runner) stepReadiness(_ context.Context) (string, error) {
	opts := readiness.Options{}
	if res, err := generate.Generate(&r.inv, generate.DefaultOptions()); err == nil {
		keys := map[string]bool{}
		for _, p := range res.NodePools {
			for k := range p.Spec.Template.ObjectMeta.Labels {
				keys[k] = true
			}
		}
		opts.NodeGroupLabels = sortedKeys(keys)
		// Where the Karpenter controller would live (plan's decision): a
		// blocker when nowhere once the groups are removed.
		if _, check, err := rollout.DecideController(&r.inv, config.Default(Env), rollout.ControllerOptions{Values: res.HelmValues, ValuesFrom: "generate's Helm values"}); err == nil {
			opts.Controller = &check
		}
	}
	rep := readiness.Evaluate(&r.inv, opts)
	if err := writeJSON(filepath.Join(r.opts.OutDir, "readiness.json"), rep); err != nil {
		return "", err
	}
	kinds := map[string]int{}
	for _, f := range rep.Findings {
		kinds[f.ID] += len(f.Objects)
		r.sum.Findings = append(r.sum.Findings, fmt.Sprintf("%s (%s): %v", f.ID, f.Severity, f.Objects))
	}
	parts := make([]string, 0, len(kinds))
	for _, k := range sortedKeys(kinds) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, kinds[k]))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d blockers, %d warnings %v", rep.Blockers, rep.Warnings, parts), nil
}
