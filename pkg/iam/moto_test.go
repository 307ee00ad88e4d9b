package iam

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2sdk "github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/karpenter-migrate/karpenter-migrate/internal/motoenv"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

var moto = motoenv.NewShared()

func TestMain(m *testing.M) { os.Exit(moto.Run(m)) }

// motoEnv is the real SDK clients against a reset moto_server seeded with
// account() (two subnets, a tagged security group, the cluster and its
// OIDC provider, not ours), and a fake clientset for aws-auth.
type motoEnv struct {
	clients Clients
	cfg     awssdk.Config
	seeded  *motoenv.Seeded
	url     string
}

func newMotoEnv(t *testing.T) *motoEnv {
	t.Helper()
	srv := moto.Server(t)
	ctx := t.Context()
	cfg, err := srv.Config(ctx, "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	acct := account()
	acct.EKS.Clusters[0].Cluster.ResourcesVpcConfig = &ekstypes.VpcConfigResponse{SubnetIds: []string{"subnet-a", "subnet-b"}}
	seeded, err := motoenv.Seed(ctx, cfg, acct)
	if err != nil {
		t.Fatal(err)
	}
	sdk := kmaws.NewClients(cfg)
	return &motoEnv{cfg: cfg, seeded: seeded, url: srv.URL, clients: Clients{
		IAM: iam.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), EventBridge: eventbridge.NewFromConfig(cfg),
		EKS: sdk.EKS, EC2: sdk.EC2,
		AWSAuth: &awsauth.Editor{Client: fake.NewClientset(), BackupNamespace: "karpenter-migrate"},
	}}
}

// target is the test cluster with moto's account and subnet and group IDs.
func (e *motoEnv) target(mode string) desired.Target {
	tg := target(mode)
	tg.AccountID = motoenv.AccountID
	for i, id := range tg.SubnetIDs {
		tg.SubnetIDs[i] = e.seeded.ID(id)
	}
	for i, id := range tg.SecurityGroupIDs {
		tg.SecurityGroupIDs[i] = e.seeded.ID(id)
	}
	return tg
}

func (e *motoEnv) plan(t *testing.T, d *desired.State, only ...Group) *Plan {
	t.Helper()
	p, err := BuildPlan(t.Context(), d, e.clients, PlanOptions{Only: only, Backoff: fastBackoff})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

func (e *motoEnv) apply(t *testing.T, p *Plan, j *Journal) *Journal {
	t.Helper()
	j, err := Apply(t.Context(), p, e.clients, ApplyOptions{Backoff: fastBackoff, Journal: j})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return j
}

func (e *motoEnv) down(t *testing.T, d *desired.State, j *Journal, only ...Group) []Item {
	t.Helper()
	items, err := Down(t.Context(), d, j, e.clients, DownOptions{Backoff: fastBackoff, Only: only})
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	return items
}

func assertAllNoop(t *testing.T, p *Plan) {
	t.Helper()
	for _, it := range p.Items {
		if it.Action != ActionNoop {
			t.Errorf("re-plan: %s %s: %s %v", it.Action, it.Ref, it.Reason, it.Diff)
		}
	}
}

// ourObjects lists, through the SDK, what moto holds that this tool
// creates: roles, customer policies, queues, rules, OIDC providers tagged
// as ours, and discovery tags on the subnets and security groups.
func (e *motoEnv) ourObjects(t *testing.T) []string {
	t.Helper()
	ctx := t.Context()
	var out []string
	roles, err := e.clients.IAM.(*iam.Client).ListRoles(ctx, &iam.ListRolesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Roles {
		out = append(out, "role "+awssdk.ToString(r.RoleName))
	}
	pols, err := e.clients.IAM.(*iam.Client).ListPolicies(ctx, &iam.ListPoliciesInput{Scope: "Local"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pols.Policies {
		out = append(out, "policy "+awssdk.ToString(p.PolicyName))
	}
	profiles, err := e.clients.IAM.(*iam.Client).ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles.InstanceProfiles {
		out = append(out, "instance profile "+awssdk.ToString(p.InstanceProfileName))
	}
	providers, err := e.clients.IAM.(*iam.Client).ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range providers.OpenIDConnectProviderList {
		if arn := awssdk.ToString(p.Arn); arn != e.seeded.Account.IAM.OIDCProviders[0].ARN {
			out = append(out, "OIDC provider "+arn)
		}
	}
	queues, err := e.clients.SQS.(*sqs.Client).ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues.QueueUrls {
		out = append(out, "queue "+q)
	}
	rules, err := e.clients.EventBridge.(*eventbridge.Client).ListRules(ctx, &eventbridge.ListRulesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules.Rules {
		out = append(out, "rule "+awssdk.ToString(r.Name))
	}
	ec2c := e.clients.EC2.(*ec2sdk.Client)
	sns, err := ec2c.DescribeSubnets(ctx, &ec2sdk.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	sgs, err := ec2c.DescribeSecurityGroups(ctx, &ec2sdk.DescribeSecurityGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	tagged := func(id string, tags []ec2types.Tag) {
		for _, tg := range tags {
			if k := awssdk.ToString(tg.Key); k == desired.TagDiscovery || k == desired.TagDiscoveryAdded {
				out = append(out, "tag "+k+" on "+id)
			}
		}
	}
	for _, sn := range sns.Subnets {
		tagged(awssdk.ToString(sn.SubnetId), sn.Tags)
	}
	for _, sg := range sgs.SecurityGroups {
		tagged(awssdk.ToString(sg.GroupId), sg.Tags)
	}
	slices.Sort(out)
	return out
}

// TestMotoPlanApplyPlanDelete: plan, apply, plan again (all no-op) and
// delete against moto_server, for IRSA (with the OIDC provider created or
// the cluster's own), an instance profile, and the single pre-1.10 policy.
// Node access is aws-auth (a fake clientset): moto has no access entries.
func TestMotoPlanApplyPlanDelete(t *testing.T) {
	tests := []struct {
		name     string
		opts     desired.Options
		oidc     bool // delete the cluster's OIDC provider first, so ours is created
		creates  int
		policies int
	}{
		// 3 discovery tags, node role, 6 policies, controller role, queue, 5 rules, aws-auth.
		{"irsa v1.14", desired.Options{Identity: desired.IdentityIRSA}, false, 18, 6},
		// + OIDC provider + instance profile.
		{"irsa v1.14 own OIDC provider, instance profile", desired.Options{Identity: desired.IdentityIRSA, CreateOIDCProvider: true, InstanceProfile: true}, true, 20, 6},
		// one policy, four rules.
		{"irsa v1.8", desired.Options{Identity: desired.IdentityIRSA, KarpenterVersion: "1.8.2"}, false, 12, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newMotoEnv(t)
			if tt.oidc {
				if _, err := e.clients.IAM.DeleteOpenIDConnectProvider(t.Context(), &iam.DeleteOpenIDConnectProviderInput{
					OpenIDConnectProviderArn: awssdk.String(e.seeded.Account.IAM.OIDCProviders[0].ARN)}); err != nil {
					t.Fatal(err)
				}
			}
			d := mustBuild(t, e.target("CONFIG_MAP"), tt.opts)
			p := e.plan(t, d)
			if got := actions(p)[ActionCreate]; got != tt.creates || len(p.Blocked()) > 0 {
				t.Fatalf("plan creates %d objects, want %d; blocked %v", got, tt.creates, p.Blocked())
			}
			j := e.apply(t, p, nil)
			if len(j.Entries) != tt.creates {
				t.Errorf("journal has %d entries, want %d", len(j.Entries), tt.creates)
			}
			objs := e.ourObjects(t)
			if n := countPrefix(objs, "policy "); n != tt.policies {
				t.Errorf("%d customer policies in moto, want %d: %v", n, tt.policies, objs)
			}
			if n := countPrefix(objs, "tag "+desired.TagDiscovery+" "); n != 3 {
				t.Errorf("%d discovery tags in moto, want 3: %v", n, objs)
			}
			e.checkApplied(t, d)

			assertAllNoop(t, e.plan(t, d))

			items := e.down(t, d, j)
			deleted := 0
			for _, it := range items {
				if it.Action == ActionDelete {
					deleted++
				}
			}
			if deleted != tt.creates {
				t.Errorf("delete removed %d objects, want %d", deleted, tt.creates)
			}
			if left := e.ourObjects(t); len(left) != 0 {
				t.Errorf("left in moto after delete: %v", left)
			}
			st, err := e.clients.AWSAuth.Lookup(t.Context(), awsauth.MapRole{RoleARN: d.NodeRoleARN})
			if err != nil || st.Present {
				t.Errorf("aws-auth still maps the node role after delete: %+v %v", st, err)
			}
		})
	}
}

func countPrefix(l []string, prefix string) int {
	n := 0
	for _, s := range l {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// checkApplied reads back through the SDK what apply made and compares it
// with the desired state: trust policies, attached policies (AWS managed
// ones included), policy documents, the queue and the rules' targets.
func (e *motoEnv) checkApplied(t *testing.T, d *desired.State) {
	t.Helper()
	ctx := t.Context()
	for _, role := range []struct {
		name     string
		trust    desired.PolicyDocument
		policies []string
	}{{d.NodeRole, d.NodeTrust, d.NodeManagedPolicy}, {d.ControllerRole, d.ControllerTrust, nil}} {
		got, err := e.clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(role.name)})
		if err != nil {
			t.Fatal(err)
		}
		trust, err := desired.ParsePolicy(awssdk.ToString(got.Role.AssumeRolePolicyDocument))
		if err != nil || !trust.Equal(role.trust) {
			t.Errorf("role %s trust = %s (%v), want %s", role.name, awssdk.ToString(got.Role.AssumeRolePolicyDocument), err, role.trust.JSON())
		}
		att, err := e.clients.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(role.name)})
		if err != nil {
			t.Fatal(err)
		}
		var arns []string
		for _, p := range att.AttachedPolicies {
			arns = append(arns, awssdk.ToString(p.PolicyArn))
		}
		for _, want := range role.policies {
			if !slices.Contains(arns, want) {
				t.Errorf("role %s lacks %s (has %v)", role.name, want, arns)
			}
		}
	}
	for _, cp := range d.ControllerPolicies {
		arn := d.PolicyARN(cp.Name)
		pol, err := e.clients.IAM.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: awssdk.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.clients.IAM.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: awssdk.String(arn), VersionId: pol.Policy.DefaultVersionId})
		if err != nil {
			t.Fatal(err)
		}
		doc, err := desired.ParsePolicy(awssdk.ToString(v.PolicyVersion.Document))
		if err != nil || !doc.Equal(cp.Document) {
			t.Errorf("policy %s in moto differs from the desired one (%v)", cp.Name, err)
		}
	}
	url, err := e.clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(d.Queue)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := e.clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if a := attrs.Attributes; a["MessageRetentionPeriod"] != "300" || a["SqsManagedSseEnabled"] != "true" || a["QueueArn"] != d.QueueARN {
		t.Errorf("queue attributes = %v", a)
	}
	for _, r := range d.Rules {
		ts, err := e.clients.EventBridge.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: awssdk.String(r.Name)})
		if err != nil || len(ts.Targets) != 1 || awssdk.ToString(ts.Targets[0].Arn) != d.QueueARN {
			t.Errorf("rule %s targets %+v (%v), want the queue", r.Name, ts, err)
		}
	}
}

// TestMotoEveryStepGroup applies each runbook group alone, plans it again
// (no-op), checks the other groups are untouched, and deletes it with
// --only.
func TestMotoEveryStepGroup(t *testing.T) {
	for _, g := range []Group{GroupDiscoveryTags, GroupNodeRole, GroupControllerRole, GroupInterruption, GroupNodeAccess} {
		t.Run(string(g), func(t *testing.T) {
			e := newMotoEnv(t)
			d := mustBuild(t, e.target("CONFIG_MAP"), desired.Options{Identity: desired.IdentityIRSA})
			// The cluster's own OIDC provider (controller-role) is there from the start.
			untouched := func(it Item) bool {
				return it.Action == ActionCreate || it.Kind == KindOIDCProvider && it.Action == ActionNoop
			}
			p := e.plan(t, d, g)
			if len(p.Items) == 0 || slices.ContainsFunc(p.Items, func(it Item) bool { return !untouched(it) }) {
				t.Fatalf("plan of %s: %+v", g, p.Items)
			}
			j := e.apply(t, p, nil)
			assertAllNoop(t, e.plan(t, d, g))
			for _, it := range e.plan(t, d).Items {
				if it.Group != g && !untouched(it) {
					t.Errorf("%s %s after applying %s alone: %s", it.Group, it.Ref, g, it.Action)
				}
			}
			for _, it := range e.down(t, d, j, g) {
				if it.Group != g {
					t.Errorf("delete --only %s touched %s %s", g, it.Group, it.Ref)
				}
			}
			if left := e.ourObjects(t); len(left) != 0 {
				t.Errorf("left in moto after deleting %s: %v", g, left)
			}
			for _, it := range e.plan(t, d, g).Items {
				if !untouched(it) {
					t.Errorf("after delete --only %s: %s %s", g, it.Action, it.Ref)
				}
			}
		})
	}
}

// TestMotoFailureHalfwayThenRerunOrDelete: the queue appears, not ours and
// different, between plan and apply; apply stops there with the journal of
// what it did. Re-run (once the queue is gone) finishes; delete removes
// what was done and leaves their queue.
func TestMotoFailureHalfwayThenRerunOrDelete(t *testing.T) {
	for _, then := range []string{"rerun", "delete"} {
		t.Run(then, func(t *testing.T) {
			e := newMotoEnv(t)
			ctx := t.Context()
			d := mustBuild(t, e.target("CONFIG_MAP"), desired.Options{Identity: desired.IdentityIRSA})
			p := e.plan(t, d)
			theirs, err := e.clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(d.Queue),
				Attributes: map[string]string{"MessageRetentionPeriod": "600"}})
			if err != nil {
				t.Fatal(err)
			}
			j, err := Apply(ctx, p, e.clients, ApplyOptions{Backoff: fastBackoff})
			if err == nil || !strings.Contains(err.Error(), "appeared after the plan") {
				t.Fatalf("apply = %v, want the queue that appeared after the plan", err)
			}
			if len(j.Entries) == 0 || slices.ContainsFunc(j.Entries, func(e JournalEntry) bool { return e.Kind == KindQueue || e.Kind == KindRule }) {
				t.Fatalf("journal after the failure = %+v", j.Entries)
			}
			switch then {
			case "rerun":
				if _, err := e.clients.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: theirs.QueueUrl}); err != nil {
					t.Fatal(err)
				}
				p := e.plan(t, d)
				a := actions(p)
				// No-op: what the journal records and the cluster's own OIDC provider.
				if a[ActionNoop] != len(j.Entries)+1 || a[ActionCreate] != len(p.Items)-len(j.Entries)-1 {
					t.Errorf("re-plan after the failure = %v; the journal had %d entries", a, len(j.Entries))
				}
				j = e.apply(t, p, j)
				assertAllNoop(t, e.plan(t, d))
				e.down(t, d, j)
				if left := e.ourObjects(t); len(left) != 0 {
					t.Errorf("left after the final delete: %v", left)
				}
			case "delete":
				e.down(t, d, j)
				left := e.ourObjects(t)
				if len(left) != 1 || !strings.HasPrefix(left[0], "queue ") {
					t.Errorf("after delete: %v, want only their queue", left)
				}
			}
		})
	}
}

// TestMotoDeleteWithoutNodeAccess: on an API-mode cluster, delete after an
// apply that left node access alone asks EKS nothing about access entries
// (moto, like a CONFIG_MAP cluster, has no such API). Without a journal,
// delete does ask, and moto's HTML 404 is reported naming the operation and
// the endpoint.
func TestMotoDeleteWithoutNodeAccess(t *testing.T) {
	e := newMotoEnv(t)
	d := mustBuild(t, e.target("API"), desired.Options{Identity: desired.IdentityIRSA})
	steps := []Group{GroupDiscoveryTags, GroupNodeRole, GroupControllerRole, GroupInterruption}
	j := e.apply(t, e.plan(t, d, steps...), nil)
	e.down(t, d, j)
	if left := e.ourObjects(t); len(left) != 0 {
		t.Errorf("left after delete from the journal: %v", left)
	}

	e.apply(t, e.plan(t, d, steps...), nil)
	e.down(t, d, nil, steps...)
	if left := e.ourObjects(t); len(left) != 0 {
		t.Errorf("left after delete --only: %v", left)
	}

	_, err := Down(t.Context(), d, nil, e.clients, DownOptions{Backoff: fastBackoff, DryRun: true})
	var nae *kmaws.NotAWSError
	if !errors.As(err, &nae) || !strings.Contains(err.Error(), "DescribeAccessEntry") || !strings.Contains(err.Error(), e.url) || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("delete without a journal on moto = %v, want moto's HTML 404 named with DescribeAccessEntry and %s", err, e.url)
	}
}

// TestMotoPodIdentityIsAMotoGap: moto has no pod identity associations;
// the plan says so naming the operation and the endpoint.
func TestMotoPodIdentityIsAMotoGap(t *testing.T) {
	e := newMotoEnv(t)
	d := mustBuild(t, e.target("CONFIG_MAP"), desired.Options{Identity: desired.IdentityPodIdentity})
	_, err := BuildPlan(t.Context(), d, e.clients, PlanOptions{Only: []Group{GroupControllerRole}, Backoff: fastBackoff})
	if err == nil || !strings.Contains(err.Error(), "ListPodIdentityAssociations") || !strings.Contains(err.Error(), e.url) {
		t.Errorf("pod identity plan on moto = %v, want an error naming ListPodIdentityAssociations and the endpoint", err)
	}
	if _, err := e.clients.EKS.(*eks.Client).DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: awssdk.String("prod")}); err != nil {
		t.Errorf("the cluster itself is served: %v", err)
	}
}

// TestMotoUpstreamQueueMatches: a queue made as Karpenter's CloudFormation
// makes it (retention, SSE, the template's queue policy) compares equal:
// not ours, so apply asks for --adopt, and adopts it without a change.
func TestMotoUpstreamQueueMatches(t *testing.T) {
	e := newMotoEnv(t)
	ctx := t.Context()
	d := mustBuild(t, e.target("CONFIG_MAP"), desired.Options{Identity: desired.IdentityIRSA})
	up, err := loadUpstream("cloudformation-v1.14.yaml", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(up.queueName), Attributes: map[string]string{
		"MessageRetentionPeriod": up.queueRetention, "SqsManagedSseEnabled": up.queueSSE, "Policy": up.queuePolicy.JSON()}}); err != nil {
		t.Fatal(err)
	}
	queueItem := func(p *Plan) Item {
		for _, it := range p.Items {
			if it.Kind == KindQueue {
				return it
			}
		}
		t.Fatal("no queue in the plan")
		return Item{}
	}
	if it := queueItem(e.plan(t, d, GroupInterruption)); it.Action != ActionConflict || len(it.Diff) != 0 || !strings.Contains(it.Reason, "--adopt") {
		t.Fatalf("upstream's queue: %+v, want a match that asks for --adopt", it)
	}
	d.Adopt = true
	e.apply(t, e.plan(t, d, GroupInterruption), nil)
	if it := queueItem(e.plan(t, d, GroupInterruption)); it.Action != ActionNoop {
		t.Errorf("adopted upstream queue re-plans as %s %v", it.Action, it.Diff)
	}
}
