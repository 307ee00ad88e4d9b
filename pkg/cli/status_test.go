package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// runWith runs the CLI with the actions' configuration injected (cli/cli's
// habit): the command is tested on its flags, options and printing, its
// collaborators an in-memory clientset, with no cluster or AWS endpoint.
func runWith(t *testing.T, c *action.Configuration, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := iostreams.Test()
	cmd, g := newRoot(streams)
	var asked action.Live
	g.Configure = func(_ context.Context, l action.Live) (*action.Configuration, error) {
		asked = l
		return c, nil
	}
	// A kubeconfig that names a cluster nobody serves: only the injected
	// configuration is used.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.SetArgs(append([]string{"--kubeconfig", kc}, args...))
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	code := g.exit(cmd.Execute())
	if asked.REST == nil {
		t.Errorf("%v: the command asked for no Kubernetes client", args)
	}
	return out.String(), errOut.String(), code
}

func TestStatusWithInjectedConfiguration(t *testing.T) {
	kube := fake.NewClientset()
	c := &action.Configuration{Kube: kube}
	_, stderr, code := runWith(t, c, "status", "--env", "prod", "--namespace", "karpenter-migrate")
	if code != 1 || !strings.Contains(stderr, "no rollout journal for environment prod in namespace karpenter-migrate") {
		t.Fatalf("status before any apply: exit %d, %q; want 1 naming the environment and namespace", code, stderr)
	}
	at := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	j := &rollout.Journal{Environment: "prod", Cluster: "shop", State: rollout.StateCompleted, PlanHash: "sha256:abc", Operator: "ops", StartedAt: at, UpdatedAt: at,
		Steps: []rollout.StepRecord{{ID: "01-preflight", State: rollout.StateCompleted, FinishedAt: at}}}
	if err := rollout.NewStore(kube, "karpenter-migrate", "prod").Save(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runWith(t, c, "status", "--env", "prod", "--namespace", "karpenter-migrate")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Environment prod (cluster shop): " + rollout.StateCompleted, "Plan sha256:abc, by ops", "01-preflight"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}
