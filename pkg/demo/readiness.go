package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
)

// stepReadiness runs the readiness action over the discovered inventory, as
// the readiness command does.
func (r *runner) stepReadiness(_ context.Context) (string, error) {
	cfg := config.Default(r.opts.Environment)
	rep := (&action.Readiness{Config: &cfg}).Run(&r.inv).Report
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
