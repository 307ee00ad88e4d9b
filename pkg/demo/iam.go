package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
)

// stepIAMPlan builds pkg/iam's desired state from the inventory (IRSA with
// the cluster's OIDC provider, aws-auth for a CONFIG_MAP cluster) and plans
// it against the account, as `iam plan` does.
func (r *runner) stepIAMPlan(ctx context.Context) (string, error) {
	a, err := r.cfg.IAM(&r.inv, desired.Options{CreateOIDCProvider: true}, filepath.Join(r.opts.OutDir, "iam-journal.json"))
	if err != nil {
		return "", err
	}
	r.iam = a
	p, err := a.Plan(ctx, nil)
	if err != nil {
		return "", err
	}
	if err := writeJSON(filepath.Join(r.opts.OutDir, "iam-plan.json"), p); err != nil {
		return "", err
	}
	if b := p.Blocked(); len(b) > 0 {
		return "", fmt.Errorf("IAM plan blocked: %s %s: %s", b[0].Action, b[0].Ref, b[0].Reason)
	}
	r.iamPlan = p
	counts := map[string]int{}
	for _, it := range p.Items {
		counts[string(it.Action)]++
	}
	var parts []string
	for _, a := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
	}
	return fmt.Sprintf("%d objects (%s identity, node access by %s): %s", len(p.Items), p.Identity, p.NodeAccess, strings.Join(parts, ", ")), nil
}

// stepIAMApply applies the plan as `iam apply --yes` does, saving the
// journal that rollback's Down uses. A journal an earlier run left in the
// output directory is of another sandbox's account: it is started afresh.
func (r *runner) stepIAMApply(ctx context.Context) (string, error) {
	if err := os.Remove(r.iam.Journal); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("start a new IAM journal: %w", err)
	}
	j, err := r.iam.Apply(ctx, r.iamPlan, nil)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d changes applied, journal %s", len(j.Entries), r.iam.Journal), nil
}

// iamDown removes what iam apply created (tagged as the tool's).
func (r *runner) iamDown(ctx context.Context) (int, error) {
	items, err := r.iam.Delete(ctx, action.IAMDelete{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		if it.Action == iam.ActionDelete {
			n++
		}
	}
	return n, nil
}
