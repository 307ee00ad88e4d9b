package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

// run executes the CLI with args and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := iostreams.Test()
	cmd, g := newRoot(streams)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	code := g.exit(cmd.Execute())
	return out.String(), errOut.String(), code
}

func TestVersionJSON(t *testing.T) {
	out, _, code := run(t, "version", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version -o json is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"version", "commit", "goVersion"} {
		if v[k] == "" {
			t.Errorf("field %s empty in %v", k, v)
		}
	}
}

func TestBadGlobalFlagsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "-o", "xml"}, "-o/--output \"xml\""},
		{[]string{"version", "--log-level", "loud"}, "--log-level \"loud\""},
		{[]string{"version", "--log-format", "xml"}, "--log-format \"xml\""},
		{[]string{"nosuchverb"}, "unknown command"},
	} {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want failure mentioning %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestEveryCommandHasAnExample(t *testing.T) {
	streams, _, _, _ := iostreams.Test()
	root := NewRootCmd(streams)
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" {
			t.Errorf("%s has no example in --help", c.Name())
		}
	}
}

func TestCompletionIsAvailable(t *testing.T) {
	out, _, code := run(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "karpenter-migrate") {
		t.Fatalf("completion bash: exit %d, %d bytes", code, len(out))
	}
}

func TestConfigInitThenValidate(t *testing.T) {
	path := t.TempDir() + "/prod.yaml"
	if _, errOut, code := run(t, "config", "init", "prod", "--cluster", "shop", "--out", path); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	if _, errOut, code := run(t, "config", "init", "prod", "--out", path); code == 0 || !strings.Contains(errOut, "--force") {
		t.Fatalf("init over an existing file: exit %d, %s", code, errOut)
	}
	out, errOut, code := run(t, "config", "validate", path, "-o", "json")
	if code != 0 {
		t.Fatalf("validate: %s", errOut)
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(out), &c); err != nil || c["cluster"] != "shop" {
		t.Fatalf("validate -o json = %s (%v)", out, err)
	}
}
