// Package e2e runs the rollout end to end: the karpenter-migrate binary
// against a real control plane (internal/testenv) with the real Karpenter
// (kwok provider) and the AWS fake (pkg/aws/awsfake) on loopback. Legacy
// node groups are kwok nodes whose providerIDs are instances of ASGs in the
// fake; a hook keeps the two in step, as EC2 and the kubelet would.
package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

const (
	clusterName = "e2e"
	region      = "us-east-1"
	accountID   = "111122223333"
)

// legacyGroup is a node group of the scenario.
type legacyGroup struct {
	name, asg string
	managed   bool
	min, max  int32
	// suspended are processes suspended before the rollout (restored as is).
	suspended []string
	// zone, when set, makes a single-zone group (one subnet, every
	// instance there), as Cluster Autoscaler's balance-similar pattern
	// has one group per zone; else instances alternate over zones.
	zone string
	// nodes, when set, is the group's instance count instead of newWorld's.
	nodes int
	// labels and taints are the group's (a managed group's config, Cluster
	// Autoscaler's node-template tags) and its nodes'.
	labels map[string]string
	taints []corev1.Taint
}

// zones are the group's zones.
func (g legacyGroup) zones() []string {
	if g.zone != "" {
		return []string{g.zone}
	}
	return zones
}

// world is one scenario: control plane, Karpenter, AWS fake, binary.
type world struct {
	t      testing.TB
	env    *testenv.Env
	aws    *awsfake.Server
	bin    string
	dir    string
	groups []legacyGroup
	// hook keeps the legacy nodes in step with the ASGs' instances.
	hook *testenv.NodeHook
	// base is the generated environment the test overlay builds on
	// (staging when empty); config is the MigrationConfig prepare writes
	// (migrationConfig when empty).
	base, config string
	// generate are generate's extra flags.
	generate []string
}

// TestMain removes the binary buildBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBinary { // calling buildBinary otherwise would build it now
		if bin, err := buildBinary(); err == nil {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

// builtBinary says whether a test asked for the binary.
var builtBinary bool

// buildBinary builds cmd/karpenter-migrate once per test binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	builtBinary = true
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "km-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "karpenter-migrate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/karpenter-migrate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// instanceTypes is the kwok provider's catalogue: AWS shapes with
// us-east-1 on-demand prices (spot at 40%) in two zones.
var instanceTypes = map[string][3]string{
	"m5.large":   {"2", "8Gi", "29"},
	"m5.xlarge":  {"4", "16Gi", "58"},
	"m5.2xlarge": {"8", "32Gi", "58"},
}

var prices = map[string]float64{"m5.large": 0.096, "m5.xlarge": 0.192, "m5.2xlarge": 0.384}

var zones = []string{"us-east-1a", "us-east-1b"}

func writeInstanceTypes(t testing.TB, dir string) string {
	t.Helper()
	var types []testenv.KwokInstanceType
	for name, r := range instanceTypes {
		types = append(types, testenv.SimpleKwokType(name, r[0], r[1], r[2], prices[name], zones))
	}
	path := filepath.Join(dir, "instance-types.json")
	if err := testenv.WriteInstanceTypes(path, types); err != nil {
		t.Fatal(err)
	}
	return path
}

// newWorld starts the control plane with Karpenter, the AWS fake seeded
// with the groups (nodes per group), and the hook that mirrors ASG
// instances as kwok nodes. opts adjust the control plane's options.
func newWorld(t testing.TB, groups []legacyGroup, nodesPerGroup int, opts ...func(*testenv.Options)) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{t: t, dir: dir, groups: groups}
	o := testenv.Options{Karpenter: true, InstanceTypesFile: writeInstanceTypes(t, dir)}
	for _, f := range opts {
		f(&o)
	}
	w.env = testenv.Start(t, o) // skips with KM_SKIP_E2E=1
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	w.bin = bin

	acct := &awsfake.Account{ID: accountID, Region: region}
	var subnets []string
	subnetOf := map[string]string{}
	for i, z := range zones {
		id := fmt.Sprintf("subnet-%d", i)
		subnets = append(subnets, id)
		subnetOf[z] = id
		acct.EC2.Subnets = append(acct.EC2.Subnets, ec2types.Subnet{SubnetId: &id, AvailabilityZone: ptr.To(z), VpcId: ptr.To("vpc-1")})
	}
	acct.EC2.SecurityGroups = []ec2types.SecurityGroup{{GroupId: ptr.To("sg-nodes"), GroupName: ptr.To("nodes"), VpcId: ptr.To("vpc-1")}}
	cl := awsfake.EKSCluster{Cluster: ekstypes.Cluster{
		Name: ptr.To(clusterName), Arn: ptr.To(fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", region, accountID, clusterName)),
		Version: ptr.To("1.31"), Status: ekstypes.ClusterStatusActive,
		AccessConfig:       &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeConfigMap},
		ResourcesVpcConfig: &ekstypes.VpcConfigResponse{SubnetIds: subnets, SecurityGroupIds: []string{"sg-nodes"}, ClusterSecurityGroupId: ptr.To("sg-nodes")},
	}}
	seq := 0
	for _, g := range groups {
		n := cmp.Or(g.nodes, nodesPerGroup)
		var groupSubnets []string
		for _, z := range g.zones() {
			groupSubnets = append(groupSubnets, subnetOf[z])
		}
		asg := astypes.AutoScalingGroup{
			AutoScalingGroupName: ptr.To(g.asg), MinSize: ptr.To(g.min), MaxSize: ptr.To(g.max), DesiredCapacity: ptr.To(int32(n)),
			AvailabilityZones: g.zones(), VPCZoneIdentifier: ptr.To(strings.Join(groupSubnets, ",")),
			MixedInstancesPolicy: nil,
			Tags: []astypes.TagDescription{
				{Key: ptr.To("k8s.io/cluster-autoscaler/enabled"), Value: ptr.To("true")},
				{Key: ptr.To("k8s.io/cluster-autoscaler/" + clusterName), Value: ptr.To("owned")},
			},
		}
		for _, k := range slices.Sorted(maps.Keys(g.labels)) {
			asg.Tags = append(asg.Tags, astypes.TagDescription{Key: ptr.To("k8s.io/cluster-autoscaler/node-template/label/" + k), Value: ptr.To(g.labels[k])})
		}
		var eksTaints []ekstypes.Taint
		for _, tt := range g.taints {
			asg.Tags = append(asg.Tags, astypes.TagDescription{Key: ptr.To("k8s.io/cluster-autoscaler/node-template/taint/" + tt.Key), Value: ptr.To(tt.Value + ":" + string(tt.Effect))})
			eksTaints = append(eksTaints, ekstypes.Taint{Key: ptr.To(tt.Key), Value: ptr.To(tt.Value), Effect: eksTaintEffect[tt.Effect]})
		}
		if g.managed {
			asg.Tags = append(asg.Tags, astypes.TagDescription{Key: ptr.To("eks:cluster-name"), Value: ptr.To(clusterName)},
				astypes.TagDescription{Key: ptr.To("eks:nodegroup-name"), Value: ptr.To(g.name)})
			cl.Nodegroups = append(cl.Nodegroups, ekstypes.Nodegroup{
				NodegroupName: ptr.To(g.name), ClusterName: ptr.To(clusterName), Status: ekstypes.NodegroupStatusActive,
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: ptr.To(g.min), MaxSize: ptr.To(g.max), DesiredSize: ptr.To(int32(n))},
				InstanceTypes: []string{"m5.xlarge"}, Subnets: groupSubnets, CapacityType: ekstypes.CapacityTypesOnDemand, AmiType: ekstypes.AMITypesAl2023X8664Standard,
				Labels: g.labels, Taints: eksTaints,
				Resources: &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: ptr.To(g.asg)}}},
			})
		} else {
			acct.EC2.LaunchTemplateVersions = append(acct.EC2.LaunchTemplateVersions, ec2types.LaunchTemplateVersion{
				LaunchTemplateId: ptr.To("lt-" + g.name), LaunchTemplateName: ptr.To(g.name), VersionNumber: ptr.To(int64(1)), DefaultVersion: ptr.To(true),
				LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: ptr.To("ami-0123"), InstanceType: ec2types.InstanceTypeM5Xlarge,
					UserData: ptr.To(base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh " + clusterName + "\n")))},
			})
			asg.LaunchTemplate = &astypes.LaunchTemplateSpecification{LaunchTemplateId: ptr.To("lt-" + g.name), Version: ptr.To("$Default")}
		}
		for _, p := range g.suspended {
			asg.SuspendedProcesses = append(asg.SuspendedProcesses, astypes.SuspendedProcess{ProcessName: ptr.To(p)})
		}
		for i := range n {
			seq++
			asg.Instances = append(asg.Instances, astypes.Instance{
				InstanceId: ptr.To(fmt.Sprintf("i-%017x", 0xe2e0000+seq)), InstanceType: ptr.To("m5.xlarge"),
				AvailabilityZone: ptr.To(g.zones()[i%len(g.zones())]), LifecycleState: astypes.LifecycleStateInService, HealthStatus: ptr.To("Healthy"),
			})
		}
		acct.AutoScaling.Groups = append(acct.AutoScaling.Groups, asg)
	}
	acct.EKS.Clusters = []awsfake.EKSCluster{cl}
	w.aws = awsfake.New(acct)
	t.Cleanup(w.aws.Close)
	w.hook = &testenv.NodeHook{Client: w.env.Client, AWS: w.aws, Node: w.nodeOf}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	if err := w.hook.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(testenv.NodeHookInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := w.hook.Sync(ctx); err != nil && ctx.Err() == nil {
					t.Logf("node hook: %v", err)
				}
			}
		}
	}()
	return w
}

// settleNodes runs the hook until a pass finds no pod left on a deleted
// node, so assertions do not race the DaemonSet controller's cache.
func (w *world) settleNodes(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := w.hook.Sync(ctx); err != nil {
			return err
		}
		stray, err := w.hook.DeletePodsOnGoneNodes(ctx)
		if err != nil || len(stray) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pods still bound to deleted nodes after 30s: %v", stray)
		}
		time.Sleep(testenv.NodeHookInterval)
	}
}

// nodeOf is the kwok node of an instance of the scenario's groups,
// labelled as its group's.
func (w *world) nodeOf(in testenv.ASGInstance) (*corev1.Node, error) {
	g, zone := w.groupOfASG(in.ASG), cmp.Or(in.Zone, zones[0])
	group := g.name
	spec := testenv.NodeSpec{Name: group + "-" + strings.TrimPrefix(in.ID, "i-"), Zone: zone, InstanceType: "m5.xlarge",
		ProviderID: "aws:///" + zone + "/" + in.ID, Labels: maps.Clone(g.labels), Taints: g.taints}
	if w.managed(group) {
		spec.NodeGroup = group
	} else {
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		spec.Labels["alpha.eksctl.io/nodegroup-name"] = group
	}
	return testenv.KwokNode(spec)
}

// eksTaintEffect is a taint effect as EKS writes it.
var eksTaintEffect = map[corev1.TaintEffect]ekstypes.TaintEffect{
	corev1.TaintEffectNoSchedule:       ekstypes.TaintEffectNoSchedule,
	corev1.TaintEffectPreferNoSchedule: ekstypes.TaintEffectPreferNoSchedule,
	corev1.TaintEffectNoExecute:        ekstypes.TaintEffectNoExecute,
}

// groupOfASG is the scenario's group of an ASG (one named after the ASG if
// none).
func (w *world) groupOfASG(asg string) legacyGroup {
	for _, g := range w.groups {
		if g.asg == asg {
			return g
		}
	}
	return legacyGroup{name: asg, asg: asg}
}

func (w *world) managed(group string) bool {
	for _, g := range w.groups {
		if g.name == group {
			return g.managed
		}
	}
	return false
}

// asgState is an ASG's sizes and suspended processes.
type asgState struct {
	Min, Max, Desired int32
	Suspended         []string
	Instances         int
}

func (w *world) asgs() map[string]asgState {
	out := map[string]asgState{}
	w.aws.Account(func(a *awsfake.Account) {
		for _, g := range a.AutoScaling.Groups {
			s := asgState{Min: ptr.Deref(g.MinSize, 0), Max: ptr.Deref(g.MaxSize, 0), Desired: ptr.Deref(g.DesiredCapacity, 0), Instances: len(g.Instances)}
			for _, p := range g.SuspendedProcesses {
				s.Suspended = append(s.Suspended, ptr.Deref(p.ProcessName, ""))
			}
			slices.Sort(s.Suspended)
			out[ptr.Deref(g.AutoScalingGroupName, "")] = s
		}
	})
	return out
}

// command runs the binary against the world.
func (w *world) command(ctx context.Context, args ...string) *exec.Cmd {
	all := append([]string{"--kubeconfig", w.env.Kubeconfig, "--region", region, "--endpoint-url", w.aws.URL(), "--no-color"}, args...)
	cmd := exec.CommandContext(ctx, w.bin, all...)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIDE2E", "AWS_SECRET_ACCESS_KEY=e2e", "AWS_EC2_METADATA_DISABLED=true",
		"HOME="+w.dir, "AWS_CONFIG_FILE="+filepath.Join(w.dir, "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(w.dir, "no-aws-credentials"))
	return cmd
}

// run runs the binary to completion and returns stdout, stderr and the exit code.
func (w *world) run(ctx context.Context, args ...string) (string, string, int) {
	w.t.Helper()
	cmd := w.command(ctx, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// mustRun runs the binary and fails the test unless it exits 0.
func (w *world) mustRun(ctx context.Context, args ...string) string {
	w.t.Helper()
	out, errOut, code := w.run(ctx, args...)
	if code != 0 {
		w.t.Fatalf("karpenter-migrate %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// started is a binary running in the background whose stderr is scanned.
type started struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  strings.Builder
	seen chan struct{}
	done chan error
}

// start runs the binary in the background; seen is closed when a stderr
// line contains trigger.
func (w *world) start(ctx context.Context, trigger string, args ...string) *started {
	w.t.Helper()
	s := &started{cmd: w.command(ctx, args...), seen: make(chan struct{}), done: make(chan error, 1)}
	pr, pw := io.Pipe()
	s.cmd.Stderr, s.cmd.Stdout = pw, io.Discard
	if err := s.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if trigger != "" && strings.Contains(line, trigger) {
				once.Do(func() { close(s.seen) })
			}
		}
	}()
	go func() {
		err := s.cmd.Wait()
		pw.Close()
		s.done <- err
	}()
	return s
}

func (s *started) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}
