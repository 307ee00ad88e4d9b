package helm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// officialVersions are the Karpenter releases the tool offers (v1.0 to
// v1.desired.NewestKnownMinor) whose provider module the Go module proxy
// serves, the newest patch of each minor up to the default: the proxy
// serves none for v1.1 to v1.7.
var officialVersions = []string{"1.0.8", "1.8.2", "1.9.3", "1.10.2", "1.11.0", "1.12.0", "1.13.1", desired.DefaultKarpenterVersion}

// officialChart is the official chart at version, prepared as the release
// prepares it (testenv.KarpenterChart).
func officialChart(t testing.TB, version string) string {
	t.Helper()
	chart, err := testenv.KarpenterChart(t.Context(), version)
	if err != nil {
		t.Fatal(err)
	}
	return chart
}

// generated are generate's Helm values for a cluster whose controller it
// pins to the managed group "system", read back from YAML as plan reads
// the tree's values file.
func generated(t testing.TB) map[string]any {
	t.Helper()
	return generatedFor(t, "system")
}

// generatedFor are generate's values pinning the controller to group.
func generatedFor(t testing.TB, group string) map[string]any {
	t.Helper()
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "prod", Region: "us-east-1", AccountID: "111122223333",
		ARN: "arn:aws:eks:us-east-1:111122223333:cluster/prod", Endpoint: "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"}}
	inv.NodeGroups = []inventory.NodeGroup{{Name: group, Kind: inventory.Managed, ASGName: "eks-" + group, MinSize: 3, MaxSize: 3, DesiredSize: 3,
		InstanceTypes: []string{"m5.large"}, CapacityType: inventory.CapacityOnDemand, Zones: []string{"us-east-1a", "us-east-1b"}, Arch: "amd64", OS: "linux", AMIType: "AL2023_x86_64_STANDARD"}}
	res, err := generate.Generate(inv, generate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(res.HelmValues)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// rendered is what the chart renders from values, as `helm template
// --include-crds` does: the manifest and its objects by "Kind name".
type rendered struct {
	manifest string
	objects  map[string][]byte
}

func render(t testing.TB, chart, version string, values map[string]any) rendered {
	t.Helper()
	k := plan.PlanKarpenter{Release: "karpenter", Namespace: "kube-system", Chart: chart, Version: version, Values: values}
	manifest, err := (&helm.Client{}).Render(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{manifest: manifest, objects: map[string][]byte{}}
	for _, doc := range strings.Split(manifest, "\n---") {
		var m struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("the chart rendered a document that is not YAML: %v\n%s", err, doc)
		}
		if m.Kind != "" {
			r.objects[m.Kind+" "+m.Metadata.Name] = []byte(doc)
		}
	}
	return r
}

func (r rendered) decode(t testing.TB, key string, into any) {
	t.Helper()
	doc, ok := r.objects[key]
	if !ok {
		t.Fatalf("the chart rendered no %s; it rendered %v", key, slices.Sorted(maps.Keys(r.objects)))
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// TestOfficialChartRendersGeneratedValues renders generate's values
// through the official chart of every offered version: the controller
// Deployment runs where, as many and as large as the values say, with the
// cluster's settings and identity; the PDB and the topology spread are the
// chart's; and generate.ControllerObjects, which the sandbox and the plan
// use in place of a chart install, agrees with what the chart renders.
func TestOfficialChartRendersGeneratedValues(t *testing.T) {
	values := generated(t)
	for _, version := range officialVersions {
		t.Run(version, func(t *testing.T) {
			r := render(t, officialChart(t, version), version, values)
			var dep appsv1.Deployment
			r.decode(t, "Deployment karpenter", &dep)
			var pdb policyv1.PodDisruptionBudget
			r.decode(t, "PodDisruptionBudget karpenter", &pdb)
			var sa corev1.ServiceAccount
			r.decode(t, "ServiceAccount karpenter", &sa)

			want, wantPDB, err := generate.ControllerObjects(values, "kube-system", "")
			if err != nil {
				t.Fatal(err)
			}
			got, wantSpec := dep.Spec.Template.Spec, want.Spec.Template.Spec
			if dep.Spec.Strategy.Type == "" && dep.Spec.Strategy.RollingUpdate != nil {
				dep.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType // the API server's default
			}
			for _, c := range []struct {
				field     string
				got, want any
			}{
				{"replicas", dep.Spec.Replicas, want.Spec.Replicas},
				{"strategy", dep.Spec.Strategy, want.Spec.Strategy},
				{"selector", dep.Spec.Selector, want.Spec.Selector},
				{"affinity", got.Affinity, wantSpec.Affinity},
				{"tolerations", got.Tolerations, wantSpec.Tolerations},
				{"nodeSelector", got.NodeSelector, wantSpec.NodeSelector},
				{"topologySpreadConstraints", got.TopologySpreadConstraints, wantSpec.TopologySpreadConstraints},
				{"priorityClassName", got.PriorityClassName, wantSpec.PriorityClassName},
				{"resources", got.Containers[0].Resources, wantSpec.Containers[0].Resources},
				{"PDB", pdb.Spec, wantPDB.Spec},
			} {
				if !equality.Semantic.DeepEqual(c.got, c.want) {
					t.Errorf("%s: the chart renders\n%s\ngenerate.ControllerObjects says\n%s", c.field, jsonOf(c.got), jsonOf(c.want))
				}
			}
			// ... and those are the values' (ControllerObjects could agree with a chart that drops them).
			var v struct {
				Replicas    int32
				Affinity    corev1.Affinity
				Tolerations []corev1.Toleration
				Controller  struct{ Resources corev1.ResourceRequirements }
				Settings    map[string]string
			}
			if err := json.Unmarshal([]byte(jsonOf(values)), &v); err != nil {
				t.Fatal(err)
			}
			if *dep.Spec.Replicas != v.Replicas {
				t.Errorf("replicas %d, the values say %d", *dep.Spec.Replicas, v.Replicas)
			}
			if got.Affinity == nil || !equality.Semantic.DeepEqual(got.Affinity.NodeAffinity, v.Affinity.NodeAffinity) {
				t.Errorf("node affinity %s, the values say %s", jsonOf(got.Affinity), jsonOf(v.Affinity.NodeAffinity))
			}
			if !equality.Semantic.DeepEqual(got.Tolerations, v.Tolerations) {
				t.Errorf("tolerations %s, the values say %s", jsonOf(got.Tolerations), jsonOf(v.Tolerations))
			}
			if !equality.Semantic.DeepEqual(got.Containers[0].Resources, v.Controller.Resources) {
				t.Errorf("resources %s, the values say %s", jsonOf(got.Containers[0].Resources), jsonOf(v.Controller.Resources))
			}
			env := map[string]string{}
			for _, e := range got.Containers[0].Env {
				env[e.Name] = e.Value
			}
			for key, name := range generate.ControllerEnv {
				if env[name] != v.Settings[key] || v.Settings[key] == "" {
					t.Errorf("settings.%s %q: the controller's %s is %q", key, v.Settings[key], name, env[name])
				}
			}
			if role := "arn:aws:iam::111122223333:role/KarpenterControllerRole-prod"; sa.Annotations["eks.amazonaws.com/role-arn"] != role {
				t.Errorf("ServiceAccount annotations %v, want the controller role %s", sa.Annotations, role)
			}
			if got.ServiceAccountName != sa.Name {
				t.Errorf("the controller runs as %q, not the annotated ServiceAccount %q", got.ServiceAccountName, sa.Name)
			}
			// The chart's own: one at a time may go, spread over zones.
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PDB maxUnavailable %v, want the chart's 1", pdb.Spec.MaxUnavailable)
			}
			if len(got.TopologySpreadConstraints) != 1 || got.TopologySpreadConstraints[0].TopologyKey != corev1.LabelTopologyZone ||
				got.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule {
				t.Errorf("topology spread %s, want the chart's zone spread", jsonOf(got.TopologySpreadConstraints))
			}
		})
	}
}

// TestOfficialChartReadsEveryGeneratedValue: every value generate writes
// changes what the official chart renders, at every offered version; a
// key the chart never reads (a misspelling, a key of another version's
// layout) is a failure naming it.
func TestOfficialChartReadsEveryGeneratedValue(t *testing.T) {
	values := generated(t)
	paths := leaves(values, nil)
	for _, version := range officialVersions {
		t.Run(version, func(t *testing.T) {
			chart := officialChart(t, version)
			base := render(t, chart, version, values).manifest
			// The check can fail: a key the chart does not read changes nothing.
			if render(t, chart, version, perturbed(values, []string{"settingz", "clusterName"})).manifest != base {
				t.Fatal("a key the chart does not read changed the rendering: the check below could not fail")
			}
			for _, p := range paths {
				if render(t, chart, version, perturbed(values, p)).manifest == base {
					t.Errorf("the chart ignores %s (a value generate writes)", strings.Join(p, "."))
				}
			}
		})
	}
}

// leaves are the paths of values' scalars and lists (a list is one
// value), sorted.
func leaves(v map[string]any, prefix []string) [][]string {
	var out [][]string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		p := append(slices.Clone(prefix), k)
		if m, ok := v[k].(map[string]any); ok {
			out = append(out, leaves(m, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// perturbed is a copy of values with the value at path changed (a
// string extended, a number increased, a list given a copy of its last
// element), or set when path is absent.
func perturbed(values map[string]any, keys []string) map[string]any {
	var c map[string]any
	if err := json.Unmarshal([]byte(jsonOf(values)), &c); err != nil {
		panic(err)
	}
	m := c
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	last := keys[len(keys)-1]
	switch x := m[last].(type) {
	case string:
		m[last] = x + "x"
	case float64:
		m[last] = x + 1
	case bool:
		m[last] = !x
	case []any:
		m[last] = append(x, x[len(x)-1])
	default:
		m[last] = "perturbed"
	}
	return c
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// TestJobRBACCoversOfficialChart: the in-cluster Job's permissions for the
// Karpenter release (generate.KarpenterRules over what the chart renders,
// as action.KarpenterRelease derives them) let it create, patch and delete
// every object the official chart of every offered version renders, in
// the namespace the chart puts it in (the release's, or another one the
// chart names: its Role karpenter-dns lives in kube-system).
func TestJobRBACCoversOfficialChart(t *testing.T) {
	const ns = "karpenter"
	for _, version := range officialVersions {
		t.Run(version, func(t *testing.T) {
			k := plan.PlanKarpenter{Release: "karpenter", Namespace: ns, Chart: officialChart(t, version), Version: version, Values: generated(t)}
			manifest, err := (&helm.Client{}).Render(t.Context(), k)
			if err != nil {
				t.Fatal(err)
			}
			rel := generate.KarpenterRelease{Namespace: ns, Kinds: generate.ChartKinds(manifest, ns)}
			rules := generate.KarpenterRules(rel)
			grants := func(group, resource, namespace, verb string) bool {
				for _, r := range rules {
					where, ok := generate.KarpenterRuleNamespace(r, ns)
					if ok && where == namespace && r.Group == group && r.Resource == resource && slices.Contains(r.Verbs, verb) {
						return true
					}
				}
				return false
			}
			for _, kind := range generate.ChartKinds(manifest, ns) {
				if kind.Namespaced != (kind.Kind != "CustomResourceDefinition" && kind.Kind != "ClusterRole" && kind.Kind != "ClusterRoleBinding") {
					t.Errorf("%s: namespaced %v", kind.Kind, kind.Namespaced)
				}
			}
			for _, m := range generate.ManifestObjects(manifest) {
				namespace := m.Namespace
				clusterScoped := m.Kind == "CustomResourceDefinition" || m.Kind == "ClusterRole" || m.Kind == "ClusterRoleBinding"
				switch {
				case clusterScoped:
					namespace = ""
				case namespace == "":
					namespace = ns // Helm puts it in the release's namespace
				}
				var resource string
				for _, kind := range generate.ChartKinds(manifest, ns) {
					if kind.Kind == m.Kind {
						resource = kind.Resource
					}
				}
				group, _, _ := strings.Cut(m.APIVersion, "/")
				if !strings.Contains(m.APIVersion, "/") {
					group = ""
				}
				verbs := []string{"create", "patch", "delete"}
				if m.Kind == "CustomResourceDefinition" {
					verbs = []string{"create", "patch"} // Helm never deletes a chart's CRDs
				}
				for _, verb := range verbs {
					if !grants(group, resource, namespace, verb) {
						t.Errorf("the chart renders %s %s in %q, but the Job may not %s %s there", m.Kind, m.Name, namespace, verb, resource)
					}
				}
			}
		})
	}
}

// TestOfficialChartStaysOnKeptNodes installs the control plane's official
// chart with the values the plan records for a kept group (generate's,
// through generate.OnKeptNodes) on a group of three nodes of which
// controller.size = 2 are kept — reserved and labelled as step 07 does —,
// and a third the waves would drain: every replica runs, Ready, on a kept
// node, with the chart's own one-per-host anti-affinity and zone spread
// (DoNotSchedule). The layouts: both kept nodes in one zone and the other
// node in another (without the label term the spread sends the second
// replica there, #31), and kept nodes over two zones with an emptier node
// in a third.
func TestOfficialChartStaysOnKeptNodes(t *testing.T) {
	env := cluster.Env(t)
	chart := testenv.ControlPlaneChart(t)
	version, err := testenv.KarpenterVersion()
	if err != nil {
		t.Fatal(err)
	}
	for i, layout := range []struct {
		name string
		// zones of the kept nodes and of the one left to drain.
		kept  []string
		other string
	}{
		{"kept in one zone", []string{"us-east-1a", "us-east-1a"}, "us-east-1b"},
		{"kept over two zones", []string{"us-east-1a", "us-east-1b"}, "us-east-1c"},
	} {
		t.Run(layout.name, func(t *testing.T) {
			ctx := t.Context()
			ns := env.Namespace(t)
			group := fmt.Sprintf("ctrl-%d", i)
			values, err := generate.OnKeptNodes(generatedFor(t, group))
			if err != nil {
				t.Fatal(err)
			}
			kept := map[string]bool{}
			var names []string
			for j, zone := range append(slices.Clone(layout.kept), layout.other) {
				spec := testenv.NodeSpec{Name: fmt.Sprintf("%s-%d", group, j), Zone: zone, NodeGroup: group}
				if j < len(layout.kept) {
					spec.Taints = []corev1.Taint{generate.ReservedTaint}
					spec.Labels = map[string]string{generate.KeptLabel: generate.KeptLabelValue}
					kept[spec.Name] = true
				}
				if _, err := env.CreateKwokNode(ctx, spec); err != nil {
					t.Fatal(err)
				}
				names = append(names, spec.Name)
				t.Cleanup(func() {
					if err := env.Client.CoreV1().Nodes().Delete(context.Background(), spec.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Errorf("delete node %s: %v", spec.Name, err)
					}
				})
			}
			if err := env.WaitForNodesReady(ctx, names...); err != nil {
				t.Fatal(err)
			}
			k := plan.PlanKarpenter{Release: "karpenter-" + group, Namespace: ns, Chart: chart, Version: strings.TrimPrefix(version, "v"), Values: values}
			c := &helm.Client{REST: env.Config, Timeout: 2 * time.Minute}
			if _, err := c.Install(ctx, k); err != nil {
				t.Fatalf("install the official chart: %v", err)
			}
			t.Cleanup(func() {
				if err := c.Uninstall(context.Background(), ns, k.Release); err != nil {
					t.Errorf("uninstall: %v", err)
				}
			})
			dep, err := env.Client.AppsV1().Deployments(ns).Get(ctx, k.Release, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
			if err != nil {
				t.Fatal(err)
			}
			healthy := 0
			for _, p := range pods.Items {
				if !kept[p.Spec.NodeName] {
					t.Errorf("replica %s runs on %q, not a kept node %v", p.Name, p.Spec.NodeName, slices.Sorted(maps.Keys(kept)))
				}
				if testenv.PodHealthy(&p) {
					healthy++
				}
			}
			if want := int(*dep.Spec.Replicas); healthy != want || len(pods.Items) != want {
				t.Errorf("%d replicas, %d Running and Ready; want %d of %d", len(pods.Items), healthy, want, want)
			}
		})
	}
}
