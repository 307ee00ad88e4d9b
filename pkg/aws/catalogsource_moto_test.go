package aws_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
)

// startMoto runs moto_server on a free loopback port for the test and
// returns its URL; the test is skipped when moto_server is not installed.
// (A minimal start; a shared moto harness may replace it.)
func startMoto(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Skip("moto_server is not installed (pip install 'moto[server]')")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	log, err := os.Create(t.TempDir() + "/moto.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start moto_server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("moto_server did not answer on %s: %v\n%s", url, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCatalogSourceMoto reads a region other than us-east-1 through the
// real SDK from moto_server, which serves EC2's DescribeInstanceTypes,
// DescribeInstanceTypeOfferings and DescribeSpotPriceHistory per region
// (it has no Price List API, so on-demand prices are not read here; the
// awsfake tests cover GetProducts).
func TestCatalogSourceMoto(t *testing.T) {
	url := startMoto(t)
	const region = "ap-northeast-2"
	cfg, err := kmaws.LoadConfig(context.Background(), kmaws.Options{Region: region, EndpointURL: url,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src := kmaws.NewCatalogSource(cfg)
	src.Pricing = nil
	snap, err := catalog.Fetch(context.Background(), src, region, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	has := func(name string) bool {
		for _, in := range snap.Types {
			if in.Name == name {
				return in.VCPU == 2 && in.MemoryMiB == 8192 && in.Arch == "amd64"
			}
		}
		return false
	}
	if len(snap.Types) < 100 || !has("m5.large") {
		t.Errorf("%d instance types, m5.large as the embedded catalogue has it: %v", len(snap.Types), has("m5.large"))
	}
	zones, types := map[string]bool{}, map[string]bool{}
	for _, o := range snap.Offerings {
		if !strings.HasPrefix(o.Zone, region) {
			t.Fatalf("offering %+v is not in %s", o, region)
		}
		zones[o.Zone], types[o.InstanceType] = true, true
	}
	if len(zones) < 2 || !types["m5.large"] {
		t.Errorf("offerings in zones %v; m5.large offered: %v", zones, types["m5.large"])
	}
	spotZones := map[string]bool{}
	for _, sp := range snap.SpotPrices {
		if !strings.HasPrefix(sp.Zone, region) || !(sp.Price > 0) {
			t.Fatalf("spot price %+v is not a price in %s", sp, region)
		}
		if sp.InstanceType == "m5.large" {
			spotZones[sp.Zone] = true
		}
	}
	if len(spotZones) < 2 {
		t.Errorf("m5.large spot prices in %v, want one per zone it is offered in", spotZones)
	}
}
