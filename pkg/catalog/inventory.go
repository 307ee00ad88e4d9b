package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// EmbeddedPricesDate is when the embedded us-east-1 on-demand prices were
// taken (Karpenter's fallback snapshot; see data/README.md).
const EmbeddedPricesDate = "2026-07-20"

var embeddedPricesTime, _ = time.Parse(time.DateOnly, EmbeddedPricesDate)

// ForInventory builds the catalogue a cluster is priced with: its region,
// the zones its node groups, subnets and nodes are in, the offerings and
// on-demand prices discover read from the region (inv.Prices) and the spot
// prices it read (inv.SpotPrices). Without live prices for the region the
// embedded us-east-1 list stands in, and PriceWarning says so.
func ForInventory(inv *inventory.Inventory) (*Catalog, error) {
	region := regionOf(inv)
	opts := Options{Region: region, Zones: inventoryZones(inv), Pricing: Pricing{SpotPrices: inv.SpotPrices}}
	if p := livePrices(inv); p != nil {
		live := &Snapshot{Version: SnapshotVersion, Region: p.Region, FetchedAt: p.FetchedAt, OnDemandPrices: p.OnDemand}
		zones := map[string]bool{}
		for _, it := range slices.Sorted(maps.Keys(p.Zones)) {
			for _, z := range p.Zones[it] {
				live.Offerings = append(live.Offerings, ZoneOffering{InstanceType: it, Zone: z})
				zones[z] = true
			}
		}
		opts.Live = live
		if len(opts.Zones) == 0 {
			opts.Zones = slices.Sorted(maps.Keys(zones))
		}
	}
	cat, err := New(opts)
	if err != nil {
		return nil, fmt.Errorf("instance-type catalogue for %s: %w", region, err)
	}
	return cat, nil
}

// PricesUsed says which prices ForInventory prices inv with.
func PricesUsed(inv *inventory.Inventory) inventory.PriceSource {
	if p := livePrices(inv); p != nil && len(p.OnDemand) > 0 {
		return p.PriceSource
	}
	return inventory.PriceSource{Region: DefaultRegion, Source: inventory.PricesEmbedded, FetchedAt: embeddedPricesTime, Note: missingNote(inv)}
}

// missingNote says why inv has no usable live prices, when it records why.
func missingNote(inv *inventory.Inventory) string {
	switch p := inv.Prices; {
	case p == nil:
		return ""
	case p.Region != regionOf(inv):
		return fmt.Sprintf("the snapshot's prices are for %s, not %s", p.Region, regionOf(inv))
	default:
		return p.Note
	}
}

// PriceWarning explains, when inv is not priced with live prices of its
// own region, what stands in and how to get the real ones ("" otherwise).
func PriceWarning(inv *inventory.Inventory) string {
	region := regionOf(inv)
	p := livePrices(inv)
	switch {
	case p != nil && len(p.OnDemand) > 0:
		return ""
	case p != nil:
		return fmt.Sprintf("the Price List API gave no on-demand prices for %s, so the embedded %s list prices (%s) stand in for them; offerings and spot prices are %s's, read %s",
			region, DefaultRegion, EmbeddedPricesDate, region, p.FetchedAt.UTC().Format("2006-01-02 15:04 MST"))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no live prices were read for %s", region)
	if note := missingNote(inv); note != "" {
		fmt.Fprintf(&b, " (%s)", note)
	}
	fmt.Fprintf(&b, "; $/h figures use the embedded %s on-demand list prices (%s)", DefaultRegion, EmbeddedPricesDate)
	if region != DefaultRegion {
		fmt.Fprintf(&b, ", which are not %s's", region)
	}
	fmt.Fprintf(&b, ", and estimate spot at %.0f%% of them where no spot price was read. Run discover with AWS access (ec2:DescribeInstanceTypes, ec2:DescribeInstanceTypeOfferings, ec2:DescribeSpotPriceHistory, pricing:GetProducts) to record %s's prices",
		DefaultSpotRatio*100, region)
	return b.String()
}

func regionOf(inv *inventory.Inventory) string {
	if inv.Cluster.Region != "" {
		return inv.Cluster.Region
	}
	return DefaultRegion
}

// livePrices are inv's recorded live prices when they are for its region.
func livePrices(inv *inventory.Inventory) *inventory.Prices {
	p := inv.Prices
	if p == nil || p.Source != inventory.PricesLive || p.Region != regionOf(inv) {
		return nil
	}
	return p
}

// inventoryZones are the zones the cluster's node groups, subnets and
// nodes are in, sorted (none when the inventory names none).
func inventoryZones(inv *inventory.Inventory) []string {
	seen := map[string]bool{}
	for _, g := range inv.NodeGroups {
		for _, z := range g.Zones {
			seen[z] = true
		}
	}
	for _, s := range inv.Subnets {
		seen[s.Zone] = true
	}
	for _, n := range inv.Nodes {
		seen[n.Zone] = true
	}
	delete(seen, "")
	return slices.Sorted(maps.Keys(seen))
}
