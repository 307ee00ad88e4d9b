package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestTemplateMatchesDefaults(t *testing.T) {
	b, err := InitFile("prod", "shop", "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("config init output does not parse: %v\n%s", err, b)
	}
	want := Default("prod")
	want.Cluster, want.Region = "shop", "eu-west-1"
	want.NodeGroups = NodeGroups{Include: []string{}, Exclude: []string{}}
	want.Readiness.Acknowledge = []string{}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("template and defaults disagree:\n got %+v\nwant %+v", *got, want)
	}
}

func TestMinimalFileTakesDefaults(t *testing.T) {
	c, err := Parse([]byte("apiVersion: karpenter-migrate.io/v1alpha1\nkind: MigrationConfig\nenvironment: dev\nrollout:\n  waveSize: \"3\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rollout.WaveSize != "3" || c.Rollout.Concurrency != 2 || c.Generate.Strategy != "multiple" || c.Gates.PDBWaitTimeout.Duration != 15*time.Minute {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestErrorsNameTheLine(t *testing.T) {
	head := "apiVersion: karpenter-migrate.io/v1alpha1\nkind: MigrationConfig\nenvironment: dev\n"
	for name, tc := range map[string]struct{ body, want string }{
		"unknown key":      {"rollout:\n  wavesize: 3\n", "line 5: rollout.wavesize: unknown key; did you mean waveSize?"},
		"misspelt key":     {"gates:\n  pdbWaitTimout: 1m\n", "line 5: gates.pdbWaitTimout: unknown key; did you mean pdbWaitTimeout?"},
		"strange key":      {"rollout:\n  colour: blue\n", "line 5: rollout.colour: unknown key; is it misspelt?"},
		"tab":              {"rollout:\n\twaveSize: 3\n", "line 5: a tab indents this line; YAML indents with spaces only"},
		"not a number":     {"rollout:\n  concurrency: two\n", `line 5: rollout.concurrency "two": want a whole number`},
		"not a list":       {"nodeGroups:\n  include: all\n", `line 5: nodeGroups.include "all": want a list like [a, b]`},
		"not a string":     {"readiness:\n  failOn: [x]\n", `line 5: readiness.failOn: want a string`},
		"bad bool":         {"rollout:\n  preProvision: maybe\n", `line 5: rollout.preProvision "maybe": want true or false`},
		"list item":        {"nodeGroups:\n  include:\n  - a\n  - {b: c}\n", `line 7: nodeGroups.include[1]: want a string`},
		"bad strategy":     {"generate:\n  strategy: triple\n", "line 5: generate.strategy \"triple\""},
		"bad wave":         {"rollout:\n  waveSize: 150%\n", "line 5: rollout.waveSize \"150%\""},
		"bad duration":     {"gates:\n  pdbWaitTimeout: soon\n", "line 5: gates.pdbWaitTimeout \"soon\" is not a duration"},
		"bad cron":         {"maintenanceWindow:\n  schedule: \"every day\"\n  duration: 1h\n", "line 4: maintenanceWindow"},
		"window no length": {"maintenanceWindow:\n  schedule: \"0 22 * * *\"\n", "line 4: maintenanceWindow.duration is required"},
		"both in and out":  {"nodeGroups:\n  include: [a]\n  exclude: [a]\n", "line 4: nodeGroups \"a\" is both"},
		"controller size":  {"controller:\n  size: 0\n", "line 5: controller.size 0: want at least 1"},
		"prepare ahead":    {"rollout:\n  prepareAhead: -1\n", "line 5: rollout.prepareAhead -1: want 0 (each wave launches its capacity as it starts)"},
		"syntax":           {"rollout: [\n", "line"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dev.yaml")
			os.WriteFile(path, []byte(head+tc.body), 0o644)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path) {
				t.Fatalf("err = %v; want %s: ...%q", err, path, tc.want)
			}
		})
	}
}

func TestWaveNodes(t *testing.T) {
	for _, tc := range []struct {
		size  string
		total int
		want  int
	}{{"20%", 23, 5}, {"20%", 1, 1}, {"5", 3, 3}, {"5", 40, 5}, {"100%", 7, 7}, {"1%", 0, 1}} {
		if got := (Rollout{WaveSize: tc.size}).WaveNodes(tc.total); got != tc.want {
			t.Errorf("WaveNodes(%s of %d) = %d, want %d", tc.size, tc.total, got, tc.want)
		}
	}
}

func TestMaintenanceWindow(t *testing.T) {
	w := MaintenanceWindow{Schedule: "0 22 * * 1-5", Duration: Duration{4 * time.Hour}, TimeZone: "UTC"}
	for _, tc := range []struct {
		at   string
		want bool
	}{
		{"2026-11-23T21:59:00Z", false}, // Monday, just before
		{"2026-11-23T22:00:00Z", true},
		{"2026-11-24T01:59:00Z", true}, // Tuesday early morning, Monday's window
		{"2026-11-24T02:01:00Z", false},
		{"2026-11-28T23:00:00Z", false}, // Saturday
	} {
		at, _ := time.Parse(time.RFC3339, tc.at)
		got, err := w.InWindow(at)
		if err != nil || got != tc.want {
			t.Errorf("InWindow(%s) = %v, %v; want %v", tc.at, got, err, tc.want)
		}
	}
	if ok, _ := (MaintenanceWindow{}).InWindow(time.Now()); !ok {
		t.Error("an empty window must allow any time")
	}
}

func FuzzParse(f *testing.F) {
	b, _ := InitFile("dev", "c", "r")
	f.Add(b)
	f.Add([]byte("rollout: {waveSize: '%'}"))
	f.Add([]byte("rollout:\n  concurrency: two\nnodeGroups:\n  include: [a, {b: c}]\n  exclude: all\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err == nil && (c.Rollout.Concurrency < 1 || c.Environment == "") {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
		// Past YAML syntax, every problem is reported on its own line and
		// names the line in the file.
		if err == nil || yaml.Unmarshal(b, new(yaml.Node)) != nil || strings.HasPrefix(err.Error(), "empty file") {
			return
		}
		for _, msg := range strings.Split(err.Error(), "\n") {
			if !lineError.MatchString(msg) {
				t.Fatalf("%q does not name its line (all: %v)", msg, err)
			}
		}
	})
}
