package cli

import (
	"strings"
	"testing"
)

func TestWizardRefusals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no terminal", []string{"wizard", "--sandbox"}, []string{"needs an interactive terminal", "karpenter-migrate discover --cluster", "karpenter-migrate apply --plan plan.yaml", "karpenter-migrate demo"}},
		{"no terminal, live", []string{"wizard", "--context", "prod"}, []string{"needs an interactive terminal"}},
		{"snapshot without sandbox", []string{"wizard", "--snapshot", "snapshot.json"}, []string{"--snapshot needs --sandbox"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := run(t, tc.args...)
			if code == 0 {
				t.Fatal("the wizard started without a terminal")
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestWizardHelpHasExamples(t *testing.T) {
	out, _, code := run(t, "wizard", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "wizard --sandbox") {
		t.Errorf("help (exit %d):\n%s", code, out)
	}
}
