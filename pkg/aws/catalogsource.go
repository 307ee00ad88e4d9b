package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// CatalogEC2API is the EC2 subset CatalogSource reads.
type CatalogEC2API interface {
	ec2.DescribeInstanceTypesAPIClient
	ec2.DescribeInstanceTypeOfferingsAPIClient
	ec2.DescribeSpotPriceHistoryAPIClient
}

// PricingAPI is the AWS Price List subset CatalogSource reads.
type PricingAPI interface {
	pricing.GetProductsAPIClient
}

// DefaultSpotWindow is how far back CatalogSource reads spot price history.
const DefaultSpotWindow = time.Hour

// CatalogSource is the live catalog.Source: EC2 DescribeInstanceTypes,
// DescribeInstanceTypeOfferings (per availability zone) and
// DescribeSpotPriceHistory (Linux/UNIX, the latest price per type and zone),
// and the Price List API's GetProducts for on-demand prices (Linux, no
// pre-installed software, used capacity; shared tenancy, with bare-metal
// prices from dedicated tenancy where shared has none), as Karpenter's AWS
// provider reads them. Every list is read with the SDK's paginators.
type CatalogSource struct {
	EC2 CatalogEC2API
	// Pricing reads on-demand prices; nil skips them (an isolated VPC), so
	// the embedded list prices stay in use.
	Pricing PricingAPI
	// Region is the region the prices are read for (the price list's
	// regionCode).
	Region string
	// SpotWindow is how far back spot price history is read (default
	// DefaultSpotWindow); the latest price per type and zone wins.
	SpotWindow time.Duration
	// Now is the clock of the spot window (default time.Now).
	Now func() time.Time
}

var _ catalog.Source = (*CatalogSource)(nil)

// PricingRegion is the Price List API endpoint region serving region, as
// Karpenter picks it: the API has endpoints in us-east-1, eu-central-1,
// ap-south-1 and cn-northwest-1 only.
func PricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "eu-"):
		return "eu-central-1"
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	default:
		return "us-east-1"
	}
}

// NewCatalogSource builds a CatalogSource for cfg's region: an EC2 client
// for cfg and a pricing client in PricingRegion(cfg.Region) (an endpoint
// override in cfg applies to both).
func NewCatalogSource(cfg awssdk.Config) *CatalogSource {
	pricingCfg := cfg.Copy()
	pricingCfg.Region = PricingRegion(cfg.Region)
	return &CatalogSource{
		EC2:     ec2.NewFromConfig(cfg),
		Pricing: pricing.NewFromConfig(pricingCfg),
		Region:  cfg.Region,
	}
}

// InstanceTypes implements catalog.Source: every type DescribeInstanceTypes
// lists with a vCPU count, memory and an x86_64 or arm64 architecture.
// On-demand prices are left to OnDemandPrices.
func (s *CatalogSource) InstanceTypes(ctx context.Context) ([]catalog.Info, error) {
	p := ec2.NewDescribeInstanceTypesPaginator(s.EC2, &ec2.DescribeInstanceTypesInput{MaxResults: awssdk.Int32(100)})
	var out []catalog.Info
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2:DescribeInstanceTypes: %w", err)
		}
		for _, it := range page.InstanceTypes {
			if in, ok := InfoFromEC2(it); ok {
				out = append(out, in)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// instanceTypeScheme splits a type name as Karpenter does: category, an
// optional high-memory size (u-6tb1), generation.
var instanceTypeScheme = regexp.MustCompile(`(^[a-z]+)(-[0-9]+tb)?([0-9]+).*\.`)

// kubeArch maps EC2 architectures to Kubernetes ones; the Mac variants
// follow the embedded catalogue (mac1 is amd64, the others arm64).
var kubeArch = map[ec2types.ArchitectureType]string{
	ec2types.ArchitectureTypeX8664:    "amd64",
	ec2types.ArchitectureTypeX8664Mac: "amd64",
	ec2types.ArchitectureTypeArm64:    "arm64",
	ec2types.ArchitectureTypeArm64Mac: "arm64",
}

// lowerKebab is Karpenter's lowerKabobCase for GPU and accelerator labels.
func lowerKebab(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "-")) }

// InfoFromEC2 converts one DescribeInstanceTypes entry into the catalogue's
// facts, deriving labels the way Karpenter's AWS provider does. ok is false
// for a type the catalogue cannot use (no vCPU or memory figure, or no
// amd64/arm64 architecture).
func InfoFromEC2(it ec2types.InstanceTypeInfo) (catalog.Info, bool) {
	name := string(it.InstanceType)
	in := catalog.Info{Name: name, Hypervisor: string(it.Hypervisor), BareMetal: awssdk.ToBool(it.BareMetal)}
	if it.VCpuInfo != nil {
		in.VCPU = int(awssdk.ToInt32(it.VCpuInfo.DefaultVCpus))
	}
	if it.MemoryInfo != nil {
		in.MemoryMiB = awssdk.ToInt64(it.MemoryInfo.SizeInMiB)
	}
	if it.ProcessorInfo != nil {
		for _, a := range it.ProcessorInfo.SupportedArchitectures {
			if k, ok := kubeArch[a]; ok {
				in.Arch = k
				break
			}
		}
	}
	if name == "" || in.VCPU <= 0 || in.MemoryMiB <= 0 || in.Arch == "" {
		return catalog.Info{}, false
	}
	if family, size, ok := strings.Cut(name, "."); ok {
		in.Family, in.Size = family, size
	}
	if m := instanceTypeScheme.FindStringSubmatch(name); m != nil {
		in.Category = m[1]
		in.Generation, _ = strconv.Atoi(m[3]) // the pattern matched digits
	} else {
		// mac-m4.metal: no generation; the category is the leading letters,
		// as Karpenter's instance-types reference lists it.
		in.Category = name[:len(name)-len(strings.TrimLeft(name, "abcdefghijklmnopqrstuvwxyz"))]
	}
	if g := it.GpuInfo; g != nil && len(g.Gpus) == 1 {
		gpu := g.Gpus[0]
		in.GPUCount = int(awssdk.ToInt32(gpu.Count))
		in.GPUName = lowerKebab(awssdk.ToString(gpu.Name))
		in.GPUManufacturer = lowerKebab(awssdk.ToString(gpu.Manufacturer))
		if gpu.MemoryInfo != nil {
			in.GPUMemoryMiB = int64(awssdk.ToInt32(gpu.MemoryInfo.SizeInMiB))
		}
	}
	switch {
	case it.NeuronInfo != nil && len(it.NeuronInfo.NeuronDevices) == 1:
		d := it.NeuronInfo.NeuronDevices[0]
		in.AcceleratorName = lowerKebab(awssdk.ToString(d.Name))
		in.AcceleratorCount = int(awssdk.ToInt32(d.Count))
	case it.InferenceAcceleratorInfo != nil && len(it.InferenceAcceleratorInfo.Accelerators) == 1:
		a := it.InferenceAcceleratorInfo.Accelerators[0]
		in.AcceleratorName = lowerKebab(awssdk.ToString(a.Name))
		in.AcceleratorCount = int(awssdk.ToInt32(a.Count))
	}
	if n := it.NetworkInfo; n != nil {
		in.MaxENIs = int(awssdk.ToInt32(n.MaximumNetworkInterfaces))
		if idx := n.DefaultNetworkCardIndex; idx != nil {
			for _, card := range n.NetworkCards {
				if awssdk.ToInt32(card.NetworkCardIndex) == *idx && card.MaximumNetworkInterfaces != nil {
					in.MaxENIs = int(*card.MaximumNetworkInterfaces)
				}
			}
		}
		in.IPv4PerENI = int(awssdk.ToInt32(n.Ipv4AddressesPerInterface))
		if in.MaxENIs > 0 && in.IPv4PerENI > 0 {
			in.MaxPodsENI = in.MaxENIs*(in.IPv4PerENI-1) + 2
		}
	}
	return in, true
}

// Offerings implements catalog.Source: the availability zones each type is
// offered in.
func (s *CatalogSource) Offerings(ctx context.Context) ([]catalog.ZoneOffering, error) {
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(s.EC2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		MaxResults:   awssdk.Int32(1000),
	})
	var out []catalog.ZoneOffering
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2:DescribeInstanceTypeOfferings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			if o.InstanceType != "" && awssdk.ToString(o.Location) != "" {
				out = append(out, catalog.ZoneOffering{InstanceType: string(o.InstanceType), Zone: *o.Location})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].Zone < out[j].Zone
	})
	return out, nil
}

// SpotPrices implements catalog.Source: the latest Linux/UNIX spot price of
// every type in every zone within the spot window.
func (s *CatalogSource) SpotPrices(ctx context.Context) ([]inventory.SpotPrice, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	window := s.SpotWindow
	if window <= 0 {
		window = DefaultSpotWindow
	}
	p := ec2.NewDescribeSpotPriceHistoryPaginator(s.EC2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           awssdk.Time(now().Add(-window)),
		MaxResults:          awssdk.Int32(1000),
	})
	type key struct{ instanceType, zone string }
	type latest struct {
		at    time.Time
		price float64
	}
	seen := map[key]latest{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2:DescribeSpotPriceHistory: %w", err)
		}
		for _, sp := range page.SpotPriceHistory {
			price, err := strconv.ParseFloat(awssdk.ToString(sp.SpotPrice), 64)
			if err != nil || !(price > 0) {
				continue // AWS always sends a positive decimal; skip anything else
			}
			k := key{string(sp.InstanceType), awssdk.ToString(sp.AvailabilityZone)}
			at := awssdk.ToTime(sp.Timestamp)
			if cur, ok := seen[k]; !ok || cur.at.Before(at) {
				seen[k] = latest{at, price}
			}
		}
	}
	out := make([]inventory.SpotPrice, 0, len(seen))
	for k, v := range seen {
		out = append(out, inventory.SpotPrice{InstanceType: k.instanceType, Zone: k.zone, Price: v.price})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].Zone < out[j].Zone
	})
	return out, nil
}

// OnDemandPrices implements catalog.Source: USD per hour per type in
// s.Region, from shared-tenancy products and, for types they lack (bare
// metal), dedicated ones. Nil when s.Pricing is nil.
func (s *CatalogSource) OnDemandPrices(ctx context.Context) (map[string]float64, error) {
	if s.Pricing == nil {
		return nil, nil
	}
	if s.Region == "" {
		return nil, errors.New("pricing:GetProducts: no region to read prices for")
	}
	prices := map[string]float64{}
	for _, q := range []struct{ tenancy, family string }{
		{"Shared", "Compute Instance"},
		{"Dedicated", "Compute Instance (bare metal)"},
	} {
		filters := []pricingtypes.Filter{
			termMatch("regionCode", s.Region),
			termMatch("serviceCode", "AmazonEC2"),
			termMatch("preInstalledSw", "NA"),
			termMatch("operatingSystem", "Linux"),
			termMatch("capacitystatus", "Used"),
			termMatch("marketoption", "OnDemand"),
			termMatch("tenancy", q.tenancy),
			termMatch("productFamily", q.family),
		}
		p := pricing.NewGetProductsPaginator(s.Pricing, &pricing.GetProductsInput{
			ServiceCode:   awssdk.String("AmazonEC2"),
			Filters:       filters,
			FormatVersion: awssdk.String("aws_v1"),
			MaxResults:    awssdk.Int32(100),
		})
		found := map[string]float64{}
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("pricing:GetProducts (%s, %s tenancy): %w", s.Region, q.tenancy, err)
			}
			for i, doc := range page.PriceList {
				name, price, err := ParseOnDemandPrice(doc)
				if err != nil {
					return nil, fmt.Errorf("pricing:GetProducts (%s): price list entry %d: %w", s.Region, i, err)
				}
				if price > 0 && (found[name] == 0 || price < found[name]) {
					found[name] = price
				}
			}
		}
		for name, price := range found {
			if _, ok := prices[name]; !ok {
				prices[name] = price
			}
		}
	}
	return prices, nil
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Field: awssdk.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: awssdk.String(value)}
}

// priceListEntry is the part of a GetProducts price list document
// (format aws_v1) that carries an instance type's on-demand price.
type priceListEntry struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParseOnDemandPrice reads one price list document: the instance type and
// its lowest positive hourly USD price (0 when the document has none, e.g.
// a product with only reserved terms). A malformed document is an error.
func ParseOnDemandPrice(doc string) (instanceType string, usdPerHour float64, err error) {
	var e priceListEntry
	if err := json.Unmarshal([]byte(doc), &e); err != nil {
		return "", 0, fmt.Errorf("price list document is not aws_v1 JSON: %w", err)
	}
	instanceType = e.Product.Attributes.InstanceType
	if instanceType == "" {
		return "", 0, errors.New("price list document has no product.attributes.instanceType")
	}
	for term, t := range e.Terms.OnDemand {
		for dim, d := range t.PriceDimensions {
			raw, ok := d.PricePerUnit["USD"]
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(raw, 64)
			if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return "", 0, fmt.Errorf("%s: terms.OnDemand[%s].priceDimensions[%s].pricePerUnit.USD = %q is not a price", instanceType, term, dim, raw)
			}
			if v > 0 && (usdPerHour == 0 || v < usdPerHour) {
				usdPerHour = v
			}
		}
	}
	return instanceType, usdPerHour, nil
}
