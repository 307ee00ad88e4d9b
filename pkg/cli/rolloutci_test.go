package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func TestEventLoggerJSON(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)
	events := []rollout.Event{
		{Time: at, Kind: rollout.EventStepStarted, Step: "10_drain_waves", Done: 9, Total: 12, Message: "per wave: drain"},
		{Time: at.Add(time.Second), Kind: rollout.EventWavePhase, Step: "10_drain_waves", Wave: 2, Waves: 3, Phase: rollout.PhaseDrain},
		{Time: at.Add(2 * time.Second), Kind: rollout.EventEviction, Step: "10_drain_waves", Wave: 2, Node: "ip-1", Pod: "shop/web-1", Message: "evicted"},
		{Time: at.Add(3 * time.Second), Kind: rollout.EventPDBWait, Pod: "shop/db-0", PDB: "shop/db", Message: "eviction refused"},
		{Time: at.Add(4 * time.Second), Kind: rollout.EventGate, Gate: &rollout.GateResult{Passed: false, PDBsBelowMin: []string{"shop/db healthy 0 < 1"}}, Message: "gate"},
		{Time: at.Add(5 * time.Second), Kind: rollout.EventStepFailed, Step: "10_drain_waves", Message: "paused", DryRun: true},
	}
	for _, tc := range []struct {
		level string
		want  []string // event kinds logged, in order
		lvls  []string
	}{
		{"info", []string{"StepStarted", "WavePhase", "Eviction", "PDBWait", "Gate", "StepFailed"}, []string{"INFO", "INFO", "INFO", "WARN", "WARN", "ERROR"}},
		{"warn", []string{"PDBWait", "Gate", "StepFailed"}, []string{"WARN", "WARN", "ERROR"}},
	} {
		t.Run(tc.level, func(t *testing.T) {
			var buf bytes.Buffer
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(tc.level)); err != nil {
				t.Fatal(err)
			}
			obs := eventLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: lv})))
			for _, e := range events {
				obs(e)
			}
			var got []map[string]any
			sc := bufio.NewScanner(&buf)
			for sc.Scan() {
				var m map[string]any
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("line is not one JSON object: %v: %s", err, sc.Text())
				}
				got = append(got, m)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d events logged, want %d: %v", len(got), len(tc.want), got)
			}
			for i, m := range got {
				if m["event"] != tc.want[i] || m["level"] != tc.lvls[i] {
					t.Errorf("event %d: %v/%v, want %s/%s", i, m["event"], m["level"], tc.want[i], tc.lvls[i])
				}
				ts, err := time.Parse(time.RFC3339Nano, m["time"].(string))
				if err != nil {
					t.Fatalf("time %v: %v", m["time"], err)
				}
				var src rollout.Event
				for _, e := range events {
					if string(e.Kind) == tc.want[i] {
						src = e
					}
				}
				if !ts.Equal(src.Time) {
					t.Errorf("event %s logged at %s, happened at %s", tc.want[i], ts, src.Time)
				}
			}
			if tc.level == "info" {
				if w := got[1]; w["wave"] != 2.0 || w["waves"] != 3.0 || w["phase"] != "drain" || w["msg"] != "WavePhase" {
					t.Errorf("wave event fields: %v", w)
				}
				if e := got[2]; e["pod"] != "shop/web-1" || e["node"] != "ip-1" || e["msg"] != "evicted" {
					t.Errorf("eviction event fields: %v", e)
				}
				if g, ok := got[4]["gate"].(map[string]any); !ok || g["passed"] != false || len(g["pdbsBelowMin"].([]any)) != 1 {
					t.Errorf("gate event fields: %v", got[4])
				}
				if got[5]["dryRun"] != true {
					t.Errorf("dry-run flag lost: %v", got[5])
				}
				if _, ok := got[0]["pod"]; ok {
					t.Errorf("empty fields are logged: %v", got[0])
				}
			}
		})
	}
}

// planFile writes a plan for an empty inventory.
func planFile(t *testing.T) string {
	t.Helper()
	return writePlan(t, plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Now: time.Unix(0, 0)})
}

// planWithKarpenter is planFile's plan with step 07 installing chart.
func planWithKarpenter(t *testing.T, chart string) string {
	t.Helper()
	return planWithValues(t, chart, map[string]any{})
}

// planWithValues is planWithKarpenter with the release's values.
func planWithValues(t *testing.T, chart string, values map[string]any) string {
	t.Helper()
	return writePlan(t, plan.PlanOptions{Environment: "dev", Config: config.Default("dev"), Now: time.Unix(0, 0),
		Karpenter: &plan.PlanKarpenter{Chart: chart, Version: "1.14.1"}, Controller: plan.ControllerOptions{Values: values}})
}

// writePlan writes the plan opts make for an empty inventory of cluster
// shop and returns its path.
func writePlan(t *testing.T, opts plan.PlanOptions) string {
	t.Helper()
	p, err := plan.BuildPlan(&inventory.Inventory{Cluster: inventory.Cluster{Name: "shop", Region: "eu-west-1"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.yaml")
	if err := p.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestApplyInCluster(t *testing.T) {
	plan := planFile(t)
	notInPod := errors.New("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined")
	var calls int
	old := inClusterConfig
	t.Cleanup(func() { inClusterConfig = old })
	inClusterConfig = func() (*rest.Config, error) { calls++; return nil, notInPod }

	for _, tc := range []struct {
		args      []string
		want      string
		wantCalls int
	}{
		{[]string{"apply", "--in-cluster", "--plan", plan, "--dry-run"}, "--in-cluster: " + notInPod.Error(), 1},
		{[]string{"rollback", "--in-cluster", "--plan", plan, "--dry-run"}, "--in-cluster: " + notInPod.Error(), 1},
		{[]string{"apply", "--in-cluster", "--kubeconfig", "/x", "--plan", plan, "--dry-run"}, "drop --kubeconfig/--context", 0},
		{[]string{"apply", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--plan", plan, "--dry-run"}, "load kubeconfig", 0},
	} {
		calls = 0
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
		if calls != tc.wantCalls {
			t.Errorf("%v: in-cluster config loaded %d times, want %d", tc.args, calls, tc.wantCalls)
		}
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dev.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: MigrationConfig\nenvironment: dev\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestApplyConfigMaintenanceWindow(t *testing.T) {
	path := writeConfig(t, "region: eu-west-1\nprofile: dev-admin\nmaintenanceWindow: {schedule: \"0 22 * * *\", duration: 2h, timeZone: UTC}\n")
	night := time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC)
	noon := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		now      time.Time
		dryRun   bool
		region   string
		wantCode int // 0: no error
	}{
		{"inside the window", night, false, "", 0},
		{"outside the window", noon, false, "", ExitPaused},
		{"dry run any time", noon, true, "", 0},
		{"flag wins over the file", night, false, "us-east-1", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &GlobalOptions{Region: tc.region}
			err := applyConfig(g, &runFlags{dryRun: tc.dryRun}, path, tc.now)
			var exit *ExitError
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantCode != 0 && (!errors.As(err, &exit) || exit.Code != tc.wantCode || !strings.Contains(err.Error(), "maintenance window")):
				t.Fatalf("error %v, want exit code %d naming the window", err, tc.wantCode)
			}
			wantRegion := tc.region
			if wantRegion == "" {
				wantRegion = "eu-west-1"
			}
			if g.Region != wantRegion || g.Profile != "dev-admin" {
				t.Errorf("region/profile = %q/%q, want %q/dev-admin", g.Region, g.Profile, wantRegion)
			}
		})
	}
	if err := applyConfig(&GlobalOptions{}, &runFlags{}, writeConfig(t, "bogus: 1\n"), noon); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("unknown key: %v, want an error naming line 4", err)
	}
}

func TestGenerateConfigFlagsWin(t *testing.T) {
	path := writeConfig(t, "generate: {strategy: single, flexibility: family, keepNodegroupLabel: false, out: trees/dev}\nnodeGroups: {include: [a, c], exclude: [b]}\n")
	for _, tc := range []struct {
		args                []string
		strategy, flex, dir string
		keepLabel           bool
		envs                string
	}{
		{nil, "single", "family", "trees/dev", false, "dev"},
		{[]string{"--strategy", "weighted", "--out", "k", "--envs", "dev,prod"}, "weighted", "family", "k", false, "dev,prod"},
	} {
		o := &generateOptions{}
		cmd := &cobra.Command{Use: "generate"}
		f := cmd.Flags()
		f.StringVar(&o.strategy, "strategy", "multiple", "")
		f.StringVar(&o.flex, "flexibility", "exact", "")
		f.BoolVar(&o.gen.KeepNodeGroupLabel, "keep-nodegroup-label", true, "")
		f.StringVar(&o.tree.Dir, "out", "karpenter", "")
		f.StringSliceVar(&o.tree.Envs, "envs", []string{"dev", "staging", "prod"}, "")
		if err := f.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c, err := generateConfig(cmd, o, path)
		if err != nil {
			t.Fatal(err)
		}
		if o.strategy != tc.strategy || o.flex != tc.flex || o.tree.Dir != tc.dir || o.gen.KeepNodeGroupLabel != tc.keepLabel || strings.Join(o.tree.Envs, ",") != tc.envs {
			t.Errorf("%v: got %s %s %s %v %v", tc.args, o.strategy, o.flex, o.tree.Dir, o.gen.KeepNodeGroupLabel, o.tree.Envs)
		}
		inv := &inventory.Inventory{NodeGroups: []inventory.NodeGroup{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}
		inScope(inv, c)
		if len(inv.NodeGroups) != 2 || inv.NodeGroups[0].Name != "a" || inv.NodeGroups[1].Name != "c" {
			t.Errorf("in scope: %v, want a and c (b excluded, d not included)", inv.NodeGroups)
		}
	}
}

func TestGenerateJobCommand(t *testing.T) {
	plan := planFile(t)
	tree := t.TempDir()
	for _, p := range []string{"base/kustomization.yaml", "overlays/dev/kustomization.yaml"} {
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, p), []byte("resources: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := runCLI(t, "generate", "--job", "--out", tree); err == nil || !strings.Contains(err.Error(), "--job needs --plan") {
		t.Errorf("--job without --plan: %v", err)
	}
	if _, _, err := runCLI(t, "generate", "--job", "--plan", plan, "--snapshot", "s.json"); err == nil || !strings.Contains(err.Error(), "drop --snapshot") {
		t.Errorf("--job with --snapshot: %v", err)
	}
	if _, _, err := runCLI(t, "generate", "--job", "--plan", plan, "--out", tree, "--config", writeConfig(t, "")+"x"); err == nil || !strings.Contains(err.Error(), "read migration config") {
		t.Errorf("--job with a missing --config: %v", err)
	}
	prod := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(prod, []byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: MigrationConfig\nenvironment: prod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "generate", "--job", "--plan", plan, "--out", tree, "--config", prod); err == nil || !strings.Contains(err.Error(), "is for environment prod, the plan for dev") {
		t.Errorf("--job with another environment's --config: %v", err)
	}
	out, _, err := runCLI(t, "generate", "--job", "--plan", plan, "--out", tree, "-n", "migrations", "--image", "example.com/km:1", "--config", writeConfig(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tree, "jobs", "dev.yaml"))
	if err != nil {
		t.Fatalf("%v (stdout %s)", err, out)
	}
	for _, want := range []string{"kind: Job", "namespace: migrations", "image: example.com/km:1", "- --in-cluster", "AWS_REGION", "eu-west-1", "- /etc/karpenter-migrate/config.yaml", "environment: dev"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("job manifest lacks %q", want)
		}
	}
	if strings.Contains(string(b), "cluster-autoscaler") {
		t.Error("a plan without Cluster Autoscaler got a Role for it")
	}
	if strings.Contains(string(b), "-karpenter") {
		t.Error("a plan without step 07 got permissions for a Karpenter release")
	}

	// With step 07, the Job may manage the release: what its chart, the
	// official one, renders.
	// generate always writes settings.clusterName, which the official chart
	// requires.
	plan = planWithValues(t, testenv.ControlPlaneChart(t), map[string]any{"settings": map[string]any{"clusterName": "shop"}})
	_, errOut, err := runCLI(t, "generate", "--job", "--plan", plan, "--out", tree)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(filepath.Join(tree, "jobs", "dev.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: karpenter-migrate-dev-karpenter\n  namespace: kube-system", "- customresourcedefinitions", "- deployments", "- poddisruptionbudgets", "- serviceaccounts", "- secrets"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("job manifest for a plan with step 07 lacks %q", want)
		}
	}
	if !strings.Contains(errOut, "the Karpenter release is in kube-system, so the Job may read its Secrets") {
		t.Errorf("no note about kube-system's Secrets: %q", errOut)
	}
	// A chart that cannot be rendered: the Job's permissions cannot be
	// derived, and nothing is written.
	plan = planWithKarpenter(t, "oci://127.0.0.1:1/karpenter/karpenter")
	other := filepath.Join(t.TempDir(), "job.yaml")
	if _, _, err := runCLI(t, "generate", "--job", "--plan", plan, "--out", tree, "--job-file", other); err == nil || !strings.Contains(err.Error(), "the Job's permissions for the Karpenter release follow what its chart renders") {
		t.Errorf("--job with a chart that cannot be pulled: %v", err)
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("a Job manifest was written without the Karpenter release's permissions")
	}
}
