package cli

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
)

// inClusterConfig is rest.InClusterConfig; tests replace it.
var inClusterConfig = rest.InClusterConfig

// restConfig returns the pod's service-account configuration with
// --in-cluster, else the kubeconfig's. AWS credentials need no flag in a
// pod: the SDK's default chain reads IRSA's web identity token
// (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE) and EKS Pod Identity's
// container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI).
func (f *runFlags) restConfig(g *GlobalOptions) (*rest.Config, error) {
	if !f.inCluster {
		return g.RESTConfig()
	}
	if g.Kubeconfig != "" || g.Context != "" {
		return nil, usageError(errors.New("--in-cluster uses the pod's service account: drop --kubeconfig/--context"))
	}
	cfg, err := inClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--in-cluster: %w (run it in a pod, e.g. the Job `generate --job` writes)", err)
	}
	return cfg, nil
}
