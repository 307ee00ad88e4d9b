package sandbox

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8sptr "k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// systemClusterCritical is the value of the system-cluster-critical
// PriorityClass, which the sandbox (without priority admission) sets itself.
const systemClusterCritical = int32(2000000000)

// installer is the sandbox's rollout.KarpenterInstaller: Helm's part is a
// release record kept in memory; installing creates what the chart would
// (the controller Deployment and PDB from the values,
// generate.ControllerObjects), starts the Karpenter stand-in and waits, in
// simulated time, for the controller's replicas to be Ready. Uninstalling
// stops the stand-in and deletes them.
type installer struct {
	sb    *Sandbox
	kube  kubernetes.Interface
	clock *Clock

	mu       sync.Mutex
	releases map[string]*rollout.Release
}

var _ rollout.KarpenterInstaller = (*installer)(nil)

func (in *installer) Release(_ context.Context, namespace, name string) (*rollout.Release, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	r, ok := in.releases[namespace+"/"+name]
	if !ok {
		return nil, nil
	}
	c := *r
	c.Values = maps.Clone(r.Values)
	return &c, nil
}

func (in *installer) Install(ctx context.Context, k plan.PlanKarpenter) (*rollout.Release, error) {
	dep, pdb, err := in.objects(k)
	if err != nil {
		return nil, err
	}
	if err := in.apply(ctx, dep); err != nil {
		return nil, err
	}
	in.sb.setKarpenter(true)
	// Wait as helm --wait does: the Deployment's replicas available.
	deadline := in.clock.Now().Add(5 * time.Minute)
	for {
		d, err := in.kube.AppsV1().Deployments(k.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the Karpenter controller: %w", err)
		}
		if d.Status.AvailableReplicas >= k8sptr.Deref(d.Spec.Replicas, 1) {
			break
		}
		if !in.clock.Now().Before(deadline) {
			return nil, fmt.Errorf("the Karpenter controller %s/%s has %d of %d replicas available after 5m", d.Namespace, d.Name, d.Status.AvailableReplicas, k8sptr.Deref(d.Spec.Replicas, 1))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-in.clock.After(PollInterval):
		}
	}
	// The PDB once the replicas run: one made before would count the
	// starting pods as a disruption.
	if _, err := in.kube.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("install the Karpenter controller's PDB: %w", err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.releases == nil {
		in.releases = map[string]*rollout.Release{}
	}
	key := k.Namespace + "/" + k.Release
	rev := 1
	if old := in.releases[key]; old != nil {
		rev = old.Revision + 1
	}
	r := &rollout.Release{Name: k.Release, Namespace: k.Namespace, Chart: "karpenter", Version: k.Version, Revision: rev, Status: rollout.ReleaseDeployed, Values: maps.Clone(k.Values)}
	in.releases[key] = r
	c := *r
	return &c, nil
}

func (in *installer) Render(_ context.Context, k plan.PlanKarpenter) (string, error) {
	dep, pdb, err := in.objects(k)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("kind: Deployment\nmetadata:\n  name: %s\n  namespace: %s\n---\nkind: PodDisruptionBudget\nmetadata:\n  name: %s\n  namespace: %s\n", dep.Name, dep.Namespace, pdb.Name, pdb.Namespace), nil
}

func (in *installer) Uninstall(ctx context.Context, namespace, name string) error {
	in.sb.setKarpenter(false)
	if err := in.kube.AppsV1().Deployments(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("uninstall the Karpenter controller: %w", err)
	}
	if err := in.kube.PolicyV1().PodDisruptionBudgets(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("uninstall the Karpenter controller's PDB: %w", err)
	}
	in.mu.Lock()
	delete(in.releases, namespace+"/"+name)
	in.mu.Unlock()
	return nil
}

func (in *installer) objects(k plan.PlanKarpenter) (*appsv1.Deployment, *policyv1.PodDisruptionBudget, error) {
	dep, pdb, err := generate.ControllerObjects(k.Values, k.Namespace, "public.ecr.aws/karpenter/controller:"+k.Version)
	if err != nil {
		return nil, nil, err
	}
	if dep.Spec.Template.Spec.PriorityClassName == "system-cluster-critical" {
		dep.Spec.Template.Spec.Priority = k8sptr.To(systemClusterCritical)
	}
	return dep, pdb, nil
}

func (in *installer) apply(ctx context.Context, dep *appsv1.Deployment) error {
	deps := in.kube.AppsV1().Deployments(dep.Namespace)
	if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, gerr := deps.Get(ctx, dep.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("upgrade the Karpenter controller: %w", gerr)
		}
		dep.ResourceVersion = old.ResourceVersion
		_, err = deps.Update(ctx, dep, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("upgrade the Karpenter controller: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("install the Karpenter controller: %w", err)
	}
	return nil
}

// setKarpenter starts or stops the Karpenter stand-in.
func (s *Sandbox) setKarpenter(on bool) {
	s.mu.Lock()
	s.karpenterOff = !on
	s.mu.Unlock()
}
