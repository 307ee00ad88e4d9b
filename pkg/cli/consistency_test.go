package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/tui"
)

// pinsOfEveryKind is the demo account with a workload pinned each way a
// pin can be handled or not: to a managed group by
// eks.amazonaws.com/nodegroup (its pool keeps the label), to a self-managed
// group the same way (its pool does not), by a group's own label with the
// group's value, with another group's value, and by required affinity.
func pinsOfEveryKind() inventory.Inventory {
	inv := sandbox.DemoInventory()
	pin := func(i int, sel map[string]string, aff *corev1.Affinity) {
		inv.Pods[i].NodeSelector, inv.Pods[i].Affinity = sel, aff
	}
	pin(0, map[string]string{"eks.amazonaws.com/nodegroup": "batch"}, nil)
	pin(1, map[string]string{"eks.amazonaws.com/nodegroup": "demo-apps"}, nil)
	pin(2, map[string]string{"role": "apps"}, nil)
	pin(3, map[string]string{"role": "batch"}, nil)
	pin(4, nil, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "eks.amazonaws.com/nodegroup", Operator: corev1.NodeSelectorOpIn, Values: []string{"demo-gpu", "system"}}}}}}}})
	return inv
}

// TestReadinessIsOneAnswer: for the demo's snapshot, the golden fixtures
// and a cluster with pins of every kind, the readiness findings are the
// same through the CLI (`readiness -o json`), the wizard's backend
// (tui.Ops.Readiness) and the demo's wiring (the readiness action with the
// demo's environment config).
func TestReadinessIsOneAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("discovers the demo account; skipped with -short")
	}
	dir := t.TempDir()
	demoInv, err := bigcluster.DemoSnapshot(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	pins := pinsOfEveryKind()
	snaps := map[string]string{
		"plan fixture":          filepath.Join("testdata", "plan", "snapshot.json"),
		"consolidation fixture": filepath.Join("testdata", "consolidation", "snapshot.json"),
	}
	for name, inv := range map[string]*inventory.Inventory{"demo seed 1": demoInv, "pins of every kind": &pins} {
		path := filepath.Join(dir, name+".json")
		if err := inventory.NewSnapshot(*inv, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).WriteFile(path); err != nil {
			t.Fatal(err)
		}
		snaps[name] = path
	}
	for name, path := range snaps {
		t.Run(name, func(t *testing.T) {
			snap, err := inventory.ReadSnapshotFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, code := run(t, "readiness", "--snapshot", path, "-o", "json")
			if code != 0 {
				t.Fatalf("readiness: %s", stderr)
			}
			var cli readinessResult
			if err := json.Unmarshal([]byte(out), &cli); err != nil {
				t.Fatalf("readiness -o json: %v\n%s", err, out)
			}
			wizard := (&tui.Ops{}).Readiness(&snap.Inventory)
			cfg := config.Default(demo.Env)
			demoRep := (&action.Readiness{Config: &cfg}).Run(&snap.Inventory).Report
			if !reflect.DeepEqual(cli.Report, wizard) {
				t.Errorf("CLI and wizard differ:\n cli    %+v\n wizard %+v", cli.Report, wizard)
			}
			if !reflect.DeepEqual(cli.Report, demoRep) {
				t.Errorf("CLI and demo differ:\n cli  %+v\n demo %+v", cli.Report, demoRep)
			}
			if name == "pins of every kind" {
				var pinned []string
				for _, f := range cli.Findings {
					if f.ID == readiness.IDPinnedToNodeGroup {
						pinned = f.Objects
					}
				}
				if len(pinned) != 2 {
					t.Errorf("pinned findings %v: want the self-managed pin and the one to another group's value", pinned)
				}
			}
		})
	}
}
