package action

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Generate maps an inventory's node groups to NodePools and EC2NodeClasses
// and writes them as a kustomize tree.
type Generate struct {
	// Options are generate's choices; a nil Catalog is the inventory's
	// (catalog.ForInventory).
	Options generate.Options
	Tree    generate.TreeOptions
}

func (a *Generate) options(inv *inventory.Inventory) (generate.Options, error) {
	o := a.Options
	if o.Catalog == nil {
		cat, err := catalog.ForInventory(inv)
		if err != nil {
			return o, err
		}
		o.Catalog = cat
	}
	return o, nil
}

// Run generates and writes the tree (generate.Run).
func (a *Generate) Run(ctx context.Context, inv *inventory.Inventory) (*generate.Report, error) {
	o, err := a.options(inv)
	if err != nil {
		return nil, err
	}
	return generate.Run(ctx, inv, o, a.Tree)
}

// FilePreview is one file of a previewed tree.
type FilePreview struct {
	Path string
	// Action is what writing would do: created, updated, unchanged or kept
	// (a file the user edited is kept).
	Action generate.FileAction
	// Diff is a unified diff against the file on disk (the whole file as
	// added lines when it is new).
	Diff string
}

// GeneratePreview is what Run would write, compared with Tree.Dir.
type GeneratePreview struct {
	Pools    []generate.PoolSummary
	Files    []FilePreview
	Warnings []generate.Finding
}

// Preview writes the tree into a temporary directory and compares it file
// by file with the one in Tree.Dir, which it leaves alone.
func (a *Generate) Preview(ctx context.Context, inv *inventory.Inventory) (*GeneratePreview, error) {
	o, err := a.options(inv)
	if err != nil {
		return nil, err
	}
	gen, err := generate.Generate(inv, o)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "karpenter-migrate-preview-")
	if err != nil {
		return nil, fmt.Errorf("preview directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	tree := a.Tree
	tree.Dir = tmp
	rep, err := generate.Write(ctx, gen, tree)
	if err != nil {
		return nil, err
	}
	res := &GeneratePreview{Pools: gen.Pools, Warnings: append(gen.Warnings, rep.Warnings...)}
	for _, f := range rep.Files {
		fp, err := previewFile(tmp, a.Tree.Dir, f.Path)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, fp)
	}
	return res, nil
}

// previewFile compares the file rel of the new tree with the one on disk.
func previewFile(newRoot, oldRoot, rel string) (FilePreview, error) {
	fp := FilePreview{Path: rel}
	next, err := os.ReadFile(filepath.Join(newRoot, filepath.FromSlash(rel)))
	if err != nil {
		return fp, fmt.Errorf("preview %s: %w", rel, err)
	}
	prev, err := os.ReadFile(filepath.Join(oldRoot, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, os.ErrNotExist):
		fp.Action = generate.FileCreated
	case err != nil:
		return fp, fmt.Errorf("read %s: %w", filepath.Join(oldRoot, rel), err)
	case string(prev) == string(next):
		fp.Action = generate.FileUnchanged
		return fp, nil
	case generate.Edited(prev):
		fp.Action = generate.FileKept
	default:
		fp.Action = generate.FileUpdated
	}
	fp.Diff, err = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(prev)), B: difflib.SplitLines(string(next)),
		FromFile: "a/" + rel, ToFile: "b/" + rel, Context: 3,
	})
	if err != nil {
		return fp, fmt.Errorf("diff %s: %w", rel, err)
	}
	return fp, nil
}
