package action

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

// IAMClients are pkg/iam's collaborators: SDK clients over the AWS config
// and, when the desired state maps nodes through aws-auth and Kubernetes
// is reachable, the aws-auth editor (backed up to Namespace and OutDir
// before it writes); Configuration.AWSAuth, when set, instead. It is the
// one place IAM clients are built.
func (c *Configuration) IAMClients(d *desired.State) iam.Clients {
	cl := iam.Clients{
		IAM: awsiam.NewFromConfig(c.AWS), SQS: sqs.NewFromConfig(c.AWS), EventBridge: eventbridge.NewFromConfig(c.AWS),
		EKS: eks.NewFromConfig(c.AWS), EC2: ec2.NewFromConfig(c.AWS),
	}
	switch {
	case c.AWSAuth != nil:
		cl.AWSAuth = c.AWSAuth
	case c.Kube != nil && (d == nil || d.NodeAccess == desired.NodeAccessConfigMap):
		cl.AWSAuth = &awsauth.Editor{Client: c.Kube, BackupNamespace: c.Namespace, BackupDir: c.OutDir, Now: c.now}
	}
	return cl
}

// AWSAuthFromKubeconfig is the aws-auth editor of the cluster config
// returns. A kubeconfig is needed only when a step touches aws-auth (node
// access on a CONFIG_MAP cluster, or one a journal records): without one,
// every call answers why, and IAM on AWS alone still runs.
func AWSAuthFromKubeconfig(config func() (*rest.Config, error), namespace, backupDir string) iam.AWSAuthAPI {
	rc, err := config()
	if err != nil {
		return unreachableAWSAuth{fmt.Errorf("the cluster maps nodes through aws-auth: %w", err)}
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return unreachableAWSAuth{fmt.Errorf("kubernetes client: %w", err)}
	}
	return &awsauth.Editor{Client: kc, BackupNamespace: namespace, BackupDir: backupDir}
}

// unreachableAWSAuth is aws-auth without Kubernetes access.
type unreachableAWSAuth struct{ err error }

func (u unreachableAWSAuth) Lookup(context.Context, awsauth.MapRole) (awsauth.Status, error) {
	return awsauth.Status{}, u.err
}
func (u unreachableAWSAuth) Ensure(context.Context, awsauth.MapRole) error { return u.err }
func (u unreachableAWSAuth) Remove(context.Context, awsauth.MapRole) (bool, error) {
	return false, u.err
}

// IAMJournalFile is the journal `iam apply` keeps by default.
func IAMJournalFile(cluster string) string {
	return "karpenter-migrate-iam-" + cluster + ".journal.json"
}

// IAM is what Karpenter needs in one cluster's account (pkg/iam's desired
// state) and the clients that reach it: plan, apply and delete.
type IAM struct {
	Desired *desired.State
	Clients iam.Clients
	// Journal is the file apply records each change in, and delete reads.
	Journal string
	now     func() time.Time
}

// IAM builds the desired state of inv's cluster with opts. journal is the
// journal file ("": IAMJournalFile in the working directory).
func (c *Configuration) IAM(inv *inventory.Inventory, opts desired.Options, journal string) (*IAM, error) {
	target, err := desired.TargetFromInventory(inv)
	if err != nil {
		return nil, err
	}
	d, err := desired.Build(target, opts)
	if err != nil {
		return nil, err
	}
	if journal == "" {
		journal = IAMJournalFile(target.Cluster)
	}
	return &IAM{Desired: d, Clients: c.IAMClients(d), Journal: journal, now: c.now}, nil
}

// Plan compares the desired state with the account (only these step
// groups when only is set).
func (a *IAM) Plan(ctx context.Context, only []iam.Group) (*iam.Plan, error) {
	return iam.BuildPlan(ctx, a.Desired, a.Clients, iam.PlanOptions{Only: only})
}

// Apply makes p's changes, recording each in the journal before the next.
func (a *IAM) Apply(ctx context.Context, p *iam.Plan, onStep func(iam.Item)) (*iam.Journal, error) {
	j, err := iam.ReadJournal(a.Journal, a.Desired.Target.Cluster)
	if err != nil {
		return nil, err
	}
	return iam.Apply(ctx, p, a.Clients, iam.ApplyOptions{
		Journal: j, Save: func(j *iam.Journal) error { return j.WriteFile(a.Journal) }, OnStep: onStep, Now: a.now,
	})
}

// IAMDelete is what iam delete is asked.
type IAMDelete struct {
	DryRun bool
	Only   []iam.Group
	OnStep func(iam.Item)
}

// Delete removes what apply created (tagged as the tool's), in dependency
// order; with DryRun it only says what it would delete.
func (a *IAM) Delete(ctx context.Context, o IAMDelete) ([]iam.Item, error) {
	j, err := iam.ReadJournal(a.Journal, a.Desired.Target.Cluster)
	if err != nil {
		return nil, err
	}
	return iam.Down(ctx, a.Desired, j, a.Clients, iam.DownOptions{DryRun: o.DryRun, Only: o.Only, OnStep: o.OnStep})
}
