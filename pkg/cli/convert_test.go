package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

const testProvisioner = `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  ttlSecondsAfterEmpty: 30
  providerRef:
    name: default
`

const testNodeTemplate = `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector:
    karpenter.sh/discovery: demo
  securityGroupSelector:
    karpenter.sh/discovery: demo
`

const badTemplate = `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: lt
spec:
  launchTemplate: mine
`

// runConvertCmd runs the CLI with stdin and returns stdout, stderr and the
// process exit code as Execute computes it.
func runConvertCmd(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	streams, in, out, errOut := iostreams.Test()
	in.WriteString(stdin)
	cmd := NewRootCmd(streams)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	code := 0
	if err := cmd.Execute(); err != nil {
		errOut.WriteString("Error: " + err.Error() + "\n")
		code = 1
		var exit *ExitError
		if errors.As(err, &exit) {
			code = exit.Code
		}
	}
	return out.String(), errOut.String(), code
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	prov := writeFile(t, dir, "in/provisioner.yaml", testProvisioner)
	writeFile(t, dir, "in/sub/nodetemplate.yml", testNodeTemplate)
	bad := writeFile(t, dir, "bad.yaml", badTemplate)

	for _, tc := range []struct {
		name      string
		stdin     string
		args      []string
		code      int
		stdout    []string
		notStdout []string
		stderr    []string
		noStdout  bool
	}{
		{name: "file to v1beta1", args: []string{"-f", prov}, stdout: []string{"apiVersion: karpenter.sh/v1beta1", "consolidationPolicy: WhenEmpty", "consolidateAfter: 30s"}},
		{name: "stdin to v1", stdin: testProvisioner + "---\n" + testNodeTemplate, args: []string{"-f", "-", "--to", "v1"}, stdout: []string{"apiVersion: karpenter.sh/v1", "apiVersion: karpenter.k8s.aws/v1\n", "alias: al2@latest", "---\n"}, stderr: []string{"httpPutResponseHopLimit"}},
		{name: "directory without -R skips subdirs", args: []string{"-f", filepath.Join(dir, "in")}, stdout: []string{"kind: NodePool"}, notStdout: []string{"EC2NodeClass"}},
		{name: "directory with -R", args: []string{"-f", filepath.Join(dir, "in"), "-R"}, stdout: []string{"kind: NodePool", "kind: EC2NodeClass"}},
		{name: "json output", args: []string{"-f", prov, "-o", "json"}, stdout: []string{`"kind": "NodePool"`}},
		{name: "ignore defaults", args: []string{"-f", prov, "--ignore-defaults"}, stdout: []string{"requirements: null"}},
		{name: "error means no output", args: []string{"-f", prov, "-f", bad}, code: 1, noStdout: true, stderr: []string{`AWSNodeTemplate "lt"`, "spec.launchTemplate", "--continue-on-error"}},
		{name: "continue on error", args: []string{"-f", prov, "-f", bad, "--continue-on-error"}, code: 1, stdout: []string{"kind: NodePool"}, stderr: []string{"error:", `AWSNodeTemplate "lt"`, "1 document(s) failed"}},
		{name: "bad --to", args: []string{"-f", prov, "--to", "v2"}, code: ExitUsage, stderr: []string{`--to "v2": want v1beta1 or v1`}},
		{name: "no -f", args: nil, code: ExitUsage, stderr: []string{"must specify -f"}},
		{name: "missing file", args: []string{"-f", filepath.Join(dir, "nope.yaml")}, code: 1, stderr: []string{"nope.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runConvertCmd(t, tc.stdin, append([]string{"convert"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tc.code, errOut)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.notStdout {
				if strings.Contains(out, s) {
					t.Errorf("stdout has %q:\n%s", s, out)
				}
			}
			if tc.noStdout && out != "" {
				t.Errorf("stdout should be empty on error, got:\n%s", out)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
	t.Run("json output parses", func(t *testing.T) {
		out, _, code := runConvertCmd(t, "", "convert", "-f", prov, "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
	})
}

func TestConvertOutputDir(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "all.yaml", testProvisioner+"---\n"+testNodeTemplate)
	outDir := filepath.Join(dir, "out")
	_, errOut, code := runConvertCmd(t, "", "convert", "-f", in, "--to", "v1", "--output-dir", outDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	entries, err := os.ReadDir(outDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "ec2nodeclass-default.yaml,nodepool-default.yaml" {
		t.Fatalf("files %v", names)
	}
	b, _ := os.ReadFile(filepath.Join(outDir, "nodepool-default.yaml"))
	if !strings.HasPrefix(string(b), "apiVersion: karpenter.sh/v1\nkind: NodePool\n") || strings.Contains(string(b), "---") {
		t.Errorf("nodepool file:\n%s", b)
	}

	// A failing document leaves the directory untouched.
	bad := writeFile(t, dir, "bad.yaml", badTemplate)
	empty := filepath.Join(dir, "empty")
	_, _, code = runConvertCmd(t, "", "convert", "-f", in, "-f", bad, "--output-dir", empty)
	if code == 0 {
		t.Fatal("want failure")
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("output dir created on error: %v", err)
	}
}

func TestConvertHelpHasExample(t *testing.T) {
	out, _, code := runConvertCmd(t, "", "convert", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--output-dir") {
		t.Fatalf("help:\n%s", out)
	}
}
