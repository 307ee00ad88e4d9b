package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
		"syntax":        {"{\n  \"kind\": \"InventorySnapshot\",\n  oops\n}", "line 3, column 3: invalid character 'o'"},
		"other version": {strings.Replace(string(good), SnapshotAPIVersion, "karpenter-migrate.io/v9", 1), "apiVersion \"karpenter-migrate.io/v9\" is not supported"},
		"other kind":    {`{"apiVersion":"v1","kind":"ConfigMap"}`, "kind \"ConfigMap\""},
		"wrong type":    {strings.Replace(string(good), `"minSize": 0`, `"minSize": "zero"`, 1), `line 16, column 26: inventory.nodeGroups[0] (apps): minSize "zero": want a whole number`},
		"unknown field": {strings.Replace(string(good), `"asgName"`, `"asgNmae"`, 1), `inventory.nodeGroups[0] (apps): unknown field "asgNmae"`},
		"trailing data": {string(good) + "{}", "after top-level value"},
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

// TestBadValuesNameObjectAndField: a quantity that does not parse, and
// requests or capacities that are negative or no instance could have, are
// rejected on load with the JSON path and the object they belong to.
func TestBadValuesNameObjectAndField(t *testing.T) {
	inv := sample()
	inv.Pods[0].Namespace, inv.Pods[0].Name = "api", "billing-x"
	inv.Pods[0].Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	inv.Nodes[0].Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	inv.DaemonSets = []DaemonSet{{Namespace: "kube-system", Name: "agent", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}
	good, err := NewSnapshot(inv, time.Unix(0, 0)).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSnapshot(good); err != nil {
		t.Fatalf("the unbroken snapshot: %v", err)
	}
	for name, tc := range map[string]struct{ old, new, want string }{
		"malformed pod request":  {`"cpu": "250m"`, `"cpu": "abc"`, `inventory.pods[0] (api/billing-x): requests.cpu "abc" is not a quantity`},
		"malformed node gpu":     {`"nvidia.com/gpu": "1"`, `"nvidia.com/gpu": "one"`, `inventory.nodes[0] (ip-10-0-0-1): capacity["nvidia.com/gpu"] "one" is not a quantity`},
		"malformed takenAt":      {`"takenAt": "1970-01-01T00:00:00Z"`, `"takenAt": "yesterday"`, `takenAt "yesterday"`},
		"negative pod request":   {`"cpu": "250m"`, `"cpu": "-1"`, `inventory.pods[0] (api/billing-x): requests.cpu -1 is negative`},
		"absurd pod request":     {`"cpu": "250m"`, `"cpu": "4000"`, `inventory.pods[0] (api/billing-x): requests.cpu 4k is more than any EC2 instance type has (896 CPUs)`},
		"absurd pod memory":      {`"memory": "512Mi"`, `"memory": "64Ti"`, `inventory.pods[0] (api/billing-x): requests.memory 64Ti is more than any EC2 instance type has (32Ti)`},
		"huge exponent":          {`"cpu": "250m"`, `"cpu": "1e9999"`, `requests.cpu 1e9999 is more than any EC2 instance type has`},
		"negative node capacity": {`"memory": "8Gi"`, `"memory": "-8Gi"`, `inventory.nodes[0] (ip-10-0-0-1): capacity.memory -8Gi is negative`},
		"absurd extended":        {`"nvidia.com/gpu": "1"`, `"nvidia.com/gpu": "1E"`, `capacity.nvidia.com/gpu 1E is too large to be real`},
		"negative daemonset":     {`"cpu": "50m"`, `"cpu": "-50m"`, `inventory.daemonSets[0] (kube-system/agent): requests.cpu -50m is negative`},
		"negative group size":    {`"maxSize": 0`, `"maxSize": -3`, `inventory.nodeGroups[0] (apps): sizes min 0, desired 0, max -3`},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.old) {
				t.Fatalf("fixture lacks %s", tc.old)
			}
			_, err := ParseSnapshot([]byte(strings.Replace(string(good), tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant one containing %s", err, tc.want)
			}
		})
	}
}

// namesWhere reports whether an error from ParseSnapshot says where the
// problem is: a line and column, a JSON path from the document's root, or
// that the document is empty.
func namesWhere(msg string) bool {
	for _, p := range []string{"line ", "inventory", "takenAt", "apiVersion", "kind ", "empty file", "top level"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func FuzzParseSnapshot(f *testing.F) {
	inv := sample()
	inv.Pods[0].Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	inv.Nodes[0].Capacity = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}
	inv.SpotPrices = []SpotPrice{{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.04}}
	inv.Prices = &Prices{PriceSource: PriceSource{Region: "us-east-1", Source: PricesLive}, OnDemand: map[string]float64{"m5.large": 0.096}, Zones: map[string][]string{"m5.large": {"us-east-1a"}}}
	good, _ := NewSnapshot(inv, time.Unix(0, 0)).Marshal()
	f.Add(good)
	f.Add([]byte(`{"apiVersion":"karpenter-migrate.io/v1alpha1","kind":"InventorySnapshot","inventory":{"cluster":{"name":"x"},"pods":[{"nodeName":"n"}]}}`))
	f.Add([]byte(`{"apiVersion":"karpenter-migrate.io/v1alpha1","kind":"InventorySnapshot","inventory":{"cluster":{"name":"x"},"pods":[{"name":"p","requests":{"cpu":"-1"}}]}}`))
	f.Add([]byte(`{"apiVersion":"karpenter-migrate.io/v1alpha1","kind":"InventorySnapshot","inventory":{"cluster":{"name":"x"},"nodes":[{"name":"n","capacity":{"cpu":"x"}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSnapshot(b)
		if err != nil {
			if !namesWhere(err.Error()) {
				t.Fatalf("error does not say where: %v", err)
			}
			return
		}
		if s.Inventory.Cluster.Name == "" {
			t.Fatal("accepted a snapshot without a cluster name")
		}
		if err := s.Inventory.Validate(); err != nil {
			t.Fatalf("accepted a snapshot that does not validate: %v", err)
		}
		for _, p := range s.Inventory.Pods {
			for name, q := range p.Requests {
				if q.Sign() < 0 || (name == corev1.ResourceCPU && q.Cmp(MaxInstanceCPU) > 0) {
					t.Fatalf("accepted pod %s/%s requesting %s %s", p.Namespace, p.Name, name, q.String())
				}
			}
		}
	})
}
