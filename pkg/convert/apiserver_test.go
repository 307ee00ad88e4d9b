package convert_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// cluster is a control plane with the official Karpenter v1 CRDs, started
// only if a test below asks for it (KM_SKIP_E2E=1 skips them).
var cluster = testenv.NewShared(testenv.Options{CRDDirs: []string{mustCRDDir("v1")}})

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

func mustCRDDir(name string) string {
	dir, err := testenv.CRDDir(name)
	if err != nil {
		panic(err)
	}
	return dir
}

// TestGoldenV1AcceptedByAPIServer sends every golden v1 output to a real
// kube-apiserver with the official v1 CRDs as a server-side dry run, so the
// OpenAPI schema, the CEL rules and strict field validation all check it.
func TestGoldenV1AcceptedByAPIServer(t *testing.T) {
	files, err := filepath.Glob("testdata/cases/*.v1.golden.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden v1 files: %v", err)
	}
	env := cluster.Env(t)
	ctx := context.Background()
	// The workloads case lives in namespace shop.
	_, err = env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".v1.golden.yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(strings.TrimSpace(string(data))) == 0 {
				t.Skip("the case converts to nothing (an error case)")
			}
			if err := env.ServerDryRun(ctx, data); err != nil {
				t.Errorf("%s rejected: %v", f, err)
			}
		})
	}
}

// TestGoldenV1beta1AcceptedByAPIServer does the same for the v1beta1
// outputs against the v0.37.8 CRDs (v1beta1 is their storage version, so no
// conversion webhook is needed). Two karpenter-convert behaviours we keep for
// byte compatibility produce objects the API server rejects; the test pins
// that, so a change either way is noticed.
func TestGoldenV1beta1AcceptedByAPIServer(t *testing.T) {
	files, err := filepath.Glob("testdata/cases/*.v1beta1.golden.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden v1beta1 files: %v", err)
	}
	rejected := map[string]string{
		// aws::ids plus aws::owners: id and owner in one term ('id' is mutually exclusive).
		"awsnodetemplate-ids": "mutually exclusive",
		// --ignore-defaults without requirements prints `requirements: null`.
		"provisioner-ignore-defaults": "requirements",
	}
	env := testenv.Start(t, testenv.Options{CRDDirs: []string{mustCRDDir("v1beta1")}})
	ctx := context.Background()
	_, err = env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".v1beta1.golden.yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(strings.TrimSpace(string(data))) == 0 {
				t.Skip("the case converts to nothing (an error case)")
			}
			err = env.ServerDryRun(ctx, data)
			want, expectReject := rejected[name]
			switch {
			case expectReject && err == nil:
				t.Errorf("expected the API server to reject %s (%s), it accepted it", f, want)
			case expectReject && !strings.Contains(err.Error(), want):
				t.Errorf("rejected for another reason than %q: %v", want, err)
			case !expectReject && err != nil:
				t.Errorf("%s rejected: %v", f, err)
			}
		})
	}
}
