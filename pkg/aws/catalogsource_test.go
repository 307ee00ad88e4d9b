package aws_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// ec2InfoOf is the DescribeInstanceTypes entry AWS would return for a
// catalogue type.
func ec2InfoOf(in catalog.Info) ec2types.InstanceTypeInfo {
	arch := ec2types.ArchitectureTypeX8664
	if in.Arch == "arm64" {
		arch = ec2types.ArchitectureTypeArm64
	}
	it := ec2types.InstanceTypeInfo{
		InstanceType:  ec2types.InstanceType(in.Name),
		VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(int32(in.VCPU))},
		MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(in.MemoryMiB)},
		ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
		Hypervisor:    ec2types.InstanceTypeHypervisor(in.Hypervisor),
		BareMetal:     awssdk.Bool(in.BareMetal),
	}
	if in.GPUCount > 0 {
		it.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{
			Count: awssdk.Int32(int32(in.GPUCount)), Name: awssdk.String(in.GPUName), Manufacturer: awssdk.String(in.GPUManufacturer),
			MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: awssdk.Int32(int32(in.GPUMemoryMiB))},
		}}}
	}
	if in.AcceleratorCount > 0 {
		if strings.HasPrefix(in.AcceleratorName, "inferentia") || strings.HasPrefix(in.AcceleratorName, "trainium") {
			it.NeuronInfo = &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{{Name: awssdk.String(in.AcceleratorName), Count: awssdk.Int32(int32(in.AcceleratorCount))}}}
		} else {
			it.InferenceAcceleratorInfo = &ec2types.InferenceAcceleratorInfo{Accelerators: []ec2types.InferenceDeviceInfo{{Name: awssdk.String(in.AcceleratorName), Count: awssdk.Int32(int32(in.AcceleratorCount))}}}
		}
	}
	if in.MaxENIs > 0 {
		it.NetworkInfo = &ec2types.NetworkInfo{
			MaximumNetworkInterfaces:  awssdk.Int32(int32(in.MaxENIs + 2)), // all cards; the default card's limit wins
			Ipv4AddressesPerInterface: awssdk.Int32(int32(in.IPv4PerENI)),
			DefaultNetworkCardIndex:   awssdk.Int32(0),
			NetworkCards: []ec2types.NetworkCardInfo{
				{NetworkCardIndex: awssdk.Int32(1), MaximumNetworkInterfaces: awssdk.Int32(2)},
				{NetworkCardIndex: awssdk.Int32(0), MaximumNetworkInterfaces: awssdk.Int32(int32(in.MaxENIs))},
			},
		}
	}
	return it
}

// TestInfoFromEC2MatchesEmbedded converts every embedded type to its
// DescribeInstanceTypes shape and back: names split into category,
// generation, family and size exactly as the embedded data (taken from
// Karpenter's docs) has them, and every other fact survives.
func TestInfoFromEC2MatchesEmbedded(t *testing.T) {
	embedded := catalog.Embedded()
	if len(embedded) < 1000 {
		t.Fatalf("embedded catalogue has %d types", len(embedded))
	}
	for _, want := range embedded {
		got, ok := kmaws.InfoFromEC2(ec2InfoOf(want))
		want.OnDemandPrice = 0
		if !ok || got != want {
			t.Errorf("%s:\n got %+v (ok %v)\nwant %+v", want.Name, got, ok, want)
		}
	}
}

func TestInfoFromEC2(t *testing.T) {
	gpu := ec2types.InstanceTypeInfo{
		InstanceType:  "g5.xlarge",
		VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(4)},
		MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(16384)},
		ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeI386, ec2types.ArchitectureTypeX8664}},
		GpuInfo: &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Count: awssdk.Int32(1), Name: awssdk.String("A10G"), Manufacturer: awssdk.String("NVIDIA"),
			MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: awssdk.Int32(24576)}}}},
		NetworkInfo: &ec2types.NetworkInfo{MaximumNetworkInterfaces: awssdk.Int32(4), Ipv4AddressesPerInterface: awssdk.Int32(15)},
	}
	for _, tc := range []struct {
		name string
		in   ec2types.InstanceTypeInfo
		want catalog.Info
		ok   bool
	}{
		{"GPU names lower-kebab, ENIs without cards", gpu, catalog.Info{Name: "g5.xlarge", Family: "g5", Category: "g", Generation: 5, Size: "xlarge", VCPU: 4, MemoryMiB: 16384,
			Arch: "amd64", GPUCount: 1, GPUName: "a10g", GPUManufacturer: "nvidia", GPUMemoryMiB: 24576, MaxENIs: 4, IPv4PerENI: 15, MaxPodsENI: 58}, true},
		{"high-memory name", ec2types.InstanceTypeInfo{InstanceType: "u-6tb1.metal", VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(448)},
			MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(6291456)}, ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{"x86_64"}}, BareMetal: awssdk.Bool(true)},
			catalog.Info{Name: "u-6tb1.metal", Family: "u-6tb1", Category: "u", Generation: 1, Size: "metal", VCPU: 448, MemoryMiB: 6291456, Arch: "amd64", BareMetal: true}, true},
		{"neuron device", ec2types.InstanceTypeInfo{InstanceType: "inf2.xlarge", VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(4)},
			MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(16384)}, ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{"x86_64"}},
			NeuronInfo: &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{{Name: awssdk.String("Inferentia2"), Count: awssdk.Int32(1)}}}},
			catalog.Info{Name: "inf2.xlarge", Family: "inf2", Category: "inf", Generation: 2, Size: "xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", AcceleratorName: "inferentia2", AcceleratorCount: 1}, true},
		{"i386 only", ec2types.InstanceTypeInfo{InstanceType: "t1.micro", VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(1)},
			MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(627)}, ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{"i386"}}}, catalog.Info{}, false},
		{"no vCPU figure", ec2types.InstanceTypeInfo{InstanceType: "x.large", MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(1024)},
			ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{"arm64"}}}, catalog.Info{}, false},
		{"empty", ec2types.InstanceTypeInfo{}, catalog.Info{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := kmaws.InfoFromEC2(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v (ok %v)\nwant %+v (ok %v)", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPricingRegion(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1": "us-east-1", "us-west-2": "us-east-1", "ca-central-1": "us-east-1", "sa-east-1": "us-east-1",
		"eu-west-1": "eu-central-1", "ap-southeast-2": "ap-south-1", "cn-north-1": "cn-northwest-1", "": "us-east-1",
	} {
		if got := kmaws.PricingRegion(region); got != want {
			t.Errorf("PricingRegion(%q) = %q, want %q", region, got, want)
		}
	}
}

func TestParseOnDemandPrice(t *testing.T) {
	for _, tc := range []struct {
		name, doc, wantType string
		want                float64
		wantErr             string
	}{
		{"fake product", awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.096, nil), "m5.large", 0.096, ""},
		{"lowest positive dimension", `{"product":{"attributes":{"instanceType":"c5.large"}},"terms":{"OnDemand":{"a":{"priceDimensions":{
			"x":{"pricePerUnit":{"USD":"0.0000000000"}},"y":{"pricePerUnit":{"USD":"0.0850000000"}},"z":{"pricePerUnit":{"USD":"0.09"}},"w":{"pricePerUnit":{"CNY":"0.5"}}}}}}}`, "c5.large", 0.085, ""},
		{"no on-demand terms", `{"product":{"attributes":{"instanceType":"c5.large"}},"terms":{"Reserved":{}}}`, "c5.large", 0, ""},
		{"not JSON", `{"product":`, "", 0, "not aws_v1 JSON"},
		{"no instance type", `{"product":{"attributes":{}}}`, "", 0, "no product.attributes.instanceType"},
		{"bad price", `{"product":{"attributes":{"instanceType":"c5.large"}},"terms":{"OnDemand":{"t":{"priceDimensions":{"d":{"pricePerUnit":{"USD":"cheap"}}}}}}}`, "", 0, `terms.OnDemand[t].priceDimensions[d].pricePerUnit.USD = "cheap"`},
		{"negative price", `{"product":{"attributes":{"instanceType":"c5.large"}},"terms":{"OnDemand":{"t":{"priceDimensions":{"d":{"pricePerUnit":{"USD":"-1"}}}}}}}`, "", 0, "is not a price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, price, err := kmaws.ParseOnDemandPrice(tc.doc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || it != tc.wantType || math.Abs(price-tc.want) > 1e-12 {
				t.Errorf("got (%q, %v, %v), want (%q, %v)", it, price, err, tc.wantType, tc.want)
			}
		})
	}
}

func FuzzParseOnDemandPrice(f *testing.F) {
	f.Add(awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.096, nil))
	f.Add(`{"product":{"attributes":{"instanceType":"x"}},"terms":{"OnDemand":{"t":{"priceDimensions":{"d":{"pricePerUnit":{"USD":"NaN"}}}}}}}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, doc string) {
		it, price, err := kmaws.ParseOnDemandPrice(doc)
		if err != nil {
			return
		}
		if it == "" || price < 0 || math.IsNaN(price) || math.IsInf(price, 0) {
			t.Fatalf("accepted %q as (%q, %v)", doc, it, price)
		}
	})
}

// fakeCatalogAccount seeds an account with the first n embedded types,
// offered in us-east-1a–c except m5.large (not in c), spot prices for
// m5.large, and on-demand prices that differ from the embedded list.
func fakeCatalogAccount(n int, now time.Time) *awsfake.Account {
	acct := &awsfake.Account{Region: "us-east-1"}
	embedded := catalog.Embedded()
	var names []string
	for _, in := range embedded[:n] {
		names = append(names, in.Name)
	}
	for _, in := range embedded {
		if in.Name == "m5.large" || in.Name == "m5.metal" {
			names = append(names, in.Name)
		}
	}
	byName := map[string]catalog.Info{}
	for _, in := range embedded {
		byName[in.Name] = in
	}
	for _, name := range names {
		acct.EC2.InstanceTypes = append(acct.EC2.InstanceTypes, ec2InfoOf(byName[name]))
		for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			if name == "m5.large" && z == "us-east-1c" {
				continue
			}
			acct.EC2.InstanceTypeOfferings = append(acct.EC2.InstanceTypeOfferings, ec2types.InstanceTypeOffering{
				InstanceType: ec2types.InstanceType(name), Location: awssdk.String(z), LocationType: ec2types.LocationTypeAvailabilityZone})
		}
	}
	spot := func(zone, product, price string, age time.Duration) ec2types.SpotPrice {
		return ec2types.SpotPrice{InstanceType: "m5.large", AvailabilityZone: awssdk.String(zone), ProductDescription: ec2types.RIProductDescription(product),
			SpotPrice: awssdk.String(price), Timestamp: awssdk.Time(now.Add(-age))}
	}
	acct.EC2.SpotPrices = []ec2types.SpotPrice{
		spot("us-east-1a", "Linux/UNIX", "0.0500", 40*time.Minute),
		spot("us-east-1a", "Linux/UNIX", "0.0400", 10*time.Minute), // latest wins
		spot("us-east-1a", "Linux/UNIX", "0.0100", 3*time.Hour),    // outside the window
		spot("us-east-1b", "Linux/UNIX (Amazon VPC)", "0.0450", 20*time.Minute),
		spot("us-east-1b", "Windows", "0.0100", 5*time.Minute), // not Linux
	}
	acct.Pricing.Products = []string{
		awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.1, nil),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.2, map[string]string{"operatingSystem": "Windows"}),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.3, map[string]string{"tenancy": "Dedicated"}),
		awsfake.EC2OnDemandProduct("eu-west-1", "m5.large", 0.4, nil),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.metal", 5.0, map[string]string{"tenancy": "Dedicated", "productFamily": "Compute Instance (bare metal)"}),
	}
	for _, name := range names[:min(150, len(names))] { // enough to page GetProducts
		if name != "m5.large" {
			acct.Pricing.Products = append(acct.Pricing.Products, awsfake.EC2OnDemandProduct("us-east-1", name, 1.5, nil))
		}
	}
	return acct
}

// newSource points a CatalogSource built by NewCatalogSource at srv.
func newSource(t *testing.T, srv *awsfake.Server, region string, now time.Time) *kmaws.CatalogSource {
	t.Helper()
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{
		Region:      region,
		EndpointURL: srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		MaxBackoff:  time.Millisecond,
		RetryMode:   awssdk.RetryModeStandard,
	})
	if err != nil {
		t.Fatal(err)
	}
	src := kmaws.NewCatalogSource(cfg)
	src.Now = func() time.Time { return now }
	return src
}

// TestCatalogSourceFetch reads a region through the real SDK clients and the
// awsfake wire protocols, and layers the snapshot over the embedded
// catalogue.
func TestCatalogSourceFetch(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	srv := awsfake.New(fakeCatalogAccount(250, now))
	t.Cleanup(srv.Close)
	src := newSource(t, srv, "us-east-1", now)

	snap, err := catalog.Fetch(context.Background(), src, "us-east-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(snap.Types); got != 252 {
		t.Errorf("types = %d, want 252", got)
	}
	if got := len(snap.Offerings); got != 3*252-1 {
		t.Errorf("offerings = %d, want %d", got, 3*252-1)
	}
	wantSpot := []inventory.SpotPrice{{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.04}, {InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.045}}
	if len(snap.SpotPrices) != len(wantSpot) || snap.SpotPrices[0] != wantSpot[0] || snap.SpotPrices[1] != wantSpot[1] {
		t.Errorf("spot prices = %v, want %v", snap.SpotPrices, wantSpot)
	}
	if p := snap.OnDemandPrices["m5.large"]; p != 0.1 {
		t.Errorf("m5.large on-demand = %v, want 0.1 (Linux, shared tenancy, us-east-1)", p)
	}
	if p := snap.OnDemandPrices["m5.metal"]; p != 5.0 {
		t.Errorf("m5.metal on-demand = %v, want 5.0 (bare metal from dedicated tenancy)", p)
	}
	if got := len(snap.OnDemandPrices); got != 152 {
		t.Errorf("on-demand prices = %d, want 152", got)
	}
	// Paginators: 252 types at 100 a page, 755 offerings at 1,000, 151
	// shared products at 100 a page and one page of dedicated ones.
	for op, want := range map[string]int{"ec2:DescribeInstanceTypes": 3, "ec2:DescribeInstanceTypeOfferings": 1, "ec2:DescribeSpotPriceHistory": 1, "pricing:GetProducts": 3} {
		service, action, _ := strings.Cut(op, ":")
		if got := srv.Calls(service, action); got != want {
			t.Errorf("%s calls = %d, want %d", op, got, want)
		}
	}

	cat, err := catalog.New(catalog.Options{Live: snap})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		it, ct, zone string
		want         float64
		ok           bool
	}{
		{"m5.large", catalog.CapacityTypeSpot, "us-east-1a", 0.04, true},
		{"m5.large", catalog.CapacityTypeSpot, "us-east-1b", 0.045, true},
		{"m5.large", catalog.CapacityTypeOnDemand, "us-east-1a", 0.1, true},
		{"m5.large", catalog.CapacityTypeOnDemand, "us-east-1c", 0, false}, // not offered there
		{"m5.metal", catalog.CapacityTypeOnDemand, "us-east-1b", 5.0, true},
	} {
		got, ok := cat.Price(tc.it, tc.ct, tc.zone)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Price(%s, %s, %s) = %v, %v; want %v, %v", tc.it, tc.ct, tc.zone, got, ok, tc.want, tc.ok)
		}
	}
}

// TestCatalogSourceRefresh caches a fetch on disk, serves the next refresh
// from the cache without a call, and on a failed refetch returns the stale
// snapshot with an error naming the denied IAM action.
func TestCatalogSourceRefresh(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	srv := awsfake.New(fakeCatalogAccount(20, now), awsfake.WithFault("ec2", "DescribeInstanceTypes", awsfake.Fault{Throttle: 1}))
	t.Cleanup(srv.Close)
	src := newSource(t, srv, "us-east-1", now)
	cache := catalog.Cache{Dir: t.TempDir(), MaxAge: time.Hour}

	first, err := catalog.Refresh(ctx, src, cache, "us-east-1", now)
	if err != nil {
		t.Fatalf("refresh (one throttle, retried): %v", err)
	}
	calls := srv.TotalCalls()
	again, err := catalog.Refresh(ctx, src, cache, "us-east-1", now.Add(30*time.Minute))
	if err != nil || srv.TotalCalls() != calls {
		t.Fatalf("fresh cache: err %v, %d new calls", err, srv.TotalCalls()-calls)
	}
	if len(again.Types) != len(first.Types) || !again.FetchedAt.Equal(first.FetchedAt) {
		t.Errorf("cached snapshot differs: %d types fetched at %v, want %d at %v", len(again.Types), again.FetchedAt, len(first.Types), first.FetchedAt)
	}

	srv.SetFault("pricing", "GetProducts", awsfake.Fault{Deny: true})
	stale, err := catalog.Refresh(ctx, src, cache, "us-east-1", now.Add(2*time.Hour))
	var denied *kmaws.AccessDeniedError
	if !errors.As(err, &denied) || denied.Action != "pricing:GetProducts" {
		t.Fatalf("denied pricing: err = %v, want an AccessDeniedError for pricing:GetProducts", err)
	}
	if stale == nil || !stale.FetchedAt.Equal(first.FetchedAt) {
		t.Errorf("denied refetch returned %v, want the stale cached snapshot", stale)
	}

	src.Pricing = nil // an isolated VPC: no on-demand lookups, embedded prices stay
	snap, err := catalog.Fetch(ctx, src, "us-east-1", now)
	if err != nil || snap.OnDemandPrices != nil {
		t.Errorf("without a pricing client: err %v, prices %v; want none", err, snap.OnDemandPrices)
	}
}
