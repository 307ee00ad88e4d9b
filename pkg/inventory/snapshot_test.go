package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() Inventory {
	return Inventory{
		Cluster:    Cluster{Name: "demo", Region: "us-east-1", AuthenticationMode: "CONFIG_MAP"},
		NodeGroups: []NodeGroup{{Name: "apps", Kind: SelfManaged, ASGName: "apps-asg", InstanceTypes: []string{"m5.large"}, CapacityType: CapacityOnDemand, Zones: []string{"us-east-1a"}}},
		Nodes:      []Node{{Name: "ip-10-0-0-1", NodeGroup: "apps", InstanceType: "m5.large", Ready: true}},
		Pods:       []Pod{{Namespace: "default", Name: "web-1", NodeName: "ip-10-0-0-1", OwnerKind: OwnerDeployment, OwnerName: "web"}},
	}
}

func TestSnapshotRoundTripIsDeterministic(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "snapshot.json")
	if err := NewSnapshot(sample(), at).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSnapshotFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	again, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(again) {
		t.Fatalf("re-encoding a loaded snapshot changed it:\n%s\n---\n%s", first, again)
	}
	if s.Inventory.Pods[0].OwnerName != "web" {
		t.Fatalf("pod owner lost: %+v", s.Inventory.Pods[0])
	}
}

func TestBadSnapshotsAreNamed(t *testing.T) {
	good, _ := NewSnapshot(sample(), time.Unix(0, 0)).Marshal()
	for name, tc := range map[string]struct{ data, want string }{
		"empty":         {"", "empty file"},
		"truncated":     {string(good[:len(good)/2]), "truncated"},
		"syntax":        {"{\n  \"kind\": \"InventorySnapshot\",\n  oops\n}", "line 3"},
		"other version": {strings.Replace(string(good), SnapshotAPIVersion, "karpenter-migrate.io/v9", 1), "apiVersion \"karpenter-migrate.io/v9\" is not supported"},
		"other kind":    {`{"apiVersion":"v1","kind":"ConfigMap"}`, "kind \"ConfigMap\""},
		"wrong type":    {strings.Replace(string(good), `"minSize": 0`, `"minSize": "zero"`, 1), "field inventory.nodeGroups.minSize"},
		"unknown field": {strings.Replace(string(good), `"asgName"`, `"asgNmae"`, 1), "asgNmae"},
		"dangling node": {strings.Replace(string(good), `"nodeGroup": "apps"`, `"nodeGroup": "gone"`, 1), "nodeGroup \"gone\" is not in inventory.nodeGroups"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.json")
			os.WriteFile(path, []byte(tc.data), 0o600)
			_, err := ReadSnapshotFile(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v; want it to name %s and contain %q", err, path, tc.want)
			}
		})
	}
}

func FuzzParseSnapshot(f *testing.F) {
	good, _ := NewSnapshot(sample(), time.Unix(0, 0)).Marshal()
	f.Add(good)
	f.Add([]byte(`{"apiVersion":"karpenter-migrate.io/v1alpha1","kind":"InventorySnapshot","inventory":{"cluster":{"name":"x"},"pods":[{"nodeName":"n"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSnapshot(b)
		if err == nil && s.Inventory.Cluster.Name == "" {
			t.Fatal("accepted a snapshot without a cluster name")
		}
	})
}
