package catalog

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Pricing adjusts the catalogue's list prices to what a user really pays.
type Pricing struct {
	// DiscountPercent is taken off every list on-demand price that has no
	// negotiated price (an EDP or a Savings Plan rate), 0–100.
	DiscountPercent float64
	// SpotRatio estimates spot as list on-demand × SpotRatio when no spot
	// price is known; 0 means DefaultSpotRatio.
	SpotRatio float64
	// OnDemand are negotiated on-demand prices per instance type, USD/h;
	// they replace the list price and are not discounted further.
	OnDemand map[string]float64
	// SpotPrices are live or snapshot spot prices. An entry with an empty
	// Zone applies to every zone without a zone-specific price.
	SpotPrices []inventory.SpotPrice
}

type spotKey struct{ instanceType, zone string }

func (p Pricing) validate() error {
	if p.DiscountPercent < 0 || p.DiscountPercent >= 100 || bad(p.DiscountPercent) {
		return fmt.Errorf("catalog: discount %v%% must be in [0, 100)", p.DiscountPercent)
	}
	if p.SpotRatio < 0 || p.SpotRatio > 1 || bad(p.SpotRatio) {
		return fmt.Errorf("catalog: spot ratio %v must be in (0, 1]", p.SpotRatio)
	}
	for name, v := range p.OnDemand {
		if !(v > 0) || bad(v) {
			return fmt.Errorf("catalog: negotiated on-demand price for %s is %v; it must be > 0", name, v)
		}
	}
	for _, sp := range p.SpotPrices {
		if !(sp.Price > 0) || bad(sp.Price) {
			return fmt.Errorf("catalog: spot price for %s in %q is %v; it must be > 0", sp.InstanceType, sp.Zone, sp.Price)
		}
	}
	return nil
}

// bad reports NaN and infinities, which no price or ratio may be.
func bad(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

func (p Pricing) spotIndex() map[spotKey]float64 {
	m := make(map[spotKey]float64, len(p.SpotPrices))
	for _, sp := range p.SpotPrices {
		m[spotKey{sp.InstanceType, sp.Zone}] = sp.Price
	}
	return m
}

func (p Pricing) onDemand(in Info) (float64, bool) {
	if v, ok := p.OnDemand[in.Name]; ok {
		return v, true
	}
	if in.OnDemandPrice <= 0 {
		return 0, false
	}
	return in.OnDemandPrice * (1 - p.DiscountPercent/100), true
}

func (p Pricing) spot(in Info, zone string, idx map[spotKey]float64) (float64, bool) {
	if v, ok := idx[spotKey{in.Name, zone}]; ok {
		return v, true
	}
	if v, ok := idx[spotKey{in.Name, ""}]; ok {
		return v, true
	}
	ratio := p.SpotRatio
	if ratio == 0 {
		ratio = DefaultSpotRatio
	}
	list := in.OnDemandPrice
	if list <= 0 {
		list = p.OnDemand[in.Name]
	}
	if list <= 0 {
		return 0, false
	}
	return list * ratio, true
}

// PriceFile is a user's negotiated prices, read by LoadPriceFile. YAML form:
//
//	discountPercent: 12          # off list on-demand for types not listed
//	spotRatio: 0.35              # spot estimate when no spot price is listed
//	prices:
//	  - instanceType: m5.xlarge
//	    onDemand: 0.152          # negotiated / Savings Plan rate, USD/h
//	  - instanceType: c6g.large
//	    spot: 0.029              # all zones
//	  - instanceType: c6g.large
//	    zone: us-east-1a
//	    spot: 0.025
//
// CSV form (header required, columns in any order, zone optional):
//
//	instanceType,capacityType,zone,price
//	m5.xlarge,on-demand,,0.152
//	c6g.large,spot,us-east-1a,0.025
type PriceFile struct {
	DiscountPercent float64          `yaml:"discountPercent"`
	SpotRatio       float64          `yaml:"spotRatio"`
	Prices          []PriceFileEntry `yaml:"prices"`
}

// PriceFileEntry is one negotiated price.
type PriceFileEntry struct {
	InstanceType string  `yaml:"instanceType"`
	Zone         string  `yaml:"zone,omitempty"`
	OnDemand     float64 `yaml:"onDemand,omitempty"`
	Spot         float64 `yaml:"spot,omitempty"`
	// Line is where the entry starts in its file (1-based), for errors.
	Line int `yaml:"-"`
}

// UnmarshalYAML records the entry's line.
func (e *PriceFileEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; k.Value {
			case "instanceType", "zone", "onDemand", "spot":
			default:
				return fmt.Errorf("line %d: field %q is not one of instanceType, zone, onDemand, spot", k.Line, k.Value)
			}
		}
	}
	type plain PriceFileEntry
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*e = PriceFileEntry(p)
	e.Line = n.Line
	return nil
}

// Pricing turns the file into catalogue Pricing.
func (f PriceFile) Pricing() Pricing {
	p := Pricing{DiscountPercent: f.DiscountPercent, SpotRatio: f.SpotRatio}
	for _, e := range f.Prices {
		if e.OnDemand > 0 {
			if p.OnDemand == nil {
				p.OnDemand = map[string]float64{}
			}
			p.OnDemand[e.InstanceType] = e.OnDemand
		}
		if e.Spot > 0 {
			p.SpotPrices = append(p.SpotPrices, inventory.SpotPrice{InstanceType: e.InstanceType, Zone: e.Zone, Price: e.Spot})
		}
	}
	return p
}

// LoadPriceFile reads a price file; ".csv" files are CSV, anything else YAML.
func LoadPriceFile(path string) (PriceFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PriceFile{}, fmt.Errorf("read price file: %w", err)
	}
	return ParsePriceFile(path, data)
}

// ParsePriceFile parses a price file's content; name picks the format (".csv"
// or YAML) and prefixes errors, which name the line and field.
func ParsePriceFile(name string, data []byte) (PriceFile, error) {
	var (
		f   PriceFile
		err error
	)
	if strings.EqualFold(filepath.Ext(name), ".csv") {
		f, err = parsePriceCSV(name, data)
	} else {
		f, err = parsePriceYAML(name, data)
	}
	if err != nil {
		return PriceFile{}, err
	}
	if f.DiscountPercent < 0 || f.DiscountPercent >= 100 || bad(f.DiscountPercent) {
		return PriceFile{}, fmt.Errorf("%s: discountPercent %v must be at least 0 and below 100", name, f.DiscountPercent)
	}
	if f.SpotRatio < 0 || f.SpotRatio > 1 || bad(f.SpotRatio) {
		return PriceFile{}, fmt.Errorf("%s: spotRatio %v must be between 0 and 1 (0 = default %v)", name, f.SpotRatio, DefaultSpotRatio)
	}
	for _, e := range f.Prices {
		switch {
		case e.InstanceType == "":
			return PriceFile{}, fmt.Errorf("%s:%d: instanceType is required", name, e.Line)
		case e.OnDemand < 0 || bad(e.OnDemand) || e.Spot < 0 || bad(e.Spot):
			return PriceFile{}, fmt.Errorf("%s:%d: %s: prices must be positive numbers (USD per hour)", name, e.Line, e.InstanceType)
		case e.OnDemand == 0 && e.Spot == 0:
			return PriceFile{}, fmt.Errorf("%s:%d: %s: set onDemand or spot (USD per hour)", name, e.Line, e.InstanceType)
		case e.Zone != "" && e.OnDemand > 0:
			return PriceFile{}, fmt.Errorf("%s:%d: %s: zone applies to spot prices only; on-demand prices are per region", name, e.Line, e.InstanceType)
		}
	}
	return f, nil
}

func parsePriceYAML(name string, data []byte) (PriceFile, error) {
	var f PriceFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return PriceFile{}, fmt.Errorf("%s: %w (expected discountPercent, spotRatio and prices[] of {instanceType, onDemand, spot, zone})", name, err)
	}
	return f, nil
}

func parsePriceCSV(name string, data []byte) (PriceFile, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err != nil {
		return PriceFile{}, fmt.Errorf("%s:1: read CSV header: %w (expected instanceType,capacityType,zone,price)", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"instanceType", "capacityType", "price"} {
		if _, ok := col[need]; !ok {
			return PriceFile{}, fmt.Errorf("%s:1: CSV header lacks column %q (expected instanceType,capacityType,zone,price)", name, need)
		}
	}
	get := func(rec []string, key string) string {
		if i, ok := col[key]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var f PriceFile
	r.FieldsPerRecord = len(header)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := r.FieldPos(0)
		if err != nil {
			return PriceFile{}, fmt.Errorf("%s: %w", name, err)
		}
		e := PriceFileEntry{InstanceType: get(rec, "instanceType"), Zone: get(rec, "zone"), Line: line}
		raw := get(rec, "price")
		v, perr := strconv.ParseFloat(raw, 64)
		if perr != nil {
			return PriceFile{}, fmt.Errorf("%s:%d: price %q is not a number (USD per hour)", name, line, raw)
		}
		if v <= 0 || bad(v) {
			return PriceFile{}, fmt.Errorf("%s:%d: price %q must be a positive number (USD per hour)", name, line, raw)
		}
		switch ct := get(rec, "capacityType"); ct {
		case CapacityTypeOnDemand:
			e.OnDemand = v
		case CapacityTypeSpot:
			e.Spot = v
		default:
			return PriceFile{}, fmt.Errorf("%s:%d: capacityType %q must be %q or %q", name, line, ct, CapacityTypeOnDemand, CapacityTypeSpot)
		}
		f.Prices = append(f.Prices, e)
	}
	return f, nil
}
