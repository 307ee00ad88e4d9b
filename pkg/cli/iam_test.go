package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func iamFixture(t *testing.T) (*awsfake.Server, string) {
	t.Helper()
	return iamFixtureMode(t, "API")
}

// iamFixtureMode is iamFixture for a cluster in the given authentication
// mode, with no kubeconfig anywhere.
func iamFixtureMode(t *testing.T, mode string) (*awsfake.Server, string) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	t.Setenv("HOME", t.TempDir())
	srv := awsfake.New(&awsfake.Account{
		ID: "111122223333", Region: "us-west-2",
		EC2: awsfake.EC2State{Subnets: []ec2types.Subnet{{SubnetId: awssdk.String("subnet-a")}}, SecurityGroups: []ec2types.SecurityGroup{{GroupId: awssdk.String("sg-1")}}},
		EKS: awsfake.EKSState{Clusters: []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: awssdk.String("prod")}}}},
	})
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	snap := filepath.Join(t.TempDir(), "snapshot.json")
	inv := inventory.Inventory{
		Cluster:    inventory.Cluster{Name: "prod", ARN: "arn:aws:eks:us-west-2:111122223333:cluster/prod", AuthenticationMode: mode},
		NodeGroups: []inventory.NodeGroup{{Name: "ng", SubnetIDs: []string{"subnet-a"}, SecurityGroupIDs: []string{"sg-1"}}},
	}
	if err := inventory.NewSnapshot(inv, time.Unix(0, 0)).WriteFile(snap); err != nil {
		t.Fatal(err)
	}
	return srv, snap
}

func TestIAMPlanApplyDelete(t *testing.T) {
	srv, snap := iamFixture(t)
	journal := filepath.Join(t.TempDir(), "journal.json")
	common := []string{"--snapshot", snap, "--endpoint-url", srv.URL(), "--journal", journal, "--identity", "pod-identity"}

	out, _, err := runCLI(t, append([]string{"iam", "plan"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"create  NodeRole", "KarpenterControllerNodeLifecyclePolicy-prod", "AllowScopedEC2InstanceActionsWithTags", "pods.eks.amazonaws.com", "EC2_LINUX"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	// Not a terminal and no --yes: refuse.
	if _, _, err := runCLI(t, append([]string{"iam", "apply"}, common...)...); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("apply without --yes = %v", err)
	}
	if n := srv.Calls("iam", "CreateRole"); n != 0 {
		t.Fatalf("refused apply still created %d roles", n)
	}
	if _, stderr, err := runCLI(t, append([]string{"iam", "apply", "--yes"}, common...)...); err != nil || !strings.Contains(stderr, "created NodeRole KarpenterNodeRole-prod") {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}

	out, _, err = runCLI(t, append([]string{"iam", "plan", "-o", "json"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	var p iam.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items {
		if it.Action != iam.ActionNoop {
			t.Errorf("after apply: %s %s", it.Action, it.Ref)
		}
	}

	if _, _, err := runCLI(t, append([]string{"iam", "delete", "--yes"}, common...)...); err != nil {
		t.Fatal(err)
	}
	srv.Account(func(a *awsfake.Account) {
		if len(a.IAM.Roles)+len(a.IAM.Policies)+len(a.SQS.Queues)+len(a.EventBridge.Rules)+len(a.EKSAccess.AccessEntries)+len(a.EKSAccess.PodIdentityAssociations) != 0 {
			t.Errorf("objects left after iam delete: %+v", a.IAM)
		}
	})
}

func TestIAMFlagErrors(t *testing.T) {
	_, snap := iamFixture(t)
	tests := [][]string{
		{"iam", "plan"},
		{"iam", "plan", "--snapshot", snap, "--cluster", "prod"},
		{"iam", "plan", "--snapshot", snap, "--identity", "kiam"},
		{"iam", "plan", "--snapshot", snap, "--only", "everything"},
	}
	for _, args := range tests {
		if _, _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestIAMApplyWithoutNodeAccessNeedsNoKubeconfig: on a CONFIG_MAP cluster
// only the node-access step edits aws-auth, so the other steps run without
// a kubeconfig; node access itself names what is missing.
func TestIAMApplyWithoutNodeAccessNeedsNoKubeconfig(t *testing.T) {
	srv, snap := iamFixtureMode(t, "CONFIG_MAP")
	journal := filepath.Join(t.TempDir(), "journal.json")
	common := []string{"--snapshot", snap, "--endpoint-url", srv.URL(), "--journal", journal, "--identity", "pod-identity"}
	only := []string{"--only", "discovery-tags,node-role,controller-role,interruption-queue"}
	if _, stderr, err := runCLI(t, append(append([]string{"iam", "apply", "--yes"}, only...), common...)...); err != nil {
		t.Fatalf("apply --only without node access: %v\n%s", err, stderr)
	}
	if n := srv.Calls("iam", "CreateRole"); n != 2 {
		t.Errorf("CreateRole calls = %d, want 2", n)
	}
	_, _, err := runCLI(t, append([]string{"iam", "plan", "--only", "node-access"}, common...)...)
	if err == nil || !strings.Contains(err.Error(), "aws-auth") || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("plan --only node-access without a kubeconfig = %v, want an error naming aws-auth and the kubeconfig", err)
	}
	// Delete from the journal: aws-auth was never touched, so no kubeconfig.
	if _, stderr, err := runCLI(t, append([]string{"iam", "delete", "--yes"}, common...)...); err != nil {
		t.Fatalf("delete: %v\n%s", err, stderr)
	}
	srv.Account(func(a *awsfake.Account) {
		if len(a.IAM.Roles)+len(a.IAM.Policies)+len(a.SQS.Queues)+len(a.EventBridge.Rules) != 0 {
			t.Errorf("objects left after iam delete: %+v", a.IAM)
		}
	})
}

// TestIAMDeleteLeavesUntouchedNodeAccessAlone: after an apply that never
// touched node access, delete (from the journal, or with --only) does not
// ask EKS about access entries.
func TestIAMDeleteLeavesUntouchedNodeAccessAlone(t *testing.T) {
	for _, how := range []string{"journal", "only"} {
		t.Run(how, func(t *testing.T) {
			srv, snap := iamFixture(t)
			common := []string{"--snapshot", snap, "--endpoint-url", srv.URL(), "--identity", "pod-identity"}
			journal := filepath.Join(t.TempDir(), "journal.json")
			steps := "discovery-tags,node-role,controller-role,interruption-queue"
			if _, stderr, err := runCLI(t, append([]string{"iam", "apply", "--yes", "--only", steps, "--journal", journal}, common...)...); err != nil {
				t.Fatalf("apply: %v\n%s", err, stderr)
			}
			del := []string{"iam", "delete", "--yes", "--journal", journal}
			if how == "only" { // no journal: the steps say what to delete
				del = []string{"iam", "delete", "--yes", "--only", steps, "--journal", filepath.Join(t.TempDir(), "none.json")}
			}
			srv.ResetCalls()
			if _, stderr, err := runCLI(t, append(del, common...)...); err != nil {
				t.Fatalf("delete: %v\n%s", err, stderr)
			}
			if n := srv.Calls("eks", "DescribeAccessEntry"); n != 0 {
				t.Errorf("delete called DescribeAccessEntry %d times", n)
			}
			srv.Account(func(a *awsfake.Account) {
				if len(a.IAM.Roles)+len(a.IAM.Policies)+len(a.SQS.Queues)+len(a.EventBridge.Rules)+len(a.EKSAccess.PodIdentityAssociations) != 0 {
					t.Errorf("objects left after iam delete: %+v", a.IAM)
				}
			})
		})
	}
}
