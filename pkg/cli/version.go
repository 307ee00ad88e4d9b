package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/version"
)

func newVersionCmd(g *GlobalOptions) *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the version, commit and Go version",
		Example:     "  karpenter-migrate version\n  karpenter-migrate version -o json",
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if done, err := printStructured(g.IO.Out, g.Output, info); done {
				return err
			}
			_, err := fmt.Fprintln(g.IO.Out, info.String())
			return err
		},
	}
}
