package iam

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
)

func iamTags(m map[string]string) []iamtypes.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]iamtypes.Tag, 0, len(m))
	for _, k := range keys {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func tagMap(tags []iamtypes.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func notFound(err error) bool {
	switch ErrorCode(err) {
	case "NoSuchEntity", "NoSuchEntityException", "ResourceNotFoundException",
		"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
		return true
	}
	return false
}

func alreadyExists(err error) bool {
	switch ErrorCode(err) {
	case "EntityAlreadyExists", "ResourceInUseException", "QueueAlreadyExists", "QueueNameExists", "ResourceAlreadyExistsException":
		return true
	}
	return false
}

// roleRes is an IAM role with a trust policy and attached policies.
type roleRes struct {
	kind     Kind
	grp      Group
	name     string
	arn      string
	trust    desired.PolicyDocument
	policies []string // ARNs to attach
}

func (x *roleRes) ref() Ref     { return Ref{Kind: x.kind, Name: x.name, ARN: x.arn} }
func (x *roleRes) group() Group { return x.grp }
func (x *roleRes) document() any {
	return map[string]any{"assumeRolePolicy": x.trust, "attachedPolicies": x.policies}
}

func (x *roleRes) get(ctx context.Context, r *runner) (*iamtypes.Role, error) {
	var out *iam.GetRoleOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(x.name)})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("get", x.ref(), err)
	}
	return out.Role, nil
}

func (x *roleRes) attached(ctx context.Context, r *runner) ([]string, error) {
	var arns []string
	p := iam.NewListAttachedRolePoliciesPaginator(r.c.IAM, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(x.name)})
	for p.HasMorePages() {
		var page *iam.ListAttachedRolePoliciesOutput
		err := r.call(ctx, func() (err error) {
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return nil, wrap("list attached policies of", x.ref(), err)
		}
		for _, a := range page.AttachedPolicies {
			arns = append(arns, aws.ToString(a.PolicyArn))
		}
	}
	return arns, nil
}

func (x *roleRes) observe(ctx context.Context, r *runner) (observed, error) {
	role, err := x.get(ctx, r)
	if err != nil || role == nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(tagMap(role.Tags))}
	trust, err := desired.ParsePolicy(aws.ToString(role.AssumeRolePolicyDocument))
	if err != nil {
		return o, wrap("read trust policy of", x.ref(), err)
	}
	o.diff = policyDiff("trust policy", trust, x.trust)
	have, err := x.attached(ctx, r)
	if err != nil {
		return o, err
	}
	for _, p := range x.policies {
		if !slices.Contains(have, p) {
			o.diff = append(o.diff, "policy not attached: "+p)
		}
	}
	return o, nil
}

func (x *roleRes) attach(ctx context.Context, r *runner) error {
	have, err := x.attached(ctx, r)
	if err != nil {
		return err
	}
	for _, p := range x.policies {
		if slices.Contains(have, p) {
			continue
		}
		err := r.callFresh(ctx, func() error {
			_, err := r.c.IAM.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(x.name), PolicyArn: aws.String(p)})
			return err
		})
		if err != nil {
			return wrap("attach "+p+" to", x.ref(), err)
		}
	}
	return nil
}

func (x *roleRes) create(ctx context.Context, r *runner) error {
	err := r.call(ctx, func() error {
		_, err := r.c.IAM.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName:                 aws.String(x.name),
			AssumeRolePolicyDocument: aws.String(x.trust.JSON()),
			Description:              aws.String(fmt.Sprintf("Karpenter %s for cluster %s, created by karpenter-migrate", x.kind, r.d.Target.Cluster)),
			Tags:                     iamTags(r.d.Tags()),
		})
		return err
	})
	if err != nil {
		return wrap("create", x.ref(), err)
	}
	return x.attach(ctx, r)
}

func (x *roleRes) update(ctx context.Context, r *runner) error {
	role, err := x.get(ctx, r)
	if err != nil {
		return err
	}
	if role == nil {
		return fmt.Errorf("update %s: it no longer exists; run plan again", x.ref())
	}
	trust, err := desired.ParsePolicy(aws.ToString(role.AssumeRolePolicyDocument))
	if err != nil || !trust.Equal(x.trust) {
		err := r.callFresh(ctx, func() error {
			_, err := r.c.IAM.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(x.name), PolicyDocument: aws.String(x.trust.JSON())})
			return err
		})
		if err != nil {
			return wrap("update trust policy of", x.ref(), err)
		}
	}
	return x.attach(ctx, r)
}

func (x *roleRes) adopt(ctx context.Context, r *runner) error {
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.IAM.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(x.name), Tags: iamTags(r.d.Tags())})
		return err
	}))
}

func (x *roleRes) remove(ctx context.Context, r *runner) (bool, error) {
	role, err := x.get(ctx, r)
	if err != nil || role == nil || !r.ours(tagMap(role.Tags)) {
		return false, err
	}
	have, err := x.attached(ctx, r)
	if err != nil {
		return false, err
	}
	for _, p := range have {
		err := r.call(ctx, func() error {
			_, err := r.c.IAM.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(x.name), PolicyArn: aws.String(p)})
			if notFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return false, wrap("detach "+p+" from", x.ref(), err)
		}
	}
	err = r.call(ctx, func() error {
		_, err := r.c.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(x.name)})
		if notFound(err) {
			return nil
		}
		return err
	})
	if ErrorCode(err) == "DeleteConflict" {
		return false, fmt.Errorf("delete %s: %w (it still has inline policies or is in an instance profile not created by karpenter-migrate; remove those by hand)", x.ref(), err)
	}
	return err == nil, wrap("delete", x.ref(), err)
}

// profileRes is the node instance profile holding the node role.
type profileRes struct {
	name, arn, role string
}

func (x *profileRes) ref() Ref      { return Ref{Kind: KindInstanceProfile, Name: x.name, ARN: x.arn} }
func (x *profileRes) group() Group  { return GroupNodeRole }
func (x *profileRes) document() any { return map[string]any{"roles": []string{x.role}} }

func (x *profileRes) get(ctx context.Context, r *runner) (*iamtypes.InstanceProfile, error) {
	var out *iam.GetInstanceProfileOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(x.name)})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("get", x.ref(), err)
	}
	return out.InstanceProfile, nil
}

func roleNames(p *iamtypes.InstanceProfile) []string {
	var out []string
	for _, r := range p.Roles {
		out = append(out, aws.ToString(r.RoleName))
	}
	return out
}

func (x *profileRes) observe(ctx context.Context, r *runner) (observed, error) {
	p, err := x.get(ctx, r)
	if err != nil || p == nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(tagMap(p.Tags))}
	if have := roleNames(p); !slices.Equal(have, []string{x.role}) {
		o.diff = append(o.diff, fmt.Sprintf("roles: current %v, desired [%s]", have, x.role))
	}
	return o, nil
}

func (x *profileRes) create(ctx context.Context, r *runner) error {
	err := r.call(ctx, func() error {
		_, err := r.c.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(x.name), Tags: iamTags(r.d.Tags())})
		return err
	})
	if err != nil {
		return wrap("create", x.ref(), err)
	}
	return x.update(ctx, r)
}

func (x *profileRes) update(ctx context.Context, r *runner) error {
	p, err := x.get(ctx, r)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("update %s: it no longer exists; run plan again", x.ref())
	}
	have := roleNames(p)
	for _, other := range have {
		if other == x.role {
			continue
		}
		err := r.call(ctx, func() error {
			_, err := r.c.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(x.name), RoleName: aws.String(other)})
			return err
		})
		if err != nil {
			return wrap("remove role "+other+" from", x.ref(), err)
		}
	}
	if slices.Contains(have, x.role) {
		return nil
	}
	return wrap("add role "+x.role+" to", x.ref(), r.callFresh(ctx, func() error {
		_, err := r.c.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(x.name), RoleName: aws.String(x.role)})
		return err
	}))
}

func (x *profileRes) adopt(ctx context.Context, r *runner) error {
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.IAM.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(x.name), Tags: iamTags(r.d.Tags())})
		return err
	}))
}

func (x *profileRes) remove(ctx context.Context, r *runner) (bool, error) {
	p, err := x.get(ctx, r)
	if err != nil || p == nil || !r.ours(tagMap(p.Tags)) {
		return false, err
	}
	for _, role := range roleNames(p) {
		err := r.call(ctx, func() error {
			_, err := r.c.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(x.name), RoleName: aws.String(role)})
			if notFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return false, wrap("remove role "+role+" from", x.ref(), err)
		}
	}
	err = r.call(ctx, func() error {
		_, err := r.c.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(x.name)})
		if notFound(err) {
			return nil
		}
		return err
	})
	return err == nil, wrap("delete", x.ref(), err)
}

// policyRes is a customer-managed controller policy.
type policyRes struct {
	name, arn string
	doc       desired.PolicyDocument
}

func (x *policyRes) ref() Ref      { return Ref{Kind: KindPolicy, Name: x.name, ARN: x.arn} }
func (x *policyRes) group() Group  { return GroupControllerRole }
func (x *policyRes) document() any { return x.doc }

func (x *policyRes) get(ctx context.Context, r *runner) (*iamtypes.Policy, error) {
	var out *iam.GetPolicyOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.IAM.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(x.arn)})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("get", x.ref(), err)
	}
	return out.Policy, nil
}

func (x *policyRes) observe(ctx context.Context, r *runner) (observed, error) {
	p, err := x.get(ctx, r)
	if err != nil || p == nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(tagMap(p.Tags))}
	var v *iam.GetPolicyVersionOutput
	err = r.callFresh(ctx, func() (err error) {
		v, err = r.c.IAM.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String(x.arn), VersionId: p.DefaultVersionId})
		return err
	})
	if err != nil {
		return o, wrap("get default version of", x.ref(), err)
	}
	current, err := desired.ParsePolicy(aws.ToString(v.PolicyVersion.Document))
	if err != nil {
		return o, wrap("read", x.ref(), err)
	}
	o.diff = policyDiff("policy document", current, x.doc)
	return o, nil
}

func (x *policyRes) create(ctx context.Context, r *runner) error {
	return wrap("create", x.ref(), r.call(ctx, func() error {
		_, err := r.c.IAM.CreatePolicy(ctx, &iam.CreatePolicyInput{
			PolicyName:     aws.String(x.name),
			PolicyDocument: aws.String(x.doc.JSON()),
			Description:    aws.String("Karpenter controller permissions for cluster " + r.d.Target.Cluster + ", created by karpenter-migrate"),
			Tags:           iamTags(r.d.Tags()),
		})
		return err
	}))
}

// versions lists the policy's versions.
func (x *policyRes) versions(ctx context.Context, r *runner) ([]iamtypes.PolicyVersion, error) {
	var out []iamtypes.PolicyVersion
	p := iam.NewListPolicyVersionsPaginator(r.c.IAM, &iam.ListPolicyVersionsInput{PolicyArn: aws.String(x.arn)})
	for p.HasMorePages() {
		var page *iam.ListPolicyVersionsOutput
		err := r.call(ctx, func() (err error) {
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return nil, wrap("list versions of", x.ref(), err)
		}
		out = append(out, page.Versions...)
	}
	return out, nil
}

func (x *policyRes) deleteVersion(ctx context.Context, r *runner, id string) error {
	return wrap("delete version "+id+" of", x.ref(), r.call(ctx, func() error {
		_, err := r.c.IAM.DeletePolicyVersion(ctx, &iam.DeletePolicyVersionInput{PolicyArn: aws.String(x.arn), VersionId: aws.String(id)})
		if notFound(err) {
			return nil
		}
		return err
	}))
}

// update sets the desired document as a new default version, first deleting
// the oldest non-default version when IAM's limit of five is reached.
func (x *policyRes) update(ctx context.Context, r *runner) error {
	vs, err := x.versions(ctx, r)
	if err != nil {
		return err
	}
	if len(vs) >= 5 {
		var oldest *iamtypes.PolicyVersion
		for i := range vs {
			if vs[i].IsDefaultVersion {
				continue
			}
			if oldest == nil || aws.ToTime(vs[i].CreateDate).Before(aws.ToTime(oldest.CreateDate)) {
				oldest = &vs[i]
			}
		}
		if oldest != nil {
			if err := x.deleteVersion(ctx, r, aws.ToString(oldest.VersionId)); err != nil {
				return err
			}
		}
	}
	return wrap("create a new version of", x.ref(), r.callFresh(ctx, func() error {
		_, err := r.c.IAM.CreatePolicyVersion(ctx, &iam.CreatePolicyVersionInput{PolicyArn: aws.String(x.arn), PolicyDocument: aws.String(x.doc.JSON()), SetAsDefault: true})
		return err
	}))
}

func (x *policyRes) adopt(ctx context.Context, r *runner) error {
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.IAM.TagPolicy(ctx, &iam.TagPolicyInput{PolicyArn: aws.String(x.arn), Tags: iamTags(r.d.Tags())})
		return err
	}))
}

func (x *policyRes) remove(ctx context.Context, r *runner) (bool, error) {
	p, err := x.get(ctx, r)
	if err != nil || p == nil || !r.ours(tagMap(p.Tags)) {
		return false, err
	}
	vs, err := x.versions(ctx, r)
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		if !v.IsDefaultVersion {
			if err := x.deleteVersion(ctx, r, aws.ToString(v.VersionId)); err != nil {
				return false, err
			}
		}
	}
	err = r.call(ctx, func() error {
		_, err := r.c.IAM.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: aws.String(x.arn)})
		if notFound(err) {
			return nil
		}
		return err
	})
	if ErrorCode(err) == "DeleteConflict" {
		return false, fmt.Errorf("delete %s: %w (it is still attached to a role, user or group not created by karpenter-migrate; detach it by hand)", x.ref(), err)
	}
	return err == nil, wrap("delete", x.ref(), err)
}

// oidcRes is the cluster's IAM OIDC provider. Unless create is set it is
// only a requirement: the plan reports it missing instead of creating it.
type oidcRes struct {
	arn, url string
	managed  bool
}

func (x *oidcRes) ref() Ref     { return Ref{Kind: KindOIDCProvider, Name: x.url, ARN: x.arn} }
func (x *oidcRes) group() Group { return GroupControllerRole }
func (x *oidcRes) document() any {
	return map[string]any{"url": x.url, "clientIDs": []string{"sts.amazonaws.com"}}
}

func (x *oidcRes) get(ctx context.Context, r *runner) (*iam.GetOpenIDConnectProviderOutput, error) {
	var out *iam.GetOpenIDConnectProviderOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.IAM.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(x.arn)})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	return out, wrap("get", x.ref(), err)
}

func (x *oidcRes) observe(ctx context.Context, r *runner) (observed, error) {
	p, err := x.get(ctx, r)
	if err != nil || p == nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(tagMap(p.Tags))}
	if !slices.Contains(p.ClientIDList, "sts.amazonaws.com") {
		o.diff = append(o.diff, fmt.Sprintf("client IDs %v do not include sts.amazonaws.com", p.ClientIDList))
	}
	if !o.ours {
		// The cluster's provider usually predates us; using it is the point.
		o.foreignOK = len(o.diff) == 0
		o.note = "exists (not managed by karpenter-migrate)"
	}
	return o, nil
}

func (x *oidcRes) create(ctx context.Context, r *runner) error {
	if !x.managed {
		return fmt.Errorf("%s does not exist: IRSA needs it; rerun with --create-oidc-provider or use --identity pod-identity", x.ref())
	}
	return wrap("create", x.ref(), r.call(ctx, func() error {
		_, err := r.c.IAM.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{
			Url: aws.String(x.url), ClientIDList: []string{"sts.amazonaws.com"}, Tags: iamTags(r.d.Tags()),
		})
		return err
	}))
}

func (x *oidcRes) update(context.Context, *runner) error {
	return fmt.Errorf("update %s: change its client IDs by hand to include sts.amazonaws.com", x.ref())
}

func (x *oidcRes) adopt(context.Context, *runner) error { return nil }

func (x *oidcRes) remove(ctx context.Context, r *runner) (bool, error) {
	p, err := x.get(ctx, r)
	if err != nil || p == nil || !r.ours(tagMap(p.Tags)) {
		return false, err
	}
	err = r.call(ctx, func() error {
		_, err := r.c.IAM.DeleteOpenIDConnectProvider(ctx, &iam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(x.arn)})
		if notFound(err) {
			return nil
		}
		return err
	})
	return err == nil, wrap("delete", x.ref(), err)
}
