package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// euWest1OnDemand are eu-west-1 Linux on-demand list prices (USD/h) of the
// plan fixture's types, from AWS's public EC2 price list; us-east-1's are
// 0.096, 0.192 and 0.17.
var euWest1OnDemand = map[string]float64{"m5.large": 0.107, "m5.xlarge": 0.214, "c5.xlarge": 0.192}

// euAWS serves an account in eu-west-1 that offers the fixture's types in
// eu-west-1a and b at the region's prices (and, as decoys, us-east-1's).
func euAWS(t *testing.T) *awsfake.Server {
	t.Helper()
	a := &awsfake.Account{Region: "eu-west-1"}
	a.EKS.Clusters = []awsfake.EKSCluster{{Cluster: ekstypes.Cluster{Name: awssdk.String("shop"), Arn: awssdk.String("arn:aws:eks:eu-west-1:123456789012:cluster/shop")}}}
	for _, it := range []string{"c5.xlarge", "m5.large", "m5.xlarge"} {
		a.EC2.InstanceTypes = append(a.EC2.InstanceTypes, ec2types.InstanceTypeInfo{InstanceType: ec2types.InstanceType(it),
			VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(2)}, MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(8192)},
			ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}}})
		for _, z := range []string{"eu-west-1a", "eu-west-1b"} {
			a.EC2.InstanceTypeOfferings = append(a.EC2.InstanceTypeOfferings, ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(it),
				Location: awssdk.String(z), LocationType: ec2types.LocationTypeAvailabilityZone})
		}
		a.Pricing.Products = append(a.Pricing.Products, awsfake.EC2OnDemandProduct("eu-west-1", it, euWest1OnDemand[it], nil),
			awsfake.EC2OnDemandProduct("us-east-1", it, 0.01, nil))
	}
	srv := awsfake.New(a)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("XDG_CACHE_HOME", dir)
	return srv
}

// inRegion writes the plan fixture (snapshot.json and the karpenter tree)
// moved to region, with prices (nil: none recorded), into a directory.
func inRegion(t *testing.T, region string, prices *inventory.Snapshot) string {
	t.Helper()
	dir := t.TempDir()
	move := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(strings.ReplaceAll(string(b), "us-east-1", region)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"kustomization.yaml", "nodepool.yaml"} {
		move(filepath.Join(planDir, "karpenter", "overlays", "prod", f), filepath.Join(dir, "karpenter", "overlays", "prod", f))
	}
	snap := filepath.Join(dir, "snapshot.json")
	move(filepath.Join(planDir, "snapshot.json"), snap)
	if prices != nil {
		s, err := inventory.ReadSnapshotFile(snap)
		if err != nil {
			t.Fatal(err)
		}
		s.Inventory.Prices, s.Inventory.SpotPrices = prices.Inventory.Prices, prices.Inventory.SpotPrices
		if err := s.WriteFile(snap); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func planJSON(t *testing.T, dir string) (*plan.Plan, string) {
	t.Helper()
	out, errOut, err := runCLI(t, "plan", "--env", "prod", "--snapshot", filepath.Join(dir, "snapshot.json"), "--dir", filepath.Join(dir, "karpenter"), "--config", filepath.Join(planDir, "prod.yaml"),
		"--skip-iam", "-f", filepath.Join(t.TempDir(), "plan.yaml"), "-o", "json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	return &p, errOut
}

func priceWarning(p *plan.Plan) string {
	for _, f := range p.Findings {
		if f.Object == "prices" {
			return f.Message
		}
	}
	return ""
}

// TestPlanInClusterRegion: discover reads eu-west-1's offerings and prices
// through the real SDK from the wire-level fake and records them in the
// snapshot; the plan of the same cluster in eu-west-1 then costs it at
// eu-west-1's prices, names them, and does not warn, while the cluster in
// us-east-1 (no prices recorded) costs the embedded us-east-1 list with a
// warning. `discover --offline` reads no prices and says so.
func TestPlanInClusterRegion(t *testing.T) {
	srv := euAWS(t)
	pricesFile := filepath.Join(t.TempDir(), "prices.json")
	_, errOut, err := runCLI(t, "discover", "--cluster", "shop", "--region", "eu-west-1", "--endpoint-url", srv.URL(), "--skip-kubernetes", "--snapshot", pricesFile)
	if err != nil {
		t.Fatalf("discover: %v\n%s", err, errOut)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("discover with the region's prices warns:\n%s", errOut)
	}
	discovered, err := inventory.ReadSnapshotFile(pricesFile)
	if err != nil {
		t.Fatal(err)
	}
	if p := discovered.Inventory.Prices; p == nil || p.Region != "eu-west-1" || p.Source != inventory.PricesLive || p.FetchedAt.IsZero() || p.OnDemand["m5.xlarge"] != 0.214 {
		t.Fatalf("snapshot prices: %+v, want eu-west-1's read live", p)
	}

	us, _ := planJSON(t, inRegion(t, "us-east-1", nil))
	eu, _ := planJSON(t, inRegion(t, "eu-west-1", discovered))
	t.Logf("the same cluster: us-east-1 (embedded list) $%.4f/h before, $%.4f/h after the waves, $%.4f/h after consolidation; eu-west-1 (live) $%.4f/h, $%.4f/h, $%.4f/h",
		us.Cost.BeforePerHour, us.Cost.AfterPerHour, us.SteadyState.AfterConsolidation.PricePerHour,
		eu.Cost.BeforePerHour, eu.Cost.AfterPerHour, eu.SteadyState.AfterConsolidation.PricePerHour)

	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// After the waves: three m5.large from Karpenter, and two of web's
	// m5.xlarge kept as the Karpenter controller's home (#25).
	if !near(eu.Cost.BeforePerHour, math.Round(3*euWest1OnDemand["m5.xlarge"]*1e4)/1e4) ||
		!near(eu.Cost.AfterPerHour, math.Round((3*euWest1OnDemand["m5.large"]+2*euWest1OnDemand["m5.xlarge"])*1e4)/1e4) {
		t.Errorf("eu-west-1 cost %+v, want three m5.xlarge before, three m5.large and the two kept m5.xlarge after, at eu-west-1's prices", eu.Cost)
	}
	if ss := eu.SteadyState; ss == nil || !near(ss.AfterConsolidation.PricePerHour, euWest1OnDemand["c5.xlarge"]+2*euWest1OnDemand["m5.xlarge"]) {
		t.Errorf("eu-west-1 steady state %+v, want one c5.xlarge and the two kept m5.xlarge at %v and %v", ss, euWest1OnDemand["c5.xlarge"], euWest1OnDemand["m5.xlarge"])
	}
	if pr := eu.Cost.Prices; pr == nil || *pr != discovered.Inventory.Prices.PriceSource {
		t.Errorf("eu-west-1 plan records prices %+v, want %+v", pr, discovered.Inventory.Prices.PriceSource)
	}
	if w := priceWarning(eu); w != "" {
		t.Errorf("eu-west-1 plan with the region's prices warns: %s", w)
	}
	if !near(us.Cost.BeforePerHour, 0.576) || us.Cost.Prices == nil || us.Cost.Prices.Source != inventory.PricesEmbedded ||
		!strings.Contains(priceWarning(us), "no live prices were read for us-east-1") {
		t.Errorf("us-east-1 plan: cost %+v, warning %q; want the embedded list and a warning", us.Cost, priceWarning(us))
	}

	// The same eu-west-1 cluster without recorded prices: the plan still
	// predicts its nodes (in eu-west-1's zones) and warns by name.
	bare, _ := planJSON(t, inRegion(t, "eu-west-1", nil))
	if !near(bare.Cost.BeforePerHour, us.Cost.BeforePerHour) || len(bare.Waves[0].PredictedNodes) != 1 || bare.Waves[0].PredictedNodes[0].Zone != "eu-west-1a" {
		t.Errorf("eu-west-1 without prices: cost %+v, wave 1 predicted %+v", bare.Cost, bare.Waves[0].PredictedNodes)
	}
	if w := priceWarning(bare); !strings.Contains(w, "no live prices were read for eu-west-1") || !strings.Contains(w, "which are not eu-west-1's") {
		t.Errorf("warning = %q", w)
	}

	calls := srv.Calls("pricing", "GetProducts")
	offline := filepath.Join(t.TempDir(), "offline.json")
	if _, errOut, err = runCLI(t, "discover", "--cluster", "shop", "--region", "eu-west-1", "--endpoint-url", srv.URL(), "--skip-kubernetes", "--offline", "--snapshot", offline); err != nil {
		t.Fatalf("discover --offline: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "warning: no live prices were read for eu-west-1;") || srv.Calls("pricing", "GetProducts") != calls {
		t.Errorf("discover --offline: %d price calls, stderr:\n%s", srv.Calls("pricing", "GetProducts")-calls, errOut)
	}
}
