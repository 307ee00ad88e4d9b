package generate

import (
	"context"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Report is what Run did: the generated objects and findings, and the files
// of the tree.
type Report struct {
	*Result
	Tree *TreeReport `json:"tree"`
}

// Run generates from the inventory and writes the tree: what the generate
// command does. Profiles are checked before anything is generated, so an
// unknown environment fails fast.
func Run(ctx context.Context, inv *inventory.Inventory, opts Options, tree TreeOptions) (*Report, error) {
	if tree.Profiles == nil {
		ps, err := LoadProfiles(tree.ProfilesDir)
		if err != nil {
			return nil, err
		}
		tree.Profiles = ps
	}
	if _, err := tree.Profiles.Select(tree.Envs); err != nil {
		return nil, err
	}
	res, err := Generate(inv, opts)
	if err != nil {
		return nil, err
	}
	tr, err := Write(ctx, res, tree)
	if err != nil {
		return nil, err
	}
	return &Report{Result: res, Tree: tr}, nil
}
