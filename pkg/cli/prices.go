package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// offlineUsage is the help of the --offline flag of discover and plan.
const offlineUsage = "read no prices from AWS: the embedded us-east-1 list prices stand in, with a warning"

// livePrices is where discover reads the region's offerings and prices
// (nil with --offline), and the disk cache that keeps them for a day
// (nil when the user has no cache directory).
func livePrices(cfg awssdk.Config, offline bool) (catalog.Source, *catalog.Cache) {
	if offline {
		return nil, nil
	}
	src := kmaws.NewCatalogSource(cfg)
	dir, err := os.UserCacheDir()
	if err != nil {
		return src, nil
	}
	return src, &catalog.Cache{Dir: filepath.Join(dir, "karpenter-migrate", "catalog")}
}

// inventoryCatalog is the catalogue that prices inv (catalog.ForInventory),
// warning on stderr when it is not the region's live prices.
func (g *GlobalOptions) inventoryCatalog(inv *inventory.Inventory) (*catalog.Catalog, error) {
	if w := catalog.PriceWarning(inv); w != "" {
		g.say(slog.LevelWarn, eventWarning, "warning: ", w, slog.String("region", inv.Cluster.Region))
	}
	return catalog.ForInventory(inv)
}

// describePrices names the prices a plan's figures use.
func describePrices(p *inventory.PriceSource) string {
	if p == nil {
		return ""
	}
	if p.Source == inventory.PricesEmbedded {
		return fmt.Sprintf(" (embedded %s list prices of %s)", p.Region, p.FetchedAt.Format("2006-01-02"))
	}
	return fmt.Sprintf(" (%s prices read live %s)", p.Region, p.FetchedAt.UTC().Format("2006-01-02 15:04 MST"))
}
