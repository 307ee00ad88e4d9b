package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	iamsdk "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

// iamClients are pkg/iam's collaborators: real SDK clients on the
// sandbox's AWS fake and the aws-auth editor on its cluster.
func (r *runner) iamClients() iam.Clients {
	cfg := r.clients.AWS
	return iam.Clients{
		IAM: iamsdk.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), EventBridge: eventbridge.NewFromConfig(cfg),
		EKS: eks.NewFromConfig(cfg), EC2: ec2.NewFromConfig(cfg),
		AWSAuth: &awsauth.Editor{Client: r.clients.Kube, BackupNamespace: Namespace, BackupDir: r.opts.OutDir, Now: r.sb.Now},
	}
}

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
	r.iamDesired, r.iamPlan = d, p
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
	j, err := iam.Apply(ctx, r.iamPlan, r.iamClients(), iam.ApplyOptions{Now: r.sb.Now, Save: func(j *iam.Journal) error { return writeJSON(path, j) }})
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
