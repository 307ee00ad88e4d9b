package tui

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
)

// LiveDialer connects to a real cluster and account as the plain commands
// do: the kubeconfig (kubectl's loading rules, the chosen context) and the
// AWS shared configuration (profile, region, optional endpoint).
func LiveDialer(kubeconfig, endpointURL string) Dialer {
	return func(ctx context.Context, c Connection) (*Clients, error) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if kubeconfig != "" {
			rules.ExplicitPath = kubeconfig
		}
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig context %q: %w", c.Context, err)
		}
		cfg, err := action.ForLive(ctx, action.Live{REST: rc, AWS: &kmaws.Options{Region: c.Region, Profile: c.Profile, EndpointURL: endpointURL}})
		if err != nil {
			return nil, err
		}
		return &Clients{Config: cfg}, nil
	}
}

// DetectDefaults fills what flags left empty: the kubeconfig's current
// context (and the others, for completion), the AWS profile and region from
// the environment, and the cluster and region an EKS context names
// (arn:aws:eks:REGION:ACCOUNT:cluster/NAME, as aws eks update-kubeconfig
// writes it).
func DetectDefaults(kubeconfig string, flags Connection) Defaults {
	d := Defaults{Connection: flags}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	if raw, err := rules.Load(); err == nil {
		for name := range raw.Contexts {
			d.Contexts = append(d.Contexts, name)
		}
		sort.Strings(d.Contexts)
		if d.Context == "" {
			d.Context = raw.CurrentContext
		}
	}
	if region, cluster, ok := parseEKSContext(d.Context); ok {
		d.Region = first(d.Region, region)
		d.Cluster = first(d.Cluster, cluster)
	}
	d.Profile = first(d.Profile, os.Getenv("AWS_PROFILE"))
	d.Region = first(d.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	d.Profiles = []string{"default"}
	if d.Profile != "" && d.Profile != "default" {
		d.Profiles = append([]string{d.Profile}, d.Profiles...)
	}
	return d
}

// parseEKSContext reads region and cluster from an EKS context name.
func parseEKSContext(name string) (region, cluster string, ok bool) {
	parts := strings.SplitN(name, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "eks" || !strings.HasPrefix(parts[5], "cluster/") {
		return "", "", false
	}
	return parts[3], strings.TrimPrefix(parts[5], "cluster/"), true
}

func first(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
