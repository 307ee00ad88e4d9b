package migrations

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// iamJournalKey is where IAMInfra keeps pkg/iam's journal in Recorded.Extra.
const iamJournalKey = "iam"

// IAMInfra runs the IAM steps through pkg/iam: each runbook group is
// planned (BuildPlan with Only) and applied, pkg/iam's journal lives in
// the rollout journal, and Down deletes everything the tool created for
// the cluster (once, for every group).
type IAMInfra struct {
	Desired *desired.State
	Clients iam.Clients
	Backoff iam.Backoff

	s        *rollout.Session
	downDone bool
}

// Bind implements rollout.SessionInfra.
func (x *IAMInfra) Bind(s *rollout.Session) { x.s = s }

func (x *IAMInfra) plan(ctx context.Context, group string) (*iam.Plan, error) {
	return iam.BuildPlan(ctx, x.Desired, x.Clients, iam.PlanOptions{Only: []iam.Group{iam.Group(group)}, Backoff: x.Backoff})
}

// Check reports whether every object of the group is up to date.
func (x *IAMInfra) Check(ctx context.Context, group string) (bool, string, error) {
	p, err := x.plan(ctx, group)
	if err != nil {
		return false, "", err
	}
	if len(p.Blocked()) > 0 || p.Changes() > 0 {
		return false, "", nil
	}
	return true, fmt.Sprintf("%d %s object(s) already in place", len(p.Items), group), nil
}

// Up applies the group's plan; in a dry run it reports what would change.
func (x *IAMInfra) Up(ctx context.Context, group string) error {
	p, err := x.plan(ctx, group)
	if err != nil {
		return err
	}
	if x.s.Options.DryRun {
		for _, it := range p.Items {
			if it.Action != iam.ActionNoop {
				x.s.Change("%s %s %s %s", it.Action, it.Kind, it.Name, it.Reason)
			}
		}
		if b := p.Blocked(); len(b) > 0 {
			return &iam.BlockedError{Items: b}
		}
		return nil
	}
	j, err := x.journal()
	if err != nil {
		return err
	}
	_, err = iam.Apply(ctx, p, x.Clients, iam.ApplyOptions{
		Backoff: x.Backoff, Journal: j, Now: x.s.Clock.Now,
		Save: func(j *iam.Journal) error {
			b, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if x.s.Journal.Recorded.Extra == nil {
				x.s.Journal.Recorded.Extra = map[string]json.RawMessage{}
			}
			x.s.Journal.Recorded.Extra[iamJournalKey] = b
			return x.s.Save(ctx)
		},
		OnStep: func(it iam.Item) { x.s.Change("%s %s %s", it.Action, it.Kind, it.Name) },
	})
	if err != nil {
		return err
	}
	if group == string(iam.GroupNodeAccess) && slices.ContainsFunc(p.Items, func(it iam.Item) bool { return it.Kind == iam.KindAWSAuth && it.Action == iam.ActionCreate }) {
		return x.recordAWSAuthBackup(ctx)
	}
	return nil
}

func (x *IAMInfra) journal() (*iam.Journal, error) {
	raw, ok := x.s.Journal.Recorded.Extra[iamJournalKey]
	if !ok {
		return &iam.Journal{Cluster: x.Desired.Target.Cluster}, nil
	}
	var j iam.Journal
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("journal recorded.extra.%s (pkg/iam's journal): %w", iamJournalKey, err)
	}
	return &j, nil
}

// recordAWSAuthBackup records the oldest backup of aws-auth the editor
// took: the state before the rollout first changed it.
func (x *IAMInfra) recordAWSAuthBackup(ctx context.Context) error {
	ed, ok := x.Clients.AWSAuth.(*awsauth.Editor)
	if !ok || ed.BackupNamespace == "" || x.s.Journal.Recorded.AWSAuthBackup != "" {
		return nil
	}
	list, err := ed.Client.CoreV1().ConfigMaps(ed.BackupNamespace).List(ctx, metav1.ListOptions{LabelSelector: awsauth.BackupLabel + "=true"})
	if err != nil {
		return fmt.Errorf("find the aws-auth backup in %s: %w", ed.BackupNamespace, err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names) // aws-auth-backup-<UTC stamp>-rv<N>
	x.s.Journal.Recorded.AWSAuthBackup = ed.BackupNamespace + "/" + names[0]
	return x.s.Save(ctx)
}

// Down deletes every object the tool created for the cluster; later calls
// in the same run do nothing.
func (x *IAMInfra) Down(ctx context.Context) error {
	if x.downDone {
		return nil
	}
	j, err := x.journal()
	if err != nil {
		return err
	}
	items, err := iam.Down(ctx, x.Desired, j, x.Clients, iam.DownOptions{Backoff: x.Backoff, DryRun: x.s.Options.DryRun})
	for _, it := range items {
		if it.Action == iam.ActionDelete {
			x.s.Change("delete %s %s", it.Kind, it.Name)
		}
	}
	if err != nil {
		return err
	}
	x.downDone = true
	return nil
}
