package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
)

// iamClients are pkg/iam's collaborators on the sandbox (the actions'
// one wiring).
func (r *runner) iamClients() iam.Clients { return r.cfg.IAMClients(r.iamDesired) }

// stepIAMPlan builds pkg/iam's desired state from the inventory (IRSA with
// the cluster's OIDC provider, aws-auth for a CONFIG_MAP cluster) and plans
// it against the account, as `iam plan` does.
func (r *runner) stepIAMPlan(ctx context.Context) (string, error) {
	t, err := iam.TargetFromInventory(&r.inv)
	if err != nil {
		return "", err
	}
	d, err := iam.Build(t, iam.Options{CreateOIDCProvider: true})
	if err != nil {
		return "", err
	}
	r.iamDesired = d
	p, err := iam.BuildPlan(ctx, d, r.iamClients(), iam.PlanOptions{})
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
// journal that rollback's Down uses.
func (r *runner) stepIAMApply(ctx context.Context) (string, error) {
	path := filepath.Join(r.opts.OutDir, "iam-journal.json")
	j, err := iam.Apply(ctx, r.iamPlan, r.iamClients(), iam.ApplyOptions{Now: r.env.Now, Save: func(j *iam.Journal) error { return writeJSON(path, j) }})
	if err != nil {
		return "", err
	}
	r.iamJournal = j
	return fmt.Sprintf("%d changes applied, journal %s", len(j.Entries), path), nil
}

// iamDown removes what iam apply created (tagged as the tool's).
func (r *runner) iamDown(ctx context.Context) (int, error) {
	items, err := iam.Down(ctx, r.iamDesired, r.iamJournal, r.iamClients(), iam.DownOptions{})
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
