package cli

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// --config maps an environment's migration config (pkg/config) onto the
// options of discover, generate and apply; plan reads it itself. A flag
// given on the command line wins over the file.

// configGlobals fills --region and --profile from the config when unset.
func configGlobals(g *GlobalOptions, c *config.Config) {
	if g.Region == "" {
		g.Region = c.Region
	}
	if g.Profile == "" {
		g.Profile = c.Profile
	}
}

// applyConfig loads apply's --config: region and profile, and the
// maintenance window, outside which apply (but not --dry-run) stops with
// the paused exit code before touching anything.
func applyConfig(g *GlobalOptions, f *runFlags, path string, now time.Time) error {
	if path == "" {
		return nil
	}
	c, err := config.Load(path)
	if err != nil {
		return err
	}
	configGlobals(g, c)
	if f.dryRun {
		return nil
	}
	open, err := c.MaintenanceWindow.InWindow(now)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !open {
		w := c.MaintenanceWindow
		return &ExitError{Code: ExitPaused, Err: fmt.Errorf("outside the maintenance window of %s (%q for %s, %s): nothing was changed; run again inside the window",
			path, w.Schedule, w.Duration, w.TimeZone)}
	}
	return nil
}

// discoverConfig loads discover's --config: the cluster (when --cluster is
// unset), region, profile and the readiness findings acknowledged.
func discoverConfig(g *GlobalOptions, o *discoverOptions, path string) error {
	if path == "" {
		return nil
	}
	c, err := config.Load(path)
	if err != nil {
		return err
	}
	configGlobals(g, c)
	if o.cluster == "" {
		o.cluster = c.Cluster
	}
	o.acknowledge, o.config = c.Readiness.Acknowledge, c
	return nil
}

// readinessConfig loads readiness's --config: readiness.failOn unless
// --fail-on is given (never: no threshold), and readiness.acknowledge.
func readinessConfig(cmd *cobra.Command, o *readinessOptions, path string) error {
	if path == "" {
		return nil
	}
	c, err := config.Load(path)
	if err != nil {
		return err
	}
	o.acknowledge, o.config = c.Readiness.Acknowledge, c
	if !cmd.Flags().Changed("fail-on") {
		o.failOn, o.failOnFrom = c.Readiness.FailOn, "readiness.failOn of "+path
		if o.failOn == "never" {
			o.failOn = ""
		}
	}
	return nil
}

// generateConfig loads generate's --config: strategy, flexibility,
// keepNodegroupLabel, the tree directory, the environment as the only
// overlay, and the node groups in scope.
func generateConfig(cmd *cobra.Command, o *generateOptions, path string) (*config.Config, error) {
	if path == "" {
		return nil, nil
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	set := func(flag string, apply func()) {
		if !cmd.Flags().Changed(flag) {
			apply()
		}
	}
	set("strategy", func() { o.strategy = c.Generate.Strategy })
	set("flexibility", func() { o.flex = c.Generate.Flexibility })
	set("keep-nodegroup-label", func() { o.gen.KeepNodeGroupLabel = c.Generate.KeepNodegroupLabel })
	set("out", func() { o.tree.Dir = c.Generate.Out })
	set("envs", func() { o.tree.Envs = []string{c.Environment} })
	set("controller-nodegroup", func() { o.gen.ControllerNodeGroup = c.Controller.NodeGroup })
	return c, nil
}

// inScope keeps the node groups the config includes and does not exclude,
// as plan does.
func inScope(inv *inventory.Inventory, c *config.Config) {
	if c == nil || (len(c.NodeGroups.Include) == 0 && len(c.NodeGroups.Exclude) == 0) {
		return
	}
	inv.NodeGroups = slices.DeleteFunc(inv.NodeGroups, func(ng inventory.NodeGroup) bool {
		if slices.Contains(c.NodeGroups.Exclude, ng.Name) {
			return true
		}
		return len(c.NodeGroups.Include) > 0 && !slices.Contains(c.NodeGroups.Include, ng.Name)
	})
}
