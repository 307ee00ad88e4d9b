package iam

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
)

// upstreamIAM is what one of Karpenter's CloudFormation templates creates,
// resolved for one cluster.
type upstreamIAM struct {
	nodeTrust      desired.PolicyDocument
	nodePolicies   []string
	policies       []desired.ControllerPolicy
	queueName      string
	queueRetention string
	queueSSE       string
	queuePolicy    desired.PolicyDocument
	rulePatterns   []string // canonical JSON
}

// cfnVars are the values !Sub, !Ref and !GetAtt resolve to.
func cfnVars(d *desired.State) map[string]string {
	suffix := "amazonaws.com"
	if d.Target.Partition == "aws-cn" {
		suffix = "amazonaws.com.cn"
	}
	return map[string]string{
		"AWS::Partition": d.Target.Partition, "AWS::Region": d.Target.Region, "AWS::AccountId": d.Target.AccountID,
		"AWS::URLSuffix": suffix, "ClusterName": d.Target.Cluster,
		"KarpenterNodeRole.Arn": d.NodeRoleARN, "KarpenterInterruptionQueue.Arn": d.QueueARN,
		"KarpenterInterruptionQueue": "https://sqs." + d.Target.Region + "." + suffix + "/" + d.Target.AccountID + "/" + d.Queue,
	}
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// cfnSub is Fn::Sub: ${Name} is replaced, ${!Literal} written as ${Literal}.
func cfnSub(s string, vars map[string]string) (string, error) {
	var missing []string
	out := subVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("!Sub: unknown %v", missing)
	}
	return out, nil
}

// cfnResolve turns a template node into plain values, resolving the
// intrinsic functions in both spellings (!Sub x and {Fn::Sub: x}).
func cfnResolve(n *yaml.Node, vars map[string]string) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		return cfnResolve(n.Content[0], vars)
	case yaml.AliasNode:
		return cfnResolve(n.Alias, vars)
	}
	if fn := strings.TrimPrefix(n.Tag, "!"); fn != n.Tag && !strings.HasPrefix(n.Tag, "!!") {
		v, err := cfnIntrinsic(fn, n, vars)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 2 {
			if fn, ok := strings.CutPrefix(n.Content[0].Value, "Fn::"); ok || n.Content[0].Value == "Ref" {
				if !ok {
					fn = "Ref"
				}
				v, err := cfnIntrinsic(fn, n.Content[1], vars)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", n.Line, err)
				}
				return v, nil
			}
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			v, err := cfnResolve(n.Content[i+1], vars)
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := cfnResolve(c, vars)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	}
	var v any
	return v, n.Decode(&v)
}

func cfnIntrinsic(fn string, n *yaml.Node, vars map[string]string) (any, error) {
	arg := n.Value
	if n.Kind == yaml.SequenceNode && fn == "GetAtt" {
		var parts []string
		for _, c := range n.Content {
			parts = append(parts, c.Value)
		}
		arg = strings.Join(parts, ".")
	} else if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("%s: only the one-string form is supported here", fn)
	}
	switch fn {
	case "Sub":
		return cfnSub(arg, vars)
	case "Ref", "GetAtt":
		v, ok := vars[arg]
		if !ok {
			return nil, fmt.Errorf("%s %s: unknown", fn, arg)
		}
		return v, nil
	}
	return nil, fmt.Errorf("intrinsic function %s not supported", fn)
}

// policyFrom reads a PolicyDocument property: a JSON string (from !Sub)
// or a YAML mapping.
func policyFrom(v any) (desired.PolicyDocument, error) {
	if s, ok := v.(string); ok {
		return desired.ParsePolicy(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return desired.PolicyDocument{}, err
	}
	return desired.ParsePolicy(string(b))
}

func loadUpstream(file string, d *desired.State) (*upstreamIAM, error) {
	raw, err := os.ReadFile(filepath.Join("testdata", "upstream", file))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	v, err := cfnResolve(&doc, cfnVars(d))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	resources, _ := v.(map[string]any)["Resources"].(map[string]any)
	u := &upstreamIAM{}
	names := make([]string, 0, len(resources))
	for name := range resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := resources[name].(map[string]any)
		props, _ := r["Properties"].(map[string]any)
		fail := func(err error) (*upstreamIAM, error) { return nil, fmt.Errorf("%s: %s: %w", file, name, err) }
		switch r["Type"] {
		case "AWS::IAM::Role":
			if u.nodeTrust, err = policyFrom(props["AssumeRolePolicyDocument"]); err != nil {
				return fail(err)
			}
			for _, p := range props["ManagedPolicyArns"].([]any) {
				u.nodePolicies = append(u.nodePolicies, p.(string))
			}
		case "AWS::IAM::ManagedPolicy":
			doc, err := policyFrom(props["PolicyDocument"])
			if err != nil {
				return fail(err)
			}
			u.policies = append(u.policies, desired.ControllerPolicy{Name: props["ManagedPolicyName"].(string), Document: doc})
		case "AWS::SQS::Queue":
			u.queueName = props["QueueName"].(string)
			u.queueRetention = fmt.Sprint(props["MessageRetentionPeriod"])
			u.queueSSE = fmt.Sprint(props["SqsManagedSseEnabled"])
		case "AWS::SQS::QueuePolicy":
			if u.queuePolicy, err = policyFrom(props["PolicyDocument"]); err != nil {
				return fail(err)
			}
		case "AWS::Events::Rule":
			targets := props["Targets"].([]any)
			if len(targets) != 1 || targets[0].(map[string]any)["Arn"] != d.QueueARN {
				return fail(fmt.Errorf("targets %v, want the queue alone", targets))
			}
			b, _ := json.Marshal(props["EventPattern"])
			u.rulePatterns = append(u.rulePatterns, string(b))
		default:
			return fail(fmt.Errorf("resource type %v is new to this test: decide whether iam must create it", r["Type"]))
		}
	}
	sort.Strings(u.rulePatterns)
	return u, nil
}

// ours renders the desired state in the same shape.
func ours(d *desired.State) *upstreamIAM {
	q := (&queueRes{policy: d.QueuePolicy}).attributes()
	u := &upstreamIAM{
		nodeTrust: d.NodeTrust, nodePolicies: slices.Clone(d.NodeManagedPolicy), policies: d.ControllerPolicies,
		queueName: d.Queue, queueRetention: q["MessageRetentionPeriod"], queueSSE: q["SqsManagedSseEnabled"], queuePolicy: d.QueuePolicy,
	}
	for _, r := range d.Rules {
		c, _ := desired.CanonicalJSON(r.EventPattern)
		u.rulePatterns = append(u.rulePatterns, c)
	}
	sort.Strings(u.rulePatterns)
	return u
}

// setDiff lists what a has and b lacks, and the reverse.
func setDiff(a, b []string) (onlyA, onlyB []string) {
	for _, x := range a {
		if !slices.Contains(b, x) {
			onlyA = append(onlyA, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			onlyB = append(onlyB, x)
		}
	}
	return onlyA, onlyB
}

func conditionPairs(c map[string]map[string]desired.StringList) []string {
	var out []string
	for op, kv := range c {
		for k, vs := range kv {
			for _, v := range vs {
				out = append(out, op+" "+k+"="+v)
			}
		}
	}
	sort.Strings(out)
	return out
}

// compareIAM lists every difference between upstream and ours: controller
// policies by name, their statements by Sid, and per statement Effect,
// Action, Resource and Condition in both directions; then the node role,
// the queue, its policy and the rules.
func compareIAM(up, our *upstreamIAM) []string {
	var diffs []string
	add := func(format string, a ...any) { diffs = append(diffs, fmt.Sprintf(format, a...)) }
	both := func(what string, upstream, our []string) {
		upstreamOnly, oursOnly := setDiff(upstream, our)
		if len(upstreamOnly) > 0 {
			add("%s: upstream grants %v, ours does not", what, upstreamOnly)
		}
		if len(oursOnly) > 0 {
			add("%s: ours grants %v, upstream does not", what, oursOnly)
		}
	}
	policyNames := func(ps []desired.ControllerPolicy) []string {
		var n []string
		for _, p := range ps {
			n = append(n, p.Name)
		}
		return n
	}
	upNames, ourNames := setDiff(policyNames(up.policies), policyNames(our.policies))
	if len(upNames)+len(ourNames) > 0 {
		add("controller policies: upstream only %v, ours only %v", upNames, ourNames)
	}
	for _, upp := range up.policies {
		i := slices.IndexFunc(our.policies, func(p desired.ControllerPolicy) bool { return p.Name == upp.Name })
		if i < 0 {
			continue
		}
		ourp := our.policies[i]
		if upp.Document.Version != ourp.Document.Version || upp.Document.Id != ourp.Document.Id {
			add("%s: Version/Id upstream %q/%q, ours %q/%q", upp.Name, upp.Document.Version, upp.Document.Id, ourp.Document.Version, ourp.Document.Id)
		}
		bySid := func(d desired.PolicyDocument) map[string]desired.Statement {
			m := map[string]desired.Statement{}
			for _, s := range d.Statement {
				if _, dup := m[s.Sid]; dup || s.Sid == "" {
					add("%s: statement Sid %q missing or repeated", upp.Name, s.Sid)
				}
				m[s.Sid] = s
			}
			return m
		}
		us, ourSids := bySid(upp.Document), bySid(ourp.Document)
		var sids []string
		for sid := range us {
			sids = append(sids, sid)
		}
		for sid := range ourSids {
			if _, ok := us[sid]; !ok {
				sids = append(sids, sid)
			}
		}
		sort.Strings(sids)
		for _, sid := range sids {
			u, uok := us[sid]
			o, ook := ourSids[sid]
			what := upp.Name + " " + sid
			switch {
			case !ook:
				add("%s: upstream statement missing from ours", what)
				continue
			case !uok:
				add("%s: ours has a statement upstream does not", what)
				continue
			}
			if u.Effect != o.Effect || (u.Principal == nil) != (o.Principal == nil) {
				add("%s: Effect/Principal upstream %s %v, ours %s %v", what, u.Effect, u.Principal, o.Effect, o.Principal)
			}
			both(what+" Action", u.Action, o.Action)
			both(what+" Resource", u.Resource, o.Resource)
			both(what+" Condition", conditionPairs(u.Condition), conditionPairs(o.Condition))
		}
	}
	if !up.nodeTrust.Equal(our.nodeTrust) {
		add("node role trust: upstream %s, ours %s", up.nodeTrust.JSON(), our.nodeTrust.JSON())
	}
	both("node role managed policies", up.nodePolicies, our.nodePolicies)
	if up.queueName != our.queueName || up.queueRetention != our.queueRetention || up.queueSSE != our.queueSSE {
		add("queue: upstream %s retention %s SSE %s, ours %s retention %s SSE %s", up.queueName, up.queueRetention, up.queueSSE, our.queueName, our.queueRetention, our.queueSSE)
	}
	if !up.queuePolicy.Equal(our.queuePolicy) {
		add("queue policy:\n%s", textDiff("queue policy", up.queuePolicy.Canonical().JSON(), our.queuePolicy.Canonical().JSON()))
	}
	both("EventBridge rule patterns", up.rulePatterns, our.rulePatterns)
	return diffs
}

// codeAdjustment changes the template to what that version's code calls,
// where the release's template lags it (see testdata/upstream/README.md).
type codeAdjustment struct {
	why    string
	adjust func(u *upstreamIAM, d *desired.State)
}

func statementOf(u *upstreamIAM, sid string) *desired.Statement {
	for i := range u.policies {
		for j := range u.policies[i].Document.Statement {
			if s := &u.policies[i].Document.Statement[j]; s.Sid == sid {
				return s
			}
		}
	}
	return nil
}

var (
	withoutListInstanceProfiles = codeAdjustment{
		why: "iam:ListInstanceProfiles is called from Karpenter v1.7 (issue #15); the tag v1.9.0 template is the nearest held",
		adjust: func(u *upstreamIAM, _ *desired.State) {
			for i := range u.policies {
				u.policies[i].Document.Statement = slices.DeleteFunc(u.policies[i].Document.Statement, func(s desired.Statement) bool {
					return s.Sid == "AllowUnscopedInstanceProfileListAction"
				})
			}
		},
	}
	withCapacityReservationRule = codeAdjustment{
		why: "Karpenter v1.10.0 parses EC2 Capacity Reservation Instance Interruption Warning (messages/capacityreservationinterruption); the template gained the rule at tag v1.11.0",
		adjust: func(u *upstreamIAM, _ *desired.State) {
			u.rulePatterns = append(u.rulePatterns, `{"detail-type":["EC2 Capacity Reservation Instance Interruption Warning"],"source":["aws.ec2"]}`)
			sort.Strings(u.rulePatterns)
		},
	}
	withPlacementGroups = codeAdjustment{
		why: "Karpenter v1.11.0 calls ec2:DescribePlacementGroups and launches into placement groups (placementGroupSelector); the templates gained both at v1.12",
		adjust: func(u *upstreamIAM, d *desired.State) {
			if s := statementOf(u, "AllowScopedEC2InstanceAccessActions"); s != nil {
				s.Resource = append(s.Resource, fmt.Sprintf("arn:%s:ec2:%s:*:placement-group/*", d.Target.Partition, d.Target.Region))
			}
			if s := statementOf(u, "AllowRegionalReadActions"); s != nil {
				s.Action = append(s.Action, "ec2:DescribePlacementGroups")
			}
		},
	}
)

// upstreamFor is the reference for every Karpenter minor version the tool
// offers (1.0 to desired.NewestKnownMinor).
var upstreamFor = []struct {
	minors []int
	file   string
	code   []codeAdjustment
}{
	{[]int{0, 1, 2}, "cloudformation-v1.0.yaml", nil},
	{[]int{3, 4, 5, 6}, "cloudformation-tag-v1.9.0.yaml", []codeAdjustment{withoutListInstanceProfiles}},
	{[]int{7, 8, 9}, "cloudformation-tag-v1.9.0.yaml", nil},
	{[]int{10}, "cloudformation-tag-v1.10.0.yaml", []codeAdjustment{withCapacityReservationRule}},
	{[]int{11}, "cloudformation-tag-v1.11.0.yaml", []codeAdjustment{withPlacementGroups}},
	{[]int{12}, "cloudformation-v1.12.yaml", nil},
	{[]int{13}, "cloudformation-v1.13.yaml", nil},
	{[]int{14}, "cloudformation-v1.14.yaml", nil},
}

// TestControllerPoliciesMatchUpstream builds the IAM of every Karpenter
// version the tool offers and compares it with Karpenter's own template for
// that version, in both directions: a missing grant fails as surely as an
// extra one.
func TestControllerPoliciesMatchUpstream(t *testing.T) {
	covered := map[int]bool{}
	for _, ref := range upstreamFor {
		for _, minor := range ref.minors {
			covered[minor] = true
			for _, partition := range []string{"aws", "aws-cn"} {
				version := fmt.Sprintf("1.%d.0", minor)
				if minor == desired.NewestKnownMinor {
					version = desired.DefaultKarpenterVersion
				}
				t.Run(version+"/"+partition, func(t *testing.T) {
					tg := target("API")
					tg.Partition = partition
					d := mustBuild(t, tg, desired.Options{KarpenterVersion: version})
					up, err := loadUpstream(ref.file, d)
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range ref.code {
						c.adjust(up, d)
					}
					for _, diff := range compareIAM(up, ours(d)) {
						t.Errorf("Karpenter %s against %s: %s", version, ref.file, diff)
					}
				})
			}
		}
	}
	for minor := 0; minor <= desired.NewestKnownMinor; minor++ {
		if !covered[minor] {
			t.Errorf("Karpenter 1.%d is offered but compared with no template", minor)
		}
	}
	next := fmt.Sprintf("1.%d.0", desired.NewestKnownMinor+1)
	if _, err := desired.Build(target("API"), desired.Options{KarpenterVersion: next}); err == nil || !strings.Contains(err.Error(), "newer than the newest") {
		t.Errorf("Karpenter %s (no template known) = %v, want a refusal", next, err)
	}
}

// TestCompareIAMSeesBothDirections guards the comparison itself: a grant
// removed from ours and one added to ours are both reported, as are a
// changed condition and a missing statement.
func TestCompareIAMSeesBothDirections(t *testing.T) {
	d := mustBuild(t, target("API"), desired.Options{})
	up, err := loadUpstream("cloudformation-v1.14.yaml", d)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := compareIAM(up, ours(d)); len(diffs) != 0 {
		t.Fatalf("v1.14 differs before the mutation: %v", diffs)
	}
	mutated := mustBuild(t, target("API"), desired.Options{})
	for i := range mutated.ControllerPolicies {
		doc := &mutated.ControllerPolicies[i].Document
		for j := range doc.Statement {
			s := &doc.Statement[j]
			switch s.Sid {
			case "AllowRegionalReadActions":
				s.Action = slices.DeleteFunc(slices.Clone(s.Action), func(a string) bool { return a == "ec2:DescribeInstanceStatus" })
				s.Action = append(s.Action, "ec2:DescribeAvailabilityZones")
			case "AllowZonalShiftStatusReadOnly":
				s.Condition = nil
			}
		}
		doc.Statement = slices.DeleteFunc(doc.Statement, func(s desired.Statement) bool { return s.Sid == "AllowPricingReadActions" })
	}
	mutated.QueuePolicy.Id = ""
	got := strings.Join(compareIAM(up, ours(mutated)), "\n")
	for _, want := range []string{
		"upstream grants [ec2:DescribeInstanceStatus], ours does not",
		"ours grants [ec2:DescribeAvailabilityZones], upstream does not",
		"AllowZonalShiftStatusReadOnly Condition: upstream grants [StringEquals arc-zonal-shift:ResourceIdentifier=",
		"AllowPricingReadActions: upstream statement missing from ours",
		"queue policy:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("comparison lacks %q:\n%s", want, got)
		}
	}
}
