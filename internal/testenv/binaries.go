package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// controlPlaneDir is where the wrapper module, build script, versions and
// kwok stages live, relative to the repository root.
const controlPlaneDir = "scripts/controlplane"

// Binaries the control plane runs; build.sh produces all of them.
const (
	binEtcd              = "etcd"
	binAPIServer         = "kube-apiserver"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
	binKwok              = "kwok"
	binKarpenter         = "karpenter-kwok"
)

// RepoRoot returns the root of the karpenter-migrate repository, found by
// walking up from the working directory (a test's package directory) to the
// directory holding scripts/controlplane/versions.env.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, controlPlaneDir, "versions.env")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no %s/versions.env above the working directory", controlPlaneDir)
		}
		dir = parent
	}
}

// versions reads scripts/controlplane/versions.env, the KEY=VALUE file that
// build.sh sources.
func versions(root string) (map[string]string, error) {
	path := filepath.Join(root, controlPlaneDir, "versions.env")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read control plane versions: %w", err)
	}
	defer f.Close()
	v := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE, got %q", path, line, text)
		}
		v[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}

// cacheBinDir returns the directory build.sh writes the binaries to:
// ${KM_CACHE:-$HOME/.cache/karpenter-migrate}/bin-k8s<K>-kwok<W>-karpenter<C>.
func cacheBinDir(root string) (string, error) {
	v, err := versions(root)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, k := range []struct{ key, label string }{
		{"K8S_VERSION", "k8s"}, {"KWOK_VERSION", "kwok"}, {"KARPENTER_VERSION", "karpenter"},
	} {
		value, ok := v[k.key]
		if !ok {
			return "", fmt.Errorf("control plane versions: %s is not set", k.key)
		}
		parts = append(parts, k.label+strings.TrimPrefix(value, "v"))
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "bin-"+strings.Join(parts, "-")), nil
}

// findBinaries returns the directory holding every named binary: KM_BIN_DIR
// when set, else the build cache. A missing binary is an error that says how
// to build it.
func findBinaries(root string, names ...string) (string, error) {
	dir := os.Getenv("KM_BIN_DIR")
	if dir == "" {
		var err error
		if dir, err = cacheBinDir(root); err != nil {
			return "", err
		}
	}
	var missing []string
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, name)
		case err != nil:
			return "", fmt.Errorf("control plane binary %s: %w", name, err)
		case info.IsDir() || info.Mode()&0o111 == 0:
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("control plane binaries missing in %s: %s; run `make controlplane` "+
			"(scripts/controlplane/build.sh, about 10 minutes from a clean cache) or point KM_BIN_DIR at them; "+
			"set KM_SKIP_E2E=1 to skip these tests", dir, strings.Join(missing, ", "))
	}
	return dir, nil
}

// Stages returns the default kwok stages file (scripts/controlplane/stages.yaml).
func Stages() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, controlPlaneDir, "stages.yaml"), nil
}
