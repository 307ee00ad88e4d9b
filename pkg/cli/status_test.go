package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// runWith runs the CLI with c injected (runInjected), checking the
// command asked for a Kubernetes client.
func runWith(t *testing.T, c *action.Configuration, args ...string) (string, string, int) {
	t.Helper()
	res := runInjected(t, func(action.Live) (*action.Configuration, error) { return c, nil }, args...)
	if res.asked == nil || res.asked.REST == nil {
		t.Errorf("%v: the command asked for no Kubernetes client", args)
	}
	return res.out, res.errOut, res.code
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
		Steps: []rollout.StepRecord{{ID: "01-preflight", State: rollout.StateCompleted, FinishedAt: at}},
		// Wave 2's capacity was prepared ahead while wave 1 drained: its
		// phase was blank.
		Waves: []rollout.WaveRecord{{Index: 1, Phase: rollout.PhaseDrain, StartedAt: at}, {Index: 2, PreparedAt: at.Add(75 * time.Second)}}}
	if err := rollout.NewStore(kube, "karpenter-migrate", "prod").Save(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runWith(t, c, "status", "--env", "prod", "--namespace", "karpenter-migrate")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Environment prod (cluster shop): " + rollout.StateCompleted, "Plan sha256:abc, by ops", "01-preflight", "2     prepared ahead at 12:01:15"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}
