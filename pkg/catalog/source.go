package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Source is where live catalogue data comes from. The AWS implementation
// wraps EC2 DescribeInstanceTypes, DescribeInstanceTypeOfferings (location
// type availability-zone), DescribeSpotPriceHistory (latest price per type
// and zone) and the pricing API's GetProducts (Linux, shared tenancy, used
// capacity) — that is pkg/aws.CatalogSource, kept out of this package so
// that the engine and generate do not link the SDK; MemorySource is the
// in-memory one.
type Source interface {
	InstanceTypes(ctx context.Context) ([]Info, error)
	Offerings(ctx context.Context) ([]ZoneOffering, error)
	SpotPrices(ctx context.Context) ([]inventory.SpotPrice, error)
	OnDemandPrices(ctx context.Context) (map[string]float64, error)
}

// ZoneOffering says a type can be launched in a zone.
type ZoneOffering struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
}

// SnapshotVersion is the version of the Snapshot JSON this build writes.
const SnapshotVersion = 1

// Snapshot is a refreshed view of one region, layered over the embedded data
// with Options.Live.
type Snapshot struct {
	Version        int                   `json:"version"`
	Region         string                `json:"region"`
	FetchedAt      time.Time             `json:"fetchedAt"`
	Types          []Info                `json:"types,omitempty"`
	Offerings      []ZoneOffering        `json:"offerings,omitempty"`
	SpotPrices     []inventory.SpotPrice `json:"spotPrices,omitempty"`
	OnDemandPrices map[string]float64    `json:"onDemandPrices,omitempty"`
}

// Fetch reads everything from src into a Snapshot stamped with now.
func Fetch(ctx context.Context, src Source, region string, now time.Time) (*Snapshot, error) {
	s := &Snapshot{Version: SnapshotVersion, Region: region, FetchedAt: now.UTC()}
	var err error
	if s.Types, err = src.InstanceTypes(ctx); err != nil {
		return nil, fmt.Errorf("describe instance types in %s: %w", region, err)
	}
	if s.Offerings, err = src.Offerings(ctx); err != nil {
		return nil, fmt.Errorf("describe instance type offerings in %s: %w", region, err)
	}
	if s.SpotPrices, err = src.SpotPrices(ctx); err != nil {
		return nil, fmt.Errorf("describe spot price history in %s: %w", region, err)
	}
	if s.OnDemandPrices, err = src.OnDemandPrices(ctx); err != nil {
		return nil, fmt.Errorf("get on-demand prices for %s: %w", region, err)
	}
	return s, nil
}

// Cache keeps Snapshots on disk, one file per region.
type Cache struct {
	// Dir holds the files, e.g. ~/.cache/karpenter-migrate/catalog.
	Dir string
	// MaxAge is how long a snapshot stays fresh; 0 means 24h.
	MaxAge time.Duration
}

func (c Cache) path(region string) string {
	return filepath.Join(c.Dir, "catalog-"+region+".json")
}

// Load returns the cached snapshot for region and whether it is still fresh
// at now; a missing file is (nil, false, nil).
func (c Cache) Load(region string, now time.Time) (*Snapshot, bool, error) {
	p := c.path(region)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read catalogue cache: %w", err)
	}
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, false, fmt.Errorf("parse catalogue cache %s: %w (delete the file to refetch)", p, err)
	}
	if s.Version != SnapshotVersion {
		return nil, false, nil // written by another build; refetch
	}
	maxAge := c.MaxAge
	if maxAge == 0 {
		maxAge = 24 * time.Hour
	}
	return &s, now.Sub(s.FetchedAt) < maxAge, nil
}

// Save writes the snapshot atomically.
func (c Cache) Save(s *Snapshot) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("create catalogue cache directory: %w", err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode catalogue snapshot: %w", err)
	}
	if err := atomicfile.WriteFile(c.path(s.Region), data, 0o644); err != nil {
		return fmt.Errorf("write catalogue cache: %w", err)
	}
	return nil
}

// Refresh returns the cached snapshot when fresh, otherwise fetches from src
// and caches the result. When the fetch fails and a stale snapshot exists,
// the stale one is returned together with the error, so callers can warn and
// carry on.
func Refresh(ctx context.Context, src Source, cache Cache, region string, now time.Time) (*Snapshot, error) {
	cached, fresh, err := cache.Load(region, now)
	if err != nil {
		return nil, err
	}
	if fresh {
		return cached, nil
	}
	s, err := Fetch(ctx, src, region, now)
	if err != nil {
		return cached, err
	}
	if err := cache.Save(s); err != nil {
		return s, err
	}
	return s, nil
}

// MemorySource is an in-memory Source; Err, when set, is returned by every
// call. Calls counts calls, to test caching.
type MemorySource struct {
	Types    []Info
	Zones    []ZoneOffering
	Spot     []inventory.SpotPrice
	OnDemand map[string]float64
	Err      error
	Calls    int
}

var _ Source = (*MemorySource)(nil)

// InstanceTypes implements Source.
func (m *MemorySource) InstanceTypes(ctx context.Context) ([]Info, error) {
	m.Calls++
	return m.Types, m.err(ctx)
}

// Offerings implements Source.
func (m *MemorySource) Offerings(ctx context.Context) ([]ZoneOffering, error) {
	return m.Zones, m.err(ctx)
}

// SpotPrices implements Source.
func (m *MemorySource) SpotPrices(ctx context.Context) ([]inventory.SpotPrice, error) {
	return m.Spot, m.err(ctx)
}

// OnDemandPrices implements Source.
func (m *MemorySource) OnDemandPrices(ctx context.Context) (map[string]float64, error) {
	return m.OnDemand, m.err(ctx)
}

func (m *MemorySource) err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.Err
}
