package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/karpenter-migrate/karpenter-migrate/internal/motoenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

var moto = motoenv.NewShared()

func TestMain(m *testing.M) { os.Exit(moto.Run(m)) }

// TestMotoIAMCommands runs iam apply / plan / delete as a user would
// against moto_server, where the two defects of issue #15 were seen: on a
// CONFIG_MAP cluster apply --only without node access needs no kubeconfig;
// on an API cluster delete after such an apply asks EKS nothing about
// access entries (moto has no such API); a plan that does ask gets moto's
// HTML 404 named with the operation and the endpoint.
func TestMotoIAMCommands(t *testing.T) {
	for _, mode := range []string{"CONFIG_MAP", "API"} {
		t.Run(mode, func(t *testing.T) {
			srv := moto.Server(t)
			cfg, err := srv.Config(t.Context(), "us-west-2")
			if err != nil {
				t.Fatal(err)
			}
			s := awssdk.String
			seeded, err := motoenv.Seed(t.Context(), cfg, &awsfake.Account{Region: "us-west-2",
				EC2: awsfake.EC2State{Subnets: []ec2types.Subnet{{SubnetId: s("subnet-a"), AvailabilityZone: s("us-west-2a")}},
					SecurityGroups: []ec2types.SecurityGroup{{GroupId: s("sg-1"), GroupName: s("nodes")}}},
				EKS: awsfake.EKSState{Clusters: []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: s("prod"), Version: s("1.31")}}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			motoenv.Env(t)
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
			t.Setenv("HOME", t.TempDir())
			snap := filepath.Join(t.TempDir(), "snapshot.json")
			inv := inventory.Inventory{
				Cluster: inventory.Cluster{Name: "prod", ARN: "arn:aws:eks:us-west-2:" + motoenv.AccountID + ":cluster/prod", AuthenticationMode: mode,
					OIDCIssuer: awssdk.ToString(seeded.Account.EKS.Clusters[0].Cluster.Identity.Oidc.Issuer)},
				NodeGroups: []inventory.NodeGroup{{Name: "ng", SubnetIDs: []string{seeded.ID("subnet-a")}, SecurityGroupIDs: []string{seeded.ID("sg-1")}}},
			}
			if err := inventory.NewSnapshot(inv, time.Unix(0, 0)).WriteFile(snap); err != nil {
				t.Fatal(err)
			}
			common := []string{"--snapshot", snap, "--endpoint-url", srv.URL, "--journal", filepath.Join(t.TempDir(), "journal.json"), "--identity", "irsa", "--create-oidc-provider"}
			only := []string{"--only", "discovery-tags,node-role,controller-role,interruption-queue"}
			if _, stderr, err := runCLI(t, append(append([]string{"iam", "apply", "--yes"}, only...), common...)...); err != nil {
				t.Fatalf("apply --only without node access: %v\n%s", err, stderr)
			}
			out, _, err := runCLI(t, append(append([]string{"iam", "plan"}, only...), common...)...)
			if err != nil || !strings.Contains(out, "0 to change, 0 blocking") {
				t.Errorf("plan after apply: %v\n%s", err, out)
			}
			if mode == "API" {
				_, _, err := runCLI(t, append([]string{"iam", "plan"}, common...)...)
				if err == nil || !strings.Contains(err.Error(), "DescribeAccessEntry") || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "not an AWS error") {
					t.Errorf("plan with node access on moto = %v, want moto's HTML 404 named with DescribeAccessEntry and the endpoint", err)
				}
			}
			if _, stderr, err := runCLI(t, append([]string{"iam", "delete", "--yes"}, common...)...); err != nil {
				t.Fatalf("delete: %v\n%s", err, stderr)
			}
			out, _, err = runCLI(t, append(append([]string{"iam", "plan", "-o", "json"}, only...), common...)...)
			if err != nil || strings.Contains(out, `"action": "no-op"`) {
				t.Errorf("plan after delete (all to create again): %v\n%s", err, out)
			}
		})
	}
}
