package generate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// cluster is a real control plane with the official Karpenter v1 CRDs,
// started only when a test asks for it.
var cluster = testenv.NewShared(testenv.Options{CRDDirs: []string{mustCRDDir("v1")}})

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

func mustCRDDir(name string) string {
	dir, err := testenv.CRDDir(name)
	if err != nil {
		panic(err)
	}
	return dir
}

// TestOverlaysPassServerSideDryRun installs the official v1 CRDs into a real
// API server and server-side dry-runs every built overlay of every fixture
// and strategy: the OpenAPI schema, the CEL rules and strict field
// validation decide whether the objects are valid Karpenter v1, not we.
func TestOverlaysPassServerSideDryRun(t *testing.T) {
	env := cluster.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := generate.DefaultOptions()
	// The over-provisioning Deployments go to the tool's namespace, which a
	// dry-run of the Namespace object does not create.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "inventories"))
	if err != nil {
		t.Fatal(err)
	}
	envs := []string{"dev", "staging", "prod"}
	t.Run("fixtures", func(t *testing.T) {
		for _, e := range entries {
			fixture := strings.TrimSuffix(e.Name(), ".json")
			snap, err := inventory.ReadSnapshotFile(filepath.Join("testdata", "inventories", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, strategy := range []generate.Strategy{generate.StrategyMultiple, generate.StrategySingle, generate.StrategyWeighted} {
				flexes := []generate.Flexibility{generate.FlexibilityExact}
				if fixture == "all" {
					flexes = append(flexes, generate.FlexibilityFamily, generate.FlexibilitySimilar)
				}
				for _, flex := range flexes {
					t.Run(fixture+"/"+string(strategy)+"/"+string(flex), func(t *testing.T) {
						t.Parallel()
						o := opts
						o.Strategy, o.Flexibility = strategy, flex
						o.Overprovisioning = fixture == "all"
						dir := t.TempDir()
						if _, err := generate.Run(ctx, &snap.Inventory, o, generate.TreeOptions{Dir: dir, Envs: envs}); err != nil {
							t.Fatal(err)
						}
						for _, name := range envs {
							built, err := generate.BuildOverlay(dir, name)
							if err != nil {
								t.Fatal(err)
							}
							if err := env.ServerDryRun(ctx, built); err != nil {
								t.Errorf("overlay %s: %v", name, err)
							}
						}
					})
				}
			}
		}
	})

	// The check can fail: a label in Karpenter's own domain is refused.
	t.Run("invalid label is refused", func(t *testing.T) {
		dir := t.TempDir()
		snap, err := inventory.ReadSnapshotFile(filepath.Join("testdata", "inventories", "ondemand-managed.json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := generate.Run(ctx, &snap.Inventory, opts, generate.TreeOptions{Dir: dir, Envs: []string{"prod"}}); err != nil {
			t.Fatal(err)
		}
		built, err := generate.BuildOverlay(dir, "prod")
		if err != nil {
			t.Fatal(err)
		}
		bad := strings.Replace(string(built), "        team: platform\n", "        team: platform\n        karpenter.sh/team: platform\n", 1)
		if bad == string(built) {
			t.Fatal("fixture changed: no team label to corrupt")
		}
		err = env.ServerDryRun(ctx, []byte(bad))
		if err == nil || !strings.Contains(err.Error(), `label domain "karpenter.sh" is restricted`) {
			t.Errorf("dry-run of a NodePool with a karpenter.sh label: %v, want the CRD's CEL rule to refuse it", err)
		}
	})
}
