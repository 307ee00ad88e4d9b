package iam

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
)

// Kind names a type of object the plan manages.
type Kind string

// Kinds, in the order Apply creates them.
const (
	KindOIDCProvider    Kind = "OIDCProvider"
	KindNodeRole        Kind = "NodeRole"
	KindInstanceProfile Kind = "InstanceProfile"
	KindPolicy          Kind = "ControllerPolicy"
	KindControllerRole  Kind = "ControllerRole"
	KindPodIdentity     Kind = "PodIdentityAssociation"
	KindQueue           Kind = "SQSQueue"
	KindRule            Kind = "EventBridgeRule"
	KindDiscoveryTag    Kind = "DiscoveryTag"
	KindAccessEntry     Kind = "AccessEntry"
	KindAWSAuth         Kind = "AWSAuthEntry"
)

// Group is a step of the rollout runbook; the runbook applies one group at
// a time through PlanOptions.Only and DownOptions.Only.
type Group string

// Groups, in runbook order.
const (
	GroupDiscoveryTags  Group = "discovery-tags"
	GroupNodeRole       Group = "node-role"
	GroupControllerRole Group = "controller-role"
	GroupInterruption   Group = "interruption-queue"
	GroupNodeAccess     Group = "node-access"
)

// Ref identifies one object.
type Ref struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	ARN  string `json:"arn,omitempty"`
}

func (r Ref) String() string { return string(r.Kind) + " " + r.Name }

// observed is what exists for one desired object.
type observed struct {
	exists bool
	// ours: tagged as created by this tool for this cluster.
	ours bool
	// diff lists how the existing object differs from the desired one.
	diff []string
	// note explains a no-op that is not ours (a tag or entry already there).
	note string
	// foreignOK: an existing object that is not ours is fine as it is and
	// is neither adopted nor deleted (discovery tags, aws-auth entries,
	// an OIDC provider we were not asked to create).
	foreignOK bool
}

// resource is one desired object: how to read, create, update, adopt and
// delete it.
type resource interface {
	ref() Ref
	group() Group
	// document is what the plan prints: policy documents, attributes.
	document() any
	observe(ctx context.Context, r *runner) (observed, error)
	create(ctx context.Context, r *runner) error
	update(ctx context.Context, r *runner) error
	// adopt tags an existing matching object as ours.
	adopt(ctx context.Context, r *runner) error
	// remove deletes the object (and what hangs on it) if it is ours and
	// reports whether it did.
	remove(ctx context.Context, r *runner) (bool, error)
}

// runner carries the clients and settings of one plan, apply or down.
type runner struct {
	c       Clients
	d       *desired.State
	backoff Backoff
}

// call retries fn on throttling.
func (r *runner) call(ctx context.Context, fn func() error) error {
	return retry(ctx, r.backoff, false, fn)
}

// callFresh retries fn on throttling and on the not-found errors that IAM's
// eventual consistency gives right after a create.
func (r *runner) callFresh(ctx context.Context, fn func() error) error {
	return retry(ctx, r.backoff, true, fn)
}

func (r *runner) ours(tags map[string]string) bool {
	return tags[desired.TagManagedBy] == desired.TagManagedByValue && tags[desired.TagCluster] == r.d.Target.Cluster
}

// textDiff renders a unified diff of two multi-line texts, current first.
func textDiff(what, current, desired string) string {
	s, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(current + "\n"), B: difflib.SplitLines(desired + "\n"),
		FromFile: what + " (current)", ToFile: what + " (desired)", Context: 2,
	})
	if err != nil {
		return fmt.Sprintf("%s differs (current %s, desired %s)", what, current, desired)
	}
	return strings.TrimRight(s, "\n")
}

// policyDiff compares two policy documents and describes the difference.
func policyDiff(what string, current, want desired.PolicyDocument) []string {
	if current.Equal(want) {
		return nil
	}
	return []string{textDiff(what, current.Canonical().JSON(), want.Canonical().JSON())}
}

func wrap(op string, ref Ref, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, ref, err)
}
