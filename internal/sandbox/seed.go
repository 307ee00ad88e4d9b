package sandbox

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Demo account constants.
const (
	DemoCluster   = "demo"
	DemoRegion    = "us-east-1"
	DemoAccountID = "111122223333"
)

var demoZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// Priorities of the demo's pods.
const (
	prioritySystem = int32(2000000000)
	priorityBatch  = int32(100)
)

// DemoInventory is the seeded account the demo migrates: an EKS cluster
// "demo" (CONFIG_MAP auth) with four node groups —
//
//   - system: managed, on-demand m5.large × 3, label role=system
//   - demo-apps: self-managed ASG with Cluster Autoscaler tags and a
//     MixedInstancesPolicy (m5/m5a/m6i xlarge, spot above an on-demand base of 2) × 12
//   - batch: managed, spot c5.xlarge/c5.2xlarge × 6
//   - demo-gpu: self-managed g4dn.xlarge × 2, tainted nvidia.com/gpu
//
// — and ~300 pods: web and API Deployments, workers, a Redis StatefulSet
// on zonal volumes, batch Jobs, a GPU inference Deployment, six
// DaemonSets and PDBs. One workload of each common readiness finding is
// included: a PDB that allows no disruption on a single replica (billing),
// CA's safe-to-evict=false (reports), emptyDir scratch data (workers),
// a selector pinned to eks.amazonaws.com/nodegroup (batch Jobs), zonal
// PersistentVolumes (redis) and pods without requests (echo).
//
// Pods carry no node: the sandbox's scheduler places them when loaded.
func DemoInventory() inventory.Inventory {
	inv := inventory.Inventory{
		Cluster: inventory.Cluster{
			Name: DemoCluster, Region: DemoRegion, AccountID: DemoAccountID, Version: "1.35",
			ARN:                    fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", DemoRegion, DemoAccountID, DemoCluster),
			Endpoint:               "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
			AuthenticationMode:     "CONFIG_MAP",
			OIDCIssuer:             "https://oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
			VPCID:                  "vpc-0demo0000000000a",
			SubnetIDs:              []string{"subnet-0demo00000000000a", "subnet-0demo00000000000b", "subnet-0demo00000000000c"},
			ClusterSecurityGroupID: "sg-0demo0000000cluster",
			ServiceIPv4CIDR:        "172.20.0.0/16",
		},
	}
	nodeRole := fmt.Sprintf("arn:aws:iam::%s:role/demo-node-role", DemoAccountID)
	caTags := func(extra map[string]string) map[string]string {
		t := map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/" + DemoCluster: "owned",
			"kubernetes.io/cluster/" + DemoCluster: "owned"}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	inv.NodeGroups = []inventory.NodeGroup{
		{Name: "demo-apps", Kind: inventory.SelfManaged, ASGName: "demo-apps", MinSize: 3, MaxSize: 30, DesiredSize: 12,
			InstanceTypes: []string{"m5.xlarge", "m5a.xlarge", "m6i.xlarge"}, CapacityType: inventory.CapacitySpot,
			Mixed: &inventory.MixedPolicy{OnDemandBaseCapacity: 2, OnDemandPercentageAboveBaseCapacity: 0, SpotAllocationStrategy: "price-capacity-optimized"},
			Zones: demoZones, Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_STANDARD", NodeRoleARN: nodeRole,
			Labels: map[string]string{"role": "apps"},
			Tags:   caTags(map[string]string{"k8s.io/cluster-autoscaler/node-template/label/role": "apps"})},
		{Name: "batch", Kind: inventory.Managed, ASGName: "eks-batch-demo0b47", MinSize: 0, MaxSize: 20, DesiredSize: 6,
			InstanceTypes: []string{"c5.xlarge", "c5.2xlarge"}, CapacityType: inventory.CapacitySpot,
			Zones: demoZones, Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_STANDARD", NodeRoleARN: nodeRole,
			Labels: map[string]string{"workload": "batch"}, Tags: caTags(nil)},
		{Name: "demo-gpu", Kind: inventory.SelfManaged, ASGName: "demo-gpu", MinSize: 0, MaxSize: 4, DesiredSize: 2,
			InstanceTypes: []string{"g4dn.xlarge"}, CapacityType: inventory.CapacityOnDemand,
			Zones: demoZones[:2], Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_NVIDIA", NodeRoleARN: nodeRole,
			Labels: map[string]string{"accelerator": "nvidia"},
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			Tags: caTags(map[string]string{"k8s.io/cluster-autoscaler/node-template/label/accelerator": "nvidia",
				"k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu":     "true:NoSchedule",
				"k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1"})},
		{Name: "system", Kind: inventory.Managed, ASGName: "eks-system-demo9a21", MinSize: 3, MaxSize: 5, DesiredSize: 3,
			InstanceTypes: []string{"m5.large"}, CapacityType: inventory.CapacityOnDemand,
			Zones: demoZones, Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_STANDARD", NodeRoleARN: nodeRole,
			Labels: map[string]string{"role": "system"}, Tags: map[string]string{"kubernetes.io/cluster/" + DemoCluster: "owned"}},
	}
	for _, z := range demoZones {
		inv.Subnets = append(inv.Subnets, inventory.Subnet{ID: "subnet-0demo00000000000" + z[len(z)-1:], Zone: z, VPCID: inv.Cluster.VPCID,
			CIDR: fmt.Sprintf("10.0.%d.0/20", 16*int(z[len(z)-1]-'a')), AvailableIPs: 4000})
	}
	inv.SecurityGroups = []inventory.SecurityGroup{{ID: "sg-0demo0000000cluster", Name: "eks-cluster-sg-demo", VPCID: inv.Cluster.VPCID}}
	inv.ClusterAutoscaler = &inventory.ClusterAutoscaler{Namespace: "kube-system", Name: "cluster-autoscaler", Replicas: 1,
		Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0", Version: "1.35.0",
		Args:          []string{"--cloud-provider=aws", "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/demo", "--balance-similar-node-groups", "--skip-nodes-with-system-pods=false"},
		AutoDiscovery: []string{"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/demo"}}
	inv.AWSAuth = &inventory.AWSAuth{Data: map[string]string{"mapRoles": fmt.Sprintf(`- rolearn: %s
  username: system:node:{{EC2PrivateDNSName}}
  groups:
  - system:bootstrappers
  - system:nodes
`, nodeRole)}}

	system := func(p *inventory.Pod) {
		p.NodeSelector = map[string]string{"role": "system"}
		p.PriorityClassName = "system-cluster-critical"
		p.Priority = ptr(prioritySystem)
	}
	add := func(kind, ns, name string, replicas int32, cpu, mem string, mut func(*inventory.Pod)) {
		lbl := map[string]string{"app.kubernetes.io/name": name}
		inv.Workloads = append(inv.Workloads, inventory.Workload{Kind: kind, Namespace: ns, Name: name, Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: lbl}})
		for i := int32(0); i < replicas; i++ {
			p := inventory.Pod{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), Labels: copyMap(lbl), OwnerKind: kind, OwnerName: name,
				Requests: requests(cpu, mem)}
			if mut != nil {
				mut(&p)
			}
			inv.Pods = append(inv.Pods, p)
		}
	}
	dep, sts, job := inventory.OwnerDeployment, inventory.OwnerStatefulSet, inventory.OwnerJob
	add(dep, "kube-system", "coredns", 2, "100m", "70Mi", system)
	add(dep, "kube-system", "cluster-autoscaler", 1, "100m", "600Mi", system)
	add(dep, "kube-system", "metrics-server", 1, "100m", "200Mi", system)
	add(dep, "kube-system", "aws-load-balancer-controller", 2, "100m", "200Mi", system)
	add(dep, "kube-system", "ebs-csi-controller", 2, "50m", "100Mi", system)
	add(dep, "web", "frontend", 30, "100m", "128Mi", nil)
	add(dep, "web", "web", 40, "200m", "256Mi", nil)
	add(dep, "api", "api", 30, "400m", "768Mi", nil)
	add(dep, "api", "billing", 1, "250m", "512Mi", nil)
	add(dep, "workers", "workers", 20, "400m", "1Gi", func(p *inventory.Pod) {
		p.Volumes = []inventory.Volume{{Name: "scratch", Kind: inventory.VolumeEmptyDir}}
	})
	add(dep, "workers", "notifications", 20, "100m", "128Mi", nil)
	add(dep, "workers", "reports", 2, "250m", "512Mi", func(p *inventory.Pod) {
		p.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
	})
	add(dep, "workers", "echo", 3, "", "", nil)
	add(sts, "cache", "redis", 3, "1", "4Gi", func(p *inventory.Pod) {
		p.Volumes = []inventory.Volume{{Name: "data", Kind: inventory.VolumePVC, ClaimName: "data-" + p.Name}}
	})
	for _, j := range []string{"etl", "reindex", "thumbnails"} {
		add(job, "batch", j, 6, "1", "1536Mi", func(p *inventory.Pod) {
			p.NodeSelector = map[string]string{"eks.amazonaws.com/nodegroup": "batch"}
			p.Priority = ptr(priorityBatch)
		})
	}
	add(dep, "ml", "inference", 2, "2", "8Gi", func(p *inventory.Pod) {
		p.Requests[ResourceGPU] = resource.MustParse("1")
		p.NodeSelector = map[string]string{"accelerator": "nvidia"}
		p.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})
	for i, z := range demoZones {
		inv.PersistentVolumes = append(inv.PersistentVolumes, inventory.PersistentVolume{
			Name: fmt.Sprintf("pvc-redis-%d", i), ClaimNamespace: "cache", ClaimName: fmt.Sprintf("data-redis-%d", i), StorageClass: "gp3", Zones: []string{z}})
	}

	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	inv.DaemonSets = []inventory.DaemonSet{
		{Namespace: "kube-system", Name: "aws-node", Requests: requests("25m", "64Mi"), Tolerations: all},
		{Namespace: "kube-system", Name: "kube-proxy", Requests: requests("100m", "32Mi"), Tolerations: all},
		{Namespace: "kube-system", Name: "ebs-csi-node", Requests: requests("10m", "40Mi"), Tolerations: all},
		{Namespace: "kube-system", Name: "nvidia-device-plugin", Requests: requests("10m", "20Mi"), NodeSelector: map[string]string{"accelerator": "nvidia"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		{Namespace: "monitoring", Name: "fluent-bit", Requests: requests("50m", "100Mi"), Tolerations: all},
		{Namespace: "monitoring", Name: "node-exporter", Requests: requests("10m", "30Mi"), Tolerations: all},
	}
	pdb := func(ns, name string, minAvail, maxUnavail *intstr.IntOrString) {
		inv.PDBs = append(inv.PDBs, inventory.PDB{Namespace: ns, Name: name,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
			MinAvailable: minAvail, MaxUnavailable: maxUnavail})
	}
	ip := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	pdb("kube-system", "coredns", nil, ip(1))
	pdb("web", "frontend", nil, pct("25%"))
	pdb("web", "web", nil, pct("10%"))
	pdb("api", "api", pct("80%"), nil)
	pdb("api", "billing", ip(1), nil)
	pdb("cache", "redis", nil, ip(1))
	pdb("ml", "inference", ip(1), nil)
	return inv
}

func requests(cpu, mem string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	if cpu != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return rl
}
