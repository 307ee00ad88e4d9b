package action

import (
	"context"
	"fmt"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Discover reads a cluster from AWS and, unless the configuration has no
// Kubernetes client, from Kubernetes.
type Discover struct {
	Cluster         string
	IncludeUserData bool
	// Prices and PriceCache refresh the region's instance types and prices
	// (nil: the embedded catalogue's).
	Prices     catalog.Source
	PriceCache *catalog.Cache
	// Progress is told each stage as it starts.
	Progress func(stage string)
	// Snapshot, when set, is where the inventory is written.
	Snapshot string
}

// Discover runs d: the one place discover.Run is wired.
func (c *Configuration) Discover(ctx context.Context, d Discover) (*inventory.Inventory, error) {
	sdk := kmaws.NewClients(c.AWS)
	src := discover.Sources{AutoScaling: sdk.AutoScaling, EC2: sdk.EC2, EKS: sdk.EKS, Kube: c.Kube, Prices: d.Prices}
	inv, err := discover.Run(ctx, src, discover.Options{
		ClusterName: d.Cluster, Region: c.AWS.Region, IncludeUserData: d.IncludeUserData,
		Progress: d.Progress, PriceCache: d.PriceCache, Now: c.now,
	})
	if err != nil {
		return nil, err
	}
	if d.Snapshot != "" {
		if err := inventory.NewSnapshot(*inv, c.now()).WriteFile(d.Snapshot); err != nil {
			return nil, fmt.Errorf("write snapshot: %w", err)
		}
	}
	return inv, nil
}
