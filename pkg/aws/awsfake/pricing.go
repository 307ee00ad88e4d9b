package awsfake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// PricingState is the AWS Price List (pricing) part of an account.
type PricingState struct {
	// Products are price list documents in the aws_v1 format, as GetProducts
	// returns them in PriceList; EC2OnDemandProduct builds one.
	Products []string `json:"products,omitempty"`
}

// EC2OnDemandProduct returns the price list document of an EC2 on-demand
// product: Linux, shared tenancy, used capacity, no pre-installed software,
// in regionCode, at usdPerHour. attrs add or replace product attributes
// (tenancy, operatingSystem, capacitystatus, ...); the key "productFamily"
// sets the product family instead (default "Compute Instance").
func EC2OnDemandProduct(regionCode, instanceType string, usdPerHour float64, attrs map[string]string) string {
	a := map[string]string{
		"servicecode":     "AmazonEC2",
		"regionCode":      regionCode,
		"instanceType":    instanceType,
		"operatingSystem": "Linux",
		"tenancy":         "Shared",
		"capacitystatus":  "Used",
		"preInstalledSw":  "NA",
		"marketoption":    "OnDemand",
		"licenseModel":    "No License required",
	}
	family := "Compute Instance"
	for k, v := range attrs {
		if k == "productFamily" {
			family = v
			continue
		}
		a[k] = v
	}
	sku := strings.ToUpper(strings.NewReplacer(".", "", "-", "").Replace(regionCode + instanceType + a["tenancy"] + a["operatingSystem"] + a["capacitystatus"]))
	doc := map[string]any{
		"serviceCode": "AmazonEC2",
		"version":     "20260701000000",
		"product":     map[string]any{"productFamily": family, "sku": sku, "attributes": a},
		"terms": map[string]any{"OnDemand": map[string]any{
			sku + ".JRTCKXETXF": map[string]any{
				"offerTermCode": "JRTCKXETXF",
				"sku":           sku,
				"priceDimensions": map[string]any{sku + ".JRTCKXETXF.6YS6EN2CT7": map[string]any{
					"unit":         "Hrs",
					"description":  "$" + strconv.FormatFloat(usdPerHour, 'f', -1, 64) + " per On Demand Linux " + instanceType + " Instance Hour",
					"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(usdPerHour, 'f', 10, 64)},
				}},
			},
		}},
	}
	b, _ := json.Marshal(doc) // maps of strings always marshal
	return string(b)
}

// registerPricing adds the AWS Price List Service (awsJson1_1): GetProducts.
func registerPricing(s *Server) {
	s.register("pricing", "GetProducts", pricingGetProducts)
}

func invalidPricingParam(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, "InvalidParameterException", format, args...)
}

// priceListProduct is what GetProducts filters on in a price list document.
type priceListProduct struct {
	ServiceCode string `json:"serviceCode"`
	Product     struct {
		ProductFamily string            `json:"productFamily"`
		Attributes    map[string]string `json:"attributes"`
	} `json:"product"`
}

// field reads a filter field: serviceCode, productFamily or an attribute
// (field names match case-insensitively).
func (p *priceListProduct) field(name string) (string, bool) {
	switch {
	case strings.EqualFold(name, "serviceCode"):
		return p.ServiceCode, true
	case strings.EqualFold(name, "productFamily"):
		return p.Product.ProductFamily, true
	}
	for k, v := range p.Product.Attributes {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func pricingMatch(f pricingtypes.Filter, p *priceListProduct) (bool, error) {
	v, ok := p.field(deref(f.Field))
	want := deref(f.Value)
	switch f.Type {
	case pricingtypes.FilterTypeTermMatch, pricingtypes.FilterTypeEquals:
		return ok && v == want, nil
	case pricingtypes.FilterTypeContains:
		return ok && strings.Contains(v, want), nil
	case pricingtypes.FilterTypeAnyOf, pricingtypes.FilterTypeNoneOf:
		hit := false
		for _, w := range strings.Split(want, ",") {
			hit = hit || (ok && v == strings.TrimSpace(w))
		}
		return hit == (f.Type == pricingtypes.FilterTypeAnyOf), nil
	default:
		return false, invalidPricingParam("Filter type %q is not one of TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF", f.Type)
	}
}

func pricingGetProducts(c *call) (any, error) {
	var in pricing.GetProductsInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	service := deref(in.ServiceCode)
	if service == "" {
		return nil, invalidPricingParam("ServiceCode is required")
	}
	if v := deref(in.FormatVersion); v != "" && v != "aws_v1" {
		return nil, invalidPricingParam("FormatVersion %q is not supported; use aws_v1", v)
	}
	if in.MaxResults != nil && (*in.MaxResults < 1 || *in.MaxResults > 100) {
		return nil, invalidPricingParam("MaxResults %d must be between 1 and 100", *in.MaxResults)
	}
	var out []string
	for i, doc := range c.acct.Pricing.Products {
		var p priceListProduct
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			return nil, errorf(http.StatusInternalServerError, "InternalErrorException", "awsfake: seeded pricing product %d is not JSON: %v", i, err)
		}
		if p.ServiceCode != service {
			continue
		}
		keep := true
		for _, f := range in.Filters {
			m, err := pricingMatch(f, &p)
			if err != nil {
				return nil, err
			}
			keep = keep && m
		}
		if keep {
			out = append(out, doc)
		}
	}
	page, next, err := paginate(c, out, deref(in.NextToken), in.MaxResults, 100, 100)
	if err != nil {
		return nil, err
	}
	return &pricing.GetProductsOutput{PriceList: page, FormatVersion: ptr("aws_v1"), NextToken: nonEmpty(next)}, nil
}
