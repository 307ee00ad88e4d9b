package desired

import (
	"slices"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

const (
	testAccount = "111122223333"
	testIssuer  = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
)

// target is a cluster "prod" with the given authentication mode.
func target(mode string) Target {
	return Target{
		Cluster: "prod", Region: "us-west-2", AccountID: testAccount, Partition: "aws", AuthenticationMode: mode,
		OIDCIssuer: testIssuer, SubnetIDs: []string{"subnet-a", "subnet-b"}, SecurityGroupIDs: []string{"sg-1"},
	}
}

func mustBuild(t *testing.T, tg Target, o Options) *State {
	t.Helper()
	d, err := Build(tg, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestScopedStatementsKeepTheirConditions guards the conditions that keep
// the broad resource patterns scoped to this cluster.
func TestScopedStatementsKeepTheirConditions(t *testing.T) {
	d := mustBuild(t, target("API"), Options{})
	want := map[string][]string{
		"AllowScopedEC2LaunchTemplateAccessActions": {"aws:ResourceTag/kubernetes.io/cluster/prod"},
		"AllowScopedEC2InstanceActionsWithTags":     {"aws:RequestTag/kubernetes.io/cluster/prod", "aws:RequestTag/eks:eks-cluster-name", "aws:RequestTag/karpenter.sh/nodepool"},
		"AllowScopedResourceCreationTagging":        {"ec2:CreateAction", "aws:RequestTag/eks:eks-cluster-name"},
		"AllowScopedResourceTagging":                {"aws:TagKeys", "aws:ResourceTag/kubernetes.io/cluster/prod"},
		"AllowScopedDeletion":                       {"aws:ResourceTag/kubernetes.io/cluster/prod", "aws:ResourceTag/karpenter.sh/nodepool"},
		"AllowPassingInstanceRole":                  {"iam:PassedToService"},
		"AllowScopedInstanceProfileCreationActions": {"aws:RequestTag/kubernetes.io/cluster/prod", "aws:RequestTag/topology.kubernetes.io/region"},
		"AllowScopedInstanceProfileActions":         {"aws:ResourceTag/kubernetes.io/cluster/prod"},
		"AllowRegionalReadActions":                  {"aws:RequestedRegion"},
	}
	seen := map[string]bool{}
	for _, p := range d.ControllerPolicies {
		for _, s := range p.Document.Statement {
			keys, ok := want[s.Sid]
			if !ok {
				continue
			}
			seen[s.Sid] = true
			var have []string
			for _, kv := range s.Condition {
				for k := range kv {
					have = append(have, k)
				}
			}
			for _, k := range keys {
				if !slices.Contains(have, k) {
					t.Errorf("%s lost condition key %s (has %v)", s.Sid, k, have)
				}
			}
		}
	}
	for sid := range want {
		if !seen[sid] {
			t.Errorf("statement %s missing", sid)
		}
	}
}

func TestBuildChoices(t *testing.T) {
	tests := []struct {
		name       string
		tg         func(*Target)
		opts       Options
		identity   Identity
		access     string
		entryType  string
		groups     []string
		rules      int
		wantErrSub string
	}{
		{name: "config map, IRSA by default", tg: func(*Target) {}, identity: IdentityIRSA, access: NodeAccessConfigMap,
			groups: []string{"system:bootstrappers", "system:nodes"}, rules: 5},
		{name: "pod identity agent present", tg: func(t *Target) { t.PodIdentityAgent = true; t.AuthenticationMode = "API" },
			identity: IdentityPodIdentity, access: NodeAccessAccessEntry, entryType: "EC2_LINUX", rules: 5},
		{name: "windows pools", tg: func(t *Target) { t.Windows = true; t.AuthenticationMode = "API_AND_CONFIG_MAP" },
			identity: IdentityIRSA, access: NodeAccessAccessEntry, entryType: "EC2_WINDOWS", rules: 5},
		{name: "windows on aws-auth", tg: func(t *Target) { t.Windows = true },
			identity: IdentityIRSA, access: NodeAccessConfigMap, groups: []string{"system:bootstrappers", "system:nodes", "eks:kube-proxy-windows"}, rules: 5},
		{name: "v1.9 has four rules", tg: func(*Target) {}, opts: Options{KarpenterVersion: "v1.9.3"}, identity: IdentityIRSA, access: NodeAccessConfigMap,
			groups: []string{"system:bootstrappers", "system:nodes"}, rules: 4},
		{name: "IRSA without issuer", tg: func(t *Target) { t.OIDCIssuer = "" }, opts: Options{Identity: IdentityIRSA}, wantErrSub: "OIDC issuer"},
		{name: "v0.37", tg: func(*Target) {}, opts: Options{KarpenterVersion: "0.37.0"}, wantErrSub: "only v1.0 and newer"},
		{name: "bad version", tg: func(*Target) {}, opts: Options{KarpenterVersion: "latest"}, wantErrSub: "MAJOR.MINOR"},
		{name: "bad identity", tg: func(*Target) {}, opts: Options{Identity: "kiam"}, wantErrSub: "want irsa or pod-identity"},
		{name: "name too long", tg: func(t *Target) { t.Cluster = strings.Repeat("c", 41) }, wantErrSub: "limit is 64"},
		{name: "bad auth mode", tg: func(t *Target) { t.AuthenticationMode = "STANDARD" }, wantErrSub: "authenticationMode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := target("CONFIG_MAP")
			tt.tg(&tg)
			d, err := Build(tg, tt.opts)
			if tt.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSub) {
					t.Fatalf("Build error = %v, want one containing %q", err, tt.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Identity != tt.identity || d.NodeAccess != tt.access || d.AccessEntryType != tt.entryType || !slices.Equal(d.AWSAuthGroups, tt.groups) || len(d.Rules) != tt.rules {
				t.Errorf("got identity %s, access %s %s, groups %v, %d rules", d.Identity, d.NodeAccess, d.AccessEntryType, d.AWSAuthGroups, len(d.Rules))
			}
		})
	}
}

func TestTrustPolicies(t *testing.T) {
	irsa := mustBuild(t, target("API"), Options{Identity: IdentityIRSA, Namespace: "karpenter"})
	cond := irsa.ControllerTrust.Statement[0].Condition["StringEquals"]
	host := strings.TrimPrefix(testIssuer, "https://")
	if got := cond[host+":sub"]; !slices.Equal(got, StringList{"system:serviceaccount:karpenter:karpenter"}) {
		t.Errorf("IRSA sub = %v", got)
	}
	if got := cond[host+":aud"]; !slices.Equal(got, StringList{"sts.amazonaws.com"}) {
		t.Errorf("IRSA aud = %v", got)
	}
	if irsa.OIDCProviderARN != "arn:aws:iam::"+testAccount+":oidc-provider/"+host {
		t.Errorf("OIDC provider ARN = %s", irsa.OIDCProviderARN)
	}
	pi := mustBuild(t, target("API"), Options{Identity: IdentityPodIdentity})
	if p := pi.ControllerTrust.Statement[0].Principal.IDs["Service"]; !slices.Equal(p, StringList{"pods.eks.amazonaws.com"}) {
		t.Errorf("pod identity principal = %v", p)
	}
	cn := target("API")
	cn.Partition = "aws-cn"
	if p := mustBuild(t, cn, Options{}).NodeTrust.Statement[0].Principal.IDs["Service"]; !slices.Equal(p, StringList{"ec2.amazonaws.com.cn"}) {
		t.Errorf("China node trust principal = %v", p)
	}
	q := irsa.QueuePolicy
	if len(q.Statement) != 2 || q.Statement[1].Effect != "Deny" || !q.Statement[1].Principal.All ||
		!slices.Equal(q.Statement[1].Condition["Bool"]["aws:SecureTransport"], StringList{"false"}) {
		t.Errorf("queue policy does not deny non-TLS: %s", q.JSON())
	}
}

func TestPolicyDocumentRoundTrip(t *testing.T) {
	d := mustBuild(t, target("API"), Options{})
	for _, doc := range []PolicyDocument{d.NodeTrust, d.ControllerTrust, d.QueuePolicy, d.ControllerPolicies[0].Document} {
		for _, enc := range []string{doc.JSON(), iamURLEncode(doc.JSON())} {
			back, err := ParsePolicy(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !back.Equal(doc) {
				t.Errorf("round trip changed the document:\n%s", enc)
			}
		}
	}
	// Spelling differences that IAM normalises are equal; a real change is not.
	a, _ := ParsePolicy(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["b","a"],"Resource":"*","Condition":{"Bool":{"k":false}}}]}`)
	b, _ := ParsePolicy(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["a","b"],"Resource":["*"],"Condition":{"Bool":{"k":"false"}}}]}`)
	if !a.Equal(b) {
		t.Error("equivalent spellings compare unequal")
	}
	c, _ := ParsePolicy(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["a","c"],"Resource":"*"}]}`)
	if a.Equal(c) {
		t.Error("different documents compare equal")
	}
}

func iamURLEncode(s string) string {
	var b strings.Builder
	for _, r := range []byte(s) {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteByte(r)
		} else {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[r>>4])+string("0123456789abcdef"[r&15])))
		}
	}
	return b.String()
}

func TestTargetFromInventory(t *testing.T) {
	inv := &inventory.Inventory{
		Cluster: inventory.Cluster{Name: "prod", ARN: "arn:aws-us-gov:eks:us-gov-west-1:111122223333:cluster/prod",
			AuthenticationMode: "API", ClusterSecurityGroupID: "sg-cluster"},
		NodeGroups: []inventory.NodeGroup{
			{Name: "a", SubnetIDs: []string{"subnet-2", "subnet-1"}},
			{Name: "b", SubnetIDs: []string{"subnet-1"}, OS: "windows", LaunchTemplate: &inventory.LaunchTemplate{SecurityGroupIDs: []string{"sg-lt"}}},
		},
	}
	tg, err := TargetFromInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Partition != "aws-us-gov" || tg.Region != "us-gov-west-1" || tg.AccountID != "111122223333" || !tg.Windows ||
		!slices.Equal(tg.SubnetIDs, []string{"subnet-1", "subnet-2"}) || !slices.Equal(tg.SecurityGroupIDs, []string{"sg-lt"}) {
		t.Errorf("target = %+v", tg)
	}
	inv.NodeGroups[1].LaunchTemplate = nil
	tg, _ = TargetFromInventory(inv)
	if !slices.Equal(tg.SecurityGroupIDs, []string{"sg-cluster"}) {
		t.Errorf("without node-group security groups: %v, want the cluster security group", tg.SecurityGroupIDs)
	}
	if _, err := TargetFromInventory(&inventory.Inventory{Cluster: inventory.Cluster{Name: "x", ARN: "nope"}}); err == nil || !strings.Contains(err.Error(), "cluster.arn") {
		t.Errorf("bad ARN error = %v", err)
	}
}
