// Package cli holds the cobra commands of karpenter-migrate. Each verb is one
// file that maps flags onto an options struct, calls one package function and
// prints the result; the work itself lives in the other packages.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/version"
)

// GlobalOptions are the flags every command accepts and the collaborators
// every command shares.
type GlobalOptions struct {
	IO     *iostreams.IOStreams
	Logger *slog.Logger

	Kubeconfig  string
	Context     string
	Namespace   string
	Region      string
	Profile     string
	EndpointURL string
	// AWSConnectTimeout bounds how long each AWS call retries an endpoint
	// it cannot connect to.
	AWSConnectTimeout time.Duration
	Output            string
	LogLevel          string
	LogFormat         string
	NoColor           bool

	// Configure builds the actions' configuration of a cluster and an
	// account (default action.ForLive); command tests inject theirs.
	Configure func(ctx context.Context, l action.Live) (*action.Configuration, error)
}

// configure is the actions' configuration of l.
func (g *GlobalOptions) configure(ctx context.Context, l action.Live) (*action.Configuration, error) {
	if g.Configure != nil {
		return g.Configure(ctx, l)
	}
	return action.ForLive(ctx, l)
}

// awsOptions are the account's options: --region (else region),
// --profile and --endpoint-url.
func (g *GlobalOptions) awsOptions(region string) *kmaws.Options {
	return &kmaws.Options{Region: firstNonEmpty(g.Region, region), Profile: g.Profile, EndpointURL: g.EndpointURL, ConnectTimeout: g.AWSConnectTimeout, Logger: g.Logger}
}

// ExitError carries a specific process exit code (readiness --fail-on, the
// scripted rollout's distinct outcomes) through cobra.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Execute runs the root command and returns the process exit code.
func Execute(streams *iostreams.IOStreams) int {
	cmd, g := newRoot(streams)
	return g.exit(cmd.Execute())
}

// exit reports err on stderr, as "Error: ..." or with --log-format json as
// one ERROR event, and returns the process exit code.
func (g *GlobalOptions) exit(err error) int {
	if err == nil {
		return 0
	}
	code := 1
	var exit *ExitError
	if errors.As(err, &exit) {
		code = exit.Code
	}
	if g.LogFormat == "json" {
		l := g.Logger
		if l == nil { // the flags failed to parse before the logger was made
			l = slog.New(slog.NewJSONHandler(g.IO.ErrOut, nil))
		}
		l.Error(err.Error(), "event", eventError, "exitCode", code)
		return code
	}
	fmt.Fprintf(g.IO.ErrOut, "Error: %v\n", err)
	return code
}

// NewRootCmd builds the command tree.
func NewRootCmd(streams *iostreams.IOStreams) *cobra.Command {
	cmd, _ := newRoot(streams)
	return cmd
}

// newRoot builds the command tree and returns the options its flags fill.
func newRoot(streams *iostreams.IOStreams) (*cobra.Command, *GlobalOptions) {
	g := &GlobalOptions{IO: streams}
	root := &cobra.Command{
		Use:   "karpenter-migrate",
		Short: "Move EKS clusters from Cluster Autoscaler node groups to Karpenter, safely",
		Long: `karpenter-migrate discovers Cluster Autoscaler node groups, generates equivalent
Karpenter v1 NodePools and EC2NodeClasses, creates the IAM Karpenter needs, plans the
move with an embedded provisioning engine, and rolls it out in PDB-safe waves that can
be resumed and rolled back.`,
		Example: `  # Watch a full migration of an embedded sandbox cluster
  karpenter-migrate demo

  # Convert old Karpenter manifests to v1
  karpenter-migrate convert -f provisioner.yaml --to v1`,
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.init(cmd)
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&g.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&g.Context, "context", "", "kubeconfig context to use")
	f.StringVarP(&g.Namespace, "namespace", "n", "karpenter-migrate", "namespace for the tool's journal and lock, where it applies")
	f.StringVar(&g.Region, "region", "", "AWS region (default: from the AWS profile or environment)")
	f.StringVar(&g.Profile, "profile", "", "AWS shared config profile")
	f.StringVar(&g.EndpointURL, "endpoint-url", "", "send every AWS call to this endpoint (testing, VPC endpoints)")
	f.DurationVar(&g.AWSConnectTimeout, "aws-connect-timeout", kmaws.DefaultConnectTimeout, "how long each AWS call keeps retrying an endpoint it cannot connect to (refused, unreachable, DNS) before it fails; throttling is retried regardless")
	f.StringVarP(&g.Output, "output", "o", "table", "output format: table, yaml or json (convert: yaml or json; apply, rollback, wizard, config init and completion have none)")
	f.StringVar(&g.LogLevel, "log-level", "info", "log level: debug|info|warn|error")
	f.StringVar(&g.LogFormat, "log-format", "text", "log format: text|json (one JSON event per line, for pipelines)")
	f.BoolVar(&g.NoColor, "no-color", false, "disable colour output (also NO_COLOR)")

	root.AddCommand(
		newVersionCmd(g),
		newConvertCmd(g),
		newConfigCmd(g),
		newGenerateCmd(g),
		newPlanCmd(g), newApplyCmd(g), newStatusCmd(g), newRollbackCmd(g),
		newConsolidationCmd(g),
		newDemoCmd(g),
		newDiscoverCmd(g), newReadinessCmd(g),
		newIAMCmd(g),
		newWizardCmd(g),
	)
	root.SetVersionTemplate("{{.Version}}\n")
	// Help, --version and completion write to the streams too.
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	strictCommandLine(root)
	return root, g
}

// init applies the global flags to the run of cmd; a bad value is a usage
// error.
func (g *GlobalOptions) init(cmd *cobra.Command) error {
	if g.NoColor {
		g.IO.SetColorEnabled(false)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.LogLevel)); err != nil {
		return usageError(fmt.Errorf("--log-level %q: want debug, info, warn or error", g.LogLevel))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.LogFormat {
	case "text":
		g.Logger = slog.New(slog.NewTextHandler(g.IO.ErrOut, opts))
	case "json":
		g.Logger = slog.New(slog.NewJSONHandler(g.IO.ErrOut, opts))
	default:
		return usageError(fmt.Errorf("--log-format %q: want text or json", g.LogFormat))
	}
	output, err := checkOutput(cmd, g.Output)
	g.Output = output
	return err
}

// RESTConfig loads the Kubernetes client configuration from --kubeconfig and
// --context with kubectl's loading rules.
func (g *GlobalOptions) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.Kubeconfig != "" {
		rules.ExplicitPath = g.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: g.Context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own words ("try setting KUBERNETES_MASTER") point
		// nowhere an EKS user should go.
		return nil, errors.New("no kubeconfig: --kubeconfig, $KUBECONFIG and ~/.kube/config name no cluster; write one with `aws eks update-kubeconfig --name CLUSTER --region REGION`, or pass --kubeconfig FILE")
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig (set --kubeconfig or --context): %w", err)
	}
	return cfg, nil
}

// oneOf validates an enumerated flag value; another is a usage error.
func oneOf(flag, value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return usageError(fmt.Errorf("--%s %q: want %s", flag, value, orList(allowed)))
}
