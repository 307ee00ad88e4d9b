package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheBinDirMatchesBuildScript keeps the Go side and build.sh agreeing
// on where the binaries live.
func TestCacheBinDirMatchesBuildScript(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KM_CACHE", t.TempDir())
	out, err := exec.Command(filepath.Join(root, controlPlaneDir, "build.sh"), "--print-dir").Output()
	if err != nil {
		t.Fatalf("build.sh --print-dir: %v", err)
	}
	got, err := cacheBinDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Errorf("cacheBinDir = %s, build.sh writes to %s", got, want)
	}
}

func TestFindBinariesNamesMissingOnes(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, binEtcd), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KM_BIN_DIR", dir)
	if got, err := findBinaries(root, binEtcd); err != nil || got != dir {
		t.Errorf("findBinaries(etcd) = %q, %v; want %q", got, err, dir)
	}
	_, err = findBinaries(root, binEtcd, binAPIServer, binKwok)
	if err == nil {
		t.Fatal("findBinaries with missing binaries succeeded")
	}
	for _, want := range []string{"kube-apiserver, kwok", "make controlplane", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestKwokNodeLabels(t *testing.T) {
	tests := []struct {
		name   string
		spec   NodeSpec
		labels map[string]string
		absent []string
	}{
		{
			name: "node group on demand",
			spec: NodeSpec{Name: "ng-0", Zone: "eu-west-1b", NodeGroup: "workers", InstanceType: "c5.large"},
			labels: map[string]string{
				"topology.kubernetes.io/zone":      "eu-west-1b",
				"topology.kubernetes.io/region":    "eu-west-1",
				"node.kubernetes.io/instance-type": "c5.large",
				LabelNodeGroup:                     "workers",
				LabelEKSCapacityType:               "ON_DEMAND",
				"kubernetes.io/hostname":           "ng-0",
			},
			absent: []string{LabelKarpenterCapacityType},
		},
		{
			name:   "spot without node group",
			spec:   NodeSpec{Name: "k-0", CapacityType: "spot", Labels: map[string]string{"team": "a"}},
			labels: map[string]string{LabelKarpenterCapacityType: "spot", "team": "a", "topology.kubernetes.io/zone": "us-east-1a"},
			absent: []string{LabelNodeGroup, LabelEKSCapacityType},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := KwokNode(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.labels {
				if got := n.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			for _, k := range tt.absent {
				if v, ok := n.Labels[k]; ok {
					t.Errorf("label %s = %q, want it absent", k, v)
				}
			}
			if n.Annotations[KwokAnnotation] != "fake" {
				t.Errorf("annotation %s = %q, want fake", KwokAnnotation, n.Annotations[KwokAnnotation])
			}
			zone := n.Labels["topology.kubernetes.io/zone"]
			if id := n.Spec.ProviderID; !strings.HasPrefix(id, "aws:///"+zone+"/i-") || len(id) != len("aws:///"+zone+"/i-")+17 {
				t.Errorf("providerID = %q, want aws:///%s/i-<17 hex digits>", id, zone)
			}
		})
	}
	if _, err := KwokNode(NodeSpec{Name: "x", CapacityType: "reserved"}); err == nil {
		t.Error("capacity type reserved accepted")
	}
}
