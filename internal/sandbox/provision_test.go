package sandbox

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func toUnstructuredForTest(v any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, json.Unmarshal(b, &u.Object)
}

func testPool(name string, weight int32, families []string, capacity []string, taints []corev1.Taint) apisv1.NodePool {
	return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodePoolSpec{Weight: &weight,
		Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimTemplateSpec{Taints: taints, Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: families},
			{Key: apisv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: capacity},
		}}}}}
}

func testPods(n int, cpu, mem string, mut func(*inventory.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		ip := inventory.Pod{Namespace: "ns", Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), Requests: requests(cpu, mem)}
		if mut != nil {
			mut(&ip)
		}
		out = append(out, PodObject(ip))
	}
	return out
}

// TestProvision checks the Karpenter stand-in's decisions, made by
// pkg/engine, against the sandbox's catalog.
func TestProvision(t *testing.T) {
	s, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	gpuTaint := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	zones := []string{"us-east-1a", "us-east-1b"}
	tests := []struct {
		name          string
		pods          []*corev1.Pod
		pools         []apisv1.NodePool
		wantPods      int
		wantMaxNodes  int
		wantPool      string
		wantCapacity  string
		unschedulable int
	}{
		// Not a node per pod: the engine packs 40 half-CPU pods onto a
		// handful of m5 nodes (several mid-sized ones when that is cheaper).
		{"packs small pods on few nodes", testPods(40, "500m", "512Mi", nil),
			[]apisv1.NodePool{testPool("general", 10, []string{"m5"}, []string{"spot", "on-demand"}, nil)}, 40, 4, "general", "spot", 0},
		{"on-demand only pool launches on-demand", testPods(3, "1", "1Gi", nil),
			[]apisv1.NodePool{testPool("od", 10, []string{"c5"}, []string{"on-demand"}, nil)}, 3, 1, "od", "on-demand", 0},
		{"highest weight wins", testPods(2, "1", "1Gi", nil),
			[]apisv1.NodePool{testPool("low", 1, []string{"m5"}, []string{"spot"}, nil), testPool("high", 50, []string{"c5"}, []string{"spot"}, nil)}, 2, 1, "high", "spot", 0},
		{"tainted pool refuses intolerant pods", testPods(2, "1", "1Gi", nil),
			[]apisv1.NodePool{testPool("gpu", 10, []string{"g4dn"}, []string{"on-demand"}, gpuTaint)}, 0, 0, "", "", 2},
		{"pod bigger than any type", testPods(1, "500", "1Gi", nil),
			[]apisv1.NodePool{testPool("general", 10, []string{"m5"}, []string{"spot"}, nil)}, 0, 0, "", "", 1},
		{"nodeSelector on a pool label", testPods(1, "1", "1Gi", func(p *inventory.Pod) { p.NodeSelector = map[string]string{"karpenter.k8s.aws/instance-family": "c5"} }),
			[]apisv1.NodePool{testPool("m", 20, []string{"m5"}, []string{"spot"}, nil), testPool("c", 10, []string{"c5"}, []string{"spot"}, nil)}, 1, 1, "c", "spot", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.Provision(ProvisionRequest{Pods: tt.pods, NodePools: tt.pools, Zones: zones, Region: "us-east-1"})
			placed := 0
			for _, c := range res.Claims {
				placed += len(c.Pods)
				if c.NodePool != tt.wantPool || c.Offering.CapacityType != tt.wantCapacity {
					t.Errorf("claim %s/%s %s, want pool %s %s", c.NodePool, c.Offering.InstanceType, c.Offering.CapacityType, tt.wantPool, tt.wantCapacity)
				}
				if c.Offering.Price <= 0 {
					t.Errorf("claim %s has no price", c.Offering.InstanceType)
				}
			}
			if placed != tt.wantPods || len(res.Claims) > tt.wantMaxNodes || len(res.Unschedulable) != tt.unschedulable {
				t.Errorf("placed %d pods on %d nodes, %d unschedulable; want %d pods on <= %d nodes, %d unschedulable",
					placed, len(res.Claims), len(res.Unschedulable), tt.wantPods, tt.wantMaxNodes, tt.unschedulable)
			}
		})
	}
}

func TestCatalogPrices(t *testing.T) {
	s, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"m5.large", "m5.xlarge", "m6i.4xlarge", "c5.2xlarge", "g4dn.xlarge", "r6i.large", "m7g.xlarge"} {
		it, ok := s.Catalog().Get(name)
		if !ok {
			t.Fatalf("%s is not in the catalog", name)
		}
		od := s.price(it.Name, "us-east-1a", inventory.CapacityOnDemand)
		spot := s.price(it.Name, "us-east-1a", inventory.CapacitySpot)
		if od <= 0 || spot <= 0 || spot >= od {
			t.Errorf("%s: on-demand %v, spot %v; want 0 < spot < on-demand", it.Name, od, spot)
		}
		if spot != s.price(it.Name, "us-east-1a", inventory.CapacitySpot) {
			t.Errorf("%s: spot price not deterministic", it.Name)
		}
		alloc, capacity := allocatable(it), it.Capacity(catalog.Kubelet{})
		if alloc.Cpu().Cmp(*capacity.Cpu()) >= 0 || alloc.Memory().Cmp(*capacity.Memory()) >= 0 || alloc.Memory().Sign() <= 0 {
			t.Errorf("%s: allocatable %v not below capacity %v", it.Name, alloc, capacity)
		}
	}
	if s.price("nope.large", "us-east-1a", inventory.CapacityOnDemand) != 0 {
		t.Error("unknown type has a price")
	}
}

// TestProvisionVolumesAndLimits checks that zone-pinned volumes constrain
// the claims and that a pool at its CPU limit takes nothing.
func TestProvisionVolumesAndLimits(t *testing.T) {
	s, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool := testPool("general", 10, []string{"m5"}, []string{"spot", "on-demand"}, nil)
	pods := testPods(10, "500m", "512Mi", nil)
	zoneB := map[string]*corev1.NodeSelector{"data": {NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}}}}}}
	for _, p := range pods {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	}
	req := ProvisionRequest{Pods: pods, NodePools: []apisv1.NodePool{pool}, Zones: []string{"us-east-1a", "us-east-1b"}, Region: "us-east-1",
		Volumes: func(*corev1.Pod) map[string]*corev1.NodeSelector { return zoneB }}
	res := s.Provision(req)
	placed := 0
	for _, c := range res.Claims {
		placed += len(c.Pods)
		if c.Offering.Zone != "us-east-1b" || c.NodePool != "general" {
			t.Errorf("claim %+v: want NodePool general in us-east-1b (the volumes' zone)", c)
		}
	}
	if placed != 10 || len(res.Unschedulable) != 0 {
		t.Errorf("placed %d of 10, unschedulable %v", placed, res.Unschedulable)
	}
	pool.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	req.NodePools, req.CPUInUse = []apisv1.NodePool{pool}, map[string]int64{"general": 8}
	if res := s.Provision(req); len(res.Claims) != 0 || len(res.Unschedulable) != 10 {
		t.Errorf("pool at its limit launched %d claims, %d unschedulable", len(res.Claims), len(res.Unschedulable))
	}
}
