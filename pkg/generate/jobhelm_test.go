package generate

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// officialKinds is a manifest with the kinds the official Karpenter chart
// renders (v1.x: no webhooks), CRDs first as `helm template
// --include-crds` prints them.
const officialKinds = `---
# Source: karpenter/crds/karpenter.sh_nodepools.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: nodepools.karpenter.sh}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: nodeclaims.karpenter.sh}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: karpenter, namespace: karpenter}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: karpenter, namespace: karpenter}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: karpenter-core}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: karpenter-core}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: karpenter, namespace: karpenter}
---
apiVersion: v1
kind: Service
metadata: {name: karpenter, namespace: karpenter}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: karpenter, namespace: karpenter}
`

func TestChartKinds(t *testing.T) {
	var got []string
	for _, k := range ChartKinds(officialKinds, "karpenter") {
		got = append(got, k.Group+"/"+k.Resource+map[bool]string{true: " (namespaced)", false: ""}[k.Namespaced])
	}
	want := []string{"apiextensions.k8s.io/customresourcedefinitions", "policy/poddisruptionbudgets (namespaced)", "/serviceaccounts (namespaced)",
		"rbac.authorization.k8s.io/clusterroles", "rbac.authorization.k8s.io/clusterrolebindings", "rbac.authorization.k8s.io/roles (namespaced)",
		"/services (namespaced)", "apps/deployments (namespaced)"}
	if !slices.Equal(got, want) {
		t.Errorf("ChartKinds:\n got %v\nwant %v", got, want)
	}
}

// TestJobRBACForKarpenter: with a Karpenter release the Job gets a Role
// in the release's namespace (its Secrets and the chart's namespaced
// kinds) and a ClusterRole for the CRDs and the chart's cluster-scoped
// kinds — exactly KarpenterRules — and nothing cluster-wide on Secrets.
func TestJobRBACForKarpenter(t *testing.T) {
	o := jobOptions(jobTree(t))
	o.Karpenter = &KarpenterRelease{Namespace: "karpenter", Kinds: ChartKinds(officialKinds, "karpenter")}
	b, err := Job(o)
	if err != nil {
		t.Fatal(err)
	}
	want := func(scope string) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, r := range KarpenterRules(*o.Karpenter) {
			if r.Scope == scope {
				out = append(out, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: r.Verbs})
			}
		}
		return out
	}
	name := JobServiceAccount("dev") + "-karpenter"
	found := map[string]bool{}
	for _, d := range decodeDocs(t, b) {
		switch {
		case d.Kind == "Namespace" && d.Metadata.Name == "karpenter":
			found["namespace"] = true
		case d.Kind == "Role" && d.Metadata.Name == name:
			found["role"] = true
			if d.Metadata.Namespace != "karpenter" || !slices.EqualFunc(d.Rules, want(ScopeKarpenterNamespace), sameRule) {
				t.Errorf("Role %s/%s rules %v, want %v in karpenter", d.Metadata.Namespace, d.Metadata.Name, d.Rules, want(ScopeKarpenterNamespace))
			}
		case d.Kind == "ClusterRole" && d.Metadata.Name == name:
			found["clusterrole"] = true
			if !slices.EqualFunc(d.Rules, want(ScopeKarpenterCluster), sameRule) {
				t.Errorf("ClusterRole %s rules %v, want %v", name, d.Rules, want(ScopeKarpenterCluster))
			}
			for _, r := range d.Rules {
				if slices.Contains(r.Resources, "secrets") {
					t.Errorf("ClusterRole %s grants Secrets cluster-wide: %v", name, r)
				}
				if slices.Contains(r.Resources, "customresourcedefinitions") && (slices.Contains(r.Verbs, "delete") || slices.Contains(r.Verbs, "update")) {
					t.Errorf("CRDs may be deleted or updated: %v (Helm never does)", r.Verbs)
				}
			}
		case d.Kind == "RoleBinding" && d.Metadata.Name == name, d.Kind == "ClusterRoleBinding" && d.Metadata.Name == name:
			found[strings.ToLower(d.Kind)] = true
		}
	}
	for _, w := range []string{"namespace", "role", "rolebinding", "clusterrole", "clusterrolebinding"} {
		if !found[w] {
			t.Errorf("no %s for the Karpenter release", w)
		}
	}
	rules := map[string][]string{}
	for _, r := range KarpenterRules(*o.Karpenter) {
		rules[r.Scope+" "+r.Group+"/"+r.Resource] = r.Verbs
	}
	for key, verbs := range map[string][]string{
		ScopeKarpenterNamespace + " /secrets":                                     {"get", "list", "create", "update", "delete"},
		ScopeKarpenterNamespace + " apps/deployments":                             {"get", "list", "watch", "create", "patch", "update", "delete"},
		ScopeKarpenterNamespace + " apps/replicasets":                             {"list", "watch"},
		ScopeKarpenterCluster + " apiextensions.k8s.io/customresourcedefinitions": {"get", "list", "watch", "create", "patch"},
		ScopeKarpenterCluster + " rbac.authorization.k8s.io/clusterroles":         {"get", "list", "watch", "create", "patch", "update", "delete", "bind", "escalate"},
	} {
		if !slices.Equal(rules[key], verbs) {
			t.Errorf("%s: %v, want %v", key, rules[key], verbs)
		}
	}

	// In kube-system (the default) no Namespace object is written.
	o.Karpenter.Namespace = "kube-system"
	if b, err = Job(o); err != nil {
		t.Fatal(err)
	}
	for _, d := range decodeDocs(t, b) {
		if d.Kind == "Namespace" && d.Metadata.Name == "kube-system" {
			t.Error("the Job manifest declares kube-system")
		}
	}
}
