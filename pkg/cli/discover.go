package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

type discoverOptions struct {
	cluster         string
	snapshot        string
	includeUserData bool
	skipKube        bool
	offline         bool
	// acknowledge are readiness finding IDs reviewed and accepted (the
	// config's readiness.acknowledge).
	acknowledge []string
	// config is --config (nil: none given).
	config *config.Config
}

func newDiscoverCmd(g *GlobalOptions) *cobra.Command {
	o := &discoverOptions{}
	var configPath string
	cmd := &cobra.Command{
		Use:   "discover --cluster NAME [--snapshot FILE] [--include-user-data]",
		Short: "Find the Cluster Autoscaler node groups, their nodes and workloads, and what blocks a move",
		Long: `discover reads EKS (cluster, managed node groups), Auto Scaling (groups tagged for Cluster
Autoscaler or owned by EKS, with their node-template tags), EC2 (launch templates and
their user data, instances, subnets, security groups, the region's instance types,
offerings and spot prices), the Price List API (the region's on-demand prices) and Kubernetes
(nodes, pods, PDBs, DaemonSets, volumes, Cluster Autoscaler, aws-auth, Karpenter), and
prints a table per node group followed by the readiness report. With --config, the
findings the config's readiness.acknowledge lists are reported as acknowledged.

--snapshot writes the inventory as versioned, deterministic JSON that generate, plan,
readiness and demo read offline; it records the prices it read and when, so a plan made
from it later prices the cluster the same way. Prices are cached for a day in the user
cache directory. With --offline, or when AWS denies the price calls, the embedded
us-east-1 list prices stand in, with a warning. Launch template user data is parsed,
then redacted unless --include-user-data.`,
		Example: `  # Discover a cluster and save the snapshot
  karpenter-migrate discover --cluster prod --region eu-west-1 --snapshot snapshot.json

  # Machine-readable inventory
  karpenter-migrate discover --cluster prod -o json > inventory.json

  # The cluster, region and profile of an environment's migration config
  karpenter-migrate discover --config migrations/prod.yaml --snapshot snapshot.json

  # AWS side only, against a local endpoint
  karpenter-migrate discover --cluster prod --skip-kubernetes --endpoint-url http://127.0.0.1:4566`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := discoverConfig(g, o, configPath); err != nil {
				return err
			}
			return runDiscover(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cluster, "cluster", "", "EKS cluster name (also the suffix of the k8s.io/cluster-autoscaler/<name> tag)")
	f.StringVar(&o.snapshot, "snapshot", "", "write the inventory snapshot to this file")
	f.BoolVar(&o.includeUserData, "include-user-data", false, "keep launch template user data in the snapshot (it may hold secrets)")
	f.BoolVar(&o.skipKube, "skip-kubernetes", false, "read AWS only")
	f.BoolVar(&o.offline, "offline", false, offlineUsage)
	f.StringVar(&configPath, "config", "", "environment migration config: its cluster, region and profile unless given as flags, and its acknowledged readiness findings")
	return cmd
}

func runDiscover(ctx context.Context, g *GlobalOptions, o *discoverOptions) error {
	if o.cluster == "" {
		return usageError(errors.New("--cluster is required: the EKS cluster name"))
	}
	live := action.Live{AWS: g.awsOptions("")}
	if !o.skipKube {
		rc, err := g.RESTConfig()
		if err != nil {
			return err
		}
		live.REST = rc
	}
	c, err := g.configure(ctx, live)
	if err != nil {
		return err
	}
	d := action.Discover{Cluster: o.cluster, IncludeUserData: o.includeUserData, Snapshot: o.snapshot}
	d.Prices, d.PriceCache = livePrices(c.AWS, o.offline)
	var inv *inventory.Inventory
	err = g.discovery().run(ctx, func(ctx context.Context, stage func(string)) error {
		d.Progress = stage
		inv, err = c.Discover(ctx, d)
		return err
	})
	if err != nil {
		return err
	}
	if o.snapshot != "" {
		g.say(slog.LevelInfo, eventWrote, "wrote ", o.snapshot, slog.String("path", o.snapshot))
	}
	cat, err := g.inventoryCatalog(inv)
	if err != nil {
		return err
	}
	report := acknowledgeFindings(g, readinessReport(g, inv, cat, o.config), o.acknowledge)
	if done, err := printStructured(g.IO.Out, g.Output, struct {
		Inventory *inventory.Inventory `json:"inventory"`
		Readiness readinessResult      `json:"readiness"`
	}{inv, report}); done {
		return err
	}
	printNodeGroups(g.IO.Out, inv, cat)
	fmt.Fprintln(g.IO.Out)
	printReadiness(g.IO.Out, report)
	return nil
}

// printNodeGroups writes one row per node group.
func printNodeGroups(w io.Writer, inv *inventory.Inventory, cat *catalog.Catalog) {
	tw := newTable(w)
	fmt.Fprintln(tw, "NODE GROUP\tKIND\tNODES\tINSTANCE TYPES\tZONES\tCAPACITY\tPODS\tCPU REQ/ALLOC\tMEM REQ/ALLOC\t$/H")
	for _, ng := range inv.NodeGroups {
		nodes := inv.NodesOf(ng.Name)
		names := make([]string, len(nodes))
		var cpuA, memA resource.Quantity
		for i, n := range nodes {
			names[i] = n.Name
			cpuA.Add(n.Allocatable[corev1.ResourceCPU])
			memA.Add(n.Allocatable[corev1.ResourceMemory])
		}
		pods := inv.PodsOn(names...)
		var cpuR, memR resource.Quantity
		for _, p := range pods {
			cpuR.Add(p.Requests[corev1.ResourceCPU])
			memR.Add(p.Requests[corev1.ResourceMemory])
		}
		var price float64
		priced := true
		for _, in := range ng.Instances {
			pr, ok := cat.Price(in.InstanceType, in.CapacityType, in.Zone)
			priced = priced && ok
			price += pr
		}
		cost := fmt.Sprintf("%.3f", price)
		if !priced {
			cost += "*"
		}
		count := len(nodes)
		if count == 0 {
			count = len(ng.Instances)
		}
		zones := append([]string{}, ng.Zones...)
		sort.Strings(zones)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s/%s\t%s/%s\t%s\n", ng.Name, ng.Kind, count, strings.Join(ng.InstanceTypes, ","),
			strings.Join(zones, ","), ng.CapacityType, len(pods), cpuR.String(), cpuA.String(), gib(memR), gib(memA), cost)
	}
	_ = tw.Flush()
}

func gib(q resource.Quantity) string {
	return fmt.Sprintf("%.1fGi", float64(q.Value())/(1<<30))
}

// printReadiness writes the findings, most severe first, then the
// acknowledged ones.
func printReadiness(w io.Writer, r readinessResult) {
	switch {
	case len(r.Findings) == 0 && len(r.Acknowledged) == 0:
		fmt.Fprintln(w, "Readiness: no findings.")
		return
	case len(r.Acknowledged) == 0:
		fmt.Fprintf(w, "Readiness: %d blocker(s), %d warning(s)\n", r.Blockers, r.Warnings)
	default:
		fmt.Fprintf(w, "Readiness: %d blocker(s), %d warning(s), %d acknowledged\n", r.Blockers, r.Warnings, len(r.Acknowledged))
	}
	for _, f := range r.Findings {
		printFinding(w, f, "")
	}
	for _, f := range r.Acknowledged {
		printFinding(w, f, ", acknowledged")
	}
}

func printFinding(w io.Writer, f readiness.Finding, note string) {
	fmt.Fprintf(w, "\n[%s] %s (%s%s)\n", strings.ToUpper(string(f.Severity)), f.Title, f.ID, note)
	for _, o := range f.Objects {
		fmt.Fprintf(w, "  - %s\n", o)
	}
	fmt.Fprintf(w, "  why: %s\n  fix: %s\n", f.Why, f.Fix)
}
