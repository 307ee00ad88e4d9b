package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

func TestReadinessFailOn(t *testing.T) {
	dir := t.TempDir()
	inv := inventory.Inventory{Cluster: inventory.Cluster{Name: "prod"},
		Workloads:         []inventory.Workload{{Kind: inventory.OwnerDeployment, Namespace: "a", Name: "web", Replicas: 1}},
		ClusterAutoscaler: &inventory.ClusterAutoscaler{Namespace: "kube-system", Name: "cluster-autoscaler", Replicas: 1}}
	path := filepath.Join(dir, "s.json")
	if err := inventory.NewSnapshot(inv, time.Unix(0, 0)).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{[]string{"readiness", "--snapshot", path}, 0, "0 blocker(s), 2 warning(s)"},
		{[]string{"readiness", "--snapshot", path, "--fail-on", "blocker"}, 0, "single-replica"},
		{[]string{"readiness", "--snapshot", path, "--fail-on", "warning"}, ExitReadiness, "cluster-autoscaler-running"},
		{[]string{"readiness", "--snapshot", path, "-o", "json"}, 0, `"id": "cluster-autoscaler-running"`},
		{[]string{"readiness", "--snapshot", path, "--fail-on", "nope"}, ExitUsage, ""},
		{[]string{"readiness", "--snapshot", filepath.Join(dir, "missing.json")}, 1, ""},
	} {
		t.Run(strings.Join(tc.args[2:], " "), func(t *testing.T) {
			io, _, out, _ := iostreams.Test()
			cmd := NewRootCmd(io)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			code := 0
			if err != nil {
				code = 1
				var exit *ExitError
				if errors.As(err, &exit) {
					code = exit.Code
				}
			}
			if code != tc.wantCode || !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("exit %d (%v), output %q; want %d and %q", code, err, out.String(), tc.wantCode, tc.wantOut)
			}
		})
	}
	_ = os.Remove(path)
}
