package action

import (
	"context"
	"errors"
	"fmt"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Status reads an environment's rollout journal from the cluster; an
// environment nothing was applied to is an error naming the ConfigMap.
func (c *Configuration) Status(ctx context.Context, env string) (*rollout.Journal, error) {
	if c.Kube == nil {
		return nil, errors.New("status needs the cluster: no Kubernetes client")
	}
	j, err := rollout.Status(ctx, c.Kube, c.Namespace, env)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("no rollout journal for environment %s in namespace %s (ConfigMap %s); nothing was applied", env, c.Namespace, rollout.JournalName(env))
	}
	return j, nil
}
