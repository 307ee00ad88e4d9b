package generate

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// KarpenterRelease is the Helm release the runbook's Karpenter step
// installs, as the in-cluster Job's RBAC needs it: where it lives and the
// kinds its chart renders.
type KarpenterRelease struct {
	Namespace string
	// Kinds are the kinds of the objects the chart renders, CRDs included
	// (ChartKinds of the rendered manifest).
	Kinds []ChartKind
}

// ChartKind is one kind a chart renders, with the resource RBAC names.
type ChartKind struct {
	Group, Kind, Resource string
	// Namespaced is false for cluster-scoped kinds (ClusterRole, CRDs, ...).
	Namespaced bool
	// Namespace is set when the chart puts objects of the kind in a
	// namespace other than the release's (the official chart's Role and
	// RoleBinding karpenter-dns are in kube-system).
	Namespace string
}

// clusterScoped are the cluster-scoped kinds a chart may render; any other
// kind is taken as namespaced (Helm puts it in the release's namespace).
var clusterScoped = map[schema.GroupKind]bool{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "", Kind: "Namespace"}:                                                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
}

// ManifestObjects are the objects of a rendered manifest (`helm template`
// output), their type and metadata only, in order. Documents without a
// kind (comments, empty) are skipped.
func ManifestObjects(manifest string) []metav1.PartialObjectMetadata {
	var out []metav1.PartialObjectMetadata
	for _, doc := range strings.Split(manifest, "\n---") {
		var m metav1.PartialObjectMetadata
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil || m.Kind == "" {
			continue
		}
		out = append(out, m)
	}
	return out
}

// ChartKinds are the distinct kinds of a manifest rendered for a release
// in namespace, and the other namespaces the chart puts them in, in the
// order they first appear.
func ChartKinds(manifest, namespace string) []ChartKind {
	var out []ChartKind
	for _, m := range ManifestObjects(manifest) {
		gvk := schema.FromAPIVersionAndKind(m.APIVersion, m.Kind)
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		k := ChartKind{Group: gvk.Group, Kind: gvk.Kind, Resource: plural.Resource, Namespaced: !clusterScoped[gvk.GroupKind()]}
		if k.Namespaced && m.Namespace != namespace {
			k.Namespace = m.Namespace
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Scopes of the Karpenter release's rules.
const (
	// ScopeKarpenterNamespace is the release's namespace.
	ScopeKarpenterNamespace = "karpenter-namespace"
	// ScopeKarpenterCluster is cluster-wide, for the chart's
	// cluster-scoped kinds.
	ScopeKarpenterCluster = "karpenter-cluster"
)

// KarpenterRuleNamespace is where a rule of KarpenterRules applies for a
// release in releaseNamespace: that namespace, another one the chart puts
// objects in (scope "karpenter-namespace/<name>"), or "" for
// cluster-wide; false for a rule of none of these scopes.
func KarpenterRuleNamespace(r RunbookRule, releaseNamespace string) (string, bool) {
	switch {
	case r.Scope == ScopeKarpenterNamespace:
		return releaseNamespace, true
	case r.Scope == ScopeKarpenterCluster:
		return "", true
	}
	ns, ok := strings.CutPrefix(r.Scope, ScopeKarpenterNamespace+"/")
	return ns, ok
}

// KarpenterRules are the permissions Helm needs to install, upgrade, wait
// for and uninstall the release, and nothing else: its release Secrets,
// the kinds the chart renders, and what Helm's wait reads.
func KarpenterRules(r KarpenterRelease) []RunbookRule {
	manage := []string{"get", "list", "watch", "create", "patch", "update", "delete"}
	out := []RunbookRule{
		{ScopeKarpenterNamespace, "", "secrets", []string{"get", "list", "create", "update", "delete"}, "Helm's release storage (Secrets sh.helm.release.v1.<release>.v<revision>); Helm finds them by label, so list reads every Secret of the namespace: give Karpenter a namespace of its own (controller.namespace) to keep that small"},
	}
	for _, k := range r.Kinds {
		switch {
		case k.Group == "apiextensions.k8s.io" && k.Kind == "CustomResourceDefinition":
			out = append(out, RunbookRule{ScopeKarpenterCluster, k.Group, k.Resource, []string{"get", "list", "watch", "create", "patch"},
				"the chart's CRDs: Helm server-side applies them on install and waits until they are established; it never updates or deletes them"})
		case k.Group == "rbac.authorization.k8s.io":
			// Kubernetes lets a subject create a role granting more than it
			// holds, or bind one, only with escalate and bind on roles.
			verbs := manage
			if k.Kind == "ClusterRole" || k.Kind == "Role" {
				verbs = append(slices.Clone(manage), "bind", "escalate")
			}
			out = append(out, RunbookRule{scopeOf(k), k.Group, k.Resource, verbs, "the chart's " + k.Kind + ": Helm applies, waits for and uninstalls it (escalate and bind: the controller's roles grant what the Job does not hold)"})
		default:
			out = append(out, RunbookRule{scopeOf(k), k.Group, k.Resource, manage, "the chart's " + k.Kind + ": Helm server-side applies it, waits for it (watch) and uninstalls it"})
		}
		if k.Group == "apps" && k.Kind == "Deployment" {
			out = append(out, RunbookRule{ScopeKarpenterNamespace, "apps", "replicasets", []string{"list", "watch"}, "Helm's wait reads a Deployment's ReplicaSets (and their pods, which the runbook lists anyway) to tell it is ready"})
		}
	}
	return out
}

func scopeOf(k ChartKind) string {
	switch {
	case !k.Namespaced:
		return ScopeKarpenterCluster
	case k.Namespace != "":
		return ScopeKarpenterNamespace + "/" + k.Namespace
	}
	return ScopeKarpenterNamespace
}
