package desired

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultKarpenterVersion is the Karpenter release the policies follow when
// no version is given.
const DefaultKarpenterVersion = "1.14.1"

// NewestKnownMinor is the newest Karpenter v1 minor version whose IAM this
// tool knows. A newer controller may call APIs these policies do not
// grant, so newer versions are refused rather than guessed.
const NewestKnownMinor = 14

// Version is a Karpenter release, major.minor.patch.
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads "1.14.1", "v1.9" or "1.12.0-rc.1" (the pre-release is
// ignored).
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("karpenter version %q: want MAJOR.MINOR[.PATCH], e.g. %s", s, DefaultKarpenterVersion)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("karpenter version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// ControllerPolicy is one customer-managed policy attached to the controller
// role.
type ControllerPolicy struct {
	// Name is the IAM policy name, e.g. KarpenterControllerNodeLifecyclePolicy-prod.
	Name     string         `json:"name"`
	Document PolicyDocument `json:"document"`
}

// policyScope is what the controller policies are scoped to.
type policyScope struct {
	partition, region, account, cluster string
	nodeRoleARN, queueARN, clusterARN   string
	version                             Version
}

func (s policyScope) arn(service, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s", s.partition, service, s.region, resource)
}

// ControllerPolicyNames is the name of every controller policy a supported
// Karpenter version uses for the cluster: the single policy before v1.10
// and the split set since. Down looks for all of them, whichever version
// created them.
func ControllerPolicyNames(cluster string) []string {
	var names []string
	for _, v := range []Version{{1, 8, 0}, {1, 12, 0}} {
		ps, _ := controllerPolicies(policyScope{cluster: cluster, version: v})
		for _, p := range ps {
			names = append(names, p.Name)
		}
	}
	return names
}

// controllerPolicies returns, for version v, the controller policies of
// Karpenter's own CloudFormation template, scoped to one cluster. Where the
// template of a release lags the code of that release, the code decides
// (a permission belongs to the version whose controller first calls it);
// pkg/iam/testdata/upstream/README.md says which source each boundary
// follows, and pkg/iam's TestControllerPoliciesMatchUpstream compares
// every version, statement by statement in both directions.
func controllerPolicies(s policyScope) ([]ControllerPolicy, error) {
	if s.version.Major < 1 {
		return nil, fmt.Errorf("karpenter version %s: only v1.0 and newer are supported; convert the v1beta1 install to v1 first (karpenter-migrate convert)", s.version)
	}
	if s.version.AtLeast(1, NewestKnownMinor+1) {
		return nil, fmt.Errorf("karpenter version %s is newer than the newest whose IAM karpenter-migrate knows (1.%d); its controller may need permissions these policies lack: use --karpenter-version %s or a newer karpenter-migrate", s.version, NewestKnownMinor, DefaultKarpenterVersion)
	}
	ec2 := func(kind string) string { return s.arn("ec2", "*:"+kind+"/*") }
	ownedKey := "kubernetes.io/cluster/" + s.cluster
	taggedResources := []string{ec2("fleet"), ec2("instance"), ec2("volume"), ec2("network-interface"), ec2("launch-template"), ec2("spot-instances-request")}
	instanceAccess := []string{s.arn("ec2", ":image/*"), s.arn("ec2", ":snapshot/*"), ec2("security-group"), ec2("subnet")}
	launchWithTags := taggedResources
	if s.version.AtLeast(1, 3) { // capacityReservationSelectorTerms
		instanceAccess = append(instanceAccess, ec2("capacity-reservation"))
		if !s.version.AtLeast(1, 10) {
			// The single-policy template (last at tag v1.9.0) also lists it
			// on the tag-scoped launch statement; the split dropped it there.
			launchWithTags = append(slices.Clone(taggedResources), ec2("capacity-reservation"))
		}
	}
	if s.version.AtLeast(1, 11) { // placementGroupSelector
		instanceAccess = append(instanceAccess, ec2("placement-group"))
	}

	nodeLifecycle := []Statement{
		allow("AllowScopedEC2InstanceAccessActions", []string{"ec2:RunInstances", "ec2:CreateFleet"}, instanceAccess),
		allow("AllowScopedEC2LaunchTemplateAccessActions", []string{"ec2:RunInstances", "ec2:CreateFleet"}, []string{ec2("launch-template")}).
			when("StringEquals", "aws:ResourceTag/"+ownedKey, "owned").
			when("StringLike", "aws:ResourceTag/karpenter.sh/nodepool", "*"),
		allow("AllowScopedEC2InstanceActionsWithTags", []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"}, launchWithTags).
			when("StringEquals", "aws:RequestTag/"+ownedKey, "owned").
			when("StringEquals", "aws:RequestTag/eks:eks-cluster-name", s.cluster).
			when("StringLike", "aws:RequestTag/karpenter.sh/nodepool", "*"),
		allow("AllowScopedResourceCreationTagging", []string{"ec2:CreateTags"}, taggedResources).
			when("StringEquals", "aws:RequestTag/"+ownedKey, "owned").
			when("StringEquals", "aws:RequestTag/eks:eks-cluster-name", s.cluster).
			when("StringEquals", "ec2:CreateAction", "RunInstances", "CreateFleet", "CreateLaunchTemplate").
			when("StringLike", "aws:RequestTag/karpenter.sh/nodepool", "*"),
		allow("AllowScopedResourceTagging", []string{"ec2:CreateTags"}, []string{ec2("instance")}).
			when("StringEquals", "aws:ResourceTag/"+ownedKey, "owned").
			when("StringLike", "aws:ResourceTag/karpenter.sh/nodepool", "*").
			when("StringEqualsIfExists", "aws:RequestTag/eks:eks-cluster-name", s.cluster).
			when("ForAllValues:StringEquals", "aws:TagKeys", "eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"),
		allow("AllowScopedDeletion", []string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"}, []string{ec2("instance"), ec2("launch-template")}).
			when("StringEquals", "aws:ResourceTag/"+ownedKey, "owned").
			when("StringLike", "aws:ResourceTag/karpenter.sh/nodepool", "*"),
	}
	instanceProfiles := fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", s.partition, s.account)
	iamIntegration := []Statement{
		allow("AllowPassingInstanceRole", []string{"iam:PassRole"}, []string{s.nodeRoleARN}).
			when("StringEquals", "iam:PassedToService", "ec2.amazonaws.com", "ec2.amazonaws.com.cn"),
		allow("AllowScopedInstanceProfileCreationActions", []string{"iam:CreateInstanceProfile"}, []string{instanceProfiles}).
			when("StringEquals", "aws:RequestTag/"+ownedKey, "owned").
			when("StringEquals", "aws:RequestTag/eks:eks-cluster-name", s.cluster).
			when("StringEquals", "aws:RequestTag/topology.kubernetes.io/region", s.region).
			when("StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass", "*"),
		allow("AllowScopedInstanceProfileTagActions", []string{"iam:TagInstanceProfile"}, []string{instanceProfiles}).
			when("StringEquals", "aws:ResourceTag/"+ownedKey, "owned").
			when("StringEquals", "aws:ResourceTag/topology.kubernetes.io/region", s.region).
			when("StringEquals", "aws:RequestTag/"+ownedKey, "owned").
			when("StringEquals", "aws:RequestTag/eks:eks-cluster-name", s.cluster).
			when("StringEquals", "aws:RequestTag/topology.kubernetes.io/region", s.region).
			when("StringLike", "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass", "*").
			when("StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass", "*"),
		allow("AllowScopedInstanceProfileActions", []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"}, []string{instanceProfiles}).
			when("StringEquals", "aws:ResourceTag/"+ownedKey, "owned").
			when("StringEquals", "aws:ResourceTag/topology.kubernetes.io/region", s.region).
			when("StringLike", "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass", "*"),
	}
	eksIntegration := []Statement{
		allow("AllowAPIServerEndpointDiscovery", []string{"eks:DescribeCluster"}, []string{s.clusterARN}),
	}
	interruption := []Statement{
		allow("AllowInterruptionQueueActions", []string{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}, []string{s.queueARN}),
	}
	describe := []string{
		"ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
		"ec2:DescribeLaunchTemplates", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
	}
	if s.version.AtLeast(1, 3) {
		describe = append(describe, "ec2:DescribeCapacityReservations")
	}
	if s.version.AtLeast(1, 11) {
		describe = append(describe, "ec2:DescribePlacementGroups")
	}
	if s.version.AtLeast(1, 12) { // the instance-status interruption controller
		describe = append(describe, "ec2:DescribeInstanceStatus")
	}
	discovery := []Statement{
		allow("AllowRegionalReadActions", describe, []string{"*"}).
			when("StringEquals", "aws:RequestedRegion", s.region),
		allow("AllowSSMReadActions", []string{"ssm:GetParameter"}, []string{s.arn("ssm", ":parameter/aws/service/*")}),
		allow("AllowPricingReadActions", []string{"pricing:GetProducts"}, []string{"*"}),
		allow("AllowInstanceProfileReadActions", []string{"iam:GetInstanceProfile"}, []string{instanceProfiles}),
	}
	if s.version.AtLeast(1, 7) { // instance profile garbage collection lists them
		discovery = append(discovery, allow("AllowUnscopedInstanceProfileListAction", []string{"iam:ListInstanceProfiles"}, []string{"*"}))
	}
	zonalShift := []Statement{
		allow("AllowZonalShiftStatusReadOnly", []string{"arc-zonal-shift:GetManagedResource"}, []string{"*"}).
			when("StringEquals", "arc-zonal-shift:ResourceIdentifier", s.clusterARN),
	}

	doc := func(st ...[]Statement) PolicyDocument {
		d := PolicyDocument{Version: PolicyVersion}
		for _, x := range st {
			d.Statement = append(d.Statement, x...)
		}
		return d
	}
	if !s.version.AtLeast(1, 10) {
		return []ControllerPolicy{{
			Name:     "KarpenterControllerPolicy-" + s.cluster,
			Document: doc(nodeLifecycle, iamIntegration, eksIntegration, interruption, discovery),
		}}, nil
	}
	out := []ControllerPolicy{
		{Name: "KarpenterControllerNodeLifecyclePolicy-" + s.cluster, Document: doc(nodeLifecycle)},
		{Name: "KarpenterControllerIAMIntegrationPolicy-" + s.cluster, Document: doc(iamIntegration)},
		{Name: "KarpenterControllerEKSIntegrationPolicy-" + s.cluster, Document: doc(eksIntegration)},
		{Name: "KarpenterControllerInterruptionPolicy-" + s.cluster, Document: doc(interruption)},
		{Name: "KarpenterControllerResourceDiscoveryPolicy-" + s.cluster, Document: doc(discovery)},
	}
	if s.version.AtLeast(1, 12) {
		out = append(out, ControllerPolicy{Name: "KarpenterControllerZonalShiftPolicy-" + s.cluster, Document: doc(zonalShift)})
	}
	return out, nil
}
