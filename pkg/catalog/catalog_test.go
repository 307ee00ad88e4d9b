package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func ptr[T any](v T) *T { return &v }

// TestGeneratedMatchesData guards the go generate step: the compiled-in
// catalogue must equal data/aws-instance-types.json.
func TestGeneratedMatchesData(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("data", "aws-instance-types.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []Info
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != 1377 {
		t.Fatalf("data has %d types, README says 1,377", len(want))
	}
	if !reflect.DeepEqual(want, Embedded()) {
		t.Fatal("zz_generated_instancetypes.go is stale: run go generate ./pkg/catalog")
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if c.Len() != 1377 || c.Region() != "us-east-1" || !reflect.DeepEqual(c.Zones(), []string{"us-east-1a", "us-east-1b", "us-east-1c"}) {
		t.Fatalf("Default: %d types, region %s, zones %v", c.Len(), c.Region(), c.Zones())
	}
	withOfferings := 0
	for _, it := range c.Types() {
		if len(it.Offerings) > 0 {
			withOfferings++
			if len(it.Offerings) != 6 {
				t.Errorf("%s has %d offerings, want 3 zones × 2 capacity types", it.Name, len(it.Offerings))
			}
		}
		// The ENI formula must reproduce the published max pods.
		if it.MaxPodsENI > 0 && it.MaxPods(Kubelet{}) != int64(it.MaxPodsENI) {
			t.Errorf("%s: MaxPods = %d, data says %d", it.Name, it.MaxPods(Kubelet{}), it.MaxPodsENI)
		}
	}
	if withOfferings != 1352 {
		t.Errorf("%d types have offerings; 1,352 have a price", withOfferings)
	}
	if _, ok := c.Get("hpc7a.12xlarge"); !ok {
		t.Error("unpriced types must still be listed")
	}
	if p, ok := c.Price("hpc7a.12xlarge", "", ""); ok {
		t.Errorf("unpriced type has price %v", p)
	}
}

func TestAllocatable(t *testing.T) {
	c := Default()
	q := resource.MustParse
	tests := []struct {
		name      string
		typ       string
		kubelet   Kubelet
		cpu, mem  string
		pods      int64
		storage   string
		extraName corev1.ResourceName
		extra     int64
	}{
		// Values published on Karpenter's instance-types reference page.
		{name: "m5.large AL2023", typ: "m5.large", cpu: "1930m", mem: "6903Mi", pods: 29},
		{name: "m5.24xlarge tiered cpu", typ: "m5.24xlarge", cpu: "95690m", mem: "355262Mi", pods: 737},
		{name: "arm64 loses 64Mi", typ: "m6g.medium", cpu: "940m", mem: "3286Mi", pods: 8},
		{name: "maxPods keeps ENI memory overhead on AL2023", typ: "m5.large", kubelet: Kubelet{MaxPods: ptr[int32](110)}, cpu: "1930m", mem: "6903Mi", pods: 110},
		{name: "Bottlerocket reserves for actual max pods", typ: "m5.large", kubelet: Kubelet{AMIFamily: AMIFamilyBottlerocket, MaxPods: ptr[int32](110)}, cpu: "1930m", mem: "6012Mi", pods: 110},
		{name: "podsPerCore caps pods", typ: "m5.large", kubelet: Kubelet{PodsPerCore: ptr[int32](4)}, cpu: "1930m", mem: "6903Mi", pods: 8},
		{name: "podsPerCore ignored on Bottlerocket", typ: "m5.large", kubelet: Kubelet{AMIFamily: AMIFamilyBottlerocket, PodsPerCore: ptr[int32](4)}, cpu: "1930m", mem: "6903Mi", pods: 29},
		{name: "Windows has 110 pods", typ: "m5.large", kubelet: Kubelet{AMIFamily: AMIFamilyWindows2022}, cpu: "1930m", mem: "6012Mi", pods: 110},
		{name: "kubeReserved and systemReserved", typ: "m5.large", kubelet: Kubelet{KubeReserved: map[string]string{"cpu": "200m"}, SystemReserved: map[string]string{"memory": "300Mi"}}, cpu: "1800m", mem: "6603Mi", pods: 29},
		{name: "evictionHard quantity", typ: "m5.large", kubelet: Kubelet{EvictionHard: map[string]string{"memory.available": "500Mi"}}, cpu: "1930m", mem: "6503Mi", pods: 29},
		{name: "evictionHard 100% means none", typ: "m5.large", kubelet: Kubelet{EvictionHard: map[string]string{"memory.available": "100%"}}, cpu: "1930m", mem: "7003Mi", pods: 29},
		{name: "reserved ENIs", typ: "m5.large", kubelet: Kubelet{ReservedENIs: 1}, cpu: "1930m", mem: "7002Mi", pods: 20},
		{name: "ephemeral storage 10% + 1Gi", typ: "m5.large", kubelet: Kubelet{EphemeralStorageGiB: 100}, cpu: "1930m", mem: "6903Mi", pods: 29, storage: "89Gi"},
		{name: "nvidia gpu", typ: "g5.xlarge", cpu: "3920m", mem: "14162Mi", pods: 58, extraName: ResourceNVIDIAGPU, extra: 1},
		{name: "neuron", typ: "inf2.xlarge", cpu: "3920m", mem: "14162Mi", pods: 58, extraName: ResourceNeuron, extra: 1},
		{name: "unknown ENIs fall back to 110", typ: "hpc7a.12xlarge", cpu: "23870m", pods: 110},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := c.Get(tc.typ)
			if !ok {
				t.Fatalf("%s not in catalogue", tc.typ)
			}
			a, err := it.Allocatable(tc.kubelet)
			if err != nil {
				t.Fatal(err)
			}
			if got := a[corev1.ResourceCPU]; got.Cmp(q(tc.cpu)) != 0 {
				t.Errorf("cpu = %s, want %s", got.String(), tc.cpu)
			}
			if tc.mem != "" {
				if got := a[corev1.ResourceMemory]; got.Cmp(q(tc.mem)) != 0 {
					t.Errorf("memory = %dMi, want %s", got.Value()>>20, tc.mem)
				}
			}
			if got := a[corev1.ResourcePods]; got.Value() != tc.pods {
				t.Errorf("pods = %d, want %d", got.Value(), tc.pods)
			}
			if tc.storage != "" {
				if got := a[corev1.ResourceEphemeralStorage]; got.Cmp(q(tc.storage)) != 0 {
					t.Errorf("ephemeral-storage = %s, want %s", got.String(), tc.storage)
				}
			}
			if tc.extraName != "" {
				if got := a[tc.extraName]; got.Value() != tc.extra {
					t.Errorf("%s = %d, want %d", tc.extraName, got.Value(), tc.extra)
				}
			}
		})
	}
}

func TestKubeletValidate(t *testing.T) {
	for _, k := range []Kubelet{
		{AMIFamily: "Ubuntu"},
		{MaxPods: ptr[int32](-1)},
		{KubeReserved: map[string]string{"cpu": "lots"}},
		{EvictionHard: map[string]string{"memory.available": "150%"}},
	} {
		it, _ := Default().Get("m5.large")
		if _, err := it.Allocatable(k); err == nil {
			t.Errorf("Allocatable(%+v) accepted invalid settings", k)
		}
	}
}

func TestLabels(t *testing.T) {
	c := Default()
	g5, _ := c.Get("g5.xlarge")
	want := map[string]string{
		LabelInstanceType: "g5.xlarge", LabelArch: "amd64", LabelOS: "linux", LabelRegion: "us-east-1",
		LabelInstanceCategory: "g", LabelInstanceFamily: "g5", LabelInstanceGeneration: "5", LabelInstanceSize: "xlarge",
		LabelInstanceCPU: "4", LabelInstanceMemory: "16384", LabelInstanceHypervisor: "nitro", LabelInstanceCapabilityFlex: "false",
		LabelInstanceGPUCount: "1", LabelInstanceGPUName: "a10g", LabelInstanceGPUManufacturer: "nvidia", LabelInstanceGPUMemory: "22888",
	}
	if !reflect.DeepEqual(g5.Labels, want) {
		t.Errorf("g5.xlarge labels:\n got %v\nwant %v", g5.Labels, want)
	}
	m5, _ := c.Get("m5.large")
	if _, ok := m5.Labels[LabelInstanceGPUCount]; ok {
		t.Error("a type without GPUs must leave the GPU labels undefined")
	}
	known := map[string]bool{}
	for _, k := range WellKnownLabels() {
		known[k] = true
	}
	for _, it := range c.Types() {
		for k := range it.Labels {
			if !known[k] {
				t.Fatalf("%s has label %s missing from WellKnownLabels", it.Name, k)
			}
		}
	}
}

func TestPricing(t *testing.T) {
	tests := []struct {
		name     string
		pricing  Pricing
		typ, ct  string
		zone     string
		want     float64
		wantNone bool
	}{
		{name: "list on-demand", typ: "m5.large", ct: CapacityTypeOnDemand, want: 0.096},
		{name: "spot estimated from list", typ: "m5.large", ct: CapacityTypeSpot, want: 0.096 * DefaultSpotRatio},
		{name: "spot ratio configurable", pricing: Pricing{SpotRatio: 0.5}, typ: "m5.large", ct: CapacityTypeSpot, want: 0.048},
		{name: "discount on on-demand", pricing: Pricing{DiscountPercent: 25}, typ: "m5.large", ct: CapacityTypeOnDemand, want: 0.072},
		{name: "discount not on spot", pricing: Pricing{DiscountPercent: 25}, typ: "m5.large", ct: CapacityTypeSpot, want: 0.096 * DefaultSpotRatio},
		{name: "negotiated beats discount", pricing: Pricing{DiscountPercent: 25, OnDemand: map[string]float64{"m5.large": 0.05}}, typ: "m5.large", ct: CapacityTypeOnDemand, want: 0.05},
		{name: "zonal spot price", pricing: Pricing{SpotPrices: []inventory.SpotPrice{{InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.02}}}, typ: "m5.large", ct: CapacityTypeSpot, zone: "us-east-1b", want: 0.02},
		{name: "zonal spot price is per zone", pricing: Pricing{SpotPrices: []inventory.SpotPrice{{InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.02}}}, typ: "m5.large", ct: CapacityTypeSpot, zone: "us-east-1a", want: 0.096 * DefaultSpotRatio},
		{name: "cheapest zone", pricing: Pricing{SpotPrices: []inventory.SpotPrice{{InstanceType: "m5.large", Zone: "us-east-1c", Price: 0.01}}}, typ: "m5.large", ct: CapacityTypeSpot, want: 0.01},
		{name: "negotiated price makes an unpriced type launchable", pricing: Pricing{OnDemand: map[string]float64{"hpc7a.12xlarge": 3}}, typ: "hpc7a.12xlarge", ct: CapacityTypeOnDemand, want: 3},
		{name: "unpriced type", typ: "hpc7a.12xlarge", ct: CapacityTypeOnDemand, wantNone: true},
		{name: "unknown type", typ: "m99.huge", ct: CapacityTypeOnDemand, wantNone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Options{Pricing: tc.pricing})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := c.Price(tc.typ, tc.ct, tc.zone)
			if tc.wantNone {
				if ok {
					t.Fatalf("price = %v, want none", got)
				}
				return
			}
			if !ok || abs(got-tc.want) > 1e-12 {
				t.Fatalf("price = %v (ok %v), want %v", got, ok, tc.want)
			}
		})
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{CapacityTypes: []string{"reserved-ish"}},
		{Pricing: Pricing{DiscountPercent: 100}},
		{Pricing: Pricing{SpotRatio: 2}},
		{Pricing: Pricing{OnDemand: map[string]float64{"m5.large": -1}}},
		{VMMemoryOverheadPercent: 1.5},
		{Types: []Info{{Name: "x"}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted invalid options", o)
		}
	}
}

func TestSimilar(t *testing.T) {
	c := Default()
	got := c.Similar("m5.xlarge", SimilarOptions{})
	if len(got) < 5 || got[0].Name != "m5.xlarge" {
		t.Fatalf("Similar(m5.xlarge) = %d types, first %v", len(got), got)
	}
	for i, it := range got[1:] {
		if it.VCPU != 4 || it.MemoryMiB != 16384 || it.Arch != "amd64" || it.GPUCount != 0 || it.Generation < 5 {
			t.Errorf("Similar returned %s (%d vCPU, %d MiB, %s, gen %d)", it.Name, it.VCPU, it.MemoryMiB, it.Arch, it.Generation)
		}
		if i > 0 && got[i].Offerings[0].Price > it.Offerings[0].Price {
			t.Errorf("not sorted by price at %s", it.Name)
		}
	}
	wide := c.Similar("m5.xlarge", SimilarOptions{MemoryTolerance: 1})
	if len(wide) <= len(got) {
		t.Errorf("a memory tolerance must widen the set: %d <= %d", len(wide), len(got))
	}
	if c.Similar("nope", SimilarOptions{}) != nil {
		t.Error("unknown type must give nil")
	}
}

func TestLiveSnapshot(t *testing.T) {
	live := &Snapshot{
		Types:          []Info{{Name: "x9.large", Family: "x9", Category: "x", Generation: 9, Size: "large", VCPU: 2, MemoryMiB: 4096, Arch: "amd64"}},
		Offerings:      []ZoneOffering{{InstanceType: "x9.large", Zone: "us-east-1a"}, {InstanceType: "m5.large", Zone: "us-east-1b"}},
		OnDemandPrices: map[string]float64{"x9.large": 0.5, "m5.large": 0.2},
		SpotPrices:     []inventory.SpotPrice{{InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.03}},
	}
	c, err := New(Options{Live: live})
	if err != nil {
		t.Fatal(err)
	}
	x, ok := c.Get("x9.large")
	if !ok || len(x.Offerings) != 2 || x.Offerings[0].Zone != "us-east-1a" {
		t.Fatalf("live-only type: %+v", x)
	}
	m5, _ := c.Get("m5.large")
	want := []Offering{{Zone: "us-east-1b", CapacityType: CapacityTypeSpot, Price: 0.03}, {Zone: "us-east-1b", CapacityType: CapacityTypeOnDemand, Price: 0.2}}
	if !reflect.DeepEqual(m5.Offerings, want) {
		t.Errorf("m5.large offerings = %+v, want %+v", m5.Offerings, want)
	}
	if c5, _ := c.Get("c5.large"); len(c5.Offerings) != 0 {
		t.Errorf("a type the live data does not offer must have no offerings, got %v", c5.Offerings)
	}
}

func TestRefreshCache(t *testing.T) {
	dir := t.TempDir()
	cache := Cache{Dir: dir, MaxAge: time.Hour}
	src := &MemorySource{Types: []Info{{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "amd64"}}, OnDemand: map[string]float64{"m5.large": 0.1}}
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	ctx := context.Background()

	s, err := Refresh(ctx, src, cache, "us-east-1", t0)
	if err != nil || src.Calls != 1 || len(s.Types) != 1 {
		t.Fatalf("first refresh: %v, calls %d", err, src.Calls)
	}
	if _, err := Refresh(ctx, src, cache, "us-east-1", t0.Add(30*time.Minute)); err != nil || src.Calls != 1 {
		t.Fatalf("fresh cache must not refetch: %v, calls %d", err, src.Calls)
	}
	src.Err = errors.New("throttled")
	stale, err := Refresh(ctx, src, cache, "us-east-1", t0.Add(2*time.Hour))
	if err == nil || stale == nil || !strings.Contains(err.Error(), "throttled") {
		t.Fatalf("a failed refetch must return the stale snapshot and the error: %v, %v", stale, err)
	}
	src.Err = nil
	if _, err := Refresh(ctx, src, cache, "us-east-1", t0.Add(2*time.Hour)); err != nil || src.Calls != 3 {
		t.Fatalf("stale cache must refetch: %v, calls %d", err, src.Calls)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog-us-east-1.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Refresh(ctx, src, cache, "us-east-1", t0); err == nil || !strings.Contains(err.Error(), "catalog-us-east-1.json") {
		t.Fatalf("a corrupt cache must be reported with its path: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Fetch(cctx, src, "us-east-1", t0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch must honour cancellation: %v", err)
	}
}
