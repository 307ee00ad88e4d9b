package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

// createdByTag marks every AWS object the tool creates, so Down deletes
// only its own.
const createdByTag = "karpenter-migrate.io/created-by"

// IAMAction is one change of the IAM plan.
type IAMAction struct {
	Action   string `json:"action"` // create | update | none
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Why      string `json:"why"`
	Resource sandbox.Resource
}

// IAMPlan lists what Karpenter needs in the account: the node role, the
// controller role and policy (IRSA), the interruption queue and its
// EventBridge rules, discovery tags and node access (an aws-auth entry for
// CONFIG_MAP clusters, an access entry otherwise). It stands in for
// pkg/iam in the demo.
func IAMPlan(inv *inventory.Inventory, cloud *sandbox.Cloud) []IAMAction {
	c := inv.Cluster.Name
	tags := map[string]string{createdByTag: "karpenter-migrate", "karpenter.sh/discovery": c}
	want := []IAMAction{
		{Kind: "Role", Name: "KarpenterNodeRole-" + c, Why: "nodes Karpenter launches assume it (EKS worker, CNI, ECR, SSM policies)"},
		{Kind: "Role", Name: "KarpenterControllerRole-" + c, Why: "the controller's IRSA role, trusted by " + nonEmpty(inv.Cluster.OIDCIssuer, "the cluster's OIDC provider")},
		{Kind: "Policy", Name: "KarpenterControllerPolicy-" + c, Why: "EC2 fleet, pricing, SSM, SQS and iam:PassRole for the node role"},
		{Kind: "Queue", Name: c, Why: "spot interruption, rebalance and instance state-change events"},
	}
	for _, rule := range []string{"ScheduledChange", "SpotInterruption", "Rebalance", "InstanceStateChange"} {
		want = append(want, IAMAction{Kind: "Rule", Name: "Karpenter" + rule + "Rule-" + c, Why: "routes " + rule + " events to the interruption queue"})
	}
	for _, s := range inv.Subnets {
		want = append(want, IAMAction{Kind: "Tag", Name: s.ID, Why: "karpenter.sh/discovery on the subnet the EC2NodeClass selects"})
	}
	for _, sg := range inv.SecurityGroups {
		want = append(want, IAMAction{Kind: "Tag", Name: sg.ID, Why: "karpenter.sh/discovery on the security group the EC2NodeClass selects"})
	}
	access := IAMAction{Kind: "AccessEntry", Name: "KarpenterNodeRole-" + c, Why: "lets Karpenter's nodes join (access entry, type EC2_LINUX)"}
	if inv.Cluster.AuthenticationMode == "CONFIG_MAP" || inv.Cluster.AuthenticationMode == "" {
		access = IAMAction{Kind: "AWSAuth", Name: "KarpenterNodeRole-" + c, Why: "mapRoles entry in kube-system/aws-auth (cluster uses CONFIG_MAP auth); existing entries kept"}
	}
	want = append(want, access)
	have := map[string]bool{}
	for _, r := range cloud.Resources() {
		have[r.Kind+"/"+r.Name] = true
	}
	for i := range want {
		want[i].Action = "create"
		if have[want[i].Kind+"/"+want[i].Name] {
			want[i].Action = "none"
		}
		want[i].Resource = sandbox.Resource{Kind: want[i].Kind, Name: want[i].Name, Tags: tags}
	}
	return want
}

// IAMApply performs the plan's creates; re-running it is a no-op.
func IAMApply(ctx context.Context, plan []IAMAction, cloud *sandbox.Cloud, kube kubernetes.Interface, accountID string) (int, error) {
	n := 0
	for _, a := range plan {
		if a.Action != "create" {
			continue
		}
		if a.Kind == "AWSAuth" {
			if err := addAWSAuthRole(ctx, kube, fmt.Sprintf("arn:aws:iam::%s:role/%s", accountID, a.Name)); err != nil {
				return n, err
			}
		}
		if _, err := cloud.CreateResource(a.Resource); err != nil {
			return n, fmt.Errorf("create %s %s: %w", a.Kind, a.Name, err)
		}
		n++
	}
	return n, nil
}

// IAMDown deletes what IAMApply created (only objects tagged as ours), in
// reverse order, and removes the aws-auth entry.
func IAMDown(ctx context.Context, cloud *sandbox.Cloud, kube kubernetes.Interface, accountID string) (int, error) {
	rs := cloud.Resources()
	n := 0
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		if r.Tags[createdByTag] == "" {
			continue
		}
		if r.Kind == "AWSAuth" {
			if err := removeAWSAuthRole(ctx, kube, fmt.Sprintf("arn:aws:iam::%s:role/%s", accountID, r.Name)); err != nil {
				return n, err
			}
		}
		cloud.DeleteResource(r.Kind, r.Name)
		n++
	}
	return n, nil
}

func awsAuthEntry(roleARN string) string {
	return fmt.Sprintf("- rolearn: %s\n  username: system:node:{{EC2PrivateDNSName}}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n", roleARN)
}

func addAWSAuthRole(ctx context.Context, kube kubernetes.Interface, roleARN string) error {
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read kube-system/aws-auth: %w", err)
	}
	if strings.Contains(cm.Data["mapRoles"], roleARN) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["mapRoles"] += awsAuthEntry(roleARN)
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update kube-system/aws-auth: %w", err)
	}
	return nil
}

func removeAWSAuthRole(ctx context.Context, kube kubernetes.Interface, roleARN string) error {
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read kube-system/aws-auth: %w", err)
	}
	cm.Data["mapRoles"] = strings.Replace(cm.Data["mapRoles"], awsAuthEntry(roleARN), "", 1)
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update kube-system/aws-auth: %w", err)
	}
	return nil
}

func (r *runner) stepIAMPlan(_ context.Context) (string, error) {
	r.state.IAM = IAMPlan(&r.inv, r.sb.Cloud())
	if err := writeJSON(filepath.Join(r.opts.OutDir, "iam-plan.json"), r.state.IAM); err != nil {
		return "", err
	}
	creates := 0
	for _, a := range r.state.IAM {
		if a.Action == "create" {
			creates++
		}
	}
	return fmt.Sprintf("%d to create, %d already present", creates, len(r.state.IAM)-creates), nil
}

func (r *runner) stepIAMApply(ctx context.Context) (string, error) {
	n, err := IAMApply(ctx, r.state.IAM, r.sb.Cloud(), r.sb.Kube(), r.inv.Cluster.AccountID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d created (tagged %s)", n, createdByTag), nil
}
