package awsfake_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	smithy "github.com/aws/smithy-go"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

// TestInstanceTypeOfferings reads offerings through the real EC2 client:
// seeded ones survive the wire, location type and filters select, and
// without seeded offerings every type is offered in every subnet zone.
func TestInstanceTypeOfferings(t *testing.T) {
	ctx := context.Background()
	var seeded ec2types.InstanceTypeOffering
	filler(7).Fill(&seeded)
	seeded.LocationType = ec2types.LocationTypeAvailabilityZone
	offer := func(it, zone string) ec2types.InstanceTypeOffering {
		return ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(it), Location: awssdk.String(zone), LocationType: ec2types.LocationTypeAvailabilityZone}
	}
	acct := &awsfake.Account{EC2: awsfake.EC2State{InstanceTypeOfferings: []ec2types.InstanceTypeOffering{
		seeded, offer("m5.large", "us-east-1a"), offer("m5.large", "us-east-1b"), offer("c5.large", "us-east-1a"),
		{InstanceType: "m5.large", Location: awssdk.String("us-east-1"), LocationType: ec2types.LocationTypeRegion},
	}}}
	_, c := clients(t, acct)

	all, err := c.EC2.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.InstanceTypeOfferings) != 4 {
		t.Fatalf("availability-zone offerings = %d, want 4 (the region one excluded)", len(all.InstanceTypeOfferings))
	}
	check(t, "InstanceTypeOffering", nil, seeded, all.InstanceTypeOfferings[0])

	region, err := c.EC2.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(region.InstanceTypeOfferings); got != 1 || awssdk.ToString(region.InstanceTypeOfferings[0].Location) != "us-east-1" {
		t.Errorf("default location type: got %d offerings %v, want the one region offering", got, region.InstanceTypeOfferings)
	}

	filtered, err := c.EC2.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: awssdk.String("location"), Values: []string{"us-east-1a"}}, {Name: awssdk.String("instance-type"), Values: []string{"m5.*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(filtered.InstanceTypeOfferings); got != 1 || filtered.InstanceTypeOfferings[0].InstanceType != "m5.large" {
		t.Errorf("filtered offerings = %v, want m5.large in us-east-1a only", filtered.InstanceTypeOfferings)
	}

	_, err = c.EC2.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{Filters: []ec2types.Filter{{Name: awssdk.String("bogus"), Values: []string{"x"}}}})
	if !hasCode(err, "InvalidParameterValue") {
		t.Errorf("unknown filter: err = %v, want InvalidParameterValue", err)
	}

	// Without seeded offerings: every type in every subnet zone, paginated.
	derived := &awsfake.Account{EC2: awsfake.EC2State{
		InstanceTypes: []ec2types.InstanceTypeInfo{{InstanceType: "m5.large"}, {InstanceType: "c5.large"}, {InstanceType: "r5.large"}},
		Subnets:       []ec2types.Subnet{{SubnetId: awssdk.String("subnet-b"), AvailabilityZone: awssdk.String("us-east-1b")}, {SubnetId: awssdk.String("subnet-d"), AvailabilityZone: awssdk.String("us-east-1d")}},
	}}
	srv, c2 := clients(t, derived)
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c2.EC2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: awssdk.Int32(5)})
	var got []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.InstanceTypeOfferings {
			got = append(got, string(o.InstanceType)+"@"+awssdk.ToString(o.Location))
		}
	}
	sort.Strings(got)
	want := []string{"c5.large@us-east-1b", "c5.large@us-east-1d", "m5.large@us-east-1b", "m5.large@us-east-1d", "r5.large@us-east-1b", "r5.large@us-east-1d"}
	if !slices.Equal(got, want) {
		t.Errorf("derived offerings = %v, want %v", got, want)
	}
	if n := srv.Calls("ec2", "DescribeInstanceTypeOfferings"); n != 2 {
		t.Errorf("6 offerings at 5 per page took %d calls, want 2", n)
	}
}

func hasCode(err error, code string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == code
}

// TestGetProducts reads price list documents through the real pricing
// client: filters of every type select, pages follow NextToken, and bad
// input gets the service's errors.
func TestGetProducts(t *testing.T) {
	ctx := context.Background()
	products := []string{
		awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.096, nil),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.xlarge", 0.192, nil),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.large", 0.188, map[string]string{"operatingSystem": "Windows"}),
		awsfake.EC2OnDemandProduct("us-east-1", "m5.metal", 4.608, map[string]string{"tenancy": "Dedicated", "productFamily": "Compute Instance (bare metal)"}),
		awsfake.EC2OnDemandProduct("eu-west-1", "m5.large", 0.107, nil),
	}
	acct := &awsfake.Account{Pricing: awsfake.PricingState{Products: products}}
	srv, _ := clients(t, acct)
	cfg, err := kmaws.LoadConfig(ctx, kmaws.Options{
		Region:      "us-east-1",
		EndpointURL: srv.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RetryMode:   awssdk.RetryModeStandard,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := pricing.NewFromConfig(cfg)

	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: awssdk.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: awssdk.String(value)}
	}
	type attrs struct {
		Product struct {
			Attributes map[string]string `json:"attributes"`
		} `json:"product"`
	}
	types := func(docs []string) []string {
		var out []string
		for _, d := range docs {
			var a attrs
			if err := json.Unmarshal([]byte(d), &a); err != nil {
				t.Fatalf("price list entry is not JSON: %v", err)
			}
			out = append(out, a.Product.Attributes["regionCode"]+"/"+a.Product.Attributes["instanceType"]+"/"+a.Product.Attributes["operatingSystem"])
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		name    string
		filters []pricingtypes.Filter
		want    []string
	}{
		{"region and OS", []pricingtypes.Filter{term("regionCode", "us-east-1"), term("operatingSystem", "Linux"), term("tenancy", "Shared")},
			[]string{"us-east-1/m5.large/Linux", "us-east-1/m5.xlarge/Linux"}},
		{"product family and case-insensitive field", []pricingtypes.Filter{term("PRODUCTFAMILY", "Compute Instance (bare metal)")},
			[]string{"us-east-1/m5.metal/Linux"}},
		{"contains", []pricingtypes.Filter{{Field: awssdk.String("instanceType"), Type: pricingtypes.FilterTypeContains, Value: awssdk.String("xlarge")}},
			[]string{"us-east-1/m5.xlarge/Linux"}},
		{"any of", []pricingtypes.Filter{term("instanceType", "m5.large"), {Field: awssdk.String("regionCode"), Type: pricingtypes.FilterTypeAnyOf, Value: awssdk.String("eu-west-1, ap-south-1")}},
			[]string{"eu-west-1/m5.large/Linux"}},
		{"none of", []pricingtypes.Filter{term("regionCode", "us-east-1"), {Field: awssdk.String("operatingSystem"), Type: pricingtypes.FilterTypeNoneOf, Value: awssdk.String("Linux")}},
			[]string{"us-east-1/m5.large/Windows"}},
		{"unknown field matches nothing", []pricingtypes.Filter{term("noSuchAttribute", "x")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := client.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), Filters: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := types(out.PriceList); !slices.Equal(got, tc.want) {
				t.Errorf("products = %v, want %v", got, tc.want)
			}
			if awssdk.ToString(out.FormatVersion) != "aws_v1" {
				t.Errorf("FormatVersion = %q, want aws_v1", awssdk.ToString(out.FormatVersion))
			}
		})
	}

	srv.ResetCalls()
	p := pricing.NewGetProductsPaginator(client, &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), MaxResults: awssdk.Int32(2)})
	var all []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.PriceList...)
	}
	if len(all) != len(products) || srv.Calls("pricing", "GetProducts") != 3 {
		t.Errorf("paginated %d products in %d calls, want %d in 3", len(all), srv.Calls("pricing", "GetProducts"), len(products))
	}

	for _, tc := range []struct {
		name string
		in   pricing.GetProductsInput
	}{
		{"bad filter type", pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), Filters: []pricingtypes.Filter{{Field: awssdk.String("a"), Type: "FUZZY", Value: awssdk.String("b")}}}},
		{"bad format version", pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), FormatVersion: awssdk.String("aws_v2")}},
		{"max results", pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), MaxResults: awssdk.Int32(101)}},
	} {
		if _, err := client.GetProducts(ctx, &tc.in); !hasCode(err, "InvalidParameterException") {
			t.Errorf("%s: err = %v, want InvalidParameterException", tc.name, err)
		}
	}
}
