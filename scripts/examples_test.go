package scripts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// TestGitHubActionsExample checks examples/github-actions/migrate.yaml:
// one job per environment, each behind its own GitHub environment (where
// the approvals are configured), chained in order, running scripts that
// exist.
func TestGitHubActionsExample(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", "github-actions", "migrate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Needs       any    `json:"needs"`
			Environment string `json:"environment"`
			Steps       []struct {
				Run string            `json:"run"`
				Env map[string]string `json:"env"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("workflow does not parse: %v", err)
	}
	chain := []struct{ job, needs, env, phase string }{
		{"dev", "", "dev", ""},
		{"staging", "dev", "staging", ""},
		{"prod-plan", "staging", "prod", "plan"},
		{"prod", "prod-plan", "prod", "apply"},
	}
	if len(wf.Jobs) != len(chain) {
		t.Errorf("%d jobs, want %d", len(wf.Jobs), len(chain))
	}
	script := regexp.MustCompile(`^scripts/(rollout(?:-all)?\.sh) (\S+)$`)
	envs := map[string]string{}
	for _, c := range chain {
		j, ok := wf.Jobs[c.job]
		if !ok {
			t.Errorf("no job %s", c.job)
			continue
		}
		if needs, _ := j.Needs.(string); needs != c.needs {
			t.Errorf("job %s needs %v, want %q", c.job, j.Needs, c.needs)
		}
		if j.Environment == "" {
			t.Errorf("job %s has no environment to hold its approval", c.job)
		} else if other, dup := envs[j.Environment]; dup {
			t.Errorf("jobs %s and %s share environment %s: one approval would release both", other, c.job, j.Environment)
		}
		envs[j.Environment] = c.job
		ran := false
		for _, s := range j.Steps {
			m := script.FindStringSubmatch(s.Run)
			if m == nil {
				continue
			}
			ran = true
			if _, err := os.Stat(filepath.Join(root, "scripts", m[1])); err != nil {
				t.Errorf("job %s runs %s: %v", c.job, s.Run, err)
			}
			if m[2] != c.env || s.Env["PHASE"] != c.phase {
				t.Errorf("job %s runs %q with PHASE=%q, want environment %s PHASE=%q", c.job, s.Run, s.Env["PHASE"], c.env, c.phase)
			}
		}
		if !ran {
			t.Errorf("job %s does not run scripts/rollout.sh", c.job)
		}
	}
}
