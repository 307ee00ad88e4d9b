package helm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	helmkube "helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// cluster is a control plane without Karpenter's CRDs: the chart brings them.
var cluster = testenv.NewShared(testenv.Options{})

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

const group = "system"

// testChart copies testdata/charts/karpenter to a temporary directory at
// version (the test's "releases" of Karpenter), with the CRDs of the control
// plane's Karpenter module in its crds/, as the official chart has them.
// These tests keep the imitation: they install a second, foreign release
// named karpenter beside the step's on one control plane, which the official
// chart's cluster-scoped objects (named after the release) do not allow.
func testChart(t *testing.T, version string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(root, "testdata", "charts", "karpenter"))
	if err != nil {
		t.Fatal(err)
	}
	crds, err := testenv.CRDDir("v1")
	if err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(crds)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(crds, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		ch.Files = append(ch.Files, &common.File{Name: "crds/" + f.Name(), Data: data})
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = version, version
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// values are what generate writes for a cluster: the controller pinned to
// the legacy group, IRSA, the cluster's queue.
func values(cluster string) map[string]any {
	return map[string]any{
		"settings":       map[string]any{"clusterName": cluster, "interruptionQueue": cluster},
		"replicas":       2,
		"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/KarpenterControllerRole-" + cluster}},
		"tolerations":    []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}},
		"affinity": map[string]any{
			"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
					map[string]any{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"},
					map[string]any{"key": testenv.LabelNodeGroup, "operator": "In", "values": []any{group}},
				}}},
			}},
			"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"topologyKey": "kubernetes.io/hostname"}}},
		},
	}
}

func nodes(t *testing.T, env *testenv.Env, prefix string) {
	t.Helper()
	var names []string
	for i, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := env.CreateKwokNode(t.Context(), testenv.NodeSpec{Name: name, Zone: zone, NodeGroup: group}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	if err := env.WaitForNodesReady(t.Context(), names...); err != nil {
		t.Fatal(err)
	}
}

// runner runs the runbook's Karpenter step alone, for environment env in
// namespace ns (journal and release alike).
func runner(e *testenv.Env, ns, environment string, k plan.PlanKarpenter, c *helm.Client) *rollout.Runner {
	var steps []rollout.Step
	for _, st := range migrations.All() {
		if rollout.SameStep(st.ID, "07_karpenter") {
			steps = append(steps, st)
		}
	}
	k.Release, k.Namespace = "karpenter", ns
	p := &plan.Plan{Environment: environment, Cluster: "test", Hash: k.Version + fmt.Sprint(len(k.Values)), Karpenter: &k,
		Budget: plan.Budget{Gates: plan.Gates{NodeReadyTimeout: plan.Duration{Duration: 3 * time.Second}}}}
	return &rollout.Runner{
		Session: rollout.Session{Kube: e.Client, Dynamic: e.Dynamic, Namespace: ns, Plan: p, Karpenter: c,
			Options: rollout.Options{Operator: "test", PollInterval: 200 * time.Millisecond}},
		Steps: steps,
		Drift: func(context.Context, *rollout.Session) ([]string, error) { return nil, nil },
	}
}

func deployment(t *testing.T, e *testenv.Env, ns string) *appsv1.Deployment {
	t.Helper()
	d, err := e.Client.AppsV1().Deployments(ns).Get(t.Context(), "karpenter", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("controller Deployment: %v", err)
	}
	return d
}

// TestKarpenterStep runs the step against a real control plane: install,
// a no-op re-run, an upgrade to a new chart version, a release made by
// someone else (agreeing: left alone; contradicting: refused, naming the
// field), and Down, which waits for the NodeClaims and removes only ours.
func TestKarpenterStep(t *testing.T) {
	env := cluster.Env(t)
	ctx := t.Context()
	nodes(t, env, "step")
	ns := env.Namespace(t)
	c := &helm.Client{REST: env.Config, Timeout: time.Minute}
	v1 := plan.PlanKarpenter{Chart: testChart(t, "1.14.0"), Version: "1.14.0", Values: values("test")}

	// Install.
	if err := runner(env, ns, "ours", v1, c).Apply(ctx); err != nil {
		t.Fatalf("install: %v", err)
	}
	rel, err := c.Release(ctx, ns, "karpenter")
	if err != nil || rel == nil || rel.Status != rollout.ReleaseDeployed || rel.Version != "1.14.0" || rel.Revision != 1 {
		t.Fatalf("after install: release %+v, %v; want 1.14.0 deployed, revision 1", rel, err)
	}
	d := deployment(t, env, ns)
	if d.Status.ReadyReplicas != 2 {
		t.Errorf("install returned with %d ready replicas, want 2 (it must wait)", d.Status.ReadyReplicas)
	}
	if got := d.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions; len(got) != 2 {
		t.Errorf("controller affinity %v, want the values' two terms", got)
	}
	j, err := rollout.Status(ctx, env.Client, ns, "ours")
	var rec migrations.KarpenterRecord
	if err != nil || json.Unmarshal(j.Recorded.Extra["karpenter"], &rec) != nil || !rec.Created || rec.Namespace != ns {
		t.Fatalf("journal does not record that this tool created the release: %s %v", j.Recorded.Extra["karpenter"], err)
	}

	// The same plan again: Check finds it done.
	if done, why, err := checkStep(ctx, runner(env, ns, "ours", v1, c)); err != nil || !done || !strings.Contains(why, "installed by this tool") {
		t.Errorf("check after install = %v %q %v, want done (installed by this tool)", done, why, err)
	}

	// Upgrade: the run stopped before recording the step done (killed
	// while waiting) and is resumed with a plan pinning a newer chart.
	store := rollout.NewStore(env.Client, ns, "ours")
	j.Steps[0].State = rollout.StateInterrupted
	if err := store.Save(ctx, j); err != nil {
		t.Fatal(err)
	}
	v2 := plan.PlanKarpenter{Chart: testChart(t, "1.14.1"), Version: "1.14.1", Values: values("test")}
	if done, _, err := checkStep(ctx, runner(env, ns, "ours", v2, c)); err != nil || done {
		t.Fatalf("check with a newer version = %v %v, want not done", done, err)
	}
	if err := runner(env, ns, "ours", v2, c).Apply(ctx); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if rel, err = c.Release(ctx, ns, "karpenter"); err != nil || rel.Version != "1.14.1" || rel.Revision != 2 || rel.Status != rollout.ReleaseDeployed {
		t.Fatalf("after upgrade: release %+v, %v; want 1.14.1 deployed, revision 2", rel, err)
	}

	// Someone else's release, in another namespace, agreeing with the plan.
	other := env.Namespace(t)
	theirs := plan.PlanKarpenter{Release: "karpenter", Namespace: other, Chart: v2.Chart, Version: "1.14.1", Values: values("test")}
	if _, err := c.Install(ctx, theirs); err != nil {
		t.Fatalf("install the foreign release: %v", err)
	}
	done, why, err := checkStep(ctx, runner(env, other, "theirs", v2, c))
	if err != nil || !done || !strings.Contains(why, "someone else") {
		t.Fatalf("check of a foreign release = %v %q %v, want done: left alone", done, why, err)
	}
	r := runner(env, other, "theirs", v2, c)
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("apply with a foreign release: %v", err)
	}
	if err := runner(env, other, "theirs", v2, c).Rollback(ctx, ""); err != nil {
		t.Fatalf("rollback with a foreign release: %v", err)
	}
	if rel, err := c.Release(ctx, other, "karpenter"); err != nil || rel == nil || rel.Revision != 1 {
		t.Fatalf("the foreign release after apply and rollback: %+v %v, want it untouched at revision 1", rel, err)
	}
	// ... and contradicting it.
	theirs.Values = values("another-cluster")
	delete(theirs.Values["settings"].(map[string]any), "interruptionQueue")
	if _, err := c.Install(ctx, theirs); err != nil {
		t.Fatalf("upgrade the foreign release: %v", err)
	}
	_, _, err = checkStep(ctx, runner(env, other, "theirs-2", v2, c))
	for _, want := range []string{"settings.clusterName", `"another-cluster"`, "settings.interruptionQueue", "no interruption queue", "serviceAccount.annotations"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check of a contradicting foreign release: %v, want it to name %s", err, want)
		}
	}

	// Down waits for the NodeClaims: with one left it refuses and keeps the release.
	nc := nodeClaim(t, env)
	err = runner(env, ns, "ours", v2, c).Rollback(ctx, "")
	if err == nil || !strings.Contains(err.Error(), "1 NodeClaims remain ("+nc+")") {
		t.Fatalf("rollback with a NodeClaim left = %v, want it refused naming %s", err, nc)
	}
	if rel, _ := c.Release(ctx, ns, "karpenter"); rel == nil {
		t.Fatal("the release was uninstalled while a NodeClaim remained")
	}
	if err := env.Dynamic.Resource(nodeClaims).Delete(ctx, nc, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := runner(env, ns, "ours", v2, c).Rollback(ctx, ""); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if rel, err := c.Release(ctx, ns, "karpenter"); err != nil || rel != nil {
		t.Errorf("after rollback our release is %+v (%v), want it uninstalled", rel, err)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "karpenter", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after rollback the controller Deployment: %v, want it gone", err)
	}
	if rel, err := c.Release(ctx, other, "karpenter"); err != nil || rel == nil {
		t.Errorf("rollback removed the foreign release (%v)", err)
	}
}

// TestKarpenterBadInput: each failure names what to do and leaves nothing
// half-installed.
func TestKarpenterBadInput(t *testing.T) {
	env := cluster.Env(t)
	ctx := t.Context()
	nodes(t, env, "bad")
	chart := testChart(t, "1.14.1")

	nothingInstalled := func(t *testing.T, ns string) {
		t.Helper()
		c := &helm.Client{REST: env.Config}
		if rel, err := c.Release(ctx, ns, "karpenter"); err != nil || rel != nil {
			t.Errorf("release left behind: %+v %v", rel, err)
		}
		if _, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "karpenter", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("controller Deployment left behind: %v", err)
		}
	}
	// A registry that answers the OCI distribution API but has no such tag.
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
	}))
	defer registry.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	unreachable := "oci://" + strings.TrimPrefix(down.URL, "http://") + "/karpenter/karpenter"
	down.Close()

	for _, tc := range []struct {
		name  string
		k     plan.PlanKarpenter
		plain bool
		want  []string
	}{
		{"unreachable registry", plan.PlanKarpenter{Chart: unreachable, Version: "1.14.1"}, true,
			[]string{"cannot pull from its OCI registry", "registry is reachable", "--karpenter-chart PATH"}},
		{"no such version", plan.PlanKarpenter{Chart: "oci://" + strings.TrimPrefix(registry.URL, "http://") + "/karpenter/karpenter", Version: "1.99.0"}, true,
			[]string{"version 1.99.0", "check the version exists", "--karpenter-version"}},
		{"local chart of another version", plan.PlanKarpenter{Chart: chart, Version: "1.13.0"}, false,
			[]string{"is version 1.14.1 but the plan pins Karpenter 1.13.0", "--karpenter-version 1.14.1"}},
		{"controller never ready: rolled back", plan.PlanKarpenter{Chart: chart, Version: "1.14.1", Values: map[string]any{"nodeSelector": map[string]any{"no-such-label": "x"}}}, false,
			[]string{"failed and was rolled back"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			tc.k.Release, tc.k.Namespace = "karpenter", ns
			c := &helm.Client{REST: env.Config, Timeout: 4 * time.Second, PlainHTTP: tc.plain, CacheDir: t.TempDir()}
			_, err := c.Install(ctx, tc.k)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("install: %v\nwant it to say %q", err, w)
				}
			}
			nothingInstalled(t, ns)
		})
	}

	t.Run("release in failed state", func(t *testing.T) {
		ns := env.Namespace(t)
		failedRelease(t, env, ns, chart)
		k := plan.PlanKarpenter{Chart: chart, Version: "1.14.1", Values: values("test")}
		c := &helm.Client{REST: env.Config, Timeout: time.Minute}
		_, _, err := checkStep(ctx, runner(env, ns, "failed", k, c))
		for _, w := range []string{"is failed", "helm history karpenter -n " + ns, "helm rollback"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("check: %v\nwant it to say %q", err, w)
			}
		}
		k.Release, k.Namespace = "karpenter", ns
		if _, err := c.Install(ctx, k); err == nil || !strings.Contains(err.Error(), "is failed") || !strings.Contains(err.Error(), "helm history karpenter -n "+ns) {
			t.Errorf("install over a failed release: %v, want refused naming helm history", err)
		}
		// Refused before anything is sent: the failed revision is as it was.
		if rel, err := c.Release(ctx, ns, "karpenter"); err != nil || rel == nil || rel.Revision != 1 || rel.Status != rollout.ReleaseFailed {
			t.Errorf("the failed release after the refusal: %+v %v, want revision 1, failed", rel, err)
		}
	})

	t.Run("namespace without permission", func(t *testing.T) {
		ns := env.Namespace(t)
		limited := rest.CopyConfig(env.Config)
		limited.Impersonate = rest.ImpersonationConfig{UserName: "no-rights"}
		c := &helm.Client{REST: limited, Timeout: 10 * time.Second}
		_, err := c.Install(ctx, plan.PlanKarpenter{Release: "karpenter", Namespace: ns, Chart: chart, Version: "1.14.1"})
		for _, w := range []string{"forbidden", "may not manage Helm releases in namespace " + ns, "controller.namespace"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("install: %v\nwant it to say %q", err, w)
			}
		}
		nothingInstalled(t, ns)
	})
}

// failedRelease installs the chart with Helm itself, without rollback,
// so that it fails (no node fits the controller) and stays failed.
func failedRelease(t *testing.T, env *testenv.Env, ns, chart string) {
	t.Helper()
	cfg := helmaction.NewConfiguration()
	if err := cfg.Init(helm.RESTClientGetter(env.Config, ns), ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	in := helmaction.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout = "karpenter", ns, helmkube.StatusWatcherStrategy, 2*time.Second
	if _, err := in.RunWithContext(t.Context(), ch, map[string]any{"nodeSelector": map[string]any{"no-such-label": "x"}}); err == nil {
		t.Fatal("the install meant to fail succeeded")
	}
}

var nodeClaims = kube.NodeClaimGVK.GroupVersion().WithResource("nodeclaims")

func nodeClaim(t *testing.T, env *testenv.Env) string {
	t.Helper()
	nc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": map[string]any{"name": "default-x7k2p"},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
			"requirements": []any{map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}}},
		},
	}}
	got, err := env.Dynamic.Resource(nodeClaims).Create(t.Context(), nc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create NodeClaim: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(nodeClaims).Delete(context.Background(), got.GetName(), metav1.DeleteOptions{})
	})
	return got.GetName()
}

// checkStep runs the Karpenter step's Check in a dry run of r (which
// loads the journal, as apply does, and changes nothing).
func checkStep(ctx context.Context, r *rollout.Runner) (bool, string, error) {
	var done bool
	var why string
	var cerr error
	r.Options.DryRun = true
	r.Plan.Hash += "-check" // not "already applied": run Check
	r.Options.Observer = rollout.Observer(func(e rollout.Event) {
		switch e.Kind {
		case rollout.EventStepSkipped:
			done, why = true, e.Message
		case rollout.EventStepFailed:
			cerr = fmt.Errorf("%s", strings.TrimPrefix(e.Message, "check: "))
		}
	})
	if err := r.Apply(ctx); err != nil {
		return false, "", err
	}
	return done, why, cerr
}

// TestRenderWithoutCluster: generate --job renders the chart with no
// connection, as `helm template --include-crds` does, to derive the Job's
// permissions from the kinds it renders.
func TestRenderWithoutCluster(t *testing.T) {
	k := plan.PlanKarpenter{Release: "karpenter", Namespace: "karpenter", Chart: testChart(t, "1.14.1"), Version: "1.14.1", Values: values("test")}
	manifest, err := (&helm.Client{}).Render(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	got := migrations.ManifestNames(manifest)
	for _, want := range []string{"CustomResourceDefinition nodepools.karpenter.sh", "Deployment karpenter/karpenter", "ServiceAccount karpenter/karpenter", "PodDisruptionBudget karpenter/karpenter"} {
		if !slices.Contains(got, want) {
			t.Errorf("rendered %v, want %s", got, want)
		}
	}
}
