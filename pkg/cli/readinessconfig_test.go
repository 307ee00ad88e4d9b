package cli

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// blockerSnapshot writes a snapshot whose readiness report has one blocker
// (a pod no controller owns) and two warnings (a single replica, Cluster
// Autoscaler running).
func blockerSnapshot(t *testing.T) string {
	t.Helper()
	inv := inventory.Inventory{Cluster: inventory.Cluster{Name: "prod"},
		Workloads:         []inventory.Workload{{Kind: inventory.OwnerDeployment, Namespace: "a", Name: "web", Replicas: 1}},
		Nodes:             []inventory.Node{{Name: "n1"}},
		Pods:              []inventory.Pod{{Namespace: "a", Name: "hand-made", NodeName: "n1", OwnerKind: inventory.OwnerNone}},
		ClusterAutoscaler: &inventory.ClusterAutoscaler{Namespace: "kube-system", Name: "cluster-autoscaler", Replicas: 1}}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := inventory.NewSnapshot(inv, time.Unix(0, 0)).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return 1
}

func TestReadinessConfig(t *testing.T) {
	snap := blockerSnapshot(t)
	for _, tc := range []struct {
		name     string
		config   string // readiness section of the migration config
		flags    []string
		wantCode int
		wantOut  []string
		wantErr  []string // on stderr
		notErr   []string
	}{
		{"failOn from the config (default blocker)", "", nil, ExitReadiness,
			[]string{"1 blocker(s), 2 warning(s)\n", "(no-controller)"}, nil, []string{"acknowledge"}},
		{"failOn never in the config", "readiness: {failOn: never}\n", nil, 0, []string{"1 blocker(s)"}, nil, nil},
		{"explicit --fail-on wins over the config's never", "readiness: {failOn: never}\n", []string{"--fail-on", "warning"}, ExitReadiness, nil, nil, nil},
		{"explicit --fail-on wins over the config's warning", "readiness: {failOn: warning, acknowledge: [no-controller]}\n", []string{"--fail-on", "blocker"}, 0, nil, nil, nil},
		{"acknowledged blocker does not count", "readiness: {failOn: blocker, acknowledge: [no-controller]}\n", nil, 0,
			[]string{"0 blocker(s), 2 warning(s), 1 acknowledged", "(no-controller, acknowledged)", "  - Pod a/hand-made"}, nil, []string{"warning:"}},
		{"acknowledged blocker, warnings still fail on warning", "readiness: {failOn: warning, acknowledge: [no-controller]}\n", nil, ExitReadiness,
			[]string{"(single-replica)"}, nil, nil},
		{"every finding acknowledged", "readiness: {failOn: warning, acknowledge: [no-controller, single-replica, cluster-autoscaler-running]}\n", nil, 0,
			[]string{"0 blocker(s), 0 warning(s), 3 acknowledged"}, nil, nil},
		{"unknown acknowledged ID is named", "readiness: {acknowledge: [no-controller, single-replica/default/web]}\n", nil, 0,
			nil, []string{`warning: readiness.acknowledge lists "single-replica/default/web", which matches no finding`, "findings: no-controller, cluster-autoscaler-running, single-replica"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"readiness", "--snapshot", snap, "--config", writeConfig(t, tc.config)}, tc.flags...)
			out, errOut, err := runCLI(t, args...)
			if got := exitCode(err); got != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tc.wantCode, out)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, w := range tc.notErr {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr has %q:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestReadinessConfigJSON(t *testing.T) {
	out, _, err := runCLI(t, "readiness", "--snapshot", blockerSnapshot(t), "--config", writeConfig(t, "readiness: {acknowledge: [no-controller]}\n"), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got readinessResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if got.Blockers != 0 || got.Warnings != 2 || len(got.Findings) != 2 || len(got.Acknowledged) != 1 || got.Acknowledged[0].ID != readiness.IDNoController {
		t.Errorf("report %+v, want the blocker acknowledged and two warnings", got)
	}
}

func TestReadinessBadConfig(t *testing.T) {
	_, _, err := runCLI(t, "readiness", "--snapshot", blockerSnapshot(t), "--config", writeConfig(t, "readiness: {failOn: sometimes}\n"))
	if err == nil || !strings.Contains(err.Error(), "readiness.failOn") {
		t.Errorf("bad failOn: %v", err)
	}
}
