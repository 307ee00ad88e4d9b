package discover_test

import (
	"context"
	"encoding/base64"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// world is a seeded account with groups self-managed ASGs of nodesPer
// nodes each (every 10th group an EKS managed node group) and podsPer pods
// per node, plus the matching Kubernetes objects.
func world(groups, nodesPer, podsPer int) (*awsfake.Account, []runtime.Object) {
	acct := &awsfake.Account{Region: "us-east-1"}
	cl := awsfake.EKSCluster{Cluster: ekstypes.Cluster{Name: awssdk.String("prod"), Version: awssdk.String("1.31"),
		Arn:          awssdk.String("arn:aws:eks:us-east-1:123456789012:cluster/prod"),
		AccessConfig: &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap},
		ResourcesVpcConfig: &ekstypes.VpcConfigResponse{VpcId: awssdk.String("vpc-1"), SubnetIds: []string{"subnet-a", "subnet-b"},
			ClusterSecurityGroupId: awssdk.String("sg-cluster")}}}
	acct.EC2.Subnets = []ec2types.Subnet{
		{SubnetId: awssdk.String("subnet-a"), AvailabilityZone: awssdk.String("us-east-1a"), VpcId: awssdk.String("vpc-1")},
		{SubnetId: awssdk.String("subnet-b"), AvailabilityZone: awssdk.String("us-east-1b"), VpcId: awssdk.String("vpc-1")},
	}
	acct.EC2.SecurityGroups = []ec2types.SecurityGroup{{GroupId: awssdk.String("sg-cluster"), GroupName: awssdk.String("cluster")}, {GroupId: awssdk.String("sg-nodes"), GroupName: awssdk.String("nodes")}}
	userData := base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh prod --kubelet-extra-args '--node-labels=team=t --max-pods=58'\n"))
	var objs []runtime.Object
	for g := 0; g < groups; g++ {
		name := fmt.Sprintf("ng-%03d", g)
		lt := fmt.Sprintf("lt-%03d", g)
		acct.EC2.LaunchTemplateVersions = append(acct.EC2.LaunchTemplateVersions, ec2types.LaunchTemplateVersion{
			LaunchTemplateId: &lt, LaunchTemplateName: awssdk.String(name), VersionNumber: awssdk.Int64(1), DefaultVersion: awssdk.Bool(true),
			LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{ImageId: awssdk.String("ami-1"), InstanceType: ec2types.InstanceTypeM5Large,
				SecurityGroupIds: []string{"sg-nodes"}, UserData: &userData,
				MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpPutResponseHopLimit: awssdk.Int32(2), HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired}},
		})
		asg := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String(name), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(int32(nodesPer * 2)),
			DesiredCapacity: awssdk.Int32(int32(nodesPer)), AvailabilityZones: []string{"us-east-1a", "us-east-1b"}, VPCZoneIdentifier: awssdk.String("subnet-a,subnet-b"),
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: &lt, Version: awssdk.String("$Latest")},
			Tags: []astypes.TagDescription{
				{Key: awssdk.String("k8s.io/cluster-autoscaler/enabled"), Value: awssdk.String("true")},
				{Key: awssdk.String("k8s.io/cluster-autoscaler/prod"), Value: awssdk.String("owned")},
				{Key: awssdk.String("k8s.io/cluster-autoscaler/node-template/label/workload"), Value: awssdk.String("general")},
				{Key: awssdk.String("k8s.io/cluster-autoscaler/node-template/taint/dedicated"), Value: awssdk.String("general:NoSchedule")},
				{Key: awssdk.String("k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"), Value: awssdk.String("100G")},
			}}
		managed := g%10 == 9
		if managed {
			cl.Nodegroups = append(cl.Nodegroups, ekstypes.Nodegroup{NodegroupName: awssdk.String("mng-" + name), ClusterName: awssdk.String("prod"),
				Status: ekstypes.NodegroupStatusActive, CapacityType: ekstypes.CapacityTypesOnDemand, AmiType: ekstypes.AMITypesAl2023X8664Standard,
				InstanceTypes: []string{"m5.large"}, ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(int32(nodesPer * 2)), DesiredSize: awssdk.Int32(int32(nodesPer))},
				Labels:    map[string]string{"eks.amazonaws.com/nodegroup": "mng-" + name},
				Resources: &ekstypes.NodegroupResources{AutoScalingGroups: []ekstypes.AutoScalingGroup{{Name: awssdk.String(name)}}}})
			asg.Tags = append(asg.Tags, astypes.TagDescription{Key: awssdk.String("eks:cluster-name"), Value: awssdk.String("prod")})
		}
		for n := 0; n < nodesPer; n++ {
			id := fmt.Sprintf("i-%04x%04x", g, n)
			zone := []string{"us-east-1a", "us-east-1b"}[n%2]
			asg.Instances = append(asg.Instances, astypes.Instance{InstanceId: &id, InstanceType: awssdk.String("m5.large"), AvailabilityZone: &zone, LifecycleState: astypes.LifecycleStateInService})
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-" + id, Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: zone}},
				Spec: corev1.NodeSpec{ProviderID: "aws:///" + zone + "/" + id},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi")},
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			objs = append(objs, node)
			for p := 0; p < podsPer; p++ {
				objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%s-%d", id, p),
					OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1", Controller: awssdk.Bool(true)}}},
					Spec:   corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}})
			}
		}
		acct.AutoScaling.Groups = append(acct.AutoScaling.Groups, asg)
	}
	acct.EKS.Clusters = []awsfake.EKSCluster{cl}
	acct.EC2.SpotPrices = []ec2types.SpotPrice{{InstanceType: ec2types.InstanceTypeM5Large, AvailabilityZone: awssdk.String("us-east-1a"), SpotPrice: awssdk.String("0.035"), ProductDescription: ec2types.RIProductDescriptionLinuxUnix, Timestamp: awssdk.Time(time.Now())}}
	objs = append(objs,
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: awssdk.Bool(true)}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler", Labels: map[string]string{"app": "cluster-autoscaler"}},
			Spec: appsv1.DeploymentSpec{Replicas: awssdk.Int32(1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ca",
				Image:   "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.1",
				Command: []string{"./cluster-autoscaler", "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"}}}}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"}, Data: map[string]string{"mapRoles": "[]"}},
	)
	return acct, objs
}

func sources(t testing.TB, acct *awsfake.Account, objs []runtime.Object) (*awsfake.Server, discover.Sources) {
	return sourcesWith(t, acct, fake.NewSimpleClientset(objs...))
}

// sourcesWith points the SDK clients at a fake account and reads
// Kubernetes from kube.
func sourcesWith(t testing.TB, acct *awsfake.Account, kube kubernetes.Interface) (*awsfake.Server, discover.Sources) {
	srv := awsfake.New(acct)
	t.Cleanup(srv.Close)
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{Region: "us-east-1", EndpointURL: srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := kmaws.NewClients(cfg)
	return srv, discover.Sources{AutoScaling: c.AutoScaling, EC2: c.EC2, EKS: c.EKS, Kube: kube}
}

func TestRun(t *testing.T) {
	acct, objs := world(10, 3, 2)
	_, src := sources(t, acct, objs)
	var steps []string
	inv, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod", Region: "us-east-1", Progress: func(s string) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 6 {
		t.Errorf("progress steps = %v", steps)
	}
	if got := len(inv.NodeGroups); got != 10 {
		t.Fatalf("node groups = %d, want 10", got)
	}
	self, _ := inv.NodeGroup("ng-000")
	mng, ok := inv.NodeGroup("mng-ng-009")
	if !ok || mng.Kind != inventory.Managed || mng.ASGName != "ng-009" {
		t.Fatalf("managed node group not merged with its ASG: %+v", mng)
	}
	if self.Kind != inventory.SelfManaged || self.Labels["workload"] != "general" || self.Labels["team"] != "t" ||
		len(self.Taints) != 1 || self.Taints[0].Value != "general" || self.TemplateResources["ephemeral-storage"] != "100G" {
		t.Errorf("CA node-template tags / bootstrap labels not read: labels %v taints %v resources %v", self.Labels, self.Taints, self.TemplateResources)
	}
	lt := self.LaunchTemplate
	if lt == nil || lt.AMIID != "ami-1" || lt.UserData != "" || !lt.UserDataRedacted || lt.Bootstrap == nil || *lt.Bootstrap.MaxPods != 58 ||
		*lt.MetadataOptions.HTTPPutResponseHopLimit != 2 {
		t.Errorf("launch template not read or user data not redacted: %+v", lt)
	}
	if got := self.Zones; len(got) != 2 || len(self.Instances) != 3 || self.InstanceTypes[0] != "m5.large" {
		t.Errorf("zones %v, instances %d, types %v", got, len(self.Instances), self.InstanceTypes)
	}
	if len(inv.NodesOf("ng-000")) != 3 || len(inv.NodesOf("mng-ng-009")) != 3 {
		t.Errorf("nodes not joined to groups via providerID")
	}
	if p := inv.Pods[0]; p.OwnerKind != inventory.OwnerDeployment || p.OwnerName != "web" || p.Requests.Cpu().MilliValue() != 100 {
		t.Errorf("pod owner chain / requests: %+v", p)
	}
	if inv.ClusterAutoscaler == nil || inv.ClusterAutoscaler.Version != "v1.32.1" || len(inv.ClusterAutoscaler.AutoDiscovery) != 1 {
		t.Errorf("cluster autoscaler: %+v", inv.ClusterAutoscaler)
	}
	if inv.Cluster.AuthenticationMode != "API_AND_CONFIG_MAP" || inv.Cluster.AccountID != "123456789012" || inv.AWSAuth == nil {
		t.Errorf("cluster: %+v", inv.Cluster)
	}
	if len(inv.SpotPrices) != 1 || inv.SpotPrices[0].Price != 0.035 || len(inv.Subnets) != 2 || len(inv.SecurityGroups) != 2 {
		t.Errorf("spot %v subnets %d sgs %d", inv.SpotPrices, len(inv.Subnets), len(inv.SecurityGroups))
	}

	// --include-user-data keeps it; two runs give the same bytes.
	inv2, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod", Region: "us-east-1", IncludeUserData: true})
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := inv2.NodeGroup("ng-000")
	if g2.LaunchTemplate.UserData == "" || g2.LaunchTemplate.UserDataRedacted {
		t.Error("--include-user-data did not keep user data")
	}
	inv3, _ := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod", Region: "us-east-1", IncludeUserData: true})
	a, _ := inventory.NewSnapshot(*inv2, time.Unix(0, 0)).Marshal()
	b, _ := inventory.NewSnapshot(*inv3, time.Unix(0, 0)).Marshal()
	if string(a) != string(b) {
		t.Error("two discoveries of an unchanged cluster differ")
	}
}

// A pod still bound to a node that is gone (its node deleted, the pod not
// yet collected: what a rollback leaves for a moment) is left out rather
// than failing the inventory (#19: plan right after a rollback).
func TestPodOnGoneNodeLeftOut(t *testing.T) {
	acct, objs := world(1, 1, 1)
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent-orphan"},
		Spec: corev1.PodSpec{NodeName: "karpenter-node-deleted"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	_, src := sources(t, acct, objs)
	inv, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod", Region: "us-east-1"})
	if err != nil {
		t.Fatalf("discover with a pod on a deleted node: %v", err)
	}
	for _, p := range inv.Pods {
		if p.Name == "agent-orphan" {
			t.Errorf("the pod of the deleted node is in the inventory: %+v", p)
		}
	}
	if len(inv.Pods) != 1 {
		t.Errorf("%d pods, want the one on a listed node", len(inv.Pods))
	}
}

func TestAccessDenied(t *testing.T) {
	acct, objs := world(1, 1, 1)
	srv, src := sources(t, acct, objs)
	srv.SetFault("autoscaling", "DescribeAutoScalingGroups", awsfake.Fault{Deny: true})
	_, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod"})
	if err == nil || !contains(err.Error(), "autoscaling:DescribeAutoScalingGroups denied: grant it to the caller") {
		t.Fatalf("got %v", err)
	}
}

// TestCallsDoNotGrowWithNodes checks there is no per-instance N+1: ten
// times the nodes costs only more pages.
func TestCallsDoNotGrowWithNodes(t *testing.T) {
	count := func(nodesPer int) int {
		acct, objs := world(20, nodesPer, 0)
		srv, src := sources(t, acct, objs)
		if _, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod"}); err != nil {
			t.Fatal(err)
		}
		return srv.TotalCalls()
	}
	small, large := count(2), count(20)
	if large != small {
		t.Errorf("AWS calls grew from %d to %d with 10x the nodes", small, large)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// pagedWorld is world with its pods and nodes behind a paging clientset;
// the seed objects are garbage once it returns.
func pagedWorld(groups, nodesPer, podsPer int) (*awsfake.Account, *pagingClient) {
	acct, objs := world(groups, nodesPer, podsPer)
	return acct, newPagingClient(objs)
}

// BenchmarkDiscover runs discovery of 500 ASGs, 5,000 nodes and 50,000 pods
// against the AWS fake and reports AWS calls per run.
func BenchmarkDiscover(b *testing.B) {
	acct, kube := pagedWorld(500, 10, 10)
	srv, src := sourcesWith(b, acct, kube)
	b.ReportAllocs()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	base, baseLive := ms.HeapInuse, ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() { // sample the heap discover adds on top of the fixtures
		var m goruntime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				goruntime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
					peak.Store(m.HeapInuse - base)
				}
			}
		}
	}()
	b.ResetTimer()
	var inv *inventory.Inventory
	for i := 0; i < b.N; i++ {
		srv.ResetCalls()
		var err error
		inv, err = discover.Run(context.Background(), src, discover.Options{ClusterName: "prod"})
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Nodes) != 5000 || len(inv.Pods) != 50000 {
			b.Fatalf("nodes %d pods %d", len(inv.Nodes), len(inv.Pods))
		}
	}
	b.StopTimer()
	close(stop)
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	b.ReportMetric(float64(srv.TotalCalls()), "aws-calls/op")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	// What the inventory itself keeps once discovery is over.
	b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(baseLive))/(1<<20), "inventory-MB")
	goruntime.KeepAlive(inv)
	goruntime.KeepAlive(src) // the fixture stays in the baseline
}

// TestControllerHome reads what decides where the Karpenter controller
// lives: the Fargate profiles (through the SDK, paginated) and the
// controller Deployment's scheduling.
func TestControllerHome(t *testing.T) {
	acct, objs := world(1, 1, 1)
	for i := range 3 {
		acct.EKS.Clusters[0].FargateProfiles = append(acct.EKS.Clusters[0].FargateProfiles, ekstypes.FargateProfile{
			FargateProfileName: awssdk.String(fmt.Sprintf("fp-%d", i)), Status: ekstypes.FargateProfileStatusActive,
			Selectors: []ekstypes.FargateProfileSelector{{Namespace: awssdk.String("karpenter"), Labels: map[string]string{"app.kubernetes.io/name": "karpenter"}}}})
	}
	labels := map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
	tol := []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}
	objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: "karpenter", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: awssdk.Int32(2), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Tolerations: tol, Containers: []corev1.Container{{Name: "controller", Image: "public.ecr.aws/karpenter/controller:1.14.1"}}}}}})
	srv, src := sources(t, acct, objs)
	inv, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.FargateProfiles) != 3 || inv.FargateProfiles[2].Name != "fp-2" || !inv.FargateProfiles[0].Selects("karpenter", labels) ||
		inv.FargateProfiles[0].Selects("karpenter", nil) {
		t.Errorf("Fargate profiles %+v", inv.FargateProfiles)
	}
	if n := srv.Calls("eks", "DescribeFargateProfile"); n != 3 {
		t.Errorf("%d DescribeFargateProfile calls, want one per profile", n)
	}
	k := inv.Karpenter
	if k == nil || k.ControllerReplicas != 2 || k.ControllerLabels["app.kubernetes.io/instance"] != "karpenter" || len(k.ControllerTolerations) != 1 {
		t.Errorf("Karpenter controller %+v", k)
	}
}
