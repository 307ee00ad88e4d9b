package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

type iamOptions struct {
	cluster, snapshot string
	opts              desired.Options
	identity          string
	only              []string
	journal           string
	backupDir         string
	dryRun, yes       bool
}

func newIAMCmd(g *GlobalOptions) *cobra.Command {
	o := &iamOptions{}
	cmd := &cobra.Command{
		Use:   "iam",
		Short: "Plan, create and remove the IAM, interruption queue and node access Karpenter needs",
		Long: `iam computes what Karpenter needs in AWS for one cluster — the node role
KarpenterNodeRole-<cluster>, the controller role and policies for the chosen Karpenter
version (IRSA or EKS Pod Identity), the interruption queue with its EventBridge rules,
karpenter.sh/discovery tags on the node groups' subnets and security groups, and node
access through an EKS access entry or the aws-auth ConfigMap — compares it with what
exists and applies only the difference. Everything it creates is tagged
karpenter-migrate.io/managed-by=karpenter-migrate and karpenter-migrate.io/cluster=<cluster>;
"iam delete" removes exactly those objects.`,
		Example: `  # What would change, with policy documents
  karpenter-migrate iam plan --cluster prod --region eu-west-1

  # Apply from a discovery snapshot, EKS Pod Identity, after confirming
  karpenter-migrate iam apply --snapshot snapshot.json --identity pod-identity

  # Remove everything iam apply created
  karpenter-migrate iam delete --cluster prod --yes`,
	}
	common := func(c *cobra.Command) *cobra.Command {
		f := c.Flags()
		f.StringVar(&o.cluster, "cluster", "", "EKS cluster name (read live with DescribeCluster and the node groups)")
		f.StringVar(&o.snapshot, "snapshot", "", "read the cluster facts from this inventory snapshot instead")
		f.StringVar(&o.identity, "identity", "", "controller credentials: irsa or pod-identity (default: pod-identity when the cluster runs the Pod Identity agent)")
		f.StringVar(&o.opts.KarpenterVersion, "karpenter-version", desired.DefaultKarpenterVersion, "Karpenter version whose controller policies to create")
		f.BoolVar(&o.opts.InstanceProfile, "instance-profile", false, "also create KarpenterNodeInstanceProfile-<cluster> (for EC2NodeClasses using spec.instanceProfile)")
		f.BoolVar(&o.opts.CreateOIDCProvider, "create-oidc-provider", false, "create the cluster's IAM OIDC provider when IRSA needs it")
		f.BoolVar(&o.opts.Adopt, "adopt", false, "take over existing objects that match but were not created by karpenter-migrate")
		f.StringVar(&o.opts.Namespace, "karpenter-namespace", "kube-system", "namespace of the Karpenter controller's service account")
		f.StringSliceVar(&o.only, "only", nil, "limit to these steps: discovery-tags, node-role, controller-role, interruption-queue, node-access")
		f.StringVar(&o.journal, "journal", "", "journal file of what was changed (default karpenter-migrate-iam-<cluster>.journal.json)")
		return c
	}
	plan := common(&cobra.Command{
		Use:   "plan",
		Short: "Show what apply would create, update or leave alone, with the policy documents",
		Example: `  karpenter-migrate iam plan --snapshot snapshot.json
  karpenter-migrate iam plan --cluster prod -o json | jq '.items[] | select(.action != "no-op")'`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE:        func(cmd *cobra.Command, _ []string) error { return runIAM(cmd.Context(), g, o, "plan") },
	})
	apply := common(&cobra.Command{
		Use:   "apply",
		Short: "Create or update exactly what the plan shows",
		Example: `  karpenter-migrate iam apply --cluster prod --yes
  karpenter-migrate iam apply --snapshot snapshot.json --identity irsa --create-oidc-provider --dry-run`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE:        func(cmd *cobra.Command, _ []string) error { return runIAM(cmd.Context(), g, o, "apply") },
	})
	del := common(&cobra.Command{
		Use:   "delete",
		Short: "Remove everything iam apply created for the cluster, in dependency order",
		Example: `  karpenter-migrate iam delete --cluster prod --dry-run
  karpenter-migrate iam delete --snapshot snapshot.json --yes`,
		Args:        cobra.NoArgs,
		Annotations: writes("table", "yaml", "json"),
		RunE:        func(cmd *cobra.Command, _ []string) error { return runIAM(cmd.Context(), g, o, "delete") },
	})
	for _, c := range []*cobra.Command{apply, del} {
		c.Flags().BoolVar(&o.dryRun, "dry-run", false, "show the plan and change nothing")
		c.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
		c.Flags().StringVar(&o.backupDir, "backup-dir", ".", "directory for the local aws-auth backup")
	}
	cmd.AddCommand(plan, apply, del)
	return cmd
}

func runIAM(ctx context.Context, g *GlobalOptions, o *iamOptions, verb string) error {
	if (o.cluster == "") == (o.snapshot == "") {
		return usageError(errors.New("give exactly one of --cluster (read the cluster live) or --snapshot FILE"))
	}
	if o.identity != "" {
		if err := oneOf("identity", o.identity, "irsa", "pod-identity"); err != nil {
			return err
		}
	}
	o.opts.Identity = desired.Identity(o.identity)
	var only []iam.Group
	for _, s := range o.only {
		if err := oneOf("only", s, "discovery-tags", "node-role", "controller-role", "interruption-queue", "node-access"); err != nil {
			return err
		}
		only = append(only, iam.Group(s))
	}

	region := g.Region
	var inv *inventory.Inventory
	if o.snapshot != "" {
		snap, err := inventory.ReadSnapshotFile(o.snapshot)
		if err != nil {
			return err
		}
		inv = &snap.Inventory
		if region == "" {
			t, err := desired.TargetFromInventory(inv)
			if err != nil {
				return fmt.Errorf("%s: %w", o.snapshot, err)
			}
			region = t.Region
		}
	}
	// AWS only: aws-auth is reached through the kubeconfig only if a step
	// in scope touches it (node access on a CONFIG_MAP cluster, or one the
	// journal records).
	c, err := g.configure(ctx, action.Live{AWS: g.awsOptions(region)})
	if err != nil {
		return err
	}
	if c.Kube == nil && c.AWSAuth == nil { // as ForLive gives it; an injected one is kept
		c.AWSAuth = action.AWSAuthFromKubeconfig(g.RESTConfig, g.Namespace, o.backupDir)
	}
	if inv == nil {
		if inv, err = c.Discover(ctx, action.Discover{Cluster: o.cluster}); err != nil {
			return err
		}
	}
	a, err := c.IAM(inv, o.opts, o.journal)
	if err != nil {
		return err
	}
	if verb == "delete" {
		return runIAMDelete(ctx, g, o, a, only)
	}
	plan, err := a.Plan(ctx, only)
	if err != nil {
		return err
	}
	if done, err := printStructured(g.IO.Out, g.Output, plan); err != nil {
		return err
	} else if !done {
		printIAMPlan(g.IO.Out, plan)
	}
	if b := plan.Blocked(); len(b) > 0 {
		return &ExitError{Code: ExitIAMBlocked, Err: &iam.BlockedError{Items: b}}
	}
	if verb == "plan" || o.dryRun || plan.Changes() == 0 {
		return nil
	}
	if err := checkOutputDirs(o, plan); err != nil {
		return err
	}
	if !o.yes {
		ok, err := g.IO.Confirm(fmt.Sprintf("Apply %d change(s) to cluster %s?", plan.Changes(), a.Desired.Target.Cluster), "--yes")
		if err != nil || !ok {
			return errors.Join(err, errors.New("nothing applied"))
		}
	}
	_, err = a.Apply(ctx, plan, func(it iam.Item) {
		g.say(slog.LevelInfo, eventIAMStep, "", fmt.Sprintf("%s %s", it.Action.PastTense(), it.Ref), slog.String("action", string(it.Action)), slog.String("kind", string(it.Ref.Kind)), slog.String("name", it.Ref.Name))
	})
	if err != nil {
		return fmt.Errorf("%w\nthe journal %s lists what was done; run apply again to finish or iam delete to undo", err, a.Journal)
	}
	g.say(slog.LevelInfo, eventIAMDone, "", fmt.Sprintf("applied %d change(s); journal in %s", plan.Changes(), a.Journal), slog.Int("changes", plan.Changes()), slog.String("journal", a.Journal))
	return nil
}

// checkOutputDirs refuses, before anything is created, an apply whose
// journal (written after every object) or aws-auth backup (written before
// the edit) could not be written: a read-only or full directory.
func checkOutputDirs(o *iamOptions, plan *iam.Plan) error {
	dirs := []string{filepath.Dir(o.journal)}
	if slices.ContainsFunc(plan.Items, func(it iam.Item) bool { return it.Kind == iam.KindAWSAuth && it.Action != iam.ActionNoop }) {
		dirs = append(dirs, o.backupDir)
	}
	for _, d := range dirs {
		if err := atomicfile.CheckWritable(d); err != nil {
			return fmt.Errorf("%w; nothing was changed: free space there or choose another directory (--journal, --backup-dir)", err)
		}
	}
	return nil
}

func runIAMDelete(ctx context.Context, g *GlobalOptions, o *iamOptions, a *action.IAM, only []iam.Group) error {
	preview, err := a.Delete(ctx, action.IAMDelete{DryRun: true, Only: only})
	if err != nil {
		return err
	}
	if done, err := printStructured(g.IO.Out, g.Output, preview); err != nil {
		return err
	} else if !done {
		printIAMDown(g.IO.Out, preview)
	}
	n := 0
	for _, it := range preview {
		if it.Action == iam.ActionDelete {
			n++
		}
	}
	if o.dryRun || n == 0 {
		return nil
	}
	if !o.yes {
		ok, err := g.IO.Confirm(fmt.Sprintf("Delete %d object(s) created by karpenter-migrate for cluster %s?", n, a.Desired.Target.Cluster), "--yes")
		if err != nil || !ok {
			return errors.Join(err, errors.New("nothing deleted"))
		}
	}
	_, err = a.Delete(ctx, action.IAMDelete{Only: only, OnStep: func(it iam.Item) {
		if it.Action == iam.ActionDelete {
			g.say(slog.LevelInfo, eventIAMStep, "", fmt.Sprintf("deleted %s", it.Ref), slog.String("action", string(it.Action)), slog.String("kind", string(it.Ref.Kind)), slog.String("name", it.Ref.Name))
		}
	}})
	if err != nil {
		return fmt.Errorf("%w\nrun iam delete again to finish", err)
	}
	return nil
}

// printIAMPlan writes the plan as a table, then the documents of what
// changes and the differences of what conflicts.
func printIAMPlan(w io.Writer, p *iam.Plan) {
	fmt.Fprintf(w, "Cluster %s: Karpenter %s, %s, nodes join by %s\n\n", p.Cluster, p.KarpenterVersion, p.Identity, p.NodeAccess)
	tw := newTable(w)
	fmt.Fprintln(tw, "ACTION\tKIND\tNAME\tNOTE")
	for _, it := range p.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Action, it.Kind, it.Name, it.Reason)
	}
	_ = tw.Flush()
	for _, it := range p.Items {
		switch it.Action {
		case iam.ActionCreate, iam.ActionUpdate, iam.ActionAdopt, iam.ActionConflict:
		default:
			continue
		}
		fmt.Fprintf(w, "\n--- %s %s %s\n", it.Action, it.Kind, it.Name)
		for _, d := range it.Diff {
			fmt.Fprintln(w, d)
		}
		if it.Action == iam.ActionCreate || it.Action == iam.ActionUpdate {
			b, err := json.MarshalIndent(it.Document, "", "  ")
			if err == nil {
				fmt.Fprintln(w, string(b))
			}
		}
	}
	fmt.Fprintf(w, "\n%d to change, %d blocking\n", p.Changes(), len(p.Blocked()))
}

func printIAMDown(w io.Writer, items []iam.Item) {
	tw := newTable(w)
	fmt.Fprintln(tw, "ACTION\tKIND\tNAME\tNOTE")
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Action, it.Kind, it.Name, strings.TrimSpace(it.Reason))
	}
	_ = tw.Flush()
}
