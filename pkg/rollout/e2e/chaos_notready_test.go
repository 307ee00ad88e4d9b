package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// TestChaosNodeNeverReady is rung 8 of the chaos ladder: Karpenter's
// claims never register (the KWOKNodeClass delays registration by an
// hour), so the first wave's placeholders never run. The wave gate times
// out after the config's nodeReadyTimeout with exit 4 naming the
// NodePools; no legacy node was cordoned and no pod evicted (nothing is
// drained onto nothing); rollback then restores the before state.
func TestChaosNodeNeverReady(t *testing.T) {
	chaosOnly(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	w := newWorld(t, scenarioGroups, 2)
	seedWorkloads(ctx, t, w)
	tree, cfg := w.prepare(ctx)
	stuck := strings.Replace(testenv.KWOKNodeClass, "nodeRegistrationDelay: 1s", "nodeRegistrationDelay: 1h", 1)
	short := strings.Replace(migrationConfig, "nodeReadyTimeout: 4m", "nodeReadyTimeout: 30s", 1)
	for path, body := range map[string]string{filepath.Join(tree, "overlays", "e2e", testenv.KWOKNodeClassFile): stuck, cfg: short} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	installController(ctx, t, w, tree)
	c := &chaosWorld{world: w, tree: tree,
		planArgs: []string{"plan", "--env", "e2e", "--cluster", clusterName, "--dir", tree, "--config", cfg, "--skip-iam", "-f", "plan.yaml", "-o", "json"},
		apply:    []string{"apply", "--plan", "plan.yaml", "--dir", tree, "--yes", "--poll-interval", "500ms", "--ack-blockers"},
		budgets: []budget{
			{name: "web", selector: labels.SelectorFromSet(labelsOf("web")), min: 3},
			{name: "solo", selector: labels.SelectorFromSet(labelsOf("solo")), min: 1},
			{name: "karpenter", selector: controllerSelector, min: 1},
		}}
	c.replan(ctx)
	before := c.state(ctx, t)
	watch, err := watchPods(ctx, c.env.Client, "", c.budgets)
	if err != nil {
		t.Fatal(err)
	}
	drain := stepID(t, c.plan, "drain_waves")
	_, errOut, code := c.run(ctx, c.apply...)
	if code != 4 || !strings.Contains(errOut, "paused at "+drain+" wave 1") || !strings.Contains(errOut, "Karpenter did not bring up capacity") {
		t.Errorf("apply with claims that never register: exit %d\n%s\nwant 4, paused at %s wave 1 naming the capacity", code, errOut, drain)
	}
	nodes, err := c.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!karpenter.sh/nodepool"})
	if err != nil {
		t.Fatal(err)
	}
	cordoned := 0
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			cordoned++
			t.Errorf("legacy node %s cordoned although no capacity came up", n.Name)
		}
	}
	moved := watch.deletions(appNS)
	if len(moved) != 0 {
		t.Errorf("%d pods evicted onto capacity that never came up: %s", len(moved), strings.Join(moved, ", "))
	}
	c.mustRun(ctx, "rollback", "--plan", "plan.yaml", "--dir", tree, "--yes", "--poll-interval", "500ms")
	if d := c.state(ctx, t).diff(before); len(d) > 0 {
		t.Errorf("after rollback: %s", strings.Join(d, "; "))
	}
	if err := c.legacyNodesClean(ctx); err != nil {
		t.Error(err)
	}
	violations := c.stopWatch(t, watch)
	t.Logf("CHAOS rung 8 node never Ready: exit %d at the wave gate; %d legacy nodes cordoned, %d pods evicted; rollback restored; PDB violations %d; %s",
		code, cordoned, len(moved), violations, time.Since(began).Round(time.Second))
}
