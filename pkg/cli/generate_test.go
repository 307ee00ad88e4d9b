package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

var generateFixture = filepath.Join("..", "generate", "testdata", "inventories", "all.json")

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	streams, _, out, errOut := iostreams.Test()
	cmd := NewRootCmd(streams)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestGenerateCommand(t *testing.T) {
	dir := t.TempDir()
	out, errOut, err := runCLI(t, "generate", "--snapshot", generateFixture, "--out", dir, "--envs", "dev,prod", "--strategy", "weighted")
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, errOut)
	}
	for _, want := range []string{"NODEPOOL", "web-asg-on-demand", "web-asg-spot", "Built overlays: dev (15 objects), prod (15 objects)"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "warning: batch-spot: spot pool allows only 4 instance type(s)") {
		t.Errorf("stderr lacks the spot warning:\n%s", errOut)
	}
	for _, p := range []string{"base/kustomization.yaml", "overlays/dev/kustomization.yaml", "overlays/prod/kustomization.yaml", "helm/karpenter-values.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "overlays", "staging")); !os.IsNotExist(err) {
		t.Error("an overlay was written for an environment not asked for")
	}

	// A re-run changes nothing and says so.
	out, _, err = runCLI(t, "generate", "--snapshot", generateFixture, "--out", dir, "--envs", "dev,prod", "--strategy", "weighted")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Wrote "+dir+": 35 unchanged.") {
		t.Errorf("re-run output:\n%s", out)
	}
}

func TestGenerateCommandJSON(t *testing.T) {
	out, _, err := runCLI(t, "generate", "--snapshot", generateFixture, "--out", t.TempDir(), "--envs", "staging", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Cluster string `json:"cluster"`
		Pools   []struct {
			Name string `json:"name"`
		} `json:"pools"`
		Tree struct {
			Built map[string]int `json:"built"`
		} `json:"tree"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if rep.Cluster != "shop" || len(rep.Pools) != 7 || rep.Tree.Built["staging"] != 14 {
		t.Errorf("report = %+v", rep)
	}
}

func TestGenerateCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no input", []string{"generate"}, "--snapshot FILE or --cluster NAME is required"},
		{"both inputs", []string{"generate", "--snapshot", generateFixture, "--cluster", "prod"}, "not both"},
		{"missing snapshot", []string{"generate", "--snapshot", "nope.json"}, "--snapshot: read snapshot: open nope.json"},
		{"bad strategy", []string{"generate", "--snapshot", generateFixture, "--strategy", "many"}, `--strategy "many": want multiple, single or weighted`},
		{"bad flexibility", []string{"generate", "--snapshot", generateFixture, "--flexibility", "any"}, `--flexibility "any"`},
		{"unknown env", []string{"generate", "--snapshot", generateFixture, "--envs", "dev,qa"}, `unknown environment profile "qa": known profiles are dev, prod, staging`},
		{"bad weight order", []string{"generate", "--snapshot", generateFixture, "--weight-order", "spot,reserved"}, `weight order "reserved"`},
		{"unknown controller group", []string{"generate", "--snapshot", generateFixture, "--controller-nodegroup", "nope"}, `controller node group "nope" is not in the inventory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "--out", t.TempDir())
			_, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
