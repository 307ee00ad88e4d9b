package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

type generateOptions struct {
	snapshot        string
	cluster         string
	includeUserData bool
	gen             generate.Options
	tree            generate.TreeOptions
	strategy        string
	flex            string
	selector        string
	config          string
	job             jobFlags
}

func newGenerateCmd(g *GlobalOptions) *cobra.Command {
	o := &generateOptions{gen: generate.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "generate --snapshot FILE|--cluster NAME [--out DIR] [--envs dev,staging,prod] [--strategy multiple|single|weighted] [--flexibility exact|family|similar]",
		Short: "Generate Karpenter v1 NodePools and EC2NodeClasses from the node groups, as a kustomize tree",
		Long: `generate maps every node group of an inventory snapshot (or of a cluster it discovers
live with --cluster, as discover does) to a Karpenter v1 NodePool and
EC2NodeClass (instance types, zones, architecture, capacity type, labels, taints, limits,
AMI, user data, block devices, IMDS, kubelet settings) and writes them as a kustomize tree:

  DIR/base/{nodepools,ec2nodeclasses}/<name>.yaml + kustomization.yaml
  DIR/overlays/<env>/kustomization.yaml + patches/   one per --envs profile
  DIR/helm/karpenter-values.yaml                     the Karpenter chart values

Strategies: multiple (one pool per group), single (merge the groups that can share a
pool; the output says why the others cannot), weighted (pools per capacity type, the
first in --weight-order preferred). Every overlay is built with kustomize before
anything is written. Files you edited are kept unless --force; a re-run on the same
inventory changes nothing. Groups that cannot be mapped are reported and skipped.`,
		Example: `  # The whole tree for three environments from a snapshot
  karpenter-migrate generate --snapshot snapshot.json --out karpenter/

  # One merged pool where possible, wider instance choice for spot
  karpenter-migrate generate --snapshot snapshot.json --out karpenter/ --strategy single --flexibility similar

  # On-demand before spot, selecting subnets and security groups by id
  karpenter-migrate generate --snapshot snapshot.json --strategy weighted --selectors ids

  # Only prod, with your own profiles added to the built-in ones, and pause pods
  karpenter-migrate generate --snapshot snapshot.json --envs prod --profiles my-profiles/ --overprovisioning

  # Straight from the live cluster, carrying custom user data into the EC2NodeClasses
  karpenter-migrate generate --cluster prod --region eu-west-1 --include-user-data --out karpenter/

  # Then apply one environment
  kubectl apply -k karpenter/overlays/prod

  # The choices of an environment's migration config, for its overlay only
  karpenter-migrate generate --snapshot snapshot.json --config migrations/prod.yaml

  # An in-cluster Job (+ ServiceAccount, minimal RBAC) applying prod's reviewed plan
  karpenter-migrate generate --job --plan plan.yaml --out karpenter/ --image ghcr.io/acme/karpenter-migrate:v1.0.0`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGenerate(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.snapshot, "snapshot", "", "inventory snapshot to generate from (written by discover)")
	f.StringVar(&o.cluster, "cluster", "", "discover this EKS cluster live instead of reading --snapshot")
	f.BoolVar(&o.includeUserData, "include-user-data", false, "with --cluster: read launch template user data so custom commands are carried (it may hold secrets)")
	f.StringVar(&o.tree.Dir, "out", "karpenter", "directory of the kustomize tree")
	f.StringSliceVar(&o.tree.Envs, "envs", []string{"dev", "staging", "prod"}, "environment profiles to write overlays for")
	f.StringVar(&o.tree.ProfilesDir, "profiles", "", "directory of extra profiles (<dir>/<name>/profile.yaml); a name given there replaces the built-in one")
	f.BoolVar(&o.tree.Force, "force", false, "overwrite generated files you edited")
	f.StringVar(&o.strategy, "strategy", string(generate.StrategyMultiple), "multiple|single|weighted")
	f.StringVar(&o.flex, "flexibility", string(generate.FlexibilityExact), "instance types: exact (the group's), family (its families and sizes), similar (same category and arch, at least as large)")
	f.StringVar(&o.selector, "selectors", string(generate.SelectorsTag), "subnets and security groups: tag (karpenter.sh/discovery=<cluster>) or ids (the group's)")
	f.BoolVar(&o.gen.KeepNodeGroupLabel, "keep-nodegroup-label", true, "label a managed group's nodes eks.amazonaws.com/nodegroup=<group> so pinned workloads keep scheduling")
	f.StringVar(&o.gen.NodeRole, "node-role", "", "EC2NodeClass role: a role name, or "+generate.NodeRoleFromNodeGroup+" for each group's (default KarpenterNodeRole-<cluster>)")
	f.StringSliceVar(&o.gen.WeightOrder, "weight-order", o.gen.WeightOrder, "weighted strategy: capacity types, most preferred first")
	f.BoolVar(&o.gen.KeepAL2, "keep-al2", false, "keep Amazon Linux 2 AMIs instead of moving them to AL2023")
	f.StringVar(&o.gen.ControllerNodeGroup, "controller-nodegroup", "", "managed node group the Karpenter controller stays on (default: picked)")
	f.BoolVar(&o.gen.Overprovisioning, "overprovisioning", false, "add pause pods under a negative PriorityClass to keep capacity warm")
	f.StringVar(&o.config, "config", "", "environment migration config: strategy, flexibility, keepNodegroupLabel, out, controller.nodeGroup, the environment's overlay and the node groups in scope (flags win)")
	o.job.bind(cmd)
	return cmd
}

func runGenerate(cmd *cobra.Command, g *GlobalOptions, o *generateOptions) error {
	if o.job.enabled {
		return runGenerateJob(cmd.Context(), g, o)
	}
	cfg, err := generateConfig(cmd, o, o.config)
	if err != nil {
		return err
	}
	if err := oneOf("strategy", o.strategy, string(generate.StrategyMultiple), string(generate.StrategySingle), string(generate.StrategyWeighted)); err != nil {
		return err
	}
	if err := oneOf("flexibility", o.flex, string(generate.FlexibilityExact), string(generate.FlexibilityFamily), string(generate.FlexibilitySimilar)); err != nil {
		return err
	}
	if err := oneOf("selectors", o.selector, string(generate.SelectorsTag), string(generate.SelectorsIDs)); err != nil {
		return err
	}
	var inv *inventory.Inventory
	switch {
	case o.snapshot != "" && o.cluster != "":
		return usageError(errors.New("give --snapshot FILE or --cluster NAME, not both"))
	case o.snapshot != "":
		snap, err := inventory.ReadSnapshotFile(o.snapshot)
		if err != nil {
			return fmt.Errorf("--snapshot: %w", err) // err names the file
		}
		inv = &snap.Inventory
	case o.cluster != "":
		var err error
		if inv, err = discoverLive(cmd.Context(), g, o.cluster, g.Region, o.includeUserData, true); err != nil {
			return err
		}
	default:
		return usageError(errors.New("--snapshot FILE or --cluster NAME is required: generate from a discover snapshot or discover the cluster now"))
	}
	inScope(inv, cfg)
	o.gen.Strategy = generate.Strategy(o.strategy)
	o.gen.Flexibility = generate.Flexibility(o.flex)
	o.gen.Selectors = generate.SelectorMode(o.selector)
	o.gen.Namespace = g.Namespace

	rep, err := (&action.Generate{Options: o.gen, Tree: o.tree}).Run(cmd.Context(), inv)
	if err != nil {
		return err
	}
	if ok, err := printStructured(g.IO.Out, g.Output, rep); ok {
		return err
	}
	printGenerateReport(g, rep)
	return nil
}

// discoverLive reads the cluster from AWS and Kubernetes as discover does,
// in region (empty: the SDK's default chain).
func discoverLive(ctx context.Context, g *GlobalOptions, cluster, region string, includeUserData, offline bool) (*inventory.Inventory, error) {
	rc, err := g.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := g.configure(ctx, action.Live{REST: rc, AWS: g.awsOptions(region)})
	if err != nil {
		return nil, err
	}
	d := action.Discover{Cluster: cluster, IncludeUserData: includeUserData}
	d.Prices, d.PriceCache = livePrices(c.AWS, offline)
	var inv *inventory.Inventory
	err = g.discovery().run(ctx, func(ctx context.Context, stage func(string)) error {
		d.Progress = stage
		inv, err = c.Discover(ctx, d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("discover cluster %s: %w", cluster, err)
	}
	return inv, nil
}

func printGenerateReport(g *GlobalOptions, rep *generate.Report) {
	w := newTable(g.IO.Out)
	fmt.Fprintln(w, "NODEPOOL\tEC2NODECLASS\tNODE GROUPS\tCAPACITY\tWEIGHT\tTYPES")
	for _, p := range rep.Pools {
		weight := "-"
		if p.Weight != nil {
			weight = fmt.Sprint(*p.Weight)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", p.Name, p.NodeClass, strings.Join(p.NodeGroups, ","), strings.Join(p.CapacityTypes, ","), weight, p.InstanceTypes)
	}
	_ = w.Flush()

	counts := map[generate.FileAction]int{}
	var kept []string
	for _, f := range rep.Tree.Files {
		counts[f.Action]++
		if f.Action == generate.FileKept {
			kept = append(kept, f.Path)
		}
	}
	var parts []string
	for _, a := range []generate.FileAction{generate.FileCreated, generate.FileUpdated, generate.FileOverwritten, generate.FileUnchanged, generate.FileKept} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	var envs []string
	for _, env := range slices.Sorted(maps.Keys(rep.Tree.Built)) {
		envs = append(envs, fmt.Sprintf("%s (%d objects)", env, rep.Tree.Built[env]))
	}
	fmt.Fprintf(g.IO.Out, "\nWrote %s: %s. Built overlays: %s.\n", rep.Tree.Dir, strings.Join(parts, ", "), strings.Join(envs, ", "))
	if len(kept) > 0 {
		fmt.Fprintf(g.IO.Out, "Kept because you edited them (--force overwrites): %s\n", strings.Join(kept, ", "))
	}
	for _, f := range rep.Notes {
		g.say(slog.LevelInfo, eventNote, "note: ", f.String(), slog.String("subject", f.Subject))
	}
	for _, f := range append(rep.Warnings, rep.Tree.Warnings...) {
		g.say(slog.LevelWarn, eventWarning, "warning: ", f.String(), slog.String("subject", f.Subject))
	}
}
