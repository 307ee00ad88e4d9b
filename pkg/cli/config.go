package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
)

func newConfigCmd(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Write and check per-environment migration config files",
		Example: `  karpenter-migrate config init prod --cluster shop --region eu-west-1
  karpenter-migrate config validate migrations/prod.yaml`,
	}
	cmd.AddCommand(newConfigInitCmd(g), newConfigValidateCmd(g))
	return cmd
}

func newConfigInitCmd(g *GlobalOptions) *cobra.Command {
	var cluster, out string
	var force bool
	cmd := &cobra.Command{
		Use:     "init ENV",
		Short:   "Write migrations/ENV.yaml with every setting, its default and what it does",
		Example: "  karpenter-migrate config init staging --cluster shop-staging --region us-east-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env := args[0]
			if out == "" {
				out = filepath.Join("migrations", env+".yaml")
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s already exists; pass --force to overwrite it", out)
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			b, err := config.InitFile(env, cluster, g.Region)
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(g.IO.Out, "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "EKS cluster name")
	cmd.Flags().StringVar(&out, "out", "", "file to write (default migrations/ENV.yaml)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	return cmd
}

func newConfigValidateCmd(g *GlobalOptions) *cobra.Command {
	return &cobra.Command{
		Use:         "validate FILE",
		Short:       "Check a migration config file and print it with defaults filled in",
		Example:     "  karpenter-migrate config validate migrations/prod.yaml -o yaml",
		Args:        cobra.ExactArgs(1),
		Annotations: writes("table", "yaml", "json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := config.Load(args[0])
			if err != nil {
				return err
			}
			if done, err := printStructured(g.IO.Out, g.Output, c); done {
				return err
			}
			fmt.Fprintf(g.IO.Out, "%s: valid (environment %s, strategy %s, waves of %s, concurrency %d)\n",
				args[0], c.Environment, c.Generate.Strategy, c.Rollout.WaveSize, c.Rollout.Concurrency)
			return nil
		},
	}
}
