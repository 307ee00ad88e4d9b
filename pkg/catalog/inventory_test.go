package catalog

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// euInventory is a cluster in eu-west-1a/b with the region's prices as
// discover records them: m5.large offered in both zones, c5.large only in
// eu-west-1a, and one spot price.
func euInventory() *inventory.Inventory {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	return &inventory.Inventory{
		Cluster:    inventory.Cluster{Name: "shop", Region: "eu-west-1"},
		NodeGroups: []inventory.NodeGroup{{Name: "web", Zones: []string{"eu-west-1b", "eu-west-1a"}}},
		SpotPrices: []inventory.SpotPrice{{InstanceType: "m5.large", Zone: "eu-west-1b", Price: 0.031}},
		Prices: &inventory.Prices{
			PriceSource: inventory.PriceSource{Region: "eu-west-1", Source: inventory.PricesLive, FetchedAt: at},
			OnDemand:    map[string]float64{"m5.large": 0.107, "c5.large": 0.096},
			Zones:       map[string][]string{"m5.large": {"eu-west-1a", "eu-west-1b"}, "c5.large": {"eu-west-1a"}},
		},
	}
}

func TestForInventoryUsesTheRegionsPrices(t *testing.T) {
	inv := euInventory()
	cat, err := ForInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Region() != "eu-west-1" || !slices.Equal(cat.Zones(), []string{"eu-west-1a", "eu-west-1b"}) {
		t.Errorf("region %s zones %v, want eu-west-1 and the node group's zones", cat.Region(), cat.Zones())
	}
	for _, tc := range []struct {
		it, ct, zone string
		want         float64
		ok           bool
	}{
		{"m5.large", CapacityTypeOnDemand, "eu-west-1a", 0.107, true},
		{"m5.large", CapacityTypeSpot, "eu-west-1b", 0.031, true},
		{"m5.large", CapacityTypeSpot, "eu-west-1a", 0.107 * DefaultSpotRatio, true}, // no history there: estimated from the region's price
		{"c5.large", CapacityTypeOnDemand, "eu-west-1a", 0.096, true},
		{"c5.large", CapacityTypeOnDemand, "eu-west-1b", 0, false}, // not offered there
		{"m5.xlarge", CapacityTypeOnDemand, "", 0, false},          // not offered in the region at all
	} {
		got, ok := cat.Price(tc.it, tc.ct, tc.zone)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Price(%s, %s, %q) = %v, %v; want %v, %v", tc.it, tc.ct, tc.zone, got, ok, tc.want, tc.ok)
		}
	}
	if it, _ := cat.Get("m5.large"); it.Labels[LabelRegion] != "eu-west-1" {
		t.Errorf("region label %q", it.Labels[LabelRegion])
	}
	if w := PriceWarning(inv); w != "" {
		t.Errorf("live prices of the region warn: %s", w)
	}
	if got := PricesUsed(inv); got != inv.Prices.PriceSource {
		t.Errorf("PricesUsed = %+v, want the recorded %+v", got, inv.Prices.PriceSource)
	}
}

// TestForInventoryOffline: without the region's live prices the embedded
// us-east-1 list prices the cluster, in the cluster's own region and zones,
// and the warning names both regions and why.
func TestForInventoryOffline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*inventory.Inventory)
		wants []string
	}{
		{"no prices recorded", func(inv *inventory.Inventory) { inv.Prices = nil },
			[]string{"no live prices were read for eu-west-1;", "embedded us-east-1 on-demand list prices (" + EmbeddedPricesDate + "), which are not eu-west-1's", "pricing:GetProducts"}},
		{"prices denied", func(inv *inventory.Inventory) {
			inv.Prices = &inventory.Prices{PriceSource: inventory.PriceSource{Region: "eu-west-1", Source: inventory.PricesEmbedded, Note: "grant pricing:GetProducts"}}
		}, []string{"no live prices were read for eu-west-1 (grant pricing:GetProducts)"}},
		{"prices of another region", func(inv *inventory.Inventory) { inv.Cluster.Region = "ap-northeast-2"; inv.NodeGroups[0].Zones = nil },
			[]string{"no live prices were read for ap-northeast-2 (the snapshot's prices are for eu-west-1, not ap-northeast-2)", "which are not ap-northeast-2's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := euInventory()
			tc.edit(inv)
			cat, err := ForInventory(inv)
			if err != nil {
				t.Fatal(err)
			}
			w := PriceWarning(inv)
			for _, want := range tc.wants {
				if !strings.Contains(w, want) {
					t.Errorf("warning lacks %q:\n%s", want, w)
				}
			}
			zone := cat.Zones()[0]
			if !strings.HasPrefix(zone, inv.Cluster.Region) {
				t.Errorf("zones %v are not in %s", cat.Zones(), inv.Cluster.Region)
			}
			if got, _ := cat.Price("m5.xlarge", CapacityTypeOnDemand, zone); got != 0.192 {
				t.Errorf("m5.xlarge on demand = %v, want the embedded 0.192", got)
			}
			used := PricesUsed(inv)
			if used.Source != inventory.PricesEmbedded || used.Region != DefaultRegion || used.FetchedAt.Format(time.DateOnly) != EmbeddedPricesDate {
				t.Errorf("PricesUsed = %+v, want the embedded us-east-1 list of %s", used, EmbeddedPricesDate)
			}
		})
	}

	// Live offerings but no on-demand prices (the Price List API answered
	// with none): the embedded on-demand prices stand in, and it says so.
	inv := euInventory()
	inv.Prices.OnDemand = nil
	if w := PriceWarning(inv); !strings.Contains(w, "gave no on-demand prices for eu-west-1") {
		t.Errorf("warning = %q", w)
	}
	cat, err := ForInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := cat.Price("c5.large", CapacityTypeOnDemand, "eu-west-1b"); ok {
		t.Errorf("c5.large in eu-west-1b = %v; the live offerings still say it is not there", got)
	}
}

// TestInstanceLimitsHoldEveryType keeps inventory's bounds on requests and
// capacities true: the largest types meet them, no type exceeds them.
func TestInstanceLimitsHoldEveryType(t *testing.T) {
	var maxCPU, maxMiB int64
	for _, in := range Embedded() {
		maxCPU, maxMiB = max(maxCPU, int64(in.VCPU)), max(maxMiB, in.MemoryMiB)
	}
	if got := inventory.MaxInstanceCPU.Value(); got != maxCPU {
		t.Errorf("inventory.MaxInstanceCPU = %d, the largest type has %d vCPUs", got, maxCPU)
	}
	if got := inventory.MaxInstanceMemory.Value(); got != maxMiB<<20 {
		t.Errorf("inventory.MaxInstanceMemory = %d bytes, the largest type has %d MiB", got, maxMiB)
	}
}
