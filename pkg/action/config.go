package action

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Configuration holds the collaborators every action uses. A nil Kube
// means the action runs without Kubernetes (discover --skip-kubernetes,
// iam on AWS only).
type Configuration struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	AWS     awssdk.Config
	// Clock is the runner's and the journals' clock; nil is real time.
	Clock clock.WithTicker
	// Catalog prices and sizes instance types; nil: catalog.Default().
	Catalog *catalog.Catalog
	// Namespace is the tool's namespace (journal, lock, aws-auth backup).
	Namespace string
	// OutDir receives files an action writes beside its main output (the
	// aws-auth backup); empty writes none.
	OutDir string
	// Observer receives the runner's progress events.
	Observer rollout.Observer
	// PollInterval is how often the runner's waits poll (0: 2s).
	PollInterval time.Duration
	// PodConcurrency bounds how many of a drained node's pods are evicted
	// at once (kube.DrainOptions.PodConcurrency; 0: all at once).
	PodConcurrency int
	// AWSAuth, when set, is the aws-auth editor IAM uses instead of one on
	// Kube (AWSAuthFromKubeconfig: IAM without a Kubernetes client).
	AWSAuth iam.AWSAuthAPI
	// Operator and Identity name who runs the rollout in the journal and
	// the lock.
	Operator, Identity string
	// KarpenterInstaller installs the plan's Karpenter release: Helm's SDK
	// (pkg/helm) on a live cluster, the stand-in in the sandbox.
	KarpenterInstaller rollout.KarpenterInstaller
}

// ForSandbox is the configuration of a run against the sandbox's clients:
// its simulated clock, and one pod evicted at a time so every wait of the
// runner steps the simulation from one goroutine and a seed gives one run.
func ForSandbox(c *sandbox.Clients, namespace, outDir, operator string) *Configuration {
	return &Configuration{
		Kube: c.Kube, Dynamic: c.Dynamic, AWS: c.AWS, Clock: c.Clock, KarpenterInstaller: c.Karpenter,
		Namespace: namespace, OutDir: outDir, PollInterval: c.PollInterval, PodConcurrency: 1,
		Operator: operator, Identity: "karpenter-migrate " + operator,
	}
}

func (c *Configuration) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

// operator is who runs the rollout: Operator, else $USER.
func (c *Configuration) operator() string {
	if c.Operator != "" {
		return c.Operator
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// Live is what ForLive needs to reach a real cluster and account.
type Live struct {
	// REST reaches the API server; nil leaves Kubernetes out.
	REST *rest.Config
	// AWS is the account's configuration; nil leaves AWS out (status).
	AWS *kmaws.Options
	// Outage is how long a request waits for an API server it cannot
	// reach (restarting, unreachable) before failing; 0 fails at once.
	// apply and rollback ride out what their Lease allows.
	Outage time.Duration
}

// ForLive builds the clients of a real cluster and account. A wave evicts
// and polls hundreds of pods at once, so client-go's default 5 QPS is
// raised: the PDBs, not the client, should pace a drain.
func ForLive(ctx context.Context, l Live) (*Configuration, error) {
	c := &Configuration{}
	if l.AWS != nil {
		var err error
		if c.AWS, err = kmaws.LoadConfig(ctx, *l.AWS); err != nil {
			return nil, err
		}
	}
	if l.REST == nil {
		return c, nil
	}
	rc := rest.CopyConfig(l.REST)
	rc.QPS, rc.Burst = max(rc.QPS, 50), max(rc.Burst, 100)
	if l.Outage > 0 {
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return kube.RideOutOutages(rt, l.Outage) })
	}
	var err error
	if c.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	c.KarpenterInstaller = &helm.Client{REST: l.REST}
	return c, nil
}
