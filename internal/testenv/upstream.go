package testenv

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Karpenter's own artefacts, taken from its Go modules through the Go
// toolchain (`go mod download`, the module proxy) rather than copied into
// this repository: the official chart, the CRDs and the kwok provider's
// node class, for the version under test.
const (
	// ProviderModule is Karpenter's AWS provider: charts/karpenter and
	// pkg/apis/crds (the CRDs the chart installs).
	ProviderModule = "github.com/aws/karpenter-provider-aws"
	// CoreModule is Karpenter core: kwok/apis/crds (the KWOKNodeClass).
	CoreModule = "sigs.k8s.io/karpenter"
)

// v1beta1Version is the newest provider release the module proxy serves
// whose CRDs are karpenter.sh/v1beta1 (v0.37.x, the upgrade path to v1,
// and every v0.3x before v0.36 are not served; neither is a release with
// the v1alpha5 CRDs, so those stay in testdata/crds/v1alpha5).
const v1beta1Version = "v0.36.2"

// ModuleDir returns the directory of module path at version in the Go
// module cache, downloading it with `go mod download -json` when it is not
// there yet. It runs outside any module (in a temporary directory), so the
// repository's go.mod is neither read nor changed. The directory is
// read-only, as the module cache is.
func ModuleDir(ctx context.Context, path, version string) (string, error) {
	scratch, err := os.MkdirTemp("", "km-mod-download-")
	if err != nil {
		return "", fmt.Errorf("download %s@%s: %w", path, version, err)
	}
	defer os.RemoveAll(scratch)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct{ Dir, Zip, Error string }
	if jerr := json.Unmarshal(out, &m); jerr == nil && m.Error != "" {
		if strings.Contains(m.Error, "requires go >=") && m.Zip != "" {
			// Downloaded and verified, but a go line newer than this
			// toolchain keeps it from being unpacked (v1.9.3 says go
			// 1.26.10): only its files are wanted, so unpack them here.
			return unzipModule(path, version, m.Zip)
		}
		return "", fmt.Errorf("go mod download %s@%s: %s (the module proxy must be reachable: GOPROXY, GOFLAGS)", path, version, m.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s (the Go toolchain must be on PATH and the module proxy reachable)", path, version, err, strings.TrimSpace(stderr.String()))
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s gave no module directory: %s", path, version, out)
	}
	return m.Dir, nil
}

// unzipModule unpacks the module zip file (entries under
// path@version/) once, into $KM_CACHE/mod/path@version.
func unzipModule(path, version, file string) (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	prefix := path + "@" + version + "/"
	final := filepath.Join(cache, "mod", filepath.FromSlash(path)+"@"+version)
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	zr, err := zip.OpenReader(file)
	if err != nil {
		return "", fmt.Errorf("unpack %s@%s: %w", path, version, err)
	}
	defer zr.Close()
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("unpack %s@%s: %w", path, version, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".unzip-")
	if err != nil {
		return "", fmt.Errorf("unpack %s@%s: %w", path, version, err)
	}
	defer os.RemoveAll(tmp)
	sub, err := fs.Sub(zr, strings.TrimSuffix(prefix, "/"))
	if err == nil {
		err = os.CopyFS(tmp, sub)
	}
	if err != nil {
		return "", fmt.Errorf("unpack %s@%s from %s: %w", path, version, file, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(final); serr != nil {
			return "", fmt.Errorf("unpack %s@%s: %w", path, version, err)
		}
	}
	return final, nil
}

// KarpenterVersion is the Karpenter release the control plane runs
// (scripts/controlplane/versions.env KARPENTER_VERSION, e.g. v1.14.1).
func KarpenterVersion() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	v, err := versions(root)
	if err != nil {
		return "", err
	}
	if v["KARPENTER_VERSION"] == "" {
		return "", errors.New("control plane versions: KARPENTER_VERSION is not set")
	}
	return v["KARPENTER_VERSION"], nil
}

// CRDDir returns a directory of Karpenter CRDs: "v1" and "kwok" are those
// of the control plane's Karpenter (the provider module's pkg/apis/crds and
// the core module's kwok/apis/crds at KARPENTER_VERSION), "v1beta1" the
// provider module's at v0.36.2, and "v1alpha5" testdata/crds/v1alpha5 at
// the repository root, which no module the proxy serves carries.
func CRDDir(name string) (string, error) {
	ctx := context.Background()
	switch name {
	case "v1", "kwok":
		version, err := KarpenterVersion()
		if err != nil {
			return "", err
		}
		if name == "kwok" {
			dir, err := ModuleDir(ctx, CoreModule, version)
			return filepath.Join(dir, "kwok", "apis", "crds"), err
		}
		return ProviderCRDDir(ctx, version)
	case "v1beta1":
		return ProviderCRDDir(ctx, v1beta1Version)
	case "v1alpha5":
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		return filepath.Join(root, "testdata", "crds", name), nil
	}
	return "", fmt.Errorf("CRD directory %q: want v1, kwok, v1beta1 or v1alpha5", name)
}

// ProviderCRDDir is pkg/apis/crds of Karpenter's provider module at
// version: the CRDs its chart installs.
func ProviderCRDDir(ctx context.Context, version string) (string, error) {
	dir, err := ModuleDir(ctx, ProviderModule, version)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "pkg", "apis", "crds"), nil
}

// KarpenterChart returns the official chart (charts/karpenter of the
// provider module) at version, prepared as Karpenter's release prepares
// it before `helm package` (hack/release/common.sh): Chart.yaml's version
// and appVersion set to the release (at a tag they still name the previous
// one), and crds/ (symlinks in the repository, absent from the module)
// filled with the module's pkg/apis/crds. It is prepared once per version
// under $KM_CACHE/karpenter-chart-<version>/karpenter, outside the
// repository.
func KarpenterChart(ctx context.Context, version string) (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	v := strings.TrimPrefix(version, "v")
	final := filepath.Join(cache, "karpenter-chart-"+v)
	chart := filepath.Join(final, "karpenter")
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err == nil {
		return chart, nil
	}
	mod, err := ModuleDir(ctx, ProviderModule, "v"+v)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("prepare the Karpenter chart: %w", err)
	}
	tmp, err := os.MkdirTemp(cache, ".karpenter-chart-"+v+"-")
	if err != nil {
		return "", fmt.Errorf("prepare the Karpenter chart: %w", err)
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, "karpenter")
	// CopyFS makes the files writable (the module cache's are not).
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(mod, "charts", "karpenter"))); err != nil {
		return "", fmt.Errorf("copy the Karpenter %s chart from the module cache: %w", v, err)
	}
	if err := setChartVersion(filepath.Join(dst, "Chart.yaml"), v); err != nil {
		return "", err
	}
	crds := os.DirFS(filepath.Join(mod, "pkg", "apis", "crds"))
	if err := os.CopyFS(filepath.Join(dst, "crds"), crds); err != nil {
		return "", fmt.Errorf("copy the Karpenter %s CRDs into its chart: %w", v, err)
	}
	// Rename into place; a concurrent test process may have won the race.
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(chart, "Chart.yaml")); serr == nil {
			return chart, nil
		}
		return "", fmt.Errorf("prepare the Karpenter chart: %w", err)
	}
	return chart, nil
}

var chartVersionLine = regexp.MustCompile(`(?m)^(version|appVersion):.*$`)

// setChartVersion does what the release's `yq e -i '.appVersion = V'` and
// `'.version = V'` do to Chart.yaml.
func setChartVersion(path, version string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("prepare the Karpenter chart: %w", err)
	}
	n := 0
	b = chartVersionLine.ReplaceAllFunc(b, func(line []byte) []byte {
		n++
		key, _, _ := bytes.Cut(line, []byte(":"))
		return fmt.Appendf(nil, "%s: %s", key, version)
	})
	if n != 2 {
		return fmt.Errorf("%s: want one top-level version and one appVersion line, found %d; the chart's layout changed", path, n)
	}
	return os.WriteFile(path, b, 0o644)
}

// cacheDir is ${KM_CACHE:-$HOME/.cache/karpenter-migrate}.
func cacheDir() (string, error) {
	if c := os.Getenv("KM_CACHE"); c != "" {
		return c, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate the cache: %w", err)
	}
	return filepath.Join(home, ".cache", "karpenter-migrate"), nil
}

// ControlPlaneChart is the official chart at the Karpenter version the
// control plane runs (KarpenterChart), for a test whose step 07 installs it
// as plan --karpenter-chart, since no registry is reachable.
func ControlPlaneChart(t testing.TB) string {
	t.Helper()
	version, err := KarpenterVersion()
	if err != nil {
		t.Fatal(err)
	}
	chart, err := KarpenterChart(t.Context(), version)
	if err != nil {
		t.Fatal(err)
	}
	return chart
}
