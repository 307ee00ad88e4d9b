package discover_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// euAccount is a cluster in eu-west-1 with one group of two m5.large
// nodes, and the region's offerings, spot price history and price list:
// c5.large is offered in eu-west-1a only and is not in use. The price list
// also holds us-east-1's m5.large, which must not be read for eu-west-1.
func euAccount(now time.Time) *awsfake.Account {
	a := &awsfake.Account{Region: "eu-west-1"}
	a.EKS.Clusters = []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: awssdk.String("shop"), Version: awssdk.String("1.31"),
		Arn: awssdk.String("arn:aws:eks:eu-west-1:123456789012:cluster/shop")}}}
	g := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String("web"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(4), DesiredCapacity: awssdk.Int32(2),
		AvailabilityZones: []string{"eu-west-1a", "eu-west-1b"},
		Tags:              []astypes.TagDescription{{Key: awssdk.String(inventory.TagCAEnabled), Value: awssdk.String("true")}, {Key: awssdk.String(inventory.TagCAPrefix + "shop"), Value: awssdk.String("owned")}}}
	for i, z := range []string{"eu-west-1a", "eu-west-1b"} {
		g.Instances = append(g.Instances, astypes.Instance{InstanceId: awssdk.String([]string{"i-0a", "i-0b"}[i]), InstanceType: awssdk.String("m5.large"),
			AvailabilityZone: awssdk.String(z), LifecycleState: astypes.LifecycleStateInService})
	}
	a.AutoScaling.Groups = []astypes.AutoScalingGroup{g}
	offered := map[string][]string{"m5.large": {"eu-west-1a", "eu-west-1b"}, "c5.large": {"eu-west-1a"}}
	for _, it := range []string{"c5.large", "m5.large"} {
		a.EC2.InstanceTypes = append(a.EC2.InstanceTypes, ec2types.InstanceTypeInfo{InstanceType: ec2types.InstanceType(it),
			VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(2)}, MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(4096)},
			ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}}})
		for _, z := range offered[it] {
			a.EC2.InstanceTypeOfferings = append(a.EC2.InstanceTypeOfferings, ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(it),
				Location: awssdk.String(z), LocationType: ec2types.LocationTypeAvailabilityZone})
		}
	}
	spot := func(it, zone, price string) ec2types.SpotPrice {
		return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(it), AvailabilityZone: awssdk.String(zone), SpotPrice: awssdk.String(price),
			ProductDescription: ec2types.RIProductDescriptionLinuxUnix, Timestamp: awssdk.Time(now.Add(-5 * time.Minute))}
	}
	a.EC2.SpotPrices = []ec2types.SpotPrice{spot("m5.large", "eu-west-1a", "0.0402"), spot("m5.large", "eu-west-1b", "0.0388"), spot("c5.large", "eu-west-1a", "0.0351")}
	a.Pricing.Products = []string{
		awsfake.EC2OnDemandProduct("eu-west-1", "m5.large", 0.107, nil),
		awsfake.EC2OnDemandProduct("eu-west-1", "c5.large", 0.107, nil),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.096, nil),
	}
	return a
}

// euSources are discover's clients for eu-west-1, reading prices through
// the real catalog source (EC2 in the region, the Price List API in
// eu-central-1), all against srv.
func euSources(t *testing.T, srv *awsfake.Server, now time.Time) discover.Sources {
	t.Helper()
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{Region: "eu-west-1", EndpointURL: srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := kmaws.NewClients(cfg)
	prices := kmaws.NewCatalogSource(cfg)
	prices.Now = func() time.Time { return now }
	return discover.Sources{AutoScaling: c.AutoScaling, EC2: c.EC2, EKS: c.EKS, Prices: prices}
}

// TestPricesOfTheClusterRegion: discover records the region's live
// offerings and prices with their source and time; the catalogue built
// from the inventory prices with them, and a second discover within the
// day reads them from the cache.
func TestPricesOfTheClusterRegion(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	srv := awsfake.New(euAccount(now))
	t.Cleanup(srv.Close)
	src := euSources(t, srv, now)
	cache := &catalog.Cache{Dir: t.TempDir()}
	var steps []string
	inv, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "shop", Region: "eu-west-1", Now: func() time.Time { return now },
		PriceCache: cache, Progress: func(s string) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(steps, "instance types, offerings and prices of eu-west-1") || slices.Contains(steps, "spot prices") {
		t.Errorf("steps %v: want the region's prices, and no separate spot step", steps)
	}
	p := inv.Prices
	if p == nil || p.Region != "eu-west-1" || p.Source != inventory.PricesLive || !p.FetchedAt.Equal(now) || p.Note != "" {
		t.Fatalf("prices recorded: %+v, want eu-west-1 live at %s", p, now)
	}
	if p.OnDemand["m5.large"] != 0.107 || !slices.Equal(p.Zones["c5.large"], []string{"eu-west-1a"}) {
		t.Errorf("on-demand %v zones %v", p.OnDemand, p.Zones)
	}
	want := []inventory.SpotPrice{{InstanceType: "c5.large", Zone: "eu-west-1a", Price: 0.0351}, {InstanceType: "m5.large", Zone: "eu-west-1a", Price: 0.0402}, {InstanceType: "m5.large", Zone: "eu-west-1b", Price: 0.0388}}
	if !slices.Equal(inv.SpotPrices, want) {
		t.Errorf("spot prices %v, want every type's: %v", inv.SpotPrices, want)
	}
	if w := catalog.PriceWarning(inv); w != "" {
		t.Errorf("warning with the region's prices: %s", w)
	}
	cat, err := catalog.ForInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := cat.Price("m5.large", catalog.CapacityTypeOnDemand, "eu-west-1b"); got != 0.107 {
		t.Errorf("m5.large on demand in eu-west-1b = %v, want the region's 0.107", got)
	}
	if _, ok := cat.Price("c5.large", catalog.CapacityTypeOnDemand, "eu-west-1b"); ok {
		t.Error("c5.large priced in eu-west-1b, where it is not offered")
	}
	snap, err := inventory.ParseSnapshot(mustMarshal(t, inv))
	if err != nil || snap.Inventory.Prices.OnDemand["m5.large"] != 0.107 {
		t.Fatalf("the prices do not survive the snapshot: %v", err)
	}

	calls := srv.Calls("pricing", "GetProducts") + srv.Calls("ec2", "DescribeInstanceTypes")
	again, err := discover.Run(context.Background(), src, discover.Options{ClusterName: "shop", Region: "eu-west-1", Now: func() time.Time { return now.Add(time.Hour) }, PriceCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("pricing", "GetProducts") + srv.Calls("ec2", "DescribeInstanceTypes") - calls; n != 0 || !again.Prices.FetchedAt.Equal(now) {
		t.Errorf("second discover within the day: %d price calls, prices of %s; want the cached ones", n, again.Prices.FetchedAt)
	}
}

// TestPricesDenied: without pricing:GetProducts discover still succeeds,
// records why there are no live prices, reads the spot prices of the types
// in use, and the catalogue falls back on the embedded list with a warning.
func TestPricesDenied(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	srv := awsfake.New(euAccount(now))
	t.Cleanup(srv.Close)
	srv.SetFault("pricing", "GetProducts", awsfake.Fault{Deny: true})
	inv, err := discover.Run(context.Background(), euSources(t, srv, now), discover.Options{ClusterName: "shop", Region: "eu-west-1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	p := inv.Prices
	if p == nil || p.Source != inventory.PricesEmbedded || p.Region != "eu-west-1" || !strings.Contains(p.Note, "pricing:GetProducts") {
		t.Fatalf("prices recorded: %+v, want embedded with the denied action", p)
	}
	if len(inv.SpotPrices) != 2 || inv.SpotPrices[0].InstanceType != "m5.large" {
		t.Errorf("spot prices %v, want m5.large's in both zones (the type in use)", inv.SpotPrices)
	}
	w := catalog.PriceWarning(inv)
	for _, want := range []string{"no live prices were read for eu-west-1", "pricing:GetProducts", "embedded us-east-1 on-demand list prices", "which are not eu-west-1's"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q: %s", want, w)
		}
	}
}

func mustMarshal(t *testing.T, inv *inventory.Inventory) []byte {
	t.Helper()
	b, err := inventory.NewSnapshot(*inv, time.Unix(0, 0)).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
