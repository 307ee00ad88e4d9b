// Package scripts_test runs scripts/rollout.sh and scripts/rollout-all.sh
// with sh against real control planes (internal/testenv) and the AWS fake
// served on loopback, one of each per environment, and checks the exit
// code of every outcome and the RBAC of the in-cluster Job.
package scripts_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Exit codes of rollout.sh (see its header).
const (
	exitDone      = 0
	exitReadiness = 3
	exitPaused    = 4
	exitDrifted   = 5
)

const (
	region    = "us-east-1"
	account   = "123456789012"
	group     = "general"
	asgName   = "eks-general-1"
	namespace = "karpenter-migrate"
	appNS     = "shop"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds karpenter-migrate once for the package's tests.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "km-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "karpenter-migrate")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/karpenter-migrate")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// world is one environment: its own control plane, AWS account and
// working copy of the user's repository (migrations/ENV.yaml and .env).
type world struct {
	env, cluster string
	kube         *testenv.Env
	aws          *awsfake.Server
	repo         string
	legacy       []string
}

func newWorld(t *testing.T, env string) *world {
	t.Helper()
	crds, err := testenv.CRDDir("v1")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{env: env, cluster: "shop-" + env, kube: testenv.Start(t, testenv.Options{CRDDirs: []string{crds}}), repo: t.TempDir()}
	w.aws = awsfake.New(w.account())
	t.Cleanup(w.aws.Close)
	ctx := t.Context()

	for i, zone := range []string{"us-east-1a", "us-east-1b"} {
		name := fmt.Sprintf("ip-10-0-%d-1.%s", i, env)
		if _, err := w.kube.CreateKwokNode(ctx, testenv.NodeSpec{Name: name, Zone: zone, NodeGroup: group, InstanceType: "m5.xlarge",
			ProviderID: fmt.Sprintf("aws:///%s/%s", zone, instanceID(i))}); err != nil {
			t.Fatal(err)
		}
		w.legacy = append(w.legacy, name)
	}
	if err := w.kube.WaitForNodesReady(ctx, w.legacy...); err != nil {
		t.Fatal(err)
	}
	c := w.kube.Client
	for _, ns := range []string{appNS} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: "kube-system"},
		Data: map[string]string{"mapRoles": "- rolearn: arn:aws:iam::" + account + ":role/eks-node-general\n  username: system:node:{{EC2PrivateDNSName}}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().Deployments(appNS).Create(ctx, deployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets(appNS).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.kube.WaitForPodsRunning(ctx, appNS, "app=web", 2); err != nil {
		t.Fatal(err)
	}
	// Karpenter capacity already up (no Karpenter runs here): the node the
	// evicted pods and placeholders land on, labelled with the pool that
	// generate names after the group.
	if _, err := w.kube.CreateKwokNode(ctx, testenv.NodeSpec{Name: "karpenter-" + env, Zone: "us-east-1a", CPU: "32", Memory: "128Gi", Pods: "110",
		Labels: map[string]string{"karpenter.sh/nodepool": group}}); err != nil {
		t.Fatal(err)
	}

	cfg := fmt.Sprintf(`apiVersion: karpenter-migrate.io/v1alpha1
kind: MigrationConfig
environment: %s
cluster: %s
region: %s
rollout:
  waveSize: "1"
  concurrency: 1
gates:
  nodeReadyTimeout: 30s
  podPendingTimeout: 30s
  pdbWaitTimeout: 4s
controller:
  # A namespace of its own: the Job may then read Helm's release Secrets
  # there, and none of kube-system's.
  namespace: karpenter
`, env, w.cluster, region)
	envFile := fmt.Sprintf("KUBECONFIG=%s\nENDPOINT_URL=%s\n", w.kube.Kubeconfig, w.aws.URL())
	writeFile(t, filepath.Join(w.repo, "migrations", env+".yaml"), cfg)
	writeFile(t, filepath.Join(w.repo, "migrations", env+".env"), envFile)
	return w
}

func instanceID(i int) string { return fmt.Sprintf("i-%017x", i+1) }

func (w *world) account() *awsfake.Account {
	acct := &awsfake.Account{ID: account, Region: region}
	acct.EC2.Subnets = []ec2types.Subnet{
		{SubnetId: awssdk.String("subnet-a"), AvailabilityZone: awssdk.String("us-east-1a"), VpcId: awssdk.String("vpc-1")},
		{SubnetId: awssdk.String("subnet-b"), AvailabilityZone: awssdk.String("us-east-1b"), VpcId: awssdk.String("vpc-1")},
	}
	acct.EC2.SecurityGroups = []ec2types.SecurityGroup{{GroupId: awssdk.String("sg-cluster"), GroupName: awssdk.String("cluster"), VpcId: awssdk.String("vpc-1")}}
	acct.EC2.LaunchTemplateVersions = []ec2types.LaunchTemplateVersion{{
		LaunchTemplateId: awssdk.String("lt-general"), LaunchTemplateName: awssdk.String("general"), VersionNumber: awssdk.Int64(1), DefaultVersion: awssdk.Bool(true),
		LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String("ami-1"), SecurityGroupIds: []string{"sg-cluster"},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpPutResponseHopLimit: awssdk.Int32(1), HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired}},
	}}
	asg := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String(asgName), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(4), DesiredCapacity: awssdk.Int32(2),
		AvailabilityZones: []string{"us-east-1a", "us-east-1b"}, VPCZoneIdentifier: awssdk.String("subnet-a,subnet-b"),
		LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: awssdk.String("lt-general"), Version: awssdk.String("1")},
		Tags: []astypes.TagDescription{
			{Key: awssdk.String("k8s.io/cluster-autoscaler/enabled"), Value: awssdk.String("true")},
			{Key: awssdk.String("k8s.io/cluster-autoscaler/" + w.cluster), Value: awssdk.String("owned")},
			{Key: awssdk.String("eks:cluster-name"), Value: awssdk.String(w.cluster)},
			{Key: awssdk.String("eks:nodegroup-name"), Value: awssdk.String(group)},
		}}
	for i, zone := range []string{"us-east-1a", "us-east-1b"} {
		asg.Instances = append(asg.Instances, astypes.Instance{InstanceId: awssdk.String(instanceID(i)), InstanceType: awssdk.String("m5.xlarge"),
			AvailabilityZone: awssdk.String(zone), LifecycleState: astypes.LifecycleStateInService})
	}
	acct.AutoScaling.Groups = []astypes.AutoScalingGroup{asg}
	issuer := "oidc.eks." + region + ".amazonaws.com/id/" + strings.ToUpper(w.env)
	acct.IAM.OIDCProviders = []awsfake.IAMOIDCProvider{{ARN: "arn:aws:iam::" + account + ":oidc-provider/" + issuer, URL: issuer, ClientIDList: []string{"sts.amazonaws.com"}}}
	acct.EKS.Clusters = []awsfake.EKSCluster{{
		Cluster: ekstypes.Cluster{Name: awssdk.String(w.cluster), Version: awssdk.String("1.31"), Status: ekstypes.ClusterStatusActive,
			Arn:          awssdk.String("arn:aws:eks:" + region + ":" + account + ":cluster/" + w.cluster),
			AccessConfig: &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap},
			Identity:     &ekstypes.Identity{Oidc: &ekstypes.OIDC{Issuer: awssdk.String("https://oidc.eks." + region + ".amazonaws.com/id/" + strings.ToUpper(w.env))}},
			ResourcesVpcConfig: &ekstypes.VpcConfigResponse{VpcId: awssdk.String("vpc-1"), SubnetIds: []string{"subnet-a", "subnet-b"},
				ClusterSecurityGroupId: awssdk.String("sg-cluster")}},
		Nodegroups: []ekstypes.Nodegroup{{NodegroupName: awssdk.String(group), ClusterName: awssdk.String(w.cluster), Status: ekstypes.NodegroupStatusActive,
			CapacityType: ekstypes.CapacityTypesOnDemand, AmiType: ekstypes.AMITypesAl2023X8664Standard, InstanceTypes: []string{"m5.xlarge"},
			NodeRole:      awssdk.String("arn:aws:iam::" + account + ":role/eks-node-general"),
			Subnets:       []string{"subnet-a", "subnet-b"},
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(4), DesiredSize: awssdk.Int32(2)},
			Resources:     &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: awssdk.String(asgName)}}}}},
	}}
	return acct
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appNS},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To(int64(0)),
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
			}}}}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// result is one script run.
type result struct {
	code           int
	stdout, stderr string
}

// script runs scripts/NAME with sh in w.repo, with extra environment
// variables, and returns its exit code and output.
func script(t *testing.T, dir, name string, env []string, args ...string) result {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{filepath.Join(root, "scripts", name)}, args...)...)
	cmd.Dir = dir
	empty := filepath.Join(t.TempDir(), "none")
	cmd.Env = append(os.Environ(), "KM_BIN="+binary(t), "AWS_ACCESS_KEY_ID=AKIDTEST", "AWS_SECRET_ACCESS_KEY=secret",
		"AWS_CONFIG_FILE="+empty, "AWS_SHARED_CREDENTIALS_FILE="+empty, "AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=", "AWS_PROFILE=")
	// No registry can be reached: step 07 installs the official chart,
	// prepared from Karpenter's Go module, with Helm.
	cmd.Env = append(cmd.Env, "KARPENTER_CHART="+testenv.ControlPlaneChart(t))
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	res := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		t.Fatalf("run %s: %v", name, err)
	}
	return res
}

func (r result) expect(t *testing.T, what string, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
}

// journal reads the environment's rollout journal, nil when absent.
func (w *world) journal(t *testing.T) *rollout.Journal {
	t.Helper()
	j, err := rollout.Status(t.Context(), w.kube.Client, namespace, w.env)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// resize sets the managed node group's maximum size, on its ASG and in
// EKS, as an operator would.
func (w *world) resize(max int32) {
	w.aws.Account(func(a *awsfake.Account) {
		a.AutoScaling.Groups[0].MaxSize = awssdk.Int32(max)
		a.EKS.Clusters[0].Nodegroups[0].ScalingConfig.MaxSize = awssdk.Int32(max)
	})
}

func TestScriptedRollout(t *testing.T) {
	dev := newWorld(t, "dev")
	staging := newWorld(t, "staging")
	// Both environments in one repository: rollout-all.sh reaches each
	// one's cluster through migrations/ENV.env.
	repo := dev.repo
	for _, f := range []string{"staging.yaml", "staging.env"} {
		b, err := os.ReadFile(filepath.Join(staging.repo, "migrations", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(repo, "migrations", f), string(b))
	}
	ctx := t.Context()

	t.Run("readiness blocker stops rollout-all before the next environment", func(t *testing.T) {
		bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hand-made", Namespace: appNS}, Spec: corev1.PodSpec{NodeName: staging.legacy[0],
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := staging.kube.Client.CoreV1().Pods(appNS).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := script(t, repo, "rollout-all.sh", nil, "staging", "dev")
		r.expect(t, "rollout-all.sh staging dev with a pod no controller owns", exitReadiness)
		if !strings.Contains(r.stdout, "no-controller") && !strings.Contains(r.stdout, "no controller") {
			t.Errorf("readiness report does not name the finding:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "staging stopped with exit code 3") {
			t.Errorf("rollout-all.sh does not say where it stopped:\n%s", r.stderr)
		}
		if _, err := os.Stat(filepath.Join(repo, ".karpenter-migrate", "dev")); !os.IsNotExist(err) {
			t.Errorf("dev was started after staging failed (work dir: %v)", err)
		}
		if err := staging.kube.Client.CoreV1().Pods(appNS).Delete(ctx, "hand-made", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})

	// The environments are independent from here on: one runs while the
	// other waits on its polls.
	t.Run("staging", func(t *testing.T) {
		t.Parallel()
		t.Run("plan made stale by resizing a group", func(t *testing.T) {
			script(t, repo, "rollout.sh", []string{"PHASE=plan"}, "staging").expect(t, "PHASE=plan rollout.sh staging", exitDone)
			staging.resize(6)
			r := script(t, repo, "rollout.sh", []string{"PHASE=apply"}, "staging")
			r.expect(t, "PHASE=apply after the group was resized", exitDrifted)
			if !strings.Contains(r.stderr, "sizes changed") {
				t.Errorf("drift not explained:\n%s", r.stderr)
			}
		})

		t.Run("PDB that never allows eviction pauses at the gate", func(t *testing.T) {
			script(t, repo, "rollout.sh", []string{"PHASE=plan"}, "staging").expect(t, "PHASE=plan rollout.sh staging", exitDone)
			// Added after the plan was reviewed: a StatefulSet pod pinned to a
			// legacy node under a budget that allows no disruption.
			c := staging.kube.Client
			labels := map[string]string{"app": "db"}
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: appNS}, Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: staging.legacy[0]},
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}}
			if _, err := c.AppsV1().StatefulSets(appNS).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PolicyV1().PodDisruptionBudgets(appNS).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db"},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := staging.kube.WaitForPodsRunning(ctx, appNS, "app=db", 1); err != nil {
				t.Fatal(err)
			}
			r := script(t, repo, "rollout.sh", []string{"PHASE=apply"}, "staging")
			r.expect(t, "PHASE=apply with a PDB allowing no disruption", exitPaused)
			j := staging.journal(t)
			if j == nil || j.State != rollout.StatePaused || !strings.Contains(j.Message, "PodDisruptionBudget") {
				t.Fatalf("journal after the pause: %+v", j)
			}
			// status -o json is the journal, saved for the pipeline.
			b, err := os.ReadFile(filepath.Join(repo, ".karpenter-migrate", "staging", "journal.json"))
			if err != nil {
				t.Fatal(err)
			}
			var saved rollout.Journal
			if err := json.Unmarshal(b, &saved); err != nil || saved.State != rollout.StatePaused {
				t.Fatalf("journal.json (status -o json) = %v, %s", err, b)
			}

			// Fixed: the run resumes where it paused and finishes.
			if err := c.AppsV1().StatefulSets(appNS).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := c.PolicyV1().PodDisruptionBudgets(appNS).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			script(t, repo, "rollout.sh", []string{"PHASE=apply"}, "staging").expect(t, "PHASE=apply resumed after the fix", exitDone)
			if j := staging.journal(t); j.State != rollout.StateCompleted {
				t.Errorf("staging journal after resume: %s %s", j.State, j.Message)
			}
		})
	})
	t.Run("dev", func(t *testing.T) {
		t.Parallel()
		t.Run("dry run changes nothing", func(t *testing.T) {
			r := script(t, repo, "rollout.sh", []string{"DRY_RUN=1"}, "dev")
			r.expect(t, "DRY_RUN=1 rollout.sh dev", exitDone)
			if j := dev.journal(t); j != nil {
				t.Errorf("dry run wrote a journal: %+v", j)
			}
			if !strings.Contains(r.stderr, "[dry-run]") {
				t.Errorf("dry run printed no dry-run events:\n%s", r.stderr)
			}
		})
		t.Run("in-cluster Job RBAC", func(t *testing.T) {
			script(t, repo, "rollout.sh", []string{"PHASE=plan"}, "dev").expect(t, "PHASE=plan rollout.sh dev", exitDone)
			planFile := filepath.Join(repo, ".karpenter-migrate", "dev", "plan.yaml")
			out, err := exec.CommandContext(ctx, binary(t), "generate", "--job", "--plan", planFile, "--out", filepath.Join(repo, "karpenter"), "--config", filepath.Join(repo, "migrations", "dev.yaml"), "--role-arn", "arn:aws:iam::"+account+":role/km").CombinedOutput()
			if err != nil {
				t.Fatalf("generate --job: %v\n%s", err, out)
			}
			manifest, err := os.ReadFile(filepath.Join(repo, "karpenter", "jobs", "dev.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			// Everything but the Job is applied; the Job is validated by the API
			// server (a pod of it would only be faked by kwok, on a legacy node).
			var objs, job []string
			for _, doc := range strings.Split(string(manifest), "\n---\n") {
				if strings.Contains(doc, "\nkind: Job\n") {
					job = append(job, doc)
				} else {
					objs = append(objs, doc)
				}
			}
			if len(job) != 1 {
				t.Fatalf("want one Job in the manifest, got %d", len(job))
			}
			if _, err := dev.kube.ApplyYAML(ctx, "", []byte(strings.Join(objs, "\n---\n"))); err != nil {
				t.Fatal(err)
			}
			if err := dev.kube.ServerDryRun(ctx, []byte(job[0])); err != nil {
				t.Fatal(err)
			}
			sa := "system:serviceaccount:" + namespace + ":" + generate.JobServiceAccount("dev")
			allowed := func(a authorizationv1.ResourceAttributes) bool {
				sar, err := dev.kube.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}, ResourceAttributes: &a}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return sar.Status.Allowed
			}
			for _, r := range generate.RunbookRules() {
				res, sub, _ := strings.Cut(r.Resource, "/")
				for _, verb := range r.Verbs {
					a := authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Resource: res, Subresource: sub}
					switch r.Scope {
					case generate.ScopeCluster:
						a.Namespace = appNS // cluster-wide, so any namespace
					case generate.ScopeNamespace:
						a.Namespace = namespace
					case generate.ScopeAWSAuth:
						a.Namespace, a.Name = "kube-system", "aws-auth"
					case generate.ScopeClusterAutoscaler:
						continue // the plan has no Cluster Autoscaler here
					}
					if !allowed(a) {
						t.Errorf("%s may not %s %s/%s in %q (%s)", sa, verb, r.Group, r.Resource, a.Namespace, r.Why)
					}
				}
			}
			// ... and Helm's, for the Karpenter release step 07 installs.
			p, err := plan.ReadPlanFile(planFile)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := action.KarpenterRelease(ctx, p)
			if err != nil || rel == nil || rel.Namespace != "karpenter" {
				t.Fatalf("the plan's Karpenter release for the Job: %+v %v", rel, err)
			}
			for _, r := range generate.KarpenterRules(*rel) {
				for _, verb := range r.Verbs {
					a := authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Resource: r.Resource, Namespace: rel.Namespace}
					if r.Scope == generate.ScopeKarpenterCluster {
						a.Namespace = ""
					}
					if !allowed(a) {
						t.Errorf("%s may not %s %s/%s in %q (%s)", sa, verb, r.Group, r.Resource, a.Namespace, r.Why)
					}
				}
			}
			for _, a := range []authorizationv1.ResourceAttributes{
				{Verb: "get", Resource: "secrets", Namespace: appNS},
				{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: appNS},
				{Verb: "delete", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
				{Verb: "delete", Resource: "nodes"},
				{Verb: "get", Resource: "secrets", Namespace: "kube-system"},
				{Verb: "update", Resource: "configmaps", Namespace: "kube-system", Name: "coredns"},
				{Verb: "delete", Resource: "pods", Namespace: appNS},
			} {
				if allowed(a) {
					t.Errorf("%s may %s %s %s in %q: the runbook does not need it", sa, a.Verb, a.Resource, a.Name, a.Namespace)
				}
			}

			// The whole runbook as the Job's ServiceAccount: any permission the
			// Role misses fails the run. JSON progress on stderr.
			kc := impersonating(t, dev.kube.Kubeconfig, sa)
			r := script(t, repo, "rollout.sh", []string{"PHASE=apply", "LOG_FORMAT=json", "KUBECONFIG=" + kc, "ENV_FILE=/dev/null/none", "ENDPOINT_URL=" + dev.aws.URL()}, "dev")
			r.expect(t, "PHASE=apply as the Job's ServiceAccount", exitDone)
			checkJSONEvents(t, r.stderr)
			if j := dev.journal(t); j == nil || j.State != rollout.StateCompleted {
				t.Fatalf("dev journal: %+v", j)
			}
			// Step 07 installed Karpenter with Helm, as the Job's ServiceAccount.
			if r, err := (&helm.Client{REST: dev.kube.Config}).Release(ctx, "karpenter", "karpenter"); err != nil || r == nil || r.Status != rollout.ReleaseDeployed {
				t.Errorf("Karpenter release after the Job's run: %+v %v, want deployed", r, err)
			}
			// The only group is where generate pins the Karpenter controller:
			// kept at its size (2), reserved, without Cluster Autoscaler tags.
			dev.aws.Account(func(a *awsfake.Account) {
				g := a.AutoScaling.Groups[0]
				if *g.DesiredCapacity != 2 || *g.MinSize != 2 || *g.MaxSize != 2 || len(g.Instances) != 2 {
					t.Errorf("kept group not at its size: min/max/desired %d/%d/%d, %d instances", *g.MinSize, *g.MaxSize, *g.DesiredCapacity, len(g.Instances))
				}
				for _, tag := range g.Tags {
					if strings.HasPrefix(*tag.Key, "k8s.io/cluster-autoscaler/") {
						t.Errorf("kept group still tagged %s", *tag.Key)
					}
				}
			})
			pods, err := dev.kube.Client.CoreV1().Pods(appNS).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if slices.Contains(dev.legacy, p.Spec.NodeName) {
					t.Errorf("pod %s still on legacy node %s", p.Name, p.Spec.NodeName)
				}
			}
		})
	})
}

// impersonating writes a copy of kubeconfig whose user acts as user (a
// ServiceAccount), as the Job's pod would.
func impersonating(t *testing.T, kubeconfig, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkJSONEvents checks that apply's progress came as one slog JSON
// object per event, with a time, for steps, waves, evictions and the gate.
func checkJSONEvents(t *testing.T, stderr string) {
	t.Helper()
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e struct {
			Time  time.Time `json:"time"`
			Level string    `json:"level"`
			Msg   string    `json:"msg"`
			Event string    `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Errorf("not a JSON event: %v: %s", err, line)
			continue
		}
		if e.Time.IsZero() || e.Level == "" || e.Event == "" {
			t.Errorf("event lacks time, level or kind: %s", line)
		}
		seen[e.Event]++
	}
	for _, kind := range []rollout.EventKind{rollout.EventRunStarted, rollout.EventStepStarted, rollout.EventStepFinished, rollout.EventWavePhase,
		rollout.EventEviction, rollout.EventGate, rollout.EventRunFinished} {
		if seen[string(kind)] == 0 {
			t.Errorf("no %s event in the JSON log (seen %v)", kind, seen)
		}
	}
	if seen["Script"] == 0 {
		t.Errorf("rollout.sh's own steps were not logged as JSON (seen %v)", seen)
	}
}
