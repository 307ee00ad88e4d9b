package generate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// jobTree writes a minimal tree with two overlays; only dev's and base's
// files may be packed for dev.
func jobTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range map[string]string{
		"base/kustomization.yaml":                 "resources: [nodepools/general.yaml]\n",
		"base/nodepools/general.yaml":             "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: general}\n",
		"overlays/dev/kustomization.yaml":         "resources: [../../base]\npatches: [{path: patches/limits.yaml}]\n",
		"overlays/dev/patches/limits.yaml":        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: general}\nspec: {limits: {cpu: 64}}\n",
		"overlays/prod/kustomization.yaml":        "resources: [../../base]\n",
		"overlays/prod/patches/never-packed.yaml": "secret: prod only\n",
		"helm/karpenter-values.yaml":              "settings: {}\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func jobOptions(tree string) JobOptions {
	return JobOptions{
		Environment: "dev", Cluster: "shop-dev", Namespace: "karpenter-migrate", Image: "ghcr.io/acme/karpenter-migrate:v1.2.3",
		Region: "eu-west-1", RoleARN: "arn:aws:iam::111122223333:role/karpenter-migrate-dev",
		Plan: []byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: Plan\nenvironment: dev\n"), PlanHash: "sha256:0123456789abcdef",
		Config:  []byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: MigrationConfig\nenvironment: dev\n"),
		TreeDir: tree, ClusterAutoscaler: &NamespacedName{Namespace: "kube-system", Name: "cluster-autoscaler"},
		BackoffLimit: 6, LeaseDuration: time.Minute,
	}
}

func TestJobGolden(t *testing.T) {
	got, err := Job(jobOptions(jobTree(t)))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "job", "dev.golden.yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Job manifest differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
}

type doc struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules []rbacv1.PolicyRule `json:"rules"`
	Data  map[string]string   `json:"data"`
}

func decodeDocs(t *testing.T, b []byte) []doc {
	t.Helper()
	var out []doc
	for _, part := range bytes.Split(b, []byte("\n---\n")) {
		var d doc
		if err := yaml.Unmarshal(part, &d); err != nil {
			t.Fatalf("manifest document does not parse: %v\n%s", err, part)
		}
		out = append(out, d)
	}
	// The stream also decodes as Kubernetes YAML.
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for n := 0; ; n++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if n != len(out) {
				t.Fatalf("decoded %d documents, split %d", n, len(out))
			}
			break
		}
	}
	return out
}

func TestJobRBACIsTheRunbookRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ca     *NamespacedName
		scopes map[string]string // role name suffix -> scope
	}{
		{"with Cluster Autoscaler", &NamespacedName{Namespace: "autoscaling", Name: "ca"}, map[string]string{"": ScopeNamespace, "-aws-auth": ScopeAWSAuth, "-cluster-autoscaler": ScopeClusterAutoscaler}},
		{"without", nil, map[string]string{"": ScopeNamespace, "-aws-auth": ScopeAWSAuth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := jobOptions(jobTree(t))
			o.ClusterAutoscaler = tc.ca
			b, err := Job(o)
			if err != nil {
				t.Fatal(err)
			}
			want := func(scope string) []rbacv1.PolicyRule {
				var rules []rbacv1.PolicyRule
				for _, r := range RunbookRules() {
					if r.Scope == scope {
						rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: r.Verbs})
					}
				}
				return rules
			}
			roles := map[string]bool{}
			for _, d := range decodeDocs(t, b) {
				switch d.Kind {
				case "ClusterRole":
					if !slices.EqualFunc(d.Rules, want(ScopeCluster), sameRule) {
						t.Errorf("ClusterRole rules %v, want %v", d.Rules, want(ScopeCluster))
					}
				case "Role":
					suffix := strings.TrimPrefix(d.Metadata.Name, JobServiceAccount("dev"))
					scope, ok := tc.scopes[suffix]
					if !ok {
						t.Errorf("unexpected Role %s/%s", d.Metadata.Namespace, d.Metadata.Name)
						continue
					}
					roles[suffix] = true
					if !slices.EqualFunc(d.Rules, want(scope), sameRule) {
						t.Errorf("Role %s rules %v, want %v", d.Metadata.Name, d.Rules, want(scope))
					}
					for _, r := range d.Rules {
						switch scope {
						case ScopeAWSAuth:
							if !slices.Equal(r.ResourceNames, []string{"aws-auth"}) || d.Metadata.Namespace != "kube-system" {
								t.Errorf("aws-auth Role not limited to kube-system/aws-auth: %s %v", d.Metadata.Namespace, r.ResourceNames)
							}
						case ScopeClusterAutoscaler:
							if !slices.Equal(r.ResourceNames, []string{tc.ca.Name}) || d.Metadata.Namespace != tc.ca.Namespace {
								t.Errorf("Cluster Autoscaler Role not limited to its Deployment: %s %v", d.Metadata.Namespace, r.ResourceNames)
							}
						}
					}
				}
			}
			if len(roles) != len(tc.scopes) {
				t.Errorf("Roles %v, want %v", roles, tc.scopes)
			}
		})
	}
}

func sameRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs)
}

func TestJobPacksOnlyTheEnvironment(t *testing.T) {
	b, err := Job(jobOptions(jobTree(t)))
	if err != nil {
		t.Fatal(err)
	}
	var cm doc
	for _, d := range decodeDocs(t, b) {
		if d.Kind == "ConfigMap" {
			cm = d
		}
	}
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"config.yaml", "plan.yaml", "tree.base.kustomization.yaml", "tree.base.nodepools.general.yaml", "tree.overlays.dev.kustomization.yaml", "tree.overlays.dev.patches.limits.yaml"}
	if !slices.Equal(keys, want) {
		t.Errorf("ConfigMap keys %v, want %v", keys, want)
	}
	if !strings.Contains(string(b), "path: tree/overlays/dev/patches/limits.yaml") {
		t.Error("the volume does not project the tree's files at their paths")
	}
}

func TestJobErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*JobOptions)
		want string
	}{
		{"no environment", func(o *JobOptions) { o.Environment = "" }, "environment is required"},
		{"bad namespace", func(o *JobOptions) { o.Namespace = "Karpenter_Migrate" }, `namespace "Karpenter_Migrate"`},
		{"environment too long for a name", func(o *JobOptions) { o.Environment = strings.Repeat("e", 60) }, "job name"},
		{"no image", func(o *JobOptions) { o.Image = "" }, "--image"},
		{"no plan", func(o *JobOptions) { o.Plan = nil }, "--plan"},
		{"zero lease", func(o *JobOptions) { o.LeaseDuration = 0 }, "lease duration 0s"},
		{"negative backoff", func(o *JobOptions) { o.BackoffLimit = -1 }, "backoff limit -1"},
		{"overlay missing", func(o *JobOptions) { o.Environment = "staging" }, "overlays/staging/kustomization.yaml"},
		{"tree missing", func(o *JobOptions) { o.TreeDir = filepath.Join(o.TreeDir, "nope") }, "run generate --envs dev first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := jobOptions(jobTree(t))
			tc.mod(&o)
			_, err := Job(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
