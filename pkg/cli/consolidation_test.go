package cli

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
)

// -update rewrites the golden files of the package's tests.
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var consolidationDir = filepath.Join("testdata", "consolidation")

func consolidationArgs(extra ...string) []string {
	return append([]string{"consolidation", "--snapshot", filepath.Join(consolidationDir, "snapshot.json"),
		"--nodepools", filepath.Join(consolidationDir, "nodepools.yaml"), "--now", "2026-03-04T12:00:00Z"}, extra...)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(consolidationDir, name)
	if *update {
		if err := atomicfile.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/cli -run Consolidation -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (re-run with -update if intended):\n%s", path, got)
	}
}

func TestConsolidationCommandTable(t *testing.T) {
	out, errOut, err := runCLI(t, consolidationArgs("--settle")...)
	if err != nil {
		t.Fatalf("consolidation: %v\n%s", err, errOut)
	}
	golden(t, "table.golden", out)
}

func TestConsolidationCommandJSON(t *testing.T) {
	out, _, err := runCLI(t, consolidationArgs("-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep action.ConsolidationReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	d := rep.Decision
	if d.Method != "Emptiness" || len(d.Commands) != 1 || d.Commands[0].Nodes[0].Name != "ip-10-0-1-5" {
		t.Fatalf("decision = %+v", d)
	}
	if len(d.Nodes) != 5 || len(d.Drifted) != 1 || d.Drifted[0].Node.Name != "ip-10-0-1-3" {
		t.Fatalf("nodes/drift = %+v / %+v", d.Nodes, d.Drifted)
	}
	if rep.Settled != nil {
		t.Fatal("settled without --settle")
	}
}

func TestConsolidationCommandErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {wieght: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"consolidation", "--nodepools", empty}, `required flag(s) "snapshot" not set`},
		{consolidationArgs("--now", "yesterday"), `--now "yesterday": want RFC 3339`},
		{[]string{"consolidation", "--snapshot", filepath.Join(consolidationDir, "snapshot.json"), "--nodepools", empty}, "no karpenter.sh/v1 NodePool found"},
		{[]string{"consolidation", "--snapshot", filepath.Join(consolidationDir, "snapshot.json"), "--nodepools", bad}, "bad.yaml:1"},
		{[]string{"consolidation", "--snapshot", filepath.Join(consolidationDir, "missing.json"), "--nodepools", empty}, "read snapshot"},
	}
	for _, c := range cases {
		_, _, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}
