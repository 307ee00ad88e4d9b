package discover_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/cli"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// cluster is a real control plane with the Karpenter v1 CRDs, shared by the
// tests of this package that read Kubernetes; the seeded world lives on it
// and on one AWS fake for the whole package.
var cluster = testenv.NewShared(testenv.Options{CRDDirs: []string{mustCRDDir("v1")}})

var (
	seedOnce sync.Once
	seedSrv  *awsfake.Server
	seedErr  error
)

func TestMain(m *testing.M) {
	code := cluster.Run(m)
	moto.Stop()
	if seedSrv != nil {
		seedSrv.Close()
	}
	os.Exit(code)
}

func mustCRDDir(name string) string {
	dir, err := testenv.CRDDir(name)
	if err != nil {
		panic(err)
	}
	return dir
}

// Instances of the seeded account; the kwok nodes carry them in their providerIDs.
const (
	instGeneral1 = "i-0a00000000000001"
	instGeneral2 = "i-0a00000000000002"
	instBatch1   = "i-0b00000000000001"
)

// seededAccount is the AWS side: a self-managed, CloudFormation-owned group
// "general" (IMDS hop limit 2) and an EKS managed node group "batch"
// tainted dedicated=batch.
func seededAccount() *awsfake.Account {
	acct := &awsfake.Account{Region: "us-east-1"}
	acct.EKS.Clusters = []awsfake.EKSCluster{{
		Cluster: ekstypes.Cluster{Name: awssdk.String("prod"), Version: awssdk.String("1.31"),
			Arn:          awssdk.String("arn:aws:eks:us-east-1:123456789012:cluster/prod"),
			AccessConfig: &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap},
			ResourcesVpcConfig: &ekstypes.VpcConfigResponse{VpcId: awssdk.String("vpc-1"), SubnetIds: []string{"subnet-a", "subnet-b"},
				ClusterSecurityGroupId: awssdk.String("sg-cluster")}},
		Nodegroups: []ekstypes.Nodegroup{{NodegroupName: awssdk.String("batch"), ClusterName: awssdk.String("prod"),
			Status: ekstypes.NodegroupStatusActive, CapacityType: ekstypes.CapacityTypesOnDemand, AmiType: ekstypes.AMITypesAl2023X8664Standard,
			InstanceTypes: []string{"m5.xlarge"}, Subnets: []string{"subnet-a"},
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(3), DesiredSize: awssdk.Int32(1)},
			Labels:        map[string]string{"eks.amazonaws.com/nodegroup": "batch"},
			Taints:        []ekstypes.Taint{{Key: awssdk.String("dedicated"), Value: awssdk.String("batch"), Effect: ekstypes.TaintEffectNoSchedule}},
			Resources:     &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: awssdk.String("eks-batch")}}}}},
	}}
	acct.EC2.Subnets = []ec2types.Subnet{
		{SubnetId: awssdk.String("subnet-a"), AvailabilityZone: awssdk.String("us-east-1a"), VpcId: awssdk.String("vpc-1")},
		{SubnetId: awssdk.String("subnet-b"), AvailabilityZone: awssdk.String("us-east-1b"), VpcId: awssdk.String("vpc-1")},
	}
	acct.EC2.SecurityGroups = []ec2types.SecurityGroup{{GroupId: awssdk.String("sg-cluster"), GroupName: awssdk.String("cluster")}, {GroupId: awssdk.String("sg-nodes"), GroupName: awssdk.String("nodes")}}
	acct.EC2.LaunchTemplateVersions = []ec2types.LaunchTemplateVersion{{
		LaunchTemplateId: awssdk.String("lt-general"), LaunchTemplateName: awssdk.String("general"), VersionNumber: awssdk.Int64(1), DefaultVersion: awssdk.Bool(true),
		LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String("ami-1"), InstanceType: ec2types.InstanceTypeM5Xlarge,
			SecurityGroupIds: []string{"sg-nodes"}, UserData: awssdk.String(base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh prod\n"))),
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpPutResponseHopLimit: awssdk.Int32(2), HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired}},
	}}
	inst := func(id, zone string) astypes.Instance {
		return astypes.Instance{InstanceId: awssdk.String(id), InstanceType: awssdk.String("m5.xlarge"), AvailabilityZone: awssdk.String(zone), LifecycleState: astypes.LifecycleStateInService}
	}
	tag := func(k, v string) astypes.TagDescription {
		return astypes.TagDescription{Key: awssdk.String(k), Value: awssdk.String(v)}
	}
	acct.AutoScaling.Groups = []astypes.AutoScalingGroup{
		{AutoScalingGroupName: awssdk.String("general"), MinSize: awssdk.Int32(2), MaxSize: awssdk.Int32(6), DesiredCapacity: awssdk.Int32(2),
			AvailabilityZones: []string{"us-east-1a", "us-east-1b"}, VPCZoneIdentifier: awssdk.String("subnet-a,subnet-b"),
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: awssdk.String("lt-general"), Version: awssdk.String("$Default")},
			Instances:      []astypes.Instance{inst(instGeneral1, "us-east-1a"), inst(instGeneral2, "us-east-1b")},
			Tags: []astypes.TagDescription{tag("k8s.io/cluster-autoscaler/enabled", "true"), tag("k8s.io/cluster-autoscaler/prod", "owned"),
				tag("aws:cloudformation:stack-name", "eksctl-prod-nodegroup-general")}},
		{AutoScalingGroupName: awssdk.String("eks-batch"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(3), DesiredCapacity: awssdk.Int32(1),
			AvailabilityZones: []string{"us-east-1a"}, VPCZoneIdentifier: awssdk.String("subnet-a"),
			Instances: []astypes.Instance{inst(instBatch1, "us-east-1a")},
			Tags:      []astypes.TagDescription{tag("eks:cluster-name", "prod"), tag("eks:nodegroup-name", "batch")}},
	}
	return acct
}

// seeded starts the AWS fake and seeds the control plane once per package.
func seeded(t *testing.T) (*testenv.Env, *awsfake.Server) {
	t.Helper()
	env := cluster.Env(t)
	seedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		seedSrv = awsfake.New(seededAccount())
		seedErr = seedKubernetes(ctx, env)
	})
	if seedErr != nil {
		t.Fatalf("seed the cluster: %v", seedErr)
	}
	return env, seedSrv
}

func seedKubernetes(ctx context.Context, env *testenv.Env) error {
	for _, n := range []testenv.NodeSpec{
		{Name: "general-1", Zone: "us-east-1a", ProviderID: "aws:///us-east-1a/" + instGeneral1, Labels: map[string]string{"alpha.eksctl.io/nodegroup-name": "general"}},
		{Name: "general-2", Zone: "us-east-1b", ProviderID: "aws:///us-east-1b/" + instGeneral2, Labels: map[string]string{"alpha.eksctl.io/nodegroup-name": "general"}},
		{Name: "batch-1", Zone: "us-east-1a", NodeGroup: "batch", ProviderID: "aws:///us-east-1a/" + instBatch1,
			Taints: []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}},
	} {
		n.InstanceType = "m5.xlarge"
		if _, err := env.CreateKwokNode(ctx, n); err != nil {
			return err
		}
	}
	if err := env.WaitForNodesReady(ctx, "general-1", "general-2", "batch-1"); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join("testdata", "e2e", "cluster.yaml"))
	if err != nil {
		return err
	}
	if _, err := env.ApplyYAML(ctx, "", data); err != nil {
		return err
	}
	// A Job of the CronJob whose pod stays Pending: kwok completes running
	// Job pods at once, and discover skips finished pods.
	cj, err := env.Client.BatchV1().CronJobs("shop").Get(ctx, "nightly", metav1.GetOptions{})
	if err != nil {
		return err
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nightly-manual", Namespace: "shop",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
		Spec: cj.Spec.JobTemplate.Spec}
	job.Spec.Template.Spec.NodeSelector = map[string]string{"no-such-node": "true"}
	if _, err := env.Client.BatchV1().Jobs("shop").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	return env.WaitFor(ctx, "pods running and the PDB observed", func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running, pending := 0, 0
		for _, p := range pods.Items {
			switch p.Status.Phase {
			case corev1.PodRunning:
				running++
			case corev1.PodPending:
				pending++
			}
		}
		// web×2, huge, db-0, debug, agent×2 (not on the tainted batch node), cluster-autoscaler.
		if running != 8 || pending != 1 {
			return false, nil
		}
		// The PV's claim is read from its spec: binding (up to the PV
		// controller's 15 s resync) need not be awaited.
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && pdb.Status.ExpectedPods == 2 && pdb.Status.CurrentHealthy == 2, err
	})
}

func seededSources(t *testing.T) discover.Sources {
	env, srv := seeded(t)
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{Region: "us-east-1", EndpointURL: srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := kmaws.NewClients(cfg)
	return discover.Sources{AutoScaling: c.AutoScaling, EC2: c.EC2, EKS: c.EKS, Kube: env.Client}
}

// TestKubernetesSide discovers the seeded cluster from the real API server
// and checks every Kubernetes fact and its join to the AWS node groups.
func TestKubernetesSide(t *testing.T) {
	src := seededSources(t)
	inv, err := discover.Run(t.Context(), src, discover.Options{ClusterName: "prod", Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	nodeGroup := map[string]string{}
	for _, n := range inv.Nodes {
		nodeGroup[n.Name] = n.NodeGroup
	}
	if nodeGroup["general-1"] != "general" || nodeGroup["general-2"] != "general" || nodeGroup["batch-1"] != "batch" {
		t.Errorf("nodes joined to groups (providerID -> instance -> ASG): %v", nodeGroup)
	}
	batch := inv.NodesOf("batch")
	if len(batch) != 1 || batch[0].InstanceID != instBatch1 || !batch[0].Ready || len(batch[0].Taints) != 1 ||
		batch[0].Allocatable.Cpu().String() != "4" || batch[0].Capacity.Memory().String() != "16Gi" || batch[0].Labels["eks.amazonaws.com/nodegroup"] != "batch" {
		t.Errorf("node batch-1: %+v", batch)
	}

	owners := map[string]int{}
	for _, p := range inv.Pods {
		owners[p.OwnerKind+" "+p.OwnerName]++
	}
	want := map[string]int{"Deployment web": 2, "Deployment huge": 1, "StatefulSet db": 1, "DaemonSet agent": 2, " ": 1, "CronJob nightly": 1, "Deployment cluster-autoscaler": 1}
	for k, n := range want {
		if owners[k] != n {
			t.Errorf("pods owned by %q: %d, want %d (all: %v)", k, owners[k], n, owners)
		}
	}
	if len(inv.PDBs) != 1 || inv.PDBs[0].DisruptionsAllowed != 0 || inv.PDBs[0].ExpectedPods != 2 {
		t.Errorf("PDB with its live status: %+v", inv.PDBs)
	}
	if len(inv.DaemonSets) != 1 || inv.DaemonSets[0].Requests.Cpu().MilliValue() != 100 {
		t.Errorf("DaemonSets: %+v", inv.DaemonSets)
	}
	if len(inv.PersistentVolumes) != 1 || !slices.Equal(inv.PersistentVolumes[0].Zones, []string{"us-east-1c"}) || inv.PersistentVolumes[0].ClaimName != "data" {
		t.Errorf("zonal PVs: %+v", inv.PersistentVolumes)
	}
	ca := inv.ClusterAutoscaler
	if ca == nil || ca.Version != "v1.32.1" || len(ca.AutoDiscovery) != 1 || ca.Flags["expander"] != "least-waste" ||
		ca.Flags["balance-similar-node-groups"] != "true" || ca.Flags["scale-down-enabled"] != "true" ||
		ca.Flags["skip-nodes-with-local-storage"] != "false" || ca.Flags["scale-down-unneeded-time"] != "5m" {
		t.Errorf("Cluster Autoscaler: %+v", ca)
	}
	if inv.AWSAuth == nil || inv.AWSAuth.Data["mapRoles"] == "" {
		t.Errorf("aws-auth: %+v", inv.AWSAuth)
	}
	k := inv.Karpenter
	if k == nil || k.Installed || !slices.Contains(k.CRDs, "nodepools.karpenter.sh/v1") || !slices.Equal(k.NodePools, []string{"existing"}) {
		t.Errorf("Karpenter CRDs and NodePools: %+v", k)
	}

	// Each seeded problem is found, through generate's pools, and nothing else.
	res, err := generate.Generate(inv, generate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodePools) != 2 {
		t.Fatalf("generate mapped %d of 2 node groups: %v", len(res.NodePools), res.Warnings)
	}
	report := readiness.Evaluate(inv, readiness.FromNodePools(inv, res.NodePools, res.NodeClasses, catalog.Default()))
	got := map[string][]string{}
	for _, f := range report.Findings {
		got[f.ID] = f.Objects
	}
	wantFindings := map[string][]string{
		readiness.IDPDBZeroMoved:          {"PodDisruptionBudget shop/web"},
		readiness.IDSingleReplica:         {"Deployment kube-system/cluster-autoscaler", "Deployment shop/huge", "StatefulSet shop/db"},
		readiness.IDNoController:          {"Pod shop/debug"},
		readiness.IDLocalData:             {"Deployment shop/web (emptyDir cache)"},
		readiness.IDSafeToEvictFalse:      {"Deployment shop/web"},
		readiness.IDZonalVolume:           {"PersistentVolume pv-zonal (us-east-1c, claim shop/data)"},
		readiness.IDPodTooLarge:           {"Deployment shop/huge"},
		readiness.IDDaemonSetNoToleration: {"DaemonSet shop/agent (dedicated:NoSchedule)"},
		readiness.IDCARunning:             {"Deployment kube-system/cluster-autoscaler"},
		readiness.IDIaCOwned:              {"node group general (CloudFormation)"},
		readiness.IDIMDSHopLimit:          {"node group general"},
	}
	for id, objs := range wantFindings {
		if !slices.Equal(got[id], objs) {
			t.Errorf("finding %s: objects %q, want %q", id, got[id], objs)
		}
	}
	for id := range got {
		if _, ok := wantFindings[id]; !ok {
			t.Errorf("unexpected finding %s: %q", id, got[id])
		}
	}
}

// TestCLIGolden runs `karpenter-migrate discover` on the seeded account
// and cluster, as a user would, and compares the table and -o json with the
// golden files (go test ./pkg/discover -run TestCLIGolden -update).
func TestCLIGolden(t *testing.T) {
	env, srv := seeded(t)
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("XDG_CACHE_HOME", dir) // the price cache
	for _, tc := range []struct{ golden, output string }{
		{"discover.table.golden", "table"},
		{"discover.json.golden", "json"},
	} {
		t.Run(tc.output, func(t *testing.T) {
			io, _, out, errOut := iostreams.Test()
			cmd := cli.NewRootCmd(io)
			cmd.SetArgs([]string{"discover", "--cluster", "prod", "--region", "us-east-1", "--endpoint-url", srv.URL(),
				"--kubeconfig", env.Kubeconfig, "-o", tc.output, "--snapshot", filepath.Join(dir, "snapshot.json")})
			if err := cmd.Execute(); err != nil {
				t.Fatalf("discover: %v\nstderr: %s", err, errOut)
			}
			if !bytes.Contains(errOut.Bytes(), []byte("reading Kubernetes nodes, pods and policies\n")) {
				t.Errorf("no plain progress lines off a TTY: %q", errOut)
			}
			got := out.Bytes()
			if tc.output == "json" {
				got = normaliseJSON(t, got)
			}
			compareGolden(t, filepath.Join("testdata", tc.golden), got)
			if _, err := inventory.ReadSnapshotFile(filepath.Join(dir, "snapshot.json")); err != nil {
				t.Errorf("snapshot written by --snapshot: %v", err)
			}
		})
	}
}

// Names and values the API server makes up differ between runs.
var (
	generatedPodName = regexp.MustCompile(`"((?:web|huge|cluster-autoscaler)-[a-z0-9]+|agent|nightly-manual)-[a-z0-9]{5}"`)
	tokenVolume      = regexp.MustCompile(`"kube-api-access-[a-z0-9]{5}"`)
	uid              = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// normaliseJSON blanks what the API server generates (creation times,
// resource versions, UIDs, random name suffixes) and sorts pods again.
func normaliseJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	b = generatedPodName.ReplaceAll(b, []byte(`"$1-xxxxx"`))
	b = tokenVolume.ReplaceAll(b, []byte(`"kube-api-access-xxxxx"`))
	b = uid.ReplaceAll(b, []byte(`<uid>`))
	var doc struct {
		Inventory inventory.Inventory `json:"inventory"`
		Readiness readiness.Report    `json:"readiness"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("discover -o json is not the documented shape: %v", err)
	}
	inv := &doc.Inventory
	for i := range inv.Nodes {
		inv.Nodes[i].CreatedAt = metav1.Time{}
	}
	if inv.AWSAuth != nil {
		inv.AWSAuth.ResourceVersion = "<rv>"
	}
	if inv.Prices != nil {
		inv.Prices.FetchedAt = time.Time{}
	}
	slices.SortStableFunc(inv.Pods, func(a, b inventory.Pod) int {
		if a.Namespace != b.Namespace {
			return cmpString(a.Namespace, b.Namespace)
		}
		if a.Name != b.Name {
			return cmpString(a.Name, b.Name)
		}
		return cmpString(a.NodeName, b.NodeName)
	})
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(g) && line < len(w) && g[line] == w[line] {
			line++
		}
		at := func(s []string) string {
			if line < len(s) {
				return s[line]
			}
			return "<end of file>"
		}
		t.Errorf("%s:%d differs (run with -update to accept):\n got: %s\nwant: %s", path, line+1, at(g), at(w))
	}
}
