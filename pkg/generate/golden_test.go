package generate

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var allEnvs = []string{"dev", "staging", "prod"}

func loadFixture(t testing.TB, name string) *inventory.Inventory {
	t.Helper()
	s, err := inventory.ReadSnapshotFile(filepath.Join("testdata", "inventories", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return &s.Inventory
}

func fixtureNames(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("testdata", "inventories"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	return names
}

// readTree returns every file under dir by slash-separated relative path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func findingsText(r *Report) []byte {
	var b bytes.Buffer
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, p := range r.Pools {
		w := "-"
		if p.Weight != nil {
			w = fmt.Sprint(*p.Weight)
		}
		fmt.Fprintf(&b, "pool: %s class=%s groups=%s capacity=%s weight=%s types=%d\n",
			p.Name, p.NodeClass, strings.Join(p.NodeGroups, ","), strings.Join(p.CapacityTypes, ","), w, p.InstanceTypes)
	}
	return b.Bytes()
}

// TestGolden generates every fixture inventory with every strategy and
// compares the written tree, the built overlays and the findings with
// testdata/golden/<fixture>/<strategy>. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	for _, fixture := range fixtureNames(t) {
		for _, strategy := range []Strategy{StrategyMultiple, StrategySingle, StrategyWeighted} {
			t.Run(fixture+"/"+string(strategy), func(t *testing.T) {
				t.Parallel()
				inv := loadFixture(t, fixture)
				opts := DefaultOptions()
				opts.Strategy = strategy
				dir := t.TempDir()
				rep, err := Run(context.Background(), inv, opts, TreeOptions{Dir: dir, Envs: allEnvs})
				if err != nil {
					t.Fatal(err)
				}
				got := map[string][]byte{}
				for rel, b := range readTree(t, dir) {
					got["tree/"+rel] = b
				}
				for _, env := range allEnvs {
					built, err := BuildOverlay(dir, env)
					if err != nil {
						t.Fatal(err)
					}
					got["built/"+env+".yaml"] = built
				}
				got["findings.txt"] = findingsText(rep)
				compareGolden(t, filepath.Join("testdata", "golden", fixture, string(strategy)), got)
			})
		}
	}
}

func compareGolden(t *testing.T, dir string, got map[string][]byte) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for rel, b := range got {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	want := readTree(t, dir)
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		w, inWant := want[n]
		g, inGot := got[n]
		switch {
		case !inWant:
			t.Errorf("%s: unexpected file (run go test -update if intended)", n)
		case !inGot:
			t.Errorf("%s: missing file", n)
		case !bytes.Equal(w, g):
			t.Errorf("%s differs from %s (run go test -update if intended):\n--- got\n%s\n--- want\n%s", n, dir, g, w)
		}
	}
}
