// Package helm installs, reads, renders and uninstalls the Karpenter
// release through Helm's Go SDK (helm.sh/helm/v4), for the runbook's
// Karpenter step: `helm upgrade --install --atomic --wait` as a library.
package helm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/registry"
	releasei "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Client is a rollout.KarpenterInstaller over Helm's SDK. Releases are
// stored as Secrets in their namespace, as the helm CLI does, so `helm
// list` shows them and a team can later hand the release to GitOps.
type Client struct {
	REST *rest.Config
	// Timeout bounds an install, upgrade or uninstall, waits included
	// (0: 5 minutes).
	Timeout time.Duration
	// PlainHTTP reaches OCI registries over http (a local mirror).
	PlainHTTP bool
	// CacheDir holds pulled charts (empty: Helm's own cache, $HELM_CACHE_HOME).
	CacheDir string
}

var _ rollout.KarpenterInstaller = (*Client)(nil)

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 5 * time.Minute
	}
	return c.Timeout
}

// config is Helm's action configuration for one namespace.
func (c *Client) config(namespace string) (*helmaction.Configuration, error) {
	if c.REST == nil {
		return nil, errors.New("helm: no Kubernetes connection")
	}
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler()))
	if err := cfg.Init(RESTClientGetter(c.REST, namespace), namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// Release returns the newest revision of the release, or nil.
func (c *Client) Release(ctx context.Context, namespace, name string) (*rollout.Release, error) {
	cfg, err := c.config(namespace)
	if err != nil {
		return nil, err
	}
	hist, err := helmaction.NewHistory(cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, explain(fmt.Errorf("read Helm release %s/%s: %w", namespace, name, err), namespace)
	}
	var last *releasev1.Release
	for _, h := range hist {
		r, err := v1(h)
		if err != nil {
			return nil, err
		}
		if last == nil || r.Version > last.Version {
			last = r
		}
	}
	if last == nil {
		return nil, nil
	}
	return release(last), nil
}

// Install upgrades the release, or installs it when there is none, with
// the chart's CRDs, and waits until every object it creates is ready (the
// controller's Deployment available). A failure rolls back: an install is
// uninstalled, an upgrade returns to the previous revision.
func (c *Client) Install(ctx context.Context, k plan.PlanKarpenter) (*rollout.Release, error) {
	cfg, err := c.config(k.Namespace)
	if err != nil {
		return nil, err
	}
	existing, err := c.Release(ctx, k.Namespace, k.Release)
	if err != nil {
		return nil, err
	}
	if existing != nil && existing.Status != rollout.ReleaseDeployed {
		return nil, fmt.Errorf("the Helm release %s/%s is %s (revision %d): see `helm history %s -n %s`, roll it back or uninstall it, then run apply again",
			k.Namespace, k.Release, existing.Status, existing.Revision, k.Release, k.Namespace)
	}
	ch, err := c.chart(cfg, k)
	if err != nil {
		return nil, err
	}
	var rel releasei.Releaser
	if existing == nil {
		// Not Helm's --create-namespace: it server-side applies the
		// namespace with a label of its own, even kube-system.
		if err := c.ensureNamespace(ctx, k.Namespace); err != nil {
			return nil, err
		}
		in := helmaction.NewInstall(cfg)
		in.ReleaseName, in.Namespace = k.Release, k.Namespace
		in.RollbackOnFailure, in.WaitStrategy, in.Timeout, in.ServerSideApply = true, helmkube.StatusWatcherStrategy, c.timeout(), true
		rel, err = in.RunWithContext(ctx, ch, k.Values)
	} else {
		up := helmaction.NewUpgrade(cfg)
		up.Namespace, up.RollbackOnFailure, up.CleanupOnFail = k.Namespace, true, true
		up.WaitStrategy, up.Timeout, up.ServerSideApply = helmkube.StatusWatcherStrategy, c.timeout(), "auto"
		rel, err = up.RunWithContext(ctx, k.Release, ch, k.Values)
	}
	if err != nil {
		verb := "install"
		if existing != nil {
			verb = fmt.Sprintf("upgrade (revision %d kept)", existing.Revision)
		}
		return nil, explain(fmt.Errorf("helm %s of %s failed and was rolled back: %w", verb, k.String(), err), k.Namespace)
	}
	r, err := v1(rel)
	if err != nil {
		return nil, err
	}
	return release(r), nil
}

// ensureNamespace creates the release's namespace when it is missing.
func (c *Client) ensureNamespace(ctx context.Context, namespace string) error {
	cs, err := kubernetes.NewForConfig(c.REST)
	if err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	if err := kube.EnsureNamespace(ctx, cs, namespace); err != nil {
		return explain(fmt.Errorf("namespace %s of the Karpenter release: %w", namespace, err), namespace)
	}
	return nil
}

// Render returns the manifests Install would apply, CRDs included, as
// `helm template` renders them (nothing is sent to the cluster; without a
// connection, REST nil, against Helm's default capabilities).
func (c *Client) Render(ctx context.Context, k plan.PlanKarpenter) (string, error) {
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler()))
	if c.REST != nil {
		var err error
		if cfg, err = c.config(k.Namespace); err != nil {
			return "", err
		}
	}
	ch, err := c.chart(cfg, k)
	if err != nil {
		return "", err
	}
	in := helmaction.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.DryRunStrategy, in.Replace, in.IncludeCRDs = k.Release, k.Namespace, helmaction.DryRunClient, true, true
	rel, err := in.RunWithContext(ctx, ch, k.Values)
	if err != nil {
		return "", fmt.Errorf("render %s: %w", k.String(), err)
	}
	r, err := v1(rel)
	if err != nil {
		return "", err
	}
	return r.Manifest, nil
}

// Uninstall removes the release and waits for its objects to be deleted.
// The CRDs stay, as with `helm uninstall`: Helm never deletes a chart's CRDs.
func (c *Client) Uninstall(ctx context.Context, namespace, name string) error {
	cfg, err := c.config(namespace)
	if err != nil {
		return err
	}
	un := helmaction.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout, un.IgnoreNotFound = helmkube.StatusWatcherStrategy, c.timeout(), true
	if _, err := un.Run(name); err != nil {
		return explain(fmt.Errorf("helm uninstall %s -n %s: %w", name, namespace, err), namespace)
	}
	return nil
}

// chart loads the plan's chart: a local directory or tarball as it is, an
// OCI reference or URL pulled at the plan's version. A local chart whose
// version is not the plan's is refused.
func (c *Client) chart(cfg *helmaction.Configuration, k plan.PlanKarpenter) (*chartv2.Chart, error) {
	settings := cli.New()
	if c.CacheDir != "" {
		settings.RepositoryCache = filepath.Join(c.CacheDir, "repository")
		settings.ContentCache = filepath.Join(c.CacheDir, "content")
		settings.RegistryConfig = filepath.Join(c.CacheDir, "registry", "config.json")
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard), registry.ClientOptCredentialsFile(settings.RegistryConfig)}
	if c.PlainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("helm registry client: %w", err)
	}
	cfg.RegistryClient = rc
	in := helmaction.NewInstall(cfg)
	in.Version, in.PlainHTTP = k.Version, c.PlainHTTP
	in.SetRegistryClient(rc)
	_, local := os.Stat(k.Chart)
	path, err := in.LocateChart(k.Chart, settings)
	if err != nil {
		what := "pull"
		if strings.HasPrefix(k.Chart, "oci://") {
			what = "pull from its OCI registry"
		}
		return nil, fmt.Errorf("chart %s version %s: cannot %s (%w); check the version exists (the plan pins it: --karpenter-version) and the registry is reachable from here, or install from a local copy with plan --karpenter-chart PATH (helm pull %s --version %s)",
			k.Chart, k.Version, what, err, k.Chart, k.Version)
	}
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", k.Chart, err)
	}
	if local == nil && ch.Metadata.Version != k.Version {
		return nil, fmt.Errorf("chart %s is version %s but the plan pins Karpenter %s: plan again with --karpenter-version %s, or point --karpenter-chart at the %s chart",
			k.Chart, ch.Metadata.Version, k.Version, ch.Metadata.Version, k.Version)
	}
	return ch, nil
}

// explain adds what to do to a permission error.
func explain(err error, namespace string) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) && apierrors.IsForbidden(err) || strings.Contains(err.Error(), "is forbidden") {
		return fmt.Errorf("%w\nthe credentials in use may not manage Helm releases in namespace %s: grant them create/update/delete on Secrets (Helm's release storage) and on the chart's objects there, or set controller.namespace in the environment's config to a namespace they may use, then plan again", err, namespace)
	}
	return err
}

func v1(r releasei.Releaser) (*releasev1.Release, error) {
	switch x := r.(type) {
	case *releasev1.Release:
		return x, nil
	case releasev1.Release:
		return &x, nil
	}
	return nil, fmt.Errorf("helm: release of unexpected type %T", r)
}

func release(r *releasev1.Release) *rollout.Release {
	out := &rollout.Release{Name: r.Name, Namespace: r.Namespace, Revision: r.Version, Values: r.Config}
	if r.Info != nil {
		out.Status = string(r.Info.Status)
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		out.Chart, out.Version = r.Chart.Metadata.Name, r.Chart.Metadata.Version
	}
	return out
}

// RESTClientGetter is Helm's client getter over a rest.Config (the tool's
// own connection, whether from a kubeconfig or in-cluster) in namespace.
func RESTClientGetter(c *rest.Config, namespace string) genericclioptions.RESTClientGetter {
	return &getter{rest: c, namespace: namespace}
}

type getter struct {
	rest      *rest.Config
	namespace string
	disc      discovery.CachedDiscoveryInterface
}

func (g *getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.rest), nil }

func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if g.disc == nil {
		d, err := discovery.NewDiscoveryClientForConfig(g.rest)
		if err != nil {
			return nil, err
		}
		g.disc = memory.NewMemCacheClient(d)
	}
	return g.disc, nil
}

func (g *getter) ToRESTMapper() (meta.RESTMapper, error) {
	d, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(d), nil
}

// ToRawKubeConfigLoader only gives Helm the namespace: the connection is
// the rest.Config.
func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	cfg := clientcmdapi.NewConfig()
	cfg.Contexts["helm"] = &clientcmdapi.Context{Namespace: g.namespace}
	cfg.CurrentContext = "helm"
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
}
