package generate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

func TestEmbeddedProfiles(t *testing.T) {
	ps, err := LoadProfiles("")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ps.Names(), ","); got != "dev,prod,staging" {
		t.Fatalf("profiles = %s", got)
	}
	dev, prod := ps["dev"], ps["prod"]
	if dev.Capacity != CapacitySpotFirst || dev.Disruption.ConsolidateAfter.String() != "30s" || dev.Disruption.Budgets[0].Nodes != "20%" {
		t.Errorf("dev = %+v", dev)
	}
	if prod.Capacity != CapacityOnDemandFallback || prod.ExpireAfter.String() != "720h0m0s" || len(prod.Disruption.Budgets) != 2 ||
		prod.Disruption.Budgets[0].Nodes != "10%" || prod.Disruption.Budgets[1].Nodes != "0" || *prod.Disruption.Budgets[1].Schedule != "0 9 * * 1-5" {
		t.Errorf("prod = %+v", prod)
	}
	for _, p := range ps {
		if len(p.templates) == 0 || p.Source != "embedded" {
			t.Errorf("profile %s: %d templates, source %q", p.Name, len(p.templates), p.Source)
		}
	}
}

func TestSelectProfiles(t *testing.T) {
	ps, err := LoadProfiles("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		names []string
		want  string // error substring; empty for success
	}{
		{[]string{"prod", "dev"}, ""},
		{[]string{"qa"}, `unknown environment profile "qa": known profiles are dev, prod, staging`},
		{[]string{"dev", "dev"}, `environment "dev" given twice`},
		{nil, "no environment given"},
	}
	for _, tt := range tests {
		got, err := ps.Select(tt.names)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Select(%v): %v", tt.names, err)
		case tt.want == "" && (len(got) != len(tt.names) || got[0].Name != tt.names[0]):
			t.Errorf("Select(%v) = %v, want them in order", tt.names, got)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Select(%v) error = %v, want %q", tt.names, err, tt.want)
		}
	}
}

func writeProfile(t *testing.T, dir, name, settings string, templates map[string]string) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, ProfileFileName), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, body := range templates {
		if err := os.WriteFile(filepath.Join(d, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const qaSettings = `description: qa
capacity: keep
disruption:
  consolidationPolicy: WhenEmpty
  consolidateAfter: Never
`

func TestProfilesDirAddsAndReplaces(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "qa", qaSettings, map[string]string{"nodepool.yaml.tmpl": "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {{ .NodePool.Name }}\nspec:\n  weight: 7\n"})
	writeProfile(t, dir, "dev", strings.Replace(qaSettings, "description: qa", "description: my dev", 1), nil)
	ps, err := LoadProfiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ps.Names(), ","); got != "dev,prod,qa,staging" {
		t.Fatalf("profiles = %s", got)
	}
	if ps["dev"].Description != "my dev" || len(ps["dev"].templates) != 0 || ps["dev"].Source != dir+"/dev" {
		t.Errorf("dev not replaced: %+v", ps["dev"])
	}
	if !ps["qa"].Disruption.ConsolidateAfter.IsNever() || ps["qa"].Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty {
		t.Errorf("qa = %+v", ps["qa"])
	}
}

func TestProfilesDirErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string
		want  string
	}{
		{"missing dir", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") }, "--profiles"},
		{"a file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "f")
			_ = os.WriteFile(p, nil, 0o644)
			return p
		}, "not a directory"},
		{"no profiles", func(t *testing.T, dir string) string { return dir }, "no profile found"},
		{"bad name", func(t *testing.T, dir string) string {
			writeProfile(t, dir, "QA_env", qaSettings, nil)
			return dir
		}, "QA_env: the name must be a DNS-1123 label"},
		{"bad template name", func(t *testing.T, dir string) string {
			writeProfile(t, dir, "qa", qaSettings, map[string]string{"pool.yaml.tmpl": "x"})
			return dir
		}, `qa/pool.yaml.tmpl: a patch template's name must start with "nodepool"`},
		{"template syntax", func(t *testing.T, dir string) string {
			writeProfile(t, dir, "qa", qaSettings, map[string]string{"nodepool.yaml.tmpl": "{{ .Nope "})
			return dir
		}, "qa/nodepool.yaml.tmpl"},
		{"bad settings", func(t *testing.T, dir string) string {
			writeProfile(t, dir, "qa", "capacity: all-spot\n", nil)
			return dir
		}, `qa/profile.yaml: capacity "all-spot"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadProfiles(tt.setup(t, t.TempDir()))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseProfileErrors(t *testing.T) {
	base := "disruption:\n  consolidationPolicy: WhenEmptyOrUnderutilized\n  consolidateAfter: 30s\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"valid", base, ""},
		{"unknown field", base + "expireAfterr: 1h\n", `unknown field "expireAfterr"`},
		{"not yaml", "disruption: [\n", "p.yaml"},
		{"no consolidateAfter", "disruption:\n  consolidationPolicy: WhenEmpty\n", "disruption.consolidateAfter is required"},
		{"bad consolidateAfter", "disruption:\n  consolidationPolicy: WhenEmpty\n  consolidateAfter: soon\n", `disruption.consolidateAfter "soon"`},
		{"bad policy", "disruption:\n  consolidationPolicy: WhenUnderutilized\n  consolidateAfter: 1m\n", `disruption.consolidationPolicy "WhenUnderutilized"`},
		{"bad budget nodes", base + "  budgets:\n  - nodes: 150%\n", `disruption.budgets[0].nodes "150%"`},
		{"schedule without duration", base + "  budgets:\n  - nodes: \"0\"\n    schedule: \"@daily\"\n", "disruption.budgets[0]: schedule and duration must be set together"},
		{"bad schedule", base + "  budgets:\n  - nodes: \"0\"\n    schedule: \"9am\"\n    duration: 8h\n", `disruption.budgets[0].schedule "9am"`},
		{"bad reason", base + "  budgets:\n  - nodes: \"1\"\n    reasons: [Expired]\n", `disruption.budgets[0].reasons: "Expired"`},
		{"bad expireAfter", base + "expireAfter: forever\n", `expireAfter "forever"`},
		{"bad tgp", base + "terminationGracePeriod: -1h\n", `terminationGracePeriod "-1h"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProfile([]byte(tt.yaml), "p", "p.yaml")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "p.yaml") {
				t.Errorf("error = %v, want one starting with the file and containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParseProfile(f *testing.F) {
	for _, name := range []string{"dev", "staging", "prod"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "overlays", name, ProfileFileName))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("disruption: {consolidateAfter: 1m, consolidationPolicy: WhenEmpty, budgets: [{nodes: '1', schedule: '@daily', duration: 1h}]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProfile(b, "fuzz", "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if p.Disruption.ConsolidationPolicy == "" {
			t.Fatal("accepted a profile without a consolidation policy")
		}
	})
}

func TestRenderPatch(t *testing.T) {
	np := &karpv1.NodePool{}
	np.Name = "a"
	tests := []struct {
		name, tmpl, want string
		empty            bool
	}{
		{"ok", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {{ .NodePool.Name }}\nspec:\n  weight: 5\n", "", false},
		{"empty rendering writes no patch", "{{ if false }}x{{ end }}\n  \n", "", true},
		{"other name", "kind: NodePool\nmetadata:\n  name: b\n", `patches NodePool "b" instead`, false},
		{"other kind", "kind: EC2NodeClass\nmetadata:\n  name: a\n", `patches EC2NodeClass "a" instead`, false},
		{"not yaml", "kind: [\n", "is not valid YAML", false},
		{"missing key", "{{ .Nope }}", "render", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := template.Must(template.New("t.yaml.tmpl").Option("missingkey=error").Funcs(templateFuncs).Parse(tt.tmpl))
			b, err := renderPatch(patchTemplate{name: "t.yaml.tmpl", tmpl: tm}, &patchData{NodePool: np}, karpv1.NodePoolKind, "a")
			switch {
			case tt.want != "":
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error = %v, want %q", err, tt.want)
				}
			case err != nil:
				t.Fatal(err)
			case tt.empty != (b == nil):
				t.Errorf("patch = %q, empty want %v", b, tt.empty)
			}
		})
	}
}
