package catalog

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func TestParsePriceFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		want    Pricing
		wantErr string
	}{
		{
			name: "yaml", file: "prices.yaml",
			content: "discountPercent: 12\nspotRatio: 0.3\nprices:\n  - instanceType: m5.xlarge\n    onDemand: 0.15\n  - instanceType: c6g.large\n    zone: us-east-1a\n    spot: 0.025\n",
			want: Pricing{DiscountPercent: 12, SpotRatio: 0.3, OnDemand: map[string]float64{"m5.xlarge": 0.15},
				SpotPrices: []inventory.SpotPrice{{InstanceType: "c6g.large", Zone: "us-east-1a", Price: 0.025}}},
		},
		{name: "empty yaml", file: "p.yaml", content: "", want: Pricing{}},
		{
			name: "csv", file: "prices.CSV",
			content: "# negotiated\ninstanceType,capacityType,zone,price\nm5.xlarge,on-demand,,0.15\nc6g.large,spot,us-east-1a,0.025\n",
			want: Pricing{OnDemand: map[string]float64{"m5.xlarge": 0.15},
				SpotPrices: []inventory.SpotPrice{{InstanceType: "c6g.large", Zone: "us-east-1a", Price: 0.025}}},
		},
		{name: "csv columns in any order, zone optional", file: "p.csv", content: "price,instanceType,capacityType\n0.1,m5.large,spot\n",
			want: Pricing{SpotPrices: []inventory.SpotPrice{{InstanceType: "m5.large", Price: 0.1}}}},
		{name: "yaml unknown field", file: "p.yaml", content: "prices:\n  - instanceType: m5.large\n    onDemnad: 0.1\n", wantErr: "line 3"},
		{name: "yaml missing type", file: "p.yaml", content: "prices:\n  - onDemand: 0.1\n", wantErr: "p.yaml:2: instanceType is required"},
		{name: "yaml no price", file: "p.yaml", content: "prices:\n  - instanceType: m5.large\n", wantErr: "p.yaml:2: m5.large: set onDemand or spot"},
		{name: "yaml negative", file: "p.yaml", content: "prices:\n  - instanceType: m5.large\n    spot: -1\n", wantErr: "p.yaml:2: m5.large: prices must be positive"},
		{name: "yaml zone on on-demand", file: "p.yaml", content: "prices:\n  - instanceType: m5.large\n    zone: a\n    onDemand: 1\n", wantErr: "zone applies to spot prices only"},
		{name: "yaml discount", file: "p.yaml", content: "discountPercent: 120\n", wantErr: "discountPercent 120"},
		{name: "yaml spot ratio", file: "p.yaml", content: "spotRatio: 3\n", wantErr: "spotRatio 3"},
		{name: "csv bad price", file: "p.csv", content: "instanceType,capacityType,price\nm5.large,spot,cheap\n", wantErr: `p.csv:2: price "cheap" is not a number`},
		{name: "csv zero price", file: "p.csv", content: "instanceType,capacityType,price\nm5.large,spot,0\n", wantErr: "p.csv:2: price"},
		{name: "csv bad capacity type", file: "p.csv", content: "instanceType,capacityType,price\n\nm5.large,reserved,1\n", wantErr: `p.csv:3: capacityType "reserved"`},
		{name: "csv missing column", file: "p.csv", content: "instanceType,price\nm5.large,1\n", wantErr: `p.csv:1: CSV header lacks column "capacityType"`},
		{name: "csv ragged", file: "p.csv", content: "instanceType,capacityType,price\nm5.large,spot\n", wantErr: "wrong number of fields"},
		{name: "csv empty", file: "p.csv", content: "", wantErr: "read CSV header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParsePriceFile(tc.file, []byte(tc.content))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Pricing(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Pricing() = %+v, want %+v", got, tc.want)
			}
			if _, err := New(Options{Pricing: f.Pricing()}); err != nil {
				t.Fatalf("a valid price file must give valid Pricing: %v", err)
			}
		})
	}
}

func TestLoadPriceFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(p, []byte("discountPercent: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := LoadPriceFile(p)
	if err != nil || f.DiscountPercent != 5 {
		t.Fatalf("LoadPriceFile = %+v, %v", f, err)
	}
	if _, err := LoadPriceFile(p + ".missing"); err == nil {
		t.Fatal("missing file must fail")
	}
}

// FuzzParsePriceFile: the parser never panics, and whatever it accepts is
// valid catalogue Pricing.
func FuzzParsePriceFile(f *testing.F) {
	f.Add("p.yaml", "discountPercent: 12\nprices:\n  - instanceType: m5.large\n    onDemand: 0.1\n")
	f.Add("p.csv", "instanceType,capacityType,zone,price\nm5.large,spot,us-east-1a,0.03\n")
	f.Add("p.yaml", "prices: [{instanceType: a, spot: .nan}]")
	f.Add("p.csv", "instanceType,capacityType,price\nx,on-demand,+Inf\n")
	f.Fuzz(func(t *testing.T, name, content string) {
		pf, err := ParsePriceFile(name, []byte(content))
		if err != nil {
			return
		}
		if _, err := New(Options{Types: []Info{{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "amd64"}}, Pricing: pf.Pricing()}); err != nil {
			t.Fatalf("accepted file gives invalid pricing: %v\n%q", err, content)
		}
	})
}
