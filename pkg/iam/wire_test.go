package iam

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/kubernetes/fake"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

const (
	testAccount = "111122223333"
	testIssuer  = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
)

var fastBackoff = Backoff{Attempts: 6, Base: time.Millisecond, Max: 5 * time.Millisecond}

// account is a cluster "prod" with two subnets, a security group that
// already carries an unrelated tag, and the cluster's OIDC provider (not
// created by us).
func account() *awsfake.Account {
	return &awsfake.Account{
		ID: testAccount, Region: "us-west-2",
		EC2: awsfake.EC2State{
			Subnets: []ec2types.Subnet{
				{SubnetId: awssdk.String("subnet-a"), AvailabilityZone: awssdk.String("us-west-2a"), VpcId: awssdk.String("vpc-1")},
				{SubnetId: awssdk.String("subnet-b"), AvailabilityZone: awssdk.String("us-west-2b"), VpcId: awssdk.String("vpc-1")},
			},
			SecurityGroups: []ec2types.SecurityGroup{{GroupId: awssdk.String("sg-1"), VpcId: awssdk.String("vpc-1"),
				Tags: []ec2types.Tag{{Key: awssdk.String("team"), Value: awssdk.String("platform")}}}},
		},
		EKS: awsfake.EKSState{Clusters: []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: awssdk.String("prod"), Status: ekstypes.ClusterStatusActive}}}},
		IAM: awsfake.IAMState{OIDCProviders: []awsfake.IAMOIDCProvider{{
			ARN: "arn:aws:iam::" + testAccount + ":oidc-provider/" + strings.TrimPrefix(testIssuer, "https://"),
			URL: strings.TrimPrefix(testIssuer, "https://"), ClientIDList: []string{"sts.amazonaws.com"},
		}}},
	}
}

func target(mode string) desired.Target {
	return desired.Target{
		Cluster: "prod", Region: "us-west-2", AccountID: testAccount, Partition: "aws", AuthenticationMode: mode,
		OIDCIssuer: testIssuer, SubnetIDs: []string{"subnet-a", "subnet-b"}, SecurityGroupIDs: []string{"sg-1"},
	}
}

// env is the real SDK clients against a fresh fake, plus a fake clientset
// for aws-auth.
type env struct {
	srv     *awsfake.Server
	clients Clients
}

func newEnv(t *testing.T, acct *awsfake.Account) *env {
	t.Helper()
	srv := awsfake.New(acct)
	t.Cleanup(srv.Close)
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{
		Region: "us-west-2", EndpointURL: srv.URL(), RetryMode: awssdk.RetryModeStandard,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		// One attempt: the retries under test are this package's own.
		MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	sdk := kmaws.NewClients(cfg)
	return &env{srv: srv, clients: Clients{
		IAM: iam.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), EventBridge: eventbridge.NewFromConfig(cfg),
		EKS: sdk.EKS, EC2: sdk.EC2,
		AWSAuth: &awsauth.Editor{Client: fake.NewClientset(), BackupNamespace: "karpenter-migrate"},
	}}
}

func (e *env) plan(t *testing.T, d *desired.State) *Plan {
	t.Helper()
	p, err := BuildPlan(context.Background(), d, e.clients, PlanOptions{Backoff: fastBackoff})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

func (e *env) apply(t *testing.T, p *Plan) *Journal {
	t.Helper()
	j, err := Apply(context.Background(), p, e.clients, ApplyOptions{Backoff: fastBackoff})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return j
}

func actions(p *Plan) map[Action]int {
	m := map[Action]int{}
	for _, it := range p.Items {
		m[it.Action]++
	}
	return m
}

func mustBuild(t *testing.T, tg desired.Target, o desired.Options) *desired.State {
	t.Helper()
	d, err := desired.Build(tg, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mutations counts the calls that change state.
func mutations(s *awsfake.Server) int {
	n := 0
	for k, v := range s.CallCounts() {
		_, op, _ := strings.Cut(k, ":")
		if !strings.HasPrefix(op, "Get") && !strings.HasPrefix(op, "List") && !strings.HasPrefix(op, "Describe") {
			n += v
		}
	}
	return n
}

// assertNothingOurs checks that no object tagged as ours is left and that
// what was there before is.
func assertNothingOurs(t *testing.T, s *awsfake.Server) {
	t.Helper()
	s.Account(func(a *awsfake.Account) {
		if len(a.IAM.Roles) != 0 || len(a.IAM.Policies) != 0 || len(a.IAM.InstanceProfiles) != 0 {
			t.Errorf("IAM left behind: %d roles, %d policies, %d instance profiles", len(a.IAM.Roles), len(a.IAM.Policies), len(a.IAM.InstanceProfiles))
		}
		if len(a.SQS.Queues) != 0 || len(a.EventBridge.Rules) != 0 {
			t.Errorf("left behind: %d queues, %d rules", len(a.SQS.Queues), len(a.EventBridge.Rules))
		}
		if len(a.EKSAccess.AccessEntries) != 0 || len(a.EKSAccess.PodIdentityAssociations) != 0 {
			t.Errorf("left behind: %d access entries, %d pod identity associations", len(a.EKSAccess.AccessEntries), len(a.EKSAccess.PodIdentityAssociations))
		}
		if len(a.IAM.OIDCProviders) != 1 {
			t.Errorf("the cluster's own OIDC provider was touched: %d providers", len(a.IAM.OIDCProviders))
		}
		for _, sn := range a.EC2.Subnets {
			if len(sn.Tags) != 0 {
				t.Errorf("subnet %s keeps tags %v", *sn.SubnetId, sn.Tags)
			}
		}
		if tags := a.EC2.SecurityGroups[0].Tags; len(tags) != 1 || *tags[0].Key != "team" {
			t.Errorf("security group tags after Down = %v, want only team=platform", tags)
		}
	})
}

func TestApplyThenReapplyIsNoopThenDown(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		opts     desired.Options
		creates  int
		policies int
	}{
		// 3 discovery tags, node role, 6 policies, controller role, queue, 5 rules, access entry.
		{"irsa api v1.14", "API", desired.Options{Identity: desired.IdentityIRSA}, 18, 6},
		// + pod identity association, + instance profile; aws-auth instead of the access entry.
		{"pod identity aws-auth v1.14 instance profile", "CONFIG_MAP", desired.Options{Identity: desired.IdentityPodIdentity, InstanceProfile: true}, 20, 6},
		// one policy, four rules.
		{"irsa api_and_config_map v1.8", "API_AND_CONFIG_MAP", desired.Options{Identity: desired.IdentityIRSA, KarpenterVersion: "1.8.2"}, 12, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, account())
			d := mustBuild(t, target(tt.mode), tt.opts)
			p := e.plan(t, d)
			if got := actions(p)[ActionCreate]; got != tt.creates {
				t.Errorf("plan creates %d objects, want %d: %+v", got, tt.creates, actions(p))
			}
			if b := p.Blocked(); len(b) > 0 {
				t.Fatalf("plan blocked: %v", b)
			}
			j := e.apply(t, p)
			if len(j.Entries) != tt.creates {
				t.Errorf("journal has %d entries, want %d", len(j.Entries), tt.creates)
			}
			e.srv.Account(func(a *awsfake.Account) {
				if len(a.IAM.Policies) != tt.policies {
					t.Errorf("%d policies created, want %d", len(a.IAM.Policies), tt.policies)
				}
				for _, r := range a.IAM.Roles {
					if !hasOwnerTags(r.Role.Tags) {
						t.Errorf("role %s not tagged as ours: %v", *r.Role.RoleName, r.Role.Tags)
					}
				}
				if len(a.SQS.Queues) != 1 || a.SQS.Queues[0].Attributes["MessageRetentionPeriod"] != "300" || a.SQS.Queues[0].Attributes["SqsManagedSseEnabled"] != "true" {
					t.Errorf("queue = %+v", a.SQS.Queues)
				}
				for _, r := range a.EventBridge.Rules {
					if len(r.Targets) != 1 || *r.Targets[0].Arn != d.QueueARN {
						t.Errorf("rule %s targets %v, want the queue", *r.Rule.Name, r.Targets)
					}
				}
			})

			// Second plan: nothing to do; second apply changes nothing.
			e.srv.ResetCalls()
			p2 := e.plan(t, d)
			if p2.Changes() != 0 {
				for _, it := range p2.Items {
					if it.Action != ActionNoop {
						t.Errorf("re-plan: %s %s: %s %v", it.Action, it.Ref, it.Reason, it.Diff)
					}
				}
			}
			e.apply(t, p2)
			if n := mutations(e.srv); n != 0 {
				t.Errorf("second apply made %d mutating calls:\n%s", n, e.srv.CallSummary())
			}

			items, err := Down(context.Background(), d, j, e.clients, DownOptions{Backoff: fastBackoff})
			if err != nil {
				t.Fatalf("down: %v", err)
			}
			deleted := 0
			for _, it := range items {
				if it.Action == ActionDelete {
					deleted++
				}
			}
			if deleted != tt.creates {
				t.Errorf("down deleted %d objects, want %d", deleted, tt.creates)
			}
			assertNothingOurs(t, e.srv)
			if tt.mode == "CONFIG_MAP" {
				st, err := e.clients.AWSAuth.Lookup(context.Background(), awsauth.MapRole{RoleARN: d.NodeRoleARN})
				if err != nil || st.Present {
					t.Errorf("aws-auth still maps the node role after down: %+v %v", st, err)
				}
			}
		})
	}
}

func hasOwnerTags(tags []iamtypes.Tag) bool {
	m := map[string]string{}
	for _, t := range tags {
		m[*t.Key] = *t.Value
	}
	return m[desired.TagManagedBy] == desired.TagManagedByValue && m[desired.TagCluster] == "prod"
}

func TestThrottlingIsRetried(t *testing.T) {
	e := newEnv(t, account())
	e.srv.SetFault("iam", "CreateRole", awsfake.Fault{Throttle: 3})
	e.srv.SetFault("sqs", "CreateQueue", awsfake.Fault{Throttle: 2})
	e.srv.SetFault("events", "PutRule", awsfake.Fault{Throttle: 1})
	e.srv.SetFault("eks", "CreateAccessEntry", awsfake.Fault{Throttle: 2})
	d := mustBuild(t, target("API"), desired.Options{})
	e.apply(t, e.plan(t, d))
	if got := e.srv.Calls("iam", "CreateRole"); got != 2+3 {
		t.Errorf("CreateRole calls = %d, want 5 (2 roles, 3 throttled)", got)
	}
	if got := e.srv.Calls("sqs", "CreateQueue"); got != 3 {
		t.Errorf("CreateQueue calls = %d, want 3", got)
	}
	if p := e.plan(t, d); p.Changes() != 0 {
		t.Errorf("after a throttled apply the plan still has %d changes", p.Changes())
	}
}

func TestThrottlingGivesUp(t *testing.T) {
	e := newEnv(t, account())
	e.srv.SetFault("iam", "CreateRole", awsfake.Fault{Throttle: 100})
	d := mustBuild(t, target("API"), desired.Options{})
	_, err := Apply(context.Background(), e.plan(t, d), e.clients, ApplyOptions{Backoff: fastBackoff})
	if ErrorCode(err) != "Throttling" || !strings.Contains(err.Error(), "NodeRole KarpenterNodeRole-prod") {
		t.Fatalf("apply = %v, want a Throttling error naming the node role", err)
	}
	if got := e.srv.Calls("iam", "CreateRole"); got != fastBackoff.Attempts {
		t.Errorf("CreateRole calls = %d, want %d", got, fastBackoff.Attempts)
	}
}

func TestEntityAlreadyExistsOnCreate(t *testing.T) {
	d := mustBuild(t, target("API"), desired.Options{})
	ours := []iamtypes.Tag{{Key: awssdk.String(desired.TagManagedBy), Value: awssdk.String(desired.TagManagedByValue)}, {Key: awssdk.String(desired.TagCluster), Value: awssdk.String("prod")}}
	role := func(tags []iamtypes.Tag) awsfake.IAMRole {
		return awsfake.IAMRole{Role: iamtypes.Role{RoleName: awssdk.String(d.NodeRole), Arn: awssdk.String(d.NodeRoleARN),
			AssumeRolePolicyDocument: awssdk.String(d.NodeTrust.JSON()), Tags: tags}}
	}

	t.Run("ours, from a lost response", func(t *testing.T) {
		e := newEnv(t, account())
		p := e.plan(t, d)
		// The role appears between plan and apply, tagged as ours (a
		// previous request whose response was lost), without its policies.
		e.srv.Account(func(a *awsfake.Account) { a.IAM.Roles = append(a.IAM.Roles, role(ours)) })
		e.apply(t, p)
		if got := e.srv.Calls("iam", "CreateRole"); got != 2 {
			t.Errorf("CreateRole calls = %d, want 2", got)
		}
		if p := e.plan(t, d); p.Changes() != 0 {
			t.Errorf("re-plan has %d changes; the recovered role was not completed", p.Changes())
		}
	})
	t.Run("someone else's", func(t *testing.T) {
		e := newEnv(t, account())
		p := e.plan(t, d)
		e.srv.Account(func(a *awsfake.Account) { a.IAM.Roles = append(a.IAM.Roles, role(nil)) })
		j, err := Apply(context.Background(), p, e.clients, ApplyOptions{Backoff: fastBackoff})
		if ErrorCode(err) != "EntityAlreadyExists" || !strings.Contains(err.Error(), "run plan again") {
			t.Fatalf("apply = %v, want EntityAlreadyExists and advice to plan again", err)
		}
		// Down with the journal removes what was done, and not their role.
		if _, err := Down(context.Background(), d, j, e.clients, DownOptions{Backoff: fastBackoff}); err != nil {
			t.Fatal(err)
		}
		e.srv.Account(func(a *awsfake.Account) {
			if len(a.IAM.Roles) != 1 || a.IAM.Roles[0].Role.Tags != nil {
				t.Errorf("roles after down = %+v, want only theirs", a.IAM.Roles)
			}
		})
	})
}

func TestFailureHalfwayThenRerunOrDown(t *testing.T) {
	denied := &awsfake.Error{Status: http.StatusBadRequest, Code: "AccessDeniedException", Message: "not authorized to perform: sqs:createqueue"}
	for _, then := range []string{"rerun", "down"} {
		t.Run(then, func(t *testing.T) {
			e := newEnv(t, account())
			d := mustBuild(t, target("API"), desired.Options{Identity: desired.IdentityPodIdentity})
			e.srv.SetFault("sqs", "CreateQueue", awsfake.Fault{Err: denied})
			var saved []int
			j, err := Apply(context.Background(), e.plan(t, d), e.clients, ApplyOptions{
				Backoff: fastBackoff, Save: func(j *Journal) error { saved = append(saved, len(j.Entries)); return nil },
			})
			if ErrorCode(err) != "AccessDeniedException" {
				t.Fatalf("apply = %v, want the injected denial", err)
			}
			if len(j.Entries) == 0 || len(saved) != len(j.Entries) || !slices.ContainsFunc(j.Entries, func(e JournalEntry) bool { return e.Kind == KindControllerRole }) {
				t.Fatalf("journal after failure = %+v (saved %v)", j.Entries, saved)
			}
			e.srv.ClearFaults()
			switch then {
			case "rerun":
				p := e.plan(t, d)
				a := actions(p)
				if a[ActionNoop] != len(j.Entries) || a[ActionCreate] != len(p.Items)-len(j.Entries) {
					t.Errorf("re-plan after failure = %v; journal had %d entries", a, len(j.Entries))
				}
				e.apply(t, p)
				if p := e.plan(t, d); p.Changes() != 0 {
					t.Errorf("after the re-run the plan still has %d changes", p.Changes())
				}
			case "down":
				if _, err := Down(context.Background(), d, j, e.clients, DownOptions{Backoff: fastBackoff}); err != nil {
					t.Fatal(err)
				}
				assertNothingOurs(t, e.srv)
			}
		})
	}
}

func TestAdoptOnlyMatching(t *testing.T) {
	d := mustBuild(t, target("API"), desired.Options{})
	seed := func(doc string) *awsfake.Account {
		a := account()
		a.SQS.Queues = []awsfake.SQSQueue{{Name: "prod", Attributes: map[string]string{
			"MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true", "Policy": doc,
		}}}
		return a
	}
	item := func(p *Plan, k Kind) Item {
		for _, it := range p.Items {
			if it.Kind == k {
				return it
			}
		}
		t.Fatalf("no %s in plan", k)
		return Item{}
	}

	// Matching, without --adopt: conflict, and apply refuses.
	e := newEnv(t, seed(d.QueuePolicy.JSON()))
	p := e.plan(t, d)
	if it := item(p, KindQueue); it.Action != ActionConflict || !strings.Contains(it.Reason, "--adopt") {
		t.Fatalf("queue item = %+v, want a conflict suggesting --adopt", it)
	}
	var blocked *BlockedError
	if _, err := Apply(context.Background(), p, e.clients, ApplyOptions{Backoff: fastBackoff}); !errors.As(err, &blocked) {
		t.Fatalf("apply of a blocked plan = %v", err)
	}
	if n := mutations(e.srv); n != 0 {
		t.Errorf("a blocked apply made %d mutating calls", n)
	}

	// Matching, with --adopt: tagged, then managed.
	d.Adopt = true
	p = e.plan(t, d)
	if it := item(p, KindQueue); it.Action != ActionAdopt {
		t.Fatalf("queue item with --adopt = %+v", it)
	}
	e.apply(t, p)
	if it := item(e.plan(t, d), KindQueue); it.Action != ActionNoop {
		t.Errorf("adopted queue re-plans as %s", it.Action)
	}

	// Differing: conflict with the difference shown, even with --adopt.
	other := d.QueuePolicy
	other.Statement = other.Statement[:1]
	e = newEnv(t, seed(other.JSON()))
	it := item(e.plan(t, d), KindQueue)
	if it.Action != ActionConflict || len(it.Diff) == 0 || !strings.Contains(strings.Join(it.Diff, "\n"), "+") {
		t.Errorf("differing queue item = %+v, want a conflict with a diff", it)
	}
}

func TestOIDCProvider(t *testing.T) {
	a := account()
	a.IAM.OIDCProviders = nil
	e := newEnv(t, a)
	d := mustBuild(t, target("API"), desired.Options{Identity: desired.IdentityIRSA})
	p := e.plan(t, d)
	if b := p.Blocked(); len(b) != 1 || b[0].Kind != KindOIDCProvider || !strings.Contains(b[0].Reason, "--create-oidc-provider") {
		t.Fatalf("blocked = %+v, want the missing OIDC provider with a hint", b)
	}
	d = mustBuild(t, target("API"), desired.Options{Identity: desired.IdentityIRSA, CreateOIDCProvider: true})
	j := e.apply(t, e.plan(t, d))
	if _, err := Down(context.Background(), d, j, e.clients, DownOptions{Backoff: fastBackoff}); err != nil {
		t.Fatal(err)
	}
	e.srv.Account(func(a *awsfake.Account) {
		if len(a.IAM.OIDCProviders) != 0 {
			t.Errorf("the OIDC provider we created survived Down")
		}
	})
}

func TestVersionUpgradeUpdatesPolicies(t *testing.T) {
	e := newEnv(t, account())
	old := mustBuild(t, target("API"), desired.Options{KarpenterVersion: "1.10.0"})
	e.apply(t, e.plan(t, old))
	cur := mustBuild(t, target("API"), desired.Options{KarpenterVersion: "1.14.1"})
	p := e.plan(t, cur)
	got := map[string]Action{}
	for _, it := range p.Items {
		if it.Action != ActionNoop {
			got[it.Name] = it.Action
		}
	}
	want := map[string]Action{
		"KarpenterControllerResourceDiscoveryPolicy-prod": ActionUpdate, // DescribePlacementGroups, DescribeInstanceStatus
		"KarpenterControllerNodeLifecyclePolicy-prod":     ActionUpdate, // placement-group/*
		"KarpenterControllerZonalShiftPolicy-prod":        ActionCreate,
		"KarpenterControllerRole-prod":                    ActionUpdate, // attach ZonalShift
	}
	if !mapsEqual(got, want) {
		t.Errorf("upgrade plan = %v, want %v", got, want)
	}
	e.apply(t, p)
	if p := e.plan(t, cur); p.Changes() != 0 {
		t.Errorf("after the upgrade the plan has %d changes", p.Changes())
	}
	e.srv.Account(func(a *awsfake.Account) {
		for _, pol := range a.IAM.Policies {
			if want[*pol.Policy.PolicyName] == ActionUpdate && (*pol.Policy.DefaultVersionId != "v2" || len(pol.Versions) != 2) {
				t.Errorf("updated policy: default %s, %d versions", *pol.Policy.DefaultVersionId, len(pol.Versions))
			}
		}
	})
	// Down at the old version still removes the ZonalShift policy.
	if _, err := Down(context.Background(), old, nil, e.clients, DownOptions{Backoff: fastBackoff}); err != nil {
		t.Fatal(err)
	}
	assertNothingOurs(t, e.srv)
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestDownAsksOnlyAboutWhatItTouched: with a journal, Down asks EKS about
// access entries and pod identity associations only if the journal records
// one (those APIs may not exist for the cluster); without a journal it
// asks about what the cluster uses now.
func TestDownAsksOnlyAboutWhatItTouched(t *testing.T) {
	e := newEnv(t, account())
	d := mustBuild(t, target("API"), desired.Options{Identity: desired.IdentityIRSA})
	p, err := BuildPlan(context.Background(), d, e.clients, PlanOptions{Backoff: fastBackoff,
		Only: []Group{GroupDiscoveryTags, GroupNodeRole, GroupControllerRole, GroupInterruption}})
	if err != nil {
		t.Fatal(err)
	}
	j := e.apply(t, p)
	e.srv.ResetCalls()
	if _, err := Down(context.Background(), d, j, e.clients, DownOptions{Backoff: fastBackoff}); err != nil {
		t.Fatal(err)
	}
	if n, m := e.srv.Calls("eks", "DescribeAccessEntry"), e.srv.Calls("eks", "ListPodIdentityAssociations"); n+m != 0 {
		t.Errorf("Down from a journal without node access or pod identity: %d DescribeAccessEntry, %d ListPodIdentityAssociations calls", n, m)
	}
	assertNothingOurs(t, e.srv)

	pi := mustBuild(t, target("API"), desired.Options{Identity: desired.IdentityPodIdentity})
	e.srv.ResetCalls()
	if _, err := Down(context.Background(), pi, nil, e.clients, DownOptions{Backoff: fastBackoff}); err != nil {
		t.Fatal(err)
	}
	if n, m := e.srv.Calls("eks", "DescribeAccessEntry"), e.srv.Calls("eks", "ListPodIdentityAssociations"); n == 0 || m == 0 {
		t.Errorf("Down without a journal: %d DescribeAccessEntry, %d ListPodIdentityAssociations calls, want both asked", n, m)
	}
}
