// Package desired is the AWS identity and access Karpenter needs for one
// cluster, computed from the cluster's facts alone: node role, controller
// role and its policies, interruption queue and EventBridge rules,
// discovery tags, and node access through an EKS access entry or aws-auth,
// with every policy document. It holds no client, so the planner can show
// it; pkg/iam diffs it against the account and applies it.
package desired

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Tags every object the tool creates carries; Down deletes only objects with
// both, for the same cluster.
const (
	TagManagedBy      = "karpenter-migrate.io/managed-by"
	TagManagedByValue = "karpenter-migrate"
	TagCluster        = "karpenter-migrate.io/cluster"
	// TagDiscoveryAdded marks a subnet or security group whose discovery tag
	// this tool added (the subnet itself is not ours), so Down removes the
	// discovery tag only there.
	TagDiscoveryAdded = "karpenter-migrate.io/discovery-tag"
	// TagDiscovery is the tag Karpenter's EC2NodeClass selectors look for.
	TagDiscovery = "karpenter.sh/discovery"
)

// Identity is how the Karpenter controller obtains AWS credentials.
type Identity string

// Identities.
const (
	IdentityAuto        Identity = ""
	IdentityIRSA        Identity = "irsa"
	IdentityPodIdentity Identity = "pod-identity"
)

// Node access modes, following the cluster's authentication mode.
const (
	NodeAccessConfigMap   = "aws-auth"
	NodeAccessAccessEntry = "access-entry"
)

// Options are the choices a user makes; zero values mean the defaults.
type Options struct {
	// KarpenterVersion selects the controller policy set (default DefaultKarpenterVersion).
	KarpenterVersion string
	// Identity is irsa or pod-identity; empty picks pod-identity when the
	// cluster runs the Pod Identity agent, irsa otherwise.
	Identity Identity
	// InstanceProfile also creates KarpenterNodeInstanceProfile-<cluster>
	// (only EC2NodeClasses that name an instanceProfile need it).
	InstanceProfile bool
	// CreateOIDCProvider creates the cluster's IAM OIDC provider when IRSA
	// needs it and it is missing.
	CreateOIDCProvider bool
	// Adopt tags existing, matching objects that were not created by this
	// tool instead of stopping at them.
	Adopt bool
	// Namespace and ServiceAccount are the Karpenter controller's
	// (default kube-system/karpenter, as in Karpenter's migration guide).
	Namespace      string
	ServiceAccount string
}

// Target is the cluster facts the desired state depends on.
type Target struct {
	Cluster            string `json:"cluster"`
	Region             string `json:"region"`
	AccountID          string `json:"accountID"`
	Partition          string `json:"partition"`
	AuthenticationMode string `json:"authenticationMode"`
	// OIDCIssuer is the cluster's issuer URL (https://oidc.eks...).
	OIDCIssuer       string   `json:"oidcIssuer,omitempty"`
	PodIdentityAgent bool     `json:"podIdentityAgent,omitempty"`
	SubnetIDs        []string `json:"subnetIDs,omitempty"`
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
	Windows          bool     `json:"windows,omitempty"`
}

// TargetFromInventory reads the cluster facts from an inventory: the
// subnets and security groups of every node group (the cluster security
// group when no group names one, as managed node groups without a launch
// template use it).
func TargetFromInventory(inv *inventory.Inventory) (Target, error) {
	if inv == nil {
		return Target{}, errors.New("no inventory: give --snapshot or a reachable cluster")
	}
	c := inv.Cluster
	t := Target{
		Cluster:            c.Name,
		Region:             c.Region,
		AccountID:          c.AccountID,
		Partition:          "aws",
		AuthenticationMode: c.AuthenticationMode,
		OIDCIssuer:         c.OIDCIssuer,
		PodIdentityAgent:   c.PodIdentityAgent,
	}
	if c.ARN != "" {
		parts := strings.SplitN(c.ARN, ":", 6)
		if len(parts) < 6 || parts[0] != "arn" {
			return Target{}, fmt.Errorf("cluster.arn %q: not an ARN", c.ARN)
		}
		t.Partition = parts[1]
		if t.Region == "" {
			t.Region = parts[3]
		}
		if t.AccountID == "" {
			t.AccountID = parts[4]
		}
	}
	for _, ng := range inv.NodeGroups {
		t.SubnetIDs = append(t.SubnetIDs, ng.SubnetIDs...)
		t.SecurityGroupIDs = append(t.SecurityGroupIDs, ng.SecurityGroupIDs...)
		if ng.LaunchTemplate != nil {
			t.SecurityGroupIDs = append(t.SecurityGroupIDs, ng.LaunchTemplate.SecurityGroupIDs...)
		}
		if strings.EqualFold(ng.OS, "windows") {
			t.Windows = true
		}
	}
	if len(t.SecurityGroupIDs) == 0 && c.ClusterSecurityGroupID != "" {
		t.SecurityGroupIDs = []string{c.ClusterSecurityGroupID}
	}
	slices.Sort(t.SubnetIDs)
	t.SubnetIDs = slices.Compact(t.SubnetIDs)
	slices.Sort(t.SecurityGroupIDs)
	t.SecurityGroupIDs = slices.Compact(t.SecurityGroupIDs)
	return t, t.validate()
}

func (t Target) validate() error {
	var errs []error
	if t.Cluster == "" {
		errs = append(errs, errors.New("cluster.name is empty"))
	}
	if t.Region == "" {
		errs = append(errs, errors.New("cluster.region is empty (set --region)"))
	}
	if t.AccountID == "" {
		errs = append(errs, errors.New("cluster.accountID is empty and cluster.arn does not name it"))
	}
	// IAM role names are at most 64 characters; the longest we build is
	// KarpenterControllerRole-<cluster> (24 + len).
	if n := len("KarpenterControllerRole-") + len(t.Cluster); n > 64 {
		errs = append(errs, fmt.Errorf("cluster name %q is too long for IAM role names (KarpenterControllerRole-<cluster> would be %d characters, the limit is 64)", t.Cluster, n))
	}
	if n := len(t.Cluster) + len(ruleSuffixLongest); n > 64 {
		errs = append(errs, fmt.Errorf("cluster name %q is too long for EventBridge rule names (%d characters, the limit is 64)", t.Cluster, n))
	}
	switch t.AuthenticationMode {
	case "", "CONFIG_MAP", "API", "API_AND_CONFIG_MAP":
	default:
		errs = append(errs, fmt.Errorf("cluster.authenticationMode %q: want CONFIG_MAP, API or API_AND_CONFIG_MAP", t.AuthenticationMode))
	}
	return errors.Join(errs...)
}

// Names of the objects for one cluster.
func NodeRoleName(cluster string) string        { return "KarpenterNodeRole-" + cluster }
func InstanceProfileName(cluster string) string { return "KarpenterNodeInstanceProfile-" + cluster }
func ControllerRoleName(cluster string) string  { return "KarpenterControllerRole-" + cluster }
func QueueName(cluster string) string           { return cluster }

// CapacityReservationRuleName is the EventBridge rule Karpenter v1.10
// added; Down looks for it whichever version the cluster runs.
func CapacityReservationRuleName(cluster string) string { return cluster + ruleSuffixLongest }

const ruleSuffixLongest = "-karpenter-CapacityReservationInterruption"

// Rule is an EventBridge rule forwarding one kind of event to the queue.
type Rule struct {
	Name         string `json:"name"`
	EventPattern string `json:"eventPattern"`
}

// State is the complete desired state for one cluster.
type State struct {
	Target           Target   `json:"target"`
	KarpenterVersion string   `json:"karpenterVersion"`
	Identity         Identity `json:"identity"`
	NodeAccess       string   `json:"nodeAccess"`
	// AccessEntryType is EC2_LINUX or EC2_WINDOWS when NodeAccess is access-entry.
	AccessEntryType string `json:"accessEntryType,omitempty"`
	Namespace       string `json:"namespace"`
	ServiceAccount  string `json:"serviceAccount"`

	NodeRole           string             `json:"nodeRole"`
	NodeRoleARN        string             `json:"nodeRoleARN"`
	NodeTrust          PolicyDocument     `json:"nodeTrust"`
	NodeManagedPolicy  []string           `json:"nodeManagedPolicies"`
	InstanceProfile    string             `json:"instanceProfile,omitempty"`
	ControllerRole     string             `json:"controllerRole"`
	ControllerRoleARN  string             `json:"controllerRoleARN"`
	ControllerTrust    PolicyDocument     `json:"controllerTrust"`
	ControllerPolicies []ControllerPolicy `json:"controllerPolicies"`
	OIDCProviderARN    string             `json:"oidcProviderARN,omitempty"`
	OIDCProviderURL    string             `json:"oidcProviderURL,omitempty"`
	CreateOIDCProvider bool               `json:"createOIDCProvider,omitempty"`
	Queue              string             `json:"queue"`
	QueueARN           string             `json:"queueARN"`
	QueuePolicy        PolicyDocument     `json:"queuePolicy"`
	Rules              []Rule             `json:"rules"`
	Adopt              bool               `json:"adopt,omitempty"`
	// AWSAuthGroups are the groups of the aws-auth mapRoles entry.
	AWSAuthGroups []string `json:"awsAuthGroups,omitempty"`
}

// Tags returns the ownership tags for the cluster.
func (d *State) Tags() map[string]string {
	return map[string]string{TagManagedBy: TagManagedByValue, TagCluster: d.Target.Cluster}
}

// Build computes the desired state for a target and options.
func Build(t Target, o Options) (*State, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if o.KarpenterVersion == "" {
		o.KarpenterVersion = DefaultKarpenterVersion
	}
	v, err := ParseVersion(o.KarpenterVersion)
	if err != nil {
		return nil, err
	}
	if o.Namespace == "" {
		o.Namespace = "kube-system"
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = "karpenter"
	}
	d := &State{
		Target:           t,
		KarpenterVersion: v.String(),
		Namespace:        o.Namespace,
		ServiceAccount:   o.ServiceAccount,
		Adopt:            o.Adopt,
	}
	switch o.Identity {
	case IdentityAuto:
		d.Identity = IdentityIRSA
		if t.PodIdentityAgent {
			d.Identity = IdentityPodIdentity
		}
	case IdentityIRSA, IdentityPodIdentity:
		d.Identity = o.Identity
	default:
		return nil, fmt.Errorf("--identity %q: want irsa or pod-identity", o.Identity)
	}
	p := t.Partition
	urlSuffix := "amazonaws.com"
	if p == "aws-cn" {
		urlSuffix = "amazonaws.com.cn"
	}
	iamARN := func(kind, name string) string { return fmt.Sprintf("arn:%s:iam::%s:%s/%s", p, t.AccountID, kind, name) }

	d.NodeRole = NodeRoleName(t.Cluster)
	d.NodeRoleARN = iamARN("role", d.NodeRole)
	d.NodeTrust = PolicyDocument{Version: PolicyVersion, Statement: []Statement{{
		Effect: "Allow", Action: StringList{"sts:AssumeRole"},
		Principal: &Principal{IDs: map[string]StringList{"Service": {"ec2." + urlSuffix}}},
	}}}
	for _, name := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"} {
		d.NodeManagedPolicy = append(d.NodeManagedPolicy, fmt.Sprintf("arn:%s:iam::aws:policy/%s", p, name))
	}
	if o.InstanceProfile {
		d.InstanceProfile = InstanceProfileName(t.Cluster)
	}

	d.ControllerRole = ControllerRoleName(t.Cluster)
	d.ControllerRoleARN = iamARN("role", d.ControllerRole)
	switch d.Identity {
	case IdentityIRSA:
		if t.OIDCIssuer == "" {
			return nil, errors.New("IRSA needs the cluster's OIDC issuer (cluster.oidcIssuer is empty); use --identity pod-identity or rediscover the cluster")
		}
		u, err := url.Parse(t.OIDCIssuer)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("cluster.oidcIssuer %q: not a URL", t.OIDCIssuer)
		}
		hostPath := u.Host + strings.TrimSuffix(u.Path, "/")
		d.OIDCProviderURL = "https://" + hostPath
		d.OIDCProviderARN = iamARN("oidc-provider", hostPath)
		d.CreateOIDCProvider = o.CreateOIDCProvider
		d.ControllerTrust = PolicyDocument{Version: PolicyVersion, Statement: []Statement{{
			Effect: "Allow", Action: StringList{"sts:AssumeRoleWithWebIdentity"},
			Principal: &Principal{IDs: map[string]StringList{"Federated": {d.OIDCProviderARN}}},
			Condition: map[string]map[string]StringList{"StringEquals": {
				hostPath + ":aud": {"sts.amazonaws.com"},
				hostPath + ":sub": {"system:serviceaccount:" + o.Namespace + ":" + o.ServiceAccount},
			}},
		}}}
	case IdentityPodIdentity:
		d.ControllerTrust = PolicyDocument{Version: PolicyVersion, Statement: []Statement{{
			Effect: "Allow", Action: StringList{"sts:AssumeRole", "sts:TagSession"},
			Principal: &Principal{IDs: map[string]StringList{"Service": {"pods.eks.amazonaws.com"}}},
		}}}
	}

	d.Queue = QueueName(t.Cluster)
	d.QueueARN = fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, t.Region, t.AccountID, d.Queue)
	// Exactly the template's queue policy (document Id, no Version), so a
	// queue created by Karpenter's CloudFormation compares equal.
	d.QueuePolicy = PolicyDocument{Id: "EC2InterruptionPolicy", Statement: []Statement{
		{
			Effect: "Allow", Action: StringList{"sqs:SendMessage"},
			Resource:  StringList{d.QueueARN},
			Principal: &Principal{IDs: map[string]StringList{"Service": {"events.amazonaws.com", "sqs.amazonaws.com"}}},
		},
		{
			Sid: "DenyHTTP", Effect: "Deny", Action: StringList{"sqs:*"}, Resource: StringList{d.QueueARN},
			Principal: &Principal{All: true},
			Condition: map[string]map[string]StringList{"Bool": {"aws:SecureTransport": {"false"}}},
		},
	}}
	d.Rules = []Rule{
		{Name: t.Cluster + "-karpenter-ScheduledChange", EventPattern: pattern("aws.health", "AWS Health Event")},
		{Name: t.Cluster + "-karpenter-SpotInterruption", EventPattern: pattern("aws.ec2", "EC2 Spot Instance Interruption Warning")},
		{Name: t.Cluster + "-karpenter-Rebalance", EventPattern: pattern("aws.ec2", "EC2 Instance Rebalance Recommendation")},
		{Name: t.Cluster + "-karpenter-InstanceStateChange", EventPattern: pattern("aws.ec2", "EC2 Instance State-change Notification")},
	}
	if v.AtLeast(1, 10) {
		d.Rules = append(d.Rules, Rule{Name: CapacityReservationRuleName(t.Cluster), EventPattern: pattern("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning")})
	}

	clusterARN := fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", p, t.Region, t.AccountID, t.Cluster)
	d.ControllerPolicies, err = controllerPolicies(policyScope{
		partition: p, region: t.Region, account: t.AccountID, cluster: t.Cluster,
		nodeRoleARN: d.NodeRoleARN, queueARN: d.QueueARN, clusterARN: clusterARN, version: v,
	})
	if err != nil {
		return nil, err
	}

	switch t.AuthenticationMode {
	case "", "CONFIG_MAP":
		d.NodeAccess = NodeAccessConfigMap
		d.AWSAuthGroups = []string{"system:bootstrappers", "system:nodes"}
		if t.Windows {
			d.AWSAuthGroups = append(d.AWSAuthGroups, "eks:kube-proxy-windows")
		}
	default:
		d.NodeAccess = NodeAccessAccessEntry
		d.AccessEntryType = "EC2_LINUX"
		if t.Windows {
			d.AccessEntryType = "EC2_WINDOWS"
		}
	}
	return d, nil
}

func pattern(source, detailType string) string {
	return fmt.Sprintf(`{"source":[%q],"detail-type":[%q]}`, source, detailType)
}

// PolicyARN is the ARN of a customer-managed policy in the target account.
func (d *State) PolicyARN(name string) string {
	return fmt.Sprintf("arn:%s:iam::%s:policy/%s", d.Target.Partition, d.Target.AccountID, name)
}
