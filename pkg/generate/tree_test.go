package generate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runAll(t *testing.T, dir string, force bool) *Report {
	t.Helper()
	rep, err := Run(context.Background(), loadFixture(t, "all"), DefaultOptions(), TreeOptions{Dir: dir, Envs: allEnvs, Force: force})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func actions(rep *Report) map[string]FileAction {
	out := map[string]FileAction{}
	for _, f := range rep.Tree.Files {
		out[f.Path] = f.Action
	}
	return out
}

func TestRerunProducesNoDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := runAll(t, dir, false)
	for _, f := range first.Tree.Files {
		if f.Action != FileCreated {
			t.Errorf("first run: %s %s, want created", f.Path, f.Action)
		}
	}
	before := readTree(t, dir)
	second := runAll(t, dir, false)
	for _, f := range second.Tree.Files {
		if f.Action != FileUnchanged {
			t.Errorf("second run: %s %s, want unchanged", f.Path, f.Action)
		}
	}
	after := readTree(t, dir)
	if len(before) != len(after) {
		t.Fatalf("re-run changed the number of files: %d then %d", len(before), len(after))
	}
	for p, b := range before {
		if !bytes.Equal(b, after[p]) {
			t.Errorf("re-run changed %s", p)
		}
	}
}

func TestUserEditsAreKept(t *testing.T) {
	t.Parallel()
	const target = "base/nodepools/general.yaml"
	tests := []struct {
		name  string
		edit  func(old []byte) []byte
		force bool
		want  FileAction
	}{
		{"edited body kept", func(old []byte) []byte {
			return bytes.Replace(old, []byte("consolidateAfter: 15m0s"), []byte("consolidateAfter: 1h0m0s"), 1)
		}, false, FileKept},
		{"header removed kept", func(old []byte) []byte { return bytes.SplitN(old, []byte("\n"), 4)[3] }, false, FileKept},
		{"edited body overwritten with force", func(old []byte) []byte { return append(old, []byte("# my note\n")...) }, true, FileOverwritten},
		{"unedited but stale is updated", func(old []byte) []byte {
			// A file generated from other input: valid header, other body.
			return withHeader([]byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: general\nspec: {}\n"))
		}, false, FileUpdated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			runAll(t, dir, false)
			p := filepath.Join(dir, filepath.FromSlash(target))
			old, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			edited := tt.edit(old)
			if err := os.WriteFile(p, edited, 0o644); err != nil {
				t.Fatal(err)
			}
			rep := runAll(t, dir, tt.force)
			if got := actions(rep)[target]; got != tt.want {
				t.Fatalf("action = %s, want %s", got, tt.want)
			}
			now, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			switch tt.want {
			case FileKept:
				if !bytes.Equal(now, edited) {
					t.Error("an edited file was changed without --force")
				}
			default:
				if !bytes.Equal(now, old) {
					t.Errorf("file not regenerated:\n%s", now)
				}
			}
			for path, a := range actions(rep) {
				if path != target && a != FileUnchanged {
					t.Errorf("%s: %s, want unchanged", path, a)
				}
			}
		})
	}
}

func TestKeptEditedBuildsUserVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runAll(t, dir, false)
	p := filepath.Join(dir, "base", "nodepools", "general.yaml")
	old, _ := os.ReadFile(p)
	edited := bytes.Replace(old, []byte("team: platform"), []byte("team: payments"), 1)
	if bytes.Equal(old, edited) {
		t.Fatal("fixture changed: no team label to edit")
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	runAll(t, dir, false)
	built, err := BuildOverlay(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(built, []byte("team: payments")) {
		t.Error("the built overlay does not carry the user's edit")
	}
}

func TestEditedKustomizationMissingPoolWarns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runAll(t, dir, false)
	edit := func(rel, drop string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		old, _ := os.ReadFile(p)
		edited := bytes.Replace(old, []byte(drop), nil, 1)
		if bytes.Equal(old, edited) {
			t.Fatalf("%s has no %q to remove", rel, drop)
		}
		if err := os.WriteFile(p, edited, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Only the base drops the pool: the overlays' patches for it cannot apply.
	edit("base/"+Kustomization, "- nodepools/gpu.yaml\n")
	_, err := Run(context.Background(), loadFixture(t, "all"), DefaultOptions(), TreeOptions{Dir: dir, Envs: allEnvs})
	if err == nil || !strings.Contains(err.Error(), "files kept because they were edited: base/kustomization.yaml") {
		t.Fatalf("error %v, want one naming the kept kustomization.yaml", err)
	}
	// The overlays drop its patches too: the tree builds, without the pool.
	for _, env := range allEnvs {
		edit("overlays/"+env+"/"+Kustomization, "- path: patches/nodepool-gpu.yaml\n")
	}
	rep := runAll(t, dir, false)
	if actions(rep)["base/"+Kustomization] != FileKept {
		t.Fatal("edited kustomization.yaml not kept")
	}
	var got []string
	for _, w := range rep.Tree.Warnings {
		if strings.Contains(w.Message, "NodePool gpu") {
			got = append(got, w.Subject)
		}
	}
	if strings.Join(got, ",") != "dev,staging,prod" {
		t.Errorf("warnings about the missing NodePool for %v, want every environment; all: %v", got, rep.Tree.Warnings)
	}
}

func TestBrokenOverlayWritesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runAll(t, dir, false)
	// A user edit that breaks the prod overlay: the patch names a field
	// Karpenter v1 does not have.
	p := filepath.Join(dir, "overlays", "prod", "patches", "nodepool-general.yaml")
	old, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(old, []byte("  consolidation:\n    enabled: true\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	// Remove a generated file so a successful run would recreate it.
	gone := filepath.Join(dir, "base", "ec2nodeclasses", "gpu.yaml")
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), loadFixture(t, "all"), DefaultOptions(), TreeOptions{Dir: dir, Envs: allEnvs})
	if err == nil {
		t.Fatal("no error for an overlay that does not build")
	}
	for _, want := range []string{"nothing written", "overlay prod", "NodePool general", "consolidation"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Error("a file was written although an overlay failed to build")
	}
}

func TestEditedDetection(t *testing.T) {
	body := []byte("a: 1\n")
	good := withHeader(body)
	tests := []struct {
		name    string
		content []byte
		want    bool
	}{
		{"generated", good, false},
		{"body changed", append(good[:len(good)-2:len(good)-2], []byte("2\n")...), true},
		{"no header", body, true},
		{"empty", nil, true},
		{"hash changed", bytes.Replace(good, []byte("sha256:"), []byte("sha256:0"), 1), true},
		{"header only", withHeader(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Edited(tt.content); got != tt.want {
				t.Errorf("Edited = %v, want %v", got, tt.want)
			}
		})
	}
}

func FuzzEdited(f *testing.F) {
	f.Add(withHeader([]byte("a: 1\n")))
	f.Add([]byte("# x\n# y\n# z\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if Edited(withHeader(b)) {
			t.Fatalf("a freshly generated file reads as edited: %q", b)
		}
		_ = Edited(b)
	})
}

func TestBuildOverlayErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := BuildOverlay(dir, "dev"); err == nil || !strings.Contains(err.Error(), "overlay dev") {
		t.Errorf("BuildOverlay on an empty directory: %v, want an error naming the overlay", err)
	}
}
