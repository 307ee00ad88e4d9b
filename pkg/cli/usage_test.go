package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

// everyCommand is every command of the tree but cobra's hidden ones.
func everyCommand(t *testing.T) []*cobra.Command {
	t.Helper()
	streams, _, _, _ := iostreams.Test()
	root, _ := newRoot(streams)
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, s := range c.Commands() {
			if !s.Hidden {
				walk(s)
			}
		}
	}
	walk(root)
	return all
}

// args is the command path of c without the root, as arguments.
func args(c *cobra.Command) []string {
	return strings.Fields(c.CommandPath())[1:]
}

// TestMistypedCommandLinesAreUsageErrors: every command refuses an
// unknown flag, naming the nearest, and every command group (and the root)
// an unknown subcommand, suggesting the nearest, with exit code 2 — not
// the group's help and exit 0.
func TestMistypedCommandLinesAreUsageErrors(t *testing.T) {
	for _, c := range everyCommand(t) {
		path := args(c)
		t.Run("unknown flag "+c.CommandPath(), func(t *testing.T) {
			_, errOut, code := run(t, append(path, "--no-such-flag")...)
			if code != ExitUsage || !strings.Contains(errOut, "unknown flag --no-such-flag") {
				t.Errorf("exit %d, stderr %q; want %d and the unknown flag named", code, errOut, ExitUsage)
			}
		})
		if c.HasAvailableSubCommands() {
			t.Run("unknown subcommand "+c.CommandPath(), func(t *testing.T) {
				_, errOut, code := run(t, append(path, "nosuchverb")...)
				if code != ExitUsage || !strings.Contains(errOut, `unknown command "nosuchverb"`) {
					t.Errorf("exit %d, stderr %q; want %d and the unknown command named", code, errOut, ExitUsage)
				}
			})
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"iam", "destroy"}, `unknown command "destroy" for "karpenter-migrate iam"`},
		{[]string{"iam", "plna"}, `did you mean "karpenter-migrate iam plan"?`},
		{[]string{"iam", "plna", "--cluster", "shop"}, `did you mean "karpenter-migrate iam plan"?`},
		{[]string{"config", "inti", "prod"}, `did you mean "karpenter-migrate config init"?`},
		{[]string{"plna"}, `did you mean "karpenter-migrate plan"?`},
		{[]string{"help", "plna"}, `did you mean "karpenter-migrate plan"?`},
		{[]string{"help", "iam", "destroy"}, `unknown command "destroy" for "karpenter-migrate iam"`},
		{[]string{"demo", "--sed", "7"}, `unknown flag --sed for "karpenter-migrate demo"; did you mean --seed?`},
		{[]string{"iam", "plan", "--clustr", "shop"}, "did you mean --cluster?"},
		{[]string{"version", "--log-levl", "debug"}, "did you mean --log-level?"},
		{[]string{"demo", "--seed", "-1"}, `--seed "-1": want a whole number, 0 or more`},
		{[]string{"apply", "--poll-interval", "2"}, `--poll-interval "2": want a duration such as 90s, 15m or 1h30m`},
		{[]string{"version", "extra"}, `unknown command "extra" for "karpenter-migrate version"`},
		{[]string{"config", "init"}, "accepts 1 arg(s), received 0"},
		{[]string{"demo", "--env", "qa"}, `environment "qa": want dev, staging or prod`},
		{[]string{"generate", "--snapshot", generateFixture, "--strategy", "many"}, `--strategy "many": want multiple, single or weighted`},
		{[]string{"version", "--log-level", "loud"}, `--log-level "loud"`},
	} {
		_, errOut, code := run(t, tc.args...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "strconv") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, ExitUsage, tc.want)
		}
	}
}

// TestOutputIsRefusedWhereItDoesNotApply: -o is a usage error on a
// command that does not write that format (naming the ones it has) and on
// one without formats, instead of being ignored.
func TestOutputIsRefusedWhereItDoesNotApply(t *testing.T) {
	prov := writeFile(t, t.TempDir(), "provisioner.yaml", testProvisioner)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "-f", prov, "-o", "table"}, `-o/--output "table": karpenter-migrate convert writes yaml or json`},
		{[]string{"version", "-o", "xml"}, `-o/--output "xml": karpenter-migrate version writes table, yaml or json`},
		{[]string{"apply", "--plan", "plan.yaml", "-o", "json"}, `-o/--output does not apply to "karpenter-migrate apply": it has one output; --log-format json`},
		{[]string{"rollback", "--plan", "plan.yaml", "-o", "yaml"}, `does not apply to "karpenter-migrate rollback"`},
		{[]string{"wizard", "-o", "json"}, `does not apply to "karpenter-migrate wizard"`},
		{[]string{"config", "init", "prod", "-o", "json"}, `does not apply to "karpenter-migrate config init": it has one output, the file it writes`},
		{[]string{"completion", "bash", "-o", "json"}, `does not apply to "karpenter-migrate completion bash"`},
	} {
		out, errOut, code := run(t, tc.args...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want %d and %q", tc.args, code, len(out), errOut, ExitUsage, tc.want)
		}
	}
	// Each command's default format, and the formats it has, still work.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "-f", prov}, "kind: NodePool"},
		{[]string{"convert", "-f", prov, "-o", "json"}, `"kind": "NodePool"`},
		{[]string{"version"}, "karpenter-migrate "},
		{[]string{"version", "-o", "yaml"}, "goVersion: "},
	} {
		out, errOut, code := run(t, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want %q", tc.args, code, errOut, out, tc.want)
		}
	}
}

// TestEveryCommandSaysWhatItsOutputIs: on every command an -o it does
// not write is refused, naming the formats it has or saying it has none.
func TestEveryCommandSaysWhatItsOutputIs(t *testing.T) {
	for _, c := range everyCommand(t) {
		if c.Name() == "help" {
			continue
		}
		a := append(args(c), "-o", "xml")
		if c.Args != nil && c.Args(c, []string{"x"}) == nil && c.Args(c, nil) != nil {
			a = append(a, "x") // config init ENV, config validate FILE
		}
		_, errOut, code := run(t, a...)
		if code != ExitUsage || !regexp.MustCompile(`-o/--output ("xml": \S.* writes \w|does not apply to)`).MatchString(errOut) {
			t.Errorf("%s -o xml: exit %d, stderr %q; want %d and the formats it writes", c.CommandPath(), code, errOut, ExitUsage)
		}
	}
}

// TestDemoBadEnvironmentLeavesNoDirectory: demo --env qa is refused before
// it creates its temporary output directory.
func TestDemoBadEnvironmentLeavesNoDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if _, errOut, code := run(t, "demo", "--env", "qa"); code != ExitUsage {
		t.Fatalf("exit %d, %s", code, errOut)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("left behind in $TMPDIR: %v", entries)
	}
}

// TestNoFlagUsageHasABacktick: pflag reads the first `quoted` word of a
// flag's usage as the name of its argument, so --help would print
// "--control-plane make demo-real".
func TestNoFlagUsageHasABacktick(t *testing.T) {
	for _, c := range everyCommand(t) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: --help shows its argument as %q (a backtick in %q)", c.CommandPath(), f.Name, name, f.Usage)
			}
		})
	}
}

// TestVersionFlag: --version prints what version prints.
func TestVersionFlag(t *testing.T) {
	version, _, _ := run(t, "version")
	flag, errOut, code := run(t, "--version")
	if code != 0 || flag != version || !strings.HasPrefix(flag, "karpenter-migrate ") {
		t.Fatalf("--version: exit %d, %q (stderr %q); want %q", code, flag, errOut, version)
	}
}

// TestExitCodeTable: the exit codes ARCHITECTURE.md documents are the
// ones exitcodes.go defines, and each command line class exits with its
// code (130 and 4 are asserted where they happen: TestDemoInterrupted,
// TestDiscoverInterrupted…, TestApplyPausedOutsideTheWindow…).
func TestExitCodeTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "## Exit codes (for CI)")
	table, _, _ = strings.Cut(table, "\n## ")
	var documented []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		documented = append(documented, n)
	}
	want := []int{0, 1, ExitUsage, ExitReadiness, ExitPaused, ExitDrifted, ExitInterrupted}
	if !slices.Equal(documented, want) {
		t.Errorf("ARCHITECTURE.md's exit codes %v, exitcodes.go's %v", documented, want)
	}
	for _, tc := range []struct {
		class string
		args  []string
		code  int
	}{
		{"success", []string{"version"}, 0},
		{"success", []string{"--version"}, 0},
		{"success", []string{"iam"}, 0}, // a group alone prints its help
		{"success", []string{"--help"}, 0},
		{"usage: unknown command", []string{"nosuchverb"}, ExitUsage},
		{"usage: unknown subcommand", []string{"iam", "destroy"}, ExitUsage},
		{"usage: unknown flag", []string{"demo", "--sed", "7"}, ExitUsage},
		{"usage: a flag's value", []string{"demo", "--seed", "-1"}, ExitUsage},
		{"usage: -o", []string{"convert", "-f", "x.yaml", "-o", "table"}, ExitUsage},
		{"error", []string{"readiness", "--snapshot", filepath.Join(t.TempDir(), "missing.json")}, 1},
	} {
		if _, errOut, code := run(t, tc.args...); code != tc.code {
			t.Errorf("%s %v: exit %d, want %d (stderr %q)", tc.class, tc.args, code, tc.code, errOut)
		}
	}
}

// TestNoKubeconfigSaysHowToWriteOne: without a kubeconfig the message is
// the command that writes one, not client-go's KUBERNETES_MASTER.
func TestNoKubeconfigSaysHowToWriteOne(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, errOut, code := run(t, "status", "--env", "prod")
	if code != 1 || !strings.Contains(errOut, "aws eks update-kubeconfig --name CLUSTER") || !strings.Contains(errOut, "--kubeconfig FILE") || strings.Contains(errOut, "KUBERNETES_MASTER") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
