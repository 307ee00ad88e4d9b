package awsfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Account is the state of one AWS account in one region. Each service's
// state is its own struct so that each service file owns its part; one
// mutex in the Server guards all of it.
//
// Resources are held as aws-sdk-go-v2 types, so a seeded field comes back
// through the real SDK exactly as written (the round-trip tests check it).
type Account struct {
	// ID is the 12-digit account ID (default 123456789012).
	ID string `json:"id,omitempty"`
	// Region is the region the fake answers for (default us-east-1).
	Region string `json:"region,omitempty"`
	// CallerARN is the identity STS returns and denials name
	// (default arn:aws:iam::<ID>:user/awsfake).
	CallerARN string `json:"callerARN,omitempty"`

	EC2         EC2State         `json:"ec2"`
	AutoScaling AutoScalingState `json:"autoScaling"`
	EKS         EKSState         `json:"eks"`
	SSM         SSMState         `json:"ssm"`
	IAM         IAMState         `json:"iam"`
	SQS         SQSState         `json:"sqs"`
	EventBridge EventBridgeState `json:"eventBridge"`
	EKSAccess   EKSAccessState   `json:"eksAccess"`
	Pricing     PricingState     `json:"pricing"`

	launchSeq uint64 // IDs of instances and activities the fake creates
}

// EC2State is the EC2 part of an account.
type EC2State struct {
	Instances      []ec2types.Instance      `json:"instances,omitempty"`
	Subnets        []ec2types.Subnet        `json:"subnets,omitempty"`
	SecurityGroups []ec2types.SecurityGroup `json:"securityGroups,omitempty"`
	// LaunchTemplateVersions hold every version of every launch template;
	// DescribeLaunchTemplates derives the templates from them. The version
	// with DefaultVersion true is the default (else version 1).
	LaunchTemplateVersions []ec2types.LaunchTemplateVersion `json:"launchTemplateVersions,omitempty"`
	InstanceTypes          []ec2types.InstanceTypeInfo      `json:"instanceTypes,omitempty"`
	SpotPrices             []ec2types.SpotPrice             `json:"spotPrices,omitempty"`
	Images                 []ec2types.Image                 `json:"images,omitempty"`

	// InstanceTypeOfferings say where each type can launch; when empty,
	// every type is offered in every zone (see instanceTypeOfferings).
	InstanceTypeOfferings []ec2types.InstanceTypeOffering `json:"instanceTypeOfferings,omitempty"`
}

// AutoScalingState is the Auto Scaling part of an account.
type AutoScalingState struct {
	// Groups are the ASGs. Their Instances need no matching EC2 instance:
	// one is synthesised (running, tagged aws:autoscaling:groupName).
	Groups               []astypes.AutoScalingGroup    `json:"groups,omitempty"`
	LaunchConfigurations []astypes.LaunchConfiguration `json:"launchConfigurations,omitempty"`
}

// EKSState is the EKS part of an account.
type EKSState struct {
	Clusters []EKSCluster `json:"clusters,omitempty"`
}

// EKSCluster is a cluster, its managed node groups and Fargate profiles.
type EKSCluster struct {
	Cluster         ekstypes.Cluster          `json:"cluster"`
	Nodegroups      []ekstypes.Nodegroup      `json:"nodegroups,omitempty"`
	FargateProfiles []ekstypes.FargateProfile `json:"fargateProfiles,omitempty"`
}

// SSMState is the SSM part of an account.
type SSMState struct {
	Parameters []ssmtypes.Parameter `json:"parameters,omitempty"`
}

func (a *Account) defaults() {
	if a.ID == "" {
		a.ID = "123456789012"
	}
	if a.Region == "" {
		a.Region = "us-east-1"
	}
	if a.CallerARN == "" {
		a.CallerARN = "arn:aws:iam::" + a.ID + ":user/awsfake"
	}
	a.syncASGInstances()
}

// syncASGInstances creates the EC2 instance behind every ASG instance that
// has none, so DescribeInstances and DescribeAutoScalingGroups agree.
func (a *Account) syncASGInstances() {
	have := make(map[string]bool, len(a.EC2.Instances))
	for _, in := range a.EC2.Instances {
		have[deref(in.InstanceId)] = true
	}
	for _, g := range a.AutoScaling.Groups {
		for _, gi := range g.Instances {
			id := deref(gi.InstanceId)
			if id == "" || have[id] {
				continue
			}
			have[id] = true
			a.EC2.Instances = append(a.EC2.Instances, ec2types.Instance{
				InstanceId:     gi.InstanceId,
				InstanceType:   ec2types.InstanceType(deref(gi.InstanceType)),
				Placement:      &ec2types.Placement{AvailabilityZone: gi.AvailabilityZone},
				State:          &ec2types.InstanceState{Code: ptr(int32(16)), Name: ec2types.InstanceStateNameRunning},
				PrivateDnsName: ptr("ip-" + strings.TrimPrefix(id, "i-") + ".ec2.internal"),
				Tags: []ec2types.Tag{
					{Key: ptr("aws:autoscaling:groupName"), Value: g.AutoScalingGroupName},
				},
			})
		}
	}
}

// LoadAccount reads an account description (YAML or JSON; see the package
// documentation for the schema). Errors name the file, line and field.
func LoadAccount(path string) (*Account, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read AWS account file: %w", err)
	}
	a, err := ParseAccount(b)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return a, nil
}

// ParseAccount decodes an account description; errors start with the line
// number ("12: ...").
func ParseAccount(b []byte) (*Account, error) {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var a Account
	if len(root.Content) == 0 {
		return nil, errors.New("1: empty account description")
	}
	if err := checkNode(root.Content[0], reflect.TypeOf(a), "account"); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("1: %w", err)
	}
	if err := json.Unmarshal(j, &a); err != nil {
		return nil, fmt.Errorf("1: %w", err)
	}
	return &a, nil
}

var (
	timeT    = reflect.TypeOf(time.Time{})
	jsonUnm  = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	knownTag = map[string]bool{"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!timestamp": true}
)

// checkNode walks a YAML node against the Go type encoding/json will decode
// it into, so that an unknown field or a wrongly typed value is reported
// with its line (encoding/json would report neither).
func checkNode(n *yamlv3.Node, t reflect.Type, where string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yamlv3.AliasNode {
		n = n.Alias
	}
	if n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if t == timeT {
		if n.Kind != yamlv3.ScalarNode {
			return fmt.Errorf("%d: %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z", n.Line, where)
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
			return fmt.Errorf("%d: %s: %q is not an RFC 3339 time (2026-01-02T15:04:05Z)", n.Line, where, n.Value)
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(jsonUnm) || t.Kind() == reflect.Interface {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			return fmt.Errorf("%d: %s: want a mapping of %s fields", n.Line, where, t.Name())
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByJSONName(t, k.Value)
			if !ok {
				return fmt.Errorf("%d: %s: unknown field %q in %s (known: %s)", k.Line, where, k.Value, t.Name(), strings.Join(jsonNames(t), ", "))
			}
			if err := checkNode(v, f.Type, where+"."+k.Value); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			return fmt.Errorf("%d: %s: want a mapping", n.Line, where)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), where+"."+n.Content[i].Value); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		if n.Kind != yamlv3.SequenceNode {
			return fmt.Errorf("%d: %s: want a list", n.Line, where)
		}
		for i, item := range n.Content {
			if err := checkNode(item, t.Elem(), where+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.String:
		if n.Kind != yamlv3.ScalarNode {
			return fmt.Errorf("%d: %s: want a string", n.Line, where)
		}
		if n.Tag != "!!str" && knownTag[n.Tag] && n.Style == 0 {
			return fmt.Errorf("%d: %s: %s is read as a %s; quote it (%q) to make it a string", n.Line, where, n.Value, strings.TrimPrefix(n.Tag, "!!"), n.Value)
		}
	case reflect.Bool:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!bool" {
			return fmt.Errorf("%d: %s: want true or false, not %q", n.Line, where, n.Value)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			return fmt.Errorf("%d: %s: want an integer, not %q", n.Line, where, n.Value)
		}
		if _, err := strconv.ParseInt(n.Value, 0, t.Bits()); err != nil {
			return fmt.Errorf("%d: %s: %q does not fit a %d-bit integer", n.Line, where, n.Value, t.Bits())
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yamlv3.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") {
			return fmt.Errorf("%d: %s: want a number, not %q", n.Line, where, n.Value)
		}
	}
	return nil
}

// fieldByJSONName finds the field encoding/json would decode key into:
// the json tag name or the Go name, matched case-insensitively.
func fieldByJSONName(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if strings.EqualFold(jsonName(f), key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
		return tag
	}
	return f.Name
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() {
			out = append(out, jsonName(f))
		}
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
