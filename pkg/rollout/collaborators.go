package rollout

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// The collaborators a Session is given: clients and the installers of
// the runbook's steps, each the narrow interface the steps use.

type kubeClient = kubernetes.Interface

// AutoScalingAPI is the part of the Auto Scaling client the rollout uses;
// *autoscaling.Client satisfies it.
type AutoScalingAPI interface {
	DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	UpdateAutoScalingGroup(ctx context.Context, in *autoscaling.UpdateAutoScalingGroupInput, optFns ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error)
	SuspendProcesses(ctx context.Context, in *autoscaling.SuspendProcessesInput, optFns ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error)
	ResumeProcesses(ctx context.Context, in *autoscaling.ResumeProcessesInput, optFns ...func(*autoscaling.Options)) (*autoscaling.ResumeProcessesOutput, error)
	TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, optFns ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
	CreateOrUpdateTags(ctx context.Context, in *autoscaling.CreateOrUpdateTagsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.CreateOrUpdateTagsOutput, error)
	DeleteTags(ctx context.Context, in *autoscaling.DeleteTagsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DeleteTagsOutput, error)
}

// EKSAPI is the part of the EKS client the rollout uses; *eks.Client
// satisfies it.
type EKSAPI interface {
	UpdateNodegroupConfig(ctx context.Context, in *eks.UpdateNodegroupConfigInput, optFns ...func(*eks.Options)) (*eks.UpdateNodegroupConfigOutput, error)
	DescribeNodegroup(ctx context.Context, in *eks.DescribeNodegroupInput, optFns ...func(*eks.Options)) (*eks.DescribeNodegroupOutput, error)
}

// Release is an installed Helm release, as the Karpenter step reads it.
type Release struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Chart     string `json:"chart"`
	// Version is the chart's version; Revision the release's.
	Version  string `json:"version"`
	Revision int    `json:"revision"`
	// Status is Helm's: deployed, failed, pending-install, ...
	Status string `json:"status"`
	// Values are the values the release was installed with (helm get values).
	Values map[string]any `json:"values,omitempty"`
}

// Helm release statuses the step branches on.
const (
	ReleaseDeployed = "deployed"
	ReleaseFailed   = "failed"
)

// KarpenterInstaller installs Karpenter's chart: pkg/helm (Helm's Go SDK)
// against a live cluster, the sandbox's stand-in in the demo.
type KarpenterInstaller interface {
	// Release returns the release, or nil when there is none.
	Release(ctx context.Context, namespace, name string) (*Release, error)
	// Install upgrades or installs the release atomically (a failure
	// rolls back: nothing is left half-installed) and waits for the
	// controller to be Ready.
	Install(ctx context.Context, k plan.PlanKarpenter) (*Release, error)
	// Render returns the manifests Install would apply, without applying them.
	Render(ctx context.Context, k plan.PlanKarpenter) (string, error)
	// Uninstall removes the release and waits for its objects to go.
	Uninstall(ctx context.Context, namespace, name string) error
}

// Infra runs the AWS-side runbook groups (pkg/iam): discovery-tags,
// node-role, controller-role, interruption-queue, node-access.
type Infra interface {
	Check(ctx context.Context, group string) (done bool, why string, err error)
	Up(ctx context.Context, group string) error
	// Down removes what the tool created for every group.
	Down(ctx context.Context) error
}

// Overlay yields the objects of the environment's built kustomize overlay.
type Overlay interface {
	Objects(ctx context.Context) ([]*unstructured.Unstructured, error)
}

// SessionInfra is an Infra that works with the run's session: the runner
// binds it before the first step, and it records what it creates in the
// journal and honours Options.DryRun itself (so the runbook calls it in
// dry runs too, to report what would change).
type SessionInfra interface {
	Infra
	Bind(s *Session)
}
