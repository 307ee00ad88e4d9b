package tui

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseEKSContext(t *testing.T) {
	tests := []struct {
		in              string
		region, cluster string
		ok              bool
	}{
		{"arn:aws:eks:eu-west-1:111122223333:cluster/prod", "eu-west-1", "prod", true},
		{"arn:aws-cn:eks:cn-north-1:111122223333:cluster/a:b", "cn-north-1", "a:b", true},
		{"kind-kind", "", "", false},
		{"arn:aws:iam::111122223333:role/x", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range tests {
		region, cluster, ok := parseEKSContext(tc.in)
		if region != tc.region || cluster != tc.cluster || ok != tc.ok {
			t.Errorf("parseEKSContext(%q) = %q, %q, %v", tc.in, region, cluster, ok)
		}
	}
}

func FuzzParseEKSContext(f *testing.F) {
	f.Add("arn:aws:eks:eu-west-1:111122223333:cluster/prod")
	f.Add("arn:::::")
	f.Fuzz(func(t *testing.T, s string) {
		region, cluster, ok := parseEKSContext(s)
		if !ok && (region != "" || cluster != "") {
			t.Fatalf("not ok but returned %q %q", region, cluster)
		}
	})
}

func TestShellWrap(t *testing.T) {
	tests := []struct {
		cmd   string
		width int
		want  string
	}{
		{"karpenter-migrate apply --plan p.yaml --yes", 80, "karpenter-migrate apply --plan p.yaml --yes"},
		{"karpenter-migrate apply --plan /out/plan.yaml --dir /out/karpenter --yes", 40,
			"karpenter-migrate apply \\\n    --plan /out/plan.yaml \\\n    --dir /out/karpenter --yes"},
		{"karpenter-migrate plan --env prod -f /o/plan.yaml", 30, "karpenter-migrate plan \\\n    --env prod \\\n    -f /o/plan.yaml"},
	}
	for _, tc := range tests {
		got := shellWrap(tc.cmd, tc.width)
		if got != tc.want {
			t.Errorf("shellWrap(%q, %d) =\n%s\nwant\n%s", tc.cmd, tc.width, got, tc.want)
		}
		if joined := strings.Join(strings.Fields(strings.ReplaceAll(got, "\\\n", "")), " "); joined != tc.cmd {
			t.Errorf("unwrapped %q, want the command back", joined)
		}
	}
}

func TestDetectDefaults(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	const cfg = `apiVersion: v1
kind: Config
current-context: arn:aws:eks:eu-west-1:111122223333:cluster/prod
contexts:
- name: arn:aws:eks:eu-west-1:111122223333:cluster/prod
  context: {cluster: prod, user: prod}
- name: kind-dev
  context: {cluster: dev, user: dev}
clusters:
- name: prod
  cluster: {server: "https://prod.example"}
- name: dev
  cluster: {server: "https://dev.example"}
users:
- name: prod
  user: {}
- name: dev
  user: {}
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_PROFILE", "ops")
	t.Setenv("AWS_REGION", "us-west-2")
	tests := []struct {
		name  string
		flags Connection
		want  Connection
	}{
		{"from the EKS context", Connection{}, Connection{Context: "arn:aws:eks:eu-west-1:111122223333:cluster/prod", Cluster: "prod", Region: "eu-west-1", Profile: "ops"}},
		{"flags win", Connection{Context: "kind-dev", Cluster: "dev-eks", Environment: "dev"}, Connection{Context: "kind-dev", Cluster: "dev-eks", Region: "us-west-2", Profile: "ops", Environment: "dev"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DetectDefaults(kubeconfig, tc.flags)
			if d.Connection != tc.want {
				t.Errorf("got %+v, want %+v", d.Connection, tc.want)
			}
			if !slices.Equal(d.Contexts, []string{"arn:aws:eks:eu-west-1:111122223333:cluster/prod", "kind-dev"}) || !slices.Contains(d.Profiles, "ops") {
				t.Errorf("choices %v %v", d.Contexts, d.Profiles)
			}
		})
	}
}
