package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
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

// consistencySnapshots are the snapshots the consistency tests run on, by
// name: the demo's (seed 1), the golden fixtures of plan and
// consolidation, and the demo account with pins of every kind.
func consistencySnapshots(t *testing.T) map[string]string {
	t.Helper()
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
	for name, inv := range map[string]*inventory.Inventory{demoSeed1: demoInv, "pins of every kind": &pins} {
		path := filepath.Join(dir, name+".json")
		if err := inventory.NewSnapshot(*inv, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).WriteFile(path); err != nil {
			t.Fatal(err)
		}
		snaps[name] = path
	}
	return snaps
}

const demoSeed1 = "demo seed 1"

// TestReadinessIsOneAnswer: for the demo's snapshot, the golden fixtures
// and a cluster with pins of every kind, the readiness findings are the
// same through the CLI (`readiness -o json`), the wizard's backend
// (tui.Ops.Readiness) and the demo's wiring (the readiness action with the
// demo's environment config).
func TestReadinessIsOneAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("discovers the demo account; skipped with -short")
	}
	for name, path := range consistencySnapshots(t) {
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

// TestPlanIsOneAnswer: for the same snapshots, the plan (its hash, waves
// and steady state: the consolidation forecast and its figure after
// consolidation) is the same through the CLI (`generate`, then `plan
// --snapshot --dir --config -o json`), the wizard's backend (tui.Ops.Plan,
// connected to the sandbox loaded with the snapshot, with the choices that
// make the demo's config) and the demo (`demo` itself for its seed; for the
// other snapshots the plan action with the demo's config, what its plan
// step runs).
func TestPlanIsOneAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("plans four clusters three ways; skipped with -short")
	}
	ctx := context.Background()
	for name, path := range consistencySnapshots(t) {
		t.Run(name, func(t *testing.T) {
			snap, err := inventory.ReadSnapshotFile(path)
			if err != nil {
				t.Fatal(err)
			}
			inv := &snap.Inventory
			if len(inv.NodeGroups) == 0 {
				t.Skip("a cluster already on Karpenter: nothing to plan (its readiness is compared above)")
			}
			dir := t.TempDir()
			tree := filepath.Join(dir, tui.TreeDir)
			if _, stderr, code := run(t, "generate", "--snapshot", path, "--out", tree, "--envs", "dev,staging,"+demo.Env); code != 0 {
				t.Fatalf("generate: %s", stderr)
			}
			cfgFile := filepath.Join(dir, "cli-"+demo.ConfigFile)
			b, err := yaml.Marshal(demo.PlanConfig(inv.Cluster))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfgFile, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, stderr, code := run(t, "plan", "--env", demo.Env, "--snapshot", path, "--dir", tree, "--config", cfgFile,
				"--create-oidc-provider", "-f", filepath.Join(dir, "cli-plan.yaml"), "-o", "json")
			if code != 0 {
				t.Fatalf("plan: %s", stderr)
			}
			var cli plan.Plan
			if err := json.Unmarshal([]byte(out), &cli); err != nil {
				t.Fatalf("plan -o json: %v", err)
			}
			after := -1.0 // the figure after consolidation, -1 without a forecast
			if cli.SteadyState != nil {
				after = cli.SteadyState.AfterConsolidation.PricePerHour
			}

			// The wizard's backend, on the sandbox loaded with the snapshot
			// (the pinned pods would not settle there: they run off the
			// nodes they pin; the demo account, the same cluster, serves
			// their connection, and the wizard plans the inventory it is
			// given).
			load := inv
			if name == "pins of every kind" {
				load = nil
			}
			sb, err := tui.NewSandbox(ctx, 1, load)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			ops := &tui.Ops{Dial: sb.Dial, OutDir: dir, Namespace: "karpenter-migrate"}
			conn := sb.Defaults().Connection
			if _, err := ops.Connect(ctx, conn); err != nil {
				t.Fatal(err)
			}
			pc := demo.PlanConfig(inv.Cluster)
			res, err := ops.Plan(ctx, inv, tui.PlanChoice{
				Environment: demo.Env, WaveSize: pc.Rollout.WaveSize, Concurrency: pc.Rollout.Concurrency, PrepareAhead: pc.Rollout.PrepareAhead,
				AllowEmptyDir: pc.Rollout.AllowEmptyDir, ForceEvict: pc.Rollout.ForceEvict,
				Generate: tui.GenerateChoice{Strategy: generate.Strategy(pc.Generate.Strategy), Flexibility: generate.Flexibility(pc.Generate.Flexibility)},
				IAM:      tui.IAMChoice{CreateOIDCProvider: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			samePlan(t, "wizard", &cli, res.Plan)
			if after >= 0 && res.ConsolidatedCostPerHour != after {
				t.Errorf("wizard shows $%v/h after consolidation, plan $%v/h", res.ConsolidatedCostPerHour, after)
			}

			// The demo.
			var dp *plan.Plan
			if name == demoSeed1 {
				// The table says the room the controller's install makes.
				table, stderr, code := run(t, "plan", "--env", demo.Env, "--snapshot", path, "--dir", tree, "--config", cfgFile,
					"--create-oidc-provider", "-f", filepath.Join(dir, "cli-plan-table.yaml"))
				if code != 0 {
					t.Fatalf("plan: %s", stderr)
				}
				if cli.Karpenter == nil || len(cli.Karpenter.Room) == 0 {
					t.Fatal("the demo's plan makes no room for the controller on its full kept nodes")
				}
				if want := fmt.Sprintf("room for the controller: %d pods evicted from the kept nodes", len(cli.Karpenter.Room)); !strings.Contains(table, want) {
					t.Errorf("plan's table does not say %q:\n%s", want, table)
				}
				// And when a wave starts before the group ahead of it ends
				// (its restarts during that group's gate).
				early := 0
				for _, w := range cli.Waves {
					if w.Timing != nil && w.Timing.EarlySeconds > 0 {
						early++
						if want := fmt.Sprintf("%s (from %s before the group ahead ends)", plan.Seconds(w.PredictedSeconds), plan.Seconds(w.Timing.EarlySeconds)); !strings.Contains(table, want) {
							t.Errorf("plan's table does not say wave %d's %q:\n%s", w.Index, want, table)
						}
					}
				}
				if early == 0 {
					t.Error("no wave of the demo's plan starts early; its wave 4 restarts api/billing during the gate of waves 2, 3")
				}
				out := t.TempDir()
				sum, err := demo.Run(ctx, demo.Options{Seed: 1, OutDir: out})
				if err != nil {
					t.Fatal(err)
				}
				if dp, err = plan.ReadPlanFile(filepath.Join(out, "plan.yaml")); err != nil {
					t.Fatal(err)
				}
				if after < 0 || sum.PlannedCostPerHour != after {
					t.Errorf("demo forecasts $%v/h after consolidation, plan $%v/h", sum.PlannedCostPerHour, after)
				}
			} else {
				dp, err = (&action.Configuration{}).Plan(ctx, action.Plan{
					Environment: demo.Env, Config: demo.PlanConfig(inv.Cluster), Inventory: action.Inventory(inv), Dir: tree,
					IAM: &plan.IAMOptions{KarpenterVersion: desired.DefaultKarpenterVersion, CreateOIDCProvider: true},
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			samePlan(t, "demo", &cli, dp)
		})
	}
}

// samePlan fails unless got has the CLI's hash, waves and steady state,
// compared as the plan file says them (JSON).
func samePlan(t *testing.T, who string, cli, got *plan.Plan) {
	t.Helper()
	if got.Hash != cli.Hash {
		t.Errorf("%s's plan hashes to %s, the CLI's to %s", who, got.Hash, cli.Hash)
	}
	for what, v := range map[string][2]any{"waves": {got.Waves, cli.Waves}, "consolidation forecast": {got.SteadyState, cli.SteadyState}} {
		g, err := json.Marshal(v[0])
		if err != nil {
			t.Fatal(err)
		}
		c, err := json.Marshal(v[1])
		if err != nil {
			t.Fatal(err)
		}
		if string(g) != string(c) {
			t.Errorf("%s's %s differ from the CLI's:\n %s %s\n cli %s", who, what, who, g, c)
		}
	}
}
