// Package inventory is the model every stage shares: the node groups of a
// cluster, their nodes and the workloads on them, as discovered from AWS and
// Kubernetes. A Snapshot is its portable, versioned JSON form.
//
// Scheduling-relevant pod fields reuse the Kubernetes core types so that the
// engine reads them exactly as the scheduler does; everything else (env,
// images, secrets) is deliberately not captured.
package inventory

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Inventory is everything discover found about one cluster.
type Inventory struct {
	Cluster           Cluster            `json:"cluster"`
	NodeGroups        []NodeGroup        `json:"nodeGroups"`
	Nodes             []Node             `json:"nodes"`
	Pods              []Pod              `json:"pods"`
	Workloads         []Workload         `json:"workloads,omitempty"`
	DaemonSets        []DaemonSet        `json:"daemonSets,omitempty"`
	PDBs              []PDB              `json:"pdbs,omitempty"`
	PersistentVolumes []PersistentVolume `json:"persistentVolumes,omitempty"`
	// Claims and StorageClasses are what Karpenter reads of a pod's volumes
	// besides the PV (volumes.go): an unbound claim takes its
	// WaitForFirstConsumer class's allowedTopologies.
	Claims         []PersistentVolumeClaim `json:"claims,omitempty"`
	StorageClasses []StorageClass          `json:"storageClasses,omitempty"`
	Subnets        []Subnet                `json:"subnets,omitempty"`
	SecurityGroups []SecurityGroup         `json:"securityGroups,omitempty"`
	SpotPrices     []SpotPrice             `json:"spotPrices,omitempty"`
	// Prices are the region's instance prices discover read (nil: none
	// were read, and the embedded us-east-1 list stands in).
	Prices            *Prices            `json:"prices,omitempty"`
	ClusterAutoscaler *ClusterAutoscaler `json:"clusterAutoscaler,omitempty"`
	AWSAuth           *AWSAuth           `json:"awsAuth,omitempty"`
	Karpenter         *KarpenterInstall  `json:"karpenter,omitempty"`
	// FargateProfiles are the cluster's Fargate profiles: a pod they select
	// runs on Fargate, on no node group.
	FargateProfiles []FargateProfile `json:"fargateProfiles,omitempty"`
}

// Cluster is the EKS control plane.
type Cluster struct {
	Name      string `json:"name"`
	Region    string `json:"region"`
	AccountID string `json:"accountID,omitempty"`
	ARN       string `json:"arn,omitempty"`
	Version   string `json:"version,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	// AuthenticationMode is CONFIG_MAP, API_AND_CONFIG_MAP or API.
	AuthenticationMode     string            `json:"authenticationMode,omitempty"`
	OIDCIssuer             string            `json:"oidcIssuer,omitempty"`
	OIDCProviderARN        string            `json:"oidcProviderARN,omitempty"`
	PodIdentityAgent       bool              `json:"podIdentityAgent,omitempty"`
	VPCID                  string            `json:"vpcID,omitempty"`
	SubnetIDs              []string          `json:"subnetIDs,omitempty"`
	ClusterSecurityGroupID string            `json:"clusterSecurityGroupID,omitempty"`
	SecurityGroupIDs       []string          `json:"securityGroupIDs,omitempty"`
	ServiceIPv4CIDR        string            `json:"serviceIPv4CIDR,omitempty"`
	Tags                   map[string]string `json:"tags,omitempty"`
}

// NodeGroupKind tells managed node groups from self-managed ASGs.
type NodeGroupKind string

const (
	Managed     NodeGroupKind = "managed"
	SelfManaged NodeGroupKind = "self-managed"
)

// Capacity types, as Karpenter spells them.
const (
	CapacityOnDemand = "on-demand"
	CapacitySpot     = "spot"
)

// NodeGroup is one ASG-backed group of legacy nodes.
type NodeGroup struct {
	Name    string        `json:"name"`
	Kind    NodeGroupKind `json:"kind"`
	ASGName string        `json:"asgName"`
	ARN     string        `json:"arn,omitempty"`

	MinSize     int32 `json:"minSize"`
	MaxSize     int32 `json:"maxSize"`
	DesiredSize int32 `json:"desiredSize"`

	// InstanceTypes lists every type the group may launch, the launch
	// template's first, then MixedInstancesPolicy overrides in order.
	InstanceTypes []string `json:"instanceTypes"`
	// CapacityType is on-demand or spot; Mixed describes a group that runs both.
	CapacityType string       `json:"capacityType"`
	Mixed        *MixedPolicy `json:"mixedInstancesPolicy,omitempty"`
	Zones        []string     `json:"zones"`
	SubnetIDs    []string     `json:"subnetIDs,omitempty"`

	// AMIType is the managed group's AMI type (AL2_x86_64, AL2023_x86_64_STANDARD,
	// BOTTLEROCKET_x86_64, CUSTOM, ...) or one inferred from the AMI.
	AMIType        string `json:"amiType,omitempty"`
	ReleaseVersion string `json:"releaseVersion,omitempty"`
	AMIID          string `json:"amiID,omitempty"`
	Arch           string `json:"arch,omitempty"` // amd64 or arm64
	OS             string `json:"os,omitempty"`   // linux or windows

	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`

	NodeRoleARN        string   `json:"nodeRoleARN,omitempty"`
	InstanceProfileARN string   `json:"instanceProfileARN,omitempty"`
	SecurityGroupIDs   []string `json:"securityGroupIDs,omitempty"`

	LaunchTemplate *LaunchTemplate `json:"launchTemplate,omitempty"`
	// LaunchConfiguration is the name of a legacy launch configuration, if any.
	LaunchConfiguration string `json:"launchConfiguration,omitempty"`

	SuspendedProcesses               []string `json:"suspendedProcesses,omitempty"`
	NewInstancesProtectedFromScaleIn bool     `json:"newInstancesProtectedFromScaleIn,omitempty"`
	// MaxUnavailable is the managed group's update config, when set.
	MaxUnavailable           *int32 `json:"maxUnavailable,omitempty"`
	MaxUnavailablePercentage *int32 `json:"maxUnavailablePercentage,omitempty"`

	// Tags are the ASG's tags, including Cluster Autoscaler's node-template
	// tags and any owner tags (CloudFormation, eksctl, Terraform).
	Tags map[string]string `json:"tags,omitempty"`
	// TemplateResources are CA node-template resources (e.g. ephemeral-storage: 100G).
	TemplateResources map[string]string `json:"templateResources,omitempty"`
	// AutoscalingOptions are CA's per-ASG overrides (scaledownunneededtime: 10m0s).
	AutoscalingOptions map[string]string `json:"autoscalingOptions,omitempty"`

	Instances []Instance `json:"instances,omitempty"`
}

// MixedPolicy is an ASG MixedInstancesPolicy's distribution.
type MixedPolicy struct {
	OnDemandBaseCapacity                int32  `json:"onDemandBaseCapacity"`
	OnDemandPercentageAboveBaseCapacity int32  `json:"onDemandPercentageAboveBaseCapacity"`
	SpotAllocationStrategy              string `json:"spotAllocationStrategy,omitempty"`
	OnDemandAllocationStrategy          string `json:"onDemandAllocationStrategy,omitempty"`
}

// Instance is an EC2 instance in a node group.
type Instance struct {
	ID                   string `json:"id"`
	InstanceType         string `json:"instanceType"`
	Zone                 string `json:"zone"`
	LifecycleState       string `json:"lifecycleState,omitempty"`
	ProtectedFromScaleIn bool   `json:"protectedFromScaleIn,omitempty"`
	CapacityType         string `json:"capacityType,omitempty"`
}

// LaunchTemplate is the part of a launch template version that matters to a
// NodePool or EC2NodeClass.
type LaunchTemplate struct {
	ID                  string            `json:"id,omitempty"`
	Name                string            `json:"name,omitempty"`
	Version             string            `json:"version,omitempty"`
	AMIID               string            `json:"amiID,omitempty"`
	InstanceType        string            `json:"instanceType,omitempty"`
	SecurityGroupIDs    []string          `json:"securityGroupIDs,omitempty"`
	InstanceProfileARN  string            `json:"instanceProfileARN,omitempty"`
	BlockDeviceMappings []BlockDevice     `json:"blockDeviceMappings,omitempty"`
	MetadataOptions     *MetadataOptions  `json:"metadataOptions,omitempty"`
	DetailedMonitoring  bool              `json:"detailedMonitoring,omitempty"`
	AssociatePublicIP   *bool             `json:"associatePublicIPAddress,omitempty"`
	Tags                map[string]string `json:"tags,omitempty"`
	// UserData is the decoded user data; discover redacts it unless asked.
	UserData         string     `json:"userData,omitempty"`
	UserDataRedacted bool       `json:"userDataRedacted,omitempty"`
	Bootstrap        *Bootstrap `json:"bootstrap,omitempty"`
}

// BlockDevice is an EBS block device mapping.
type BlockDevice struct {
	DeviceName          string `json:"deviceName"`
	VolumeSizeGiB       int32  `json:"volumeSizeGiB,omitempty"`
	VolumeType          string `json:"volumeType,omitempty"`
	IOPS                *int32 `json:"iops,omitempty"`
	Throughput          *int32 `json:"throughput,omitempty"`
	Encrypted           *bool  `json:"encrypted,omitempty"`
	KMSKeyID            string `json:"kmsKeyID,omitempty"`
	DeleteOnTermination *bool  `json:"deleteOnTermination,omitempty"`
	SnapshotID          string `json:"snapshotID,omitempty"`
}

// MetadataOptions are the instance metadata (IMDS) settings.
type MetadataOptions struct {
	HTTPEndpoint            string `json:"httpEndpoint,omitempty"`
	HTTPTokens              string `json:"httpTokens,omitempty"`
	HTTPPutResponseHopLimit *int32 `json:"httpPutResponseHopLimit,omitempty"`
	HTTPProtocolIPv6        string `json:"httpProtocolIPv6,omitempty"`
}

// Bootstrap formats of user data.
const (
	BootstrapAL2          = "al2-bootstrap.sh"
	BootstrapNodeadm      = "al2023-nodeadm"
	BootstrapBottlerocket = "bottlerocket-toml"
	BootstrapUnknown      = "unknown"
)

// Bootstrap is what the user data tells the kubelet.
type Bootstrap struct {
	Format         string            `json:"format"`
	MaxPods        *int32            `json:"maxPods,omitempty"`
	NodeLabels     map[string]string `json:"nodeLabels,omitempty"`
	Taints         []corev1.Taint    `json:"taints,omitempty"`
	KubeReserved   map[string]string `json:"kubeReserved,omitempty"`
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	EvictionHard   map[string]string `json:"evictionHard,omitempty"`
	EvictionSoft   map[string]string `json:"evictionSoft,omitempty"`
	ClusterDNS     []string          `json:"clusterDNS,omitempty"`
	// ExtraArgs are kubelet arguments the fields above do not capture.
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// Custom is true when user data does more than bootstrap the node
	// (extra commands), so it must be carried over as user data.
	Custom bool `json:"custom,omitempty"`
}

// Node is a Kubernetes node.
type Node struct {
	Name         string `json:"name"`
	ProviderID   string `json:"providerID,omitempty"`
	InstanceID   string `json:"instanceID,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	// NodeGroup is the legacy group the node belongs to; empty for nodes
	// that are in none (Karpenter's, Fargate, unmanaged).
	NodeGroup string `json:"nodeGroup,omitempty"`
	// NodePool is set for nodes Karpenter launched.
	NodePool      string              `json:"nodePool,omitempty"`
	Labels        map[string]string   `json:"labels,omitempty"`
	Annotations   map[string]string   `json:"annotations,omitempty"`
	Taints        []corev1.Taint      `json:"taints,omitempty"`
	Capacity      corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable   corev1.ResourceList `json:"allocatable,omitempty"`
	Ready         bool                `json:"ready"`
	Unschedulable bool                `json:"unschedulable,omitempty"`
	CreatedAt     metav1.Time         `json:"createdAt,omitempty"`
	// VolumeLimits are the node's CSINode attach limits per CSI driver
	// (spec.drivers[].allocatable.count): the volumes of each driver that
	// may be attached to it at once.
	VolumeLimits map[string]int32 `json:"volumeLimits,omitempty"`
}

// Node-group labels, in the order NodeGroupOf reads them: EKS managed
// groups, eksctl's self-managed groups, and the label the tool's test
// environments give self-managed nodes.
var nodeGroupLabels = []string{"eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name", "karpenter-migrate.io/node-group"}

// NodeGroupOf returns the legacy node group a node's labels name, or "".
// It is the one answer to "is this node legacy" (discover, the rollout):
// a node Karpenter launched (karpenter.sh/nodepool) never is, although
// generated NodePools may keep eks.amazonaws.com/nodegroup on their nodes
// for workloads that select it (keepNodegroupLabel).
func NodeGroupOf(labels map[string]string) string {
	if labels["karpenter.sh/nodepool"] != "" {
		return ""
	}
	for _, k := range nodeGroupLabels {
		if v := labels[k]; v != "" {
			return v
		}
	}
	return ""
}

// Cluster Autoscaler's auto-discovery tags: a group carrying both is one it
// scales for the cluster. discover reads them; the rollout records and
// restores them on the group kept for the Karpenter controller.
const (
	TagCAEnabled = "k8s.io/cluster-autoscaler/enabled"
	TagCAPrefix  = "k8s.io/cluster-autoscaler/"
)

// CAAutoDiscoveryTags are the tag keys Cluster Autoscaler discovers a
// group of cluster by.
func CAAutoDiscoveryTags(cluster string) []string {
	return []string{TagCAEnabled, TagCAPrefix + cluster}
}

// Annotations that keep a pod from being moved, as Karpenter and Cluster
// Autoscaler read them.
const (
	AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	AnnotationSafeToEvict  = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// DisruptionBlocked returns why a pod with these annotations asks not to be
// moved, or "". The drain skips such a pod and the planner keeps its node.
func DisruptionBlocked(annotations map[string]string) string {
	if annotations[AnnotationDoNotDisrupt] == "true" {
		return AnnotationDoNotDisrupt + "=true"
	}
	if annotations[AnnotationSafeToEvict] == "false" {
		return AnnotationSafeToEvict + "=false"
	}
	return ""
}

// Owner kinds of a pod's top-level controller.
const (
	OwnerDeployment  = "Deployment"
	OwnerStatefulSet = "StatefulSet"
	OwnerDaemonSet   = "DaemonSet"
	OwnerJob         = "Job"
	OwnerCronJob     = "CronJob"
	OwnerReplicaSet  = "ReplicaSet"
	OwnerNone        = ""
)

// Pod is a pod with the fields that decide where it may run and whether it
// may be moved.
type Pod struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	NodeName    string            `json:"nodeName,omitempty"`
	Phase       corev1.PodPhase   `json:"phase,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// OwnerKind/OwnerName name the top of the owner chain (a ReplicaSet's
	// Deployment, a Job's CronJob); empty for bare pods.
	OwnerKind string `json:"ownerKind,omitempty"`
	OwnerName string `json:"ownerName,omitempty"`
	// Requests are the effective requests the scheduler uses:
	// max(sum of containers, largest init container) plus pod overhead.
	Requests                      corev1.ResourceList               `json:"requests,omitempty"`
	NodeSelector                  map[string]string                 `json:"nodeSelector,omitempty"`
	Affinity                      *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations                   []corev1.Toleration               `json:"tolerations,omitempty"`
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	PriorityClassName             string                            `json:"priorityClassName,omitempty"`
	Priority                      *int32                            `json:"priority,omitempty"`
	HostPorts                     []HostPort                        `json:"hostPorts,omitempty"`
	Volumes                       []Volume                          `json:"volumes,omitempty"`
	TerminationGracePeriodSeconds *int64                            `json:"terminationGracePeriodSeconds,omitempty"`
}

// HostPort is a container port bound on the node.
type HostPort struct {
	Port     int32           `json:"port"`
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	HostIP   string          `json:"hostIP,omitempty"`
}

// Volume kinds that matter to a move.
const (
	VolumeEmptyDir = "emptyDir"
	VolumeHostPath = "hostPath"
	VolumePVC      = "persistentVolumeClaim"
	VolumeOther    = "other"
)

// Volume is a pod volume reduced to what decides whether moving loses data
// or is pinned to a zone.
type Volume struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	ClaimName string `json:"claimName,omitempty"`
	// Topology are the node selector terms (ORed) a node must match to
	// reach the claim's volume, and Driver the CSI driver that attaches it:
	// what Karpenter reads of the claim (ResolveVolumes fills both).
	Topology []corev1.NodeSelectorTerm `json:"topology,omitempty"`
	Driver   string                    `json:"driver,omitempty"`
}

// Workload is a controller that owns pods (Deployment, StatefulSet, Job).
type Workload struct {
	Kind          string                `json:"kind"`
	Namespace     string                `json:"namespace"`
	Name          string                `json:"name"`
	Replicas      int32                 `json:"replicas"`
	ReadyReplicas int32                 `json:"readyReplicas"`
	Selector      *metav1.LabelSelector `json:"selector,omitempty"`
}

// DaemonSet runs one pod on every node it selects; its requests are overhead
// on every new node.
type DaemonSet struct {
	Namespace    string              `json:"namespace"`
	Name         string              `json:"name"`
	Labels       map[string]string   `json:"labels,omitempty"`
	Requests     corev1.ResourceList `json:"requests,omitempty"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	HostPorts    []HostPort          `json:"hostPorts,omitempty"`
}

// PDB is a PodDisruptionBudget with its last observed status.
type PDB struct {
	Namespace                  string                                   `json:"namespace"`
	Name                       string                                   `json:"name"`
	Selector                   *metav1.LabelSelector                    `json:"selector,omitempty"`
	MinAvailable               *intstr.IntOrString                      `json:"minAvailable,omitempty"`
	MaxUnavailable             *intstr.IntOrString                      `json:"maxUnavailable,omitempty"`
	UnhealthyPodEvictionPolicy *policyv1.UnhealthyPodEvictionPolicyType `json:"unhealthyPodEvictionPolicy,omitempty"`
	DisruptionsAllowed         int32                                    `json:"disruptionsAllowed"`
	CurrentHealthy             int32                                    `json:"currentHealthy"`
	DesiredHealthy             int32                                    `json:"desiredHealthy"`
	ExpectedPods               int32                                    `json:"expectedPods"`
}

// PersistentVolume is a bound volume with zonal node affinity.
type PersistentVolume struct {
	Name           string   `json:"name"`
	ClaimNamespace string   `json:"claimNamespace,omitempty"`
	ClaimName      string   `json:"claimName,omitempty"`
	StorageClass   string   `json:"storageClass,omitempty"`
	Zones          []string `json:"zones,omitempty"`
	// Driver is the CSI driver that attaches the volume (spec.csi.driver,
	// or ebs.csi.aws.com for an in-tree awsElasticBlockStore volume).
	Driver string `json:"driver,omitempty"`
}

// PersistentVolumeClaim is a claim with the volume it is bound to, if any.
type PersistentVolumeClaim struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	StorageClass string `json:"storageClass,omitempty"`
	VolumeName   string `json:"volumeName,omitempty"`
}

// StorageClass is what scheduling reads of a StorageClass.
type StorageClass struct {
	Name        string `json:"name"`
	Provisioner string `json:"provisioner,omitempty"`
	// VolumeBindingMode is Immediate or WaitForFirstConsumer.
	VolumeBindingMode string                        `json:"volumeBindingMode,omitempty"`
	AllowedTopologies []corev1.TopologySelectorTerm `json:"allowedTopologies,omitempty"`
}

// Subnet is a VPC subnet a node group uses.
type Subnet struct {
	ID           string            `json:"id"`
	Zone         string            `json:"zone"`
	VPCID        string            `json:"vpcID,omitempty"`
	CIDR         string            `json:"cidr,omitempty"`
	AvailableIPs int32             `json:"availableIPs,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// SecurityGroup is an EC2 security group a node group uses.
type SecurityGroup struct {
	ID    string            `json:"id"`
	Name  string            `json:"name,omitempty"`
	VPCID string            `json:"vpcID,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
}

// Where prices come from (PriceSource.Source).
const (
	// PricesLive were read from the region's EC2 and Price List APIs.
	PricesLive = "live"
	// PricesEmbedded are the tool's built-in us-east-1 list prices, used
	// when AWS could not be read.
	PricesEmbedded = "embedded"
)

// PriceSource says which prices priced an inventory or a plan.
type PriceSource struct {
	// Region is the region the prices are for.
	Region string `json:"region"`
	// Source is PricesLive or PricesEmbedded.
	Source string `json:"source"`
	// FetchedAt is when live prices were read.
	FetchedAt time.Time `json:"fetchedAt,omitzero"`
	// Note says why the live prices are missing or old (the AWS error).
	Note string `json:"note,omitempty"`
}

// Prices are a region's instance offerings and on-demand prices as
// discover read them, so that a plan made from the snapshot later prices
// the cluster the same way; spot prices are Inventory.SpotPrices.
type Prices struct {
	PriceSource
	// OnDemand is USD per hour by instance type (Linux, shared tenancy).
	OnDemand map[string]float64 `json:"onDemand,omitempty"`
	// Zones are the availability zones each instance type is offered in.
	Zones map[string][]string `json:"zones,omitempty"`
}

// SpotPrice is a recent spot price for a type in a zone, in USD per hour.
type SpotPrice struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	Price        float64 `json:"price"`
}

// ClusterAutoscaler is the running Cluster Autoscaler deployment.
type ClusterAutoscaler struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Replicas  int32    `json:"replicas"`
	Image     string   `json:"image,omitempty"`
	Version   string   `json:"version,omitempty"`
	Args      []string `json:"args,omitempty"`
	// AutoDiscovery holds the --node-group-auto-discovery specs.
	AutoDiscovery []string `json:"autoDiscovery,omitempty"`
	// Nodes holds the static --nodes=<min>:<max>:<asg> specs.
	Nodes []string `json:"nodes,omitempty"`
	// Flags are every other command-line flag by name without dashes
	// (scale-down-enabled, expander, balance-similar-node-groups, ...); a
	// boolean flag given bare is "true", and the last of a repeated flag wins.
	Flags map[string]string `json:"flags,omitempty"`
}

// AWSAuth is the aws-auth ConfigMap as found.
type AWSAuth struct {
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Data            map[string]string `json:"data,omitempty"`
}

// KarpenterInstall describes a Karpenter already present in the cluster.
type KarpenterInstall struct {
	Installed  bool     `json:"installed"`
	Version    string   `json:"version,omitempty"`
	Namespace  string   `json:"namespace,omitempty"`
	Deployment string   `json:"deployment,omitempty"`
	Ready      bool     `json:"ready,omitempty"`
	CRDs       []string `json:"crds,omitempty"`
	NodePools  []string `json:"nodePools,omitempty"`
	// ControllerAffinity is the controller's pod affinity, to check it
	// cannot land on nodes it manages.
	ControllerAffinity     *corev1.Affinity  `json:"controllerAffinity,omitempty"`
	ControllerNodeSelector map[string]string `json:"controllerNodeSelector,omitempty"`
	// ControllerTolerations, ControllerLabels (its pod template's) and
	// ControllerReplicas complete the controller's scheduling: where it
	// may run once the legacy groups are gone, and whether a Fargate
	// profile selects it.
	ControllerTolerations []corev1.Toleration `json:"controllerTolerations,omitempty"`
	ControllerLabels      map[string]string   `json:"controllerLabels,omitempty"`
	ControllerReplicas    int32               `json:"controllerReplicas,omitempty"`
}

// FargateProfile is an EKS Fargate profile: pods matching one of its
// selectors run on Fargate.
type FargateProfile struct {
	Name      string            `json:"name"`
	Status    string            `json:"status,omitempty"`
	Selectors []FargateSelector `json:"selectors,omitempty"`
}

// FargateSelector selects the pods of a namespace, optionally by labels
// (all must match).
type FargateSelector struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Selects reports whether a pod of namespace ns with labels runs on this
// profile (an inactive profile selects nothing).
func (f FargateProfile) Selects(ns string, labels map[string]string) bool {
	if f.Status != "" && f.Status != "ACTIVE" {
		return false
	}
	for _, s := range f.Selectors {
		if s.Namespace != ns {
			continue
		}
		match := true
		for k, v := range s.Labels {
			match = match && labels[k] == v
		}
		if match {
			return true
		}
	}
	return false
}
