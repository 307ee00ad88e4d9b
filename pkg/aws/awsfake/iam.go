package awsfake

//go:generate go run ./internal/gennames -module github.com/aws/aws-sdk-go-v2/service/iam -var iamNames -out zz_iam_names.go

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// IAMState is the IAM part of an account.
type IAMState struct {
	Roles            []IAMRole            `json:"roles,omitempty"`
	Policies         []IAMPolicy          `json:"policies,omitempty"`
	InstanceProfiles []IAMInstanceProfile `json:"instanceProfiles,omitempty"`
	OIDCProviders    []IAMOIDCProvider    `json:"oidcProviders,omitempty"`
}

// IAMRole is a role and the ARNs of its attached managed policies.
type IAMRole struct {
	Role             iamtypes.Role `json:"role"`
	AttachedPolicies []string      `json:"attachedPolicies,omitempty"`
}

// IAMPolicy is a customer-managed policy and its versions.
type IAMPolicy struct {
	Policy   iamtypes.Policy          `json:"policy"`
	Versions []iamtypes.PolicyVersion `json:"versions,omitempty"`
}

// IAMInstanceProfile is an instance profile and the names of its roles.
type IAMInstanceProfile struct {
	InstanceProfile iamtypes.InstanceProfile `json:"instanceProfile"`
	RoleNames       []string                 `json:"roleNames,omitempty"`
}

// IAMOIDCProvider is an IAM OpenID Connect provider.
type IAMOIDCProvider struct {
	ARN          string         `json:"arn"`
	URL          string         `json:"url"`
	ClientIDList []string       `json:"clientIDList,omitempty"`
	Tags         []iamtypes.Tag `json:"tags,omitempty"`
}

// registerIAM adds IAM (awsquery): roles, managed policies and their
// versions, instance profiles and OIDC providers, with IAM's conflicts
// (EntityAlreadyExists, DeleteConflict, LimitExceeded).
func registerIAM(s *Server) {
	for name, h := range map[string]handler{
		"GetRole": iamGetRole, "CreateRole": iamCreateRole, "DeleteRole": iamDeleteRole, "TagRole": iamTagRole,
		"UpdateAssumeRolePolicy":   iamUpdateAssumeRolePolicy,
		"ListAttachedRolePolicies": iamListAttachedRolePolicies, "AttachRolePolicy": iamAttachRolePolicy, "DetachRolePolicy": iamDetachRolePolicy,
		"GetInstanceProfile": iamGetInstanceProfile, "CreateInstanceProfile": iamCreateInstanceProfile, "TagInstanceProfile": iamTagInstanceProfile,
		"AddRoleToInstanceProfile": iamAddRoleToInstanceProfile, "RemoveRoleFromInstanceProfile": iamRemoveRoleFromInstanceProfile,
		"DeleteInstanceProfile": iamDeleteInstanceProfile,
		"GetPolicy":             iamGetPolicy, "GetPolicyVersion": iamGetPolicyVersion, "CreatePolicy": iamCreatePolicy,
		"CreatePolicyVersion": iamCreatePolicyVersion, "ListPolicyVersions": iamListPolicyVersions,
		"DeletePolicyVersion": iamDeletePolicyVersion, "DeletePolicy": iamDeletePolicy, "TagPolicy": iamTagPolicy,
		"GetOpenIDConnectProvider": iamGetOIDC, "CreateOpenIDConnectProvider": iamCreateOIDC, "DeleteOpenIDConnectProvider": iamDeleteOIDC,
	} {
		s.register("iam", name, h)
	}
}

func noSuchEntity(format string, args ...any) *Error {
	return errorf(http.StatusNotFound, "NoSuchEntity", format, args...)
}

func entityExists(format string, args ...any) *Error {
	return errorf(http.StatusConflict, "EntityAlreadyExists", format, args...)
}

func deleteConflict(format string, args ...any) *Error {
	return errorf(http.StatusConflict, "DeleteConflict", format, args...)
}

// iamEncode URL-encodes a policy document as IAM returns it.
func iamEncode(doc string) *string {
	return ptr(strings.ReplaceAll(url.QueryEscape(doc), "+", "%20"))
}

// policyParam reads a policy document parameter and checks it is JSON.
func (c *call) policyParam(name string) (string, error) {
	doc := c.param(name)
	if doc == "" {
		return "", c.missingParam(name)
	}
	if !json.Valid([]byte(doc)) {
		return "", errorf(http.StatusBadRequest, "MalformedPolicyDocument", "Syntax errors in policy.")
	}
	return doc, nil
}

// iamTags reads Tags.member.N.Key/Value.
func (c *call) iamTags() []iamtypes.Tag {
	var out []iamtypes.Tag
	for _, i := range c.indexes("Tags.member") {
		p := "Tags.member." + strconv.Itoa(i)
		out = append(out, iamtypes.Tag{Key: ptr(c.param(p + ".Key")), Value: ptr(c.param(p + ".Value"))})
	}
	return out
}

func mergeIAMTags(have, add []iamtypes.Tag) []iamtypes.Tag {
	for _, t := range add {
		i := slices.IndexFunc(have, func(h iamtypes.Tag) bool { return deref(h.Key) == deref(t.Key) })
		if i >= 0 {
			have[i] = t
		} else {
			have = append(have, t)
		}
	}
	return have
}

func (c *call) iamARN(kind, name string) string {
	return fmt.Sprintf("arn:aws:iam::%s:%s/%s", c.acct.ID, kind, name)
}

func (c *call) role(name string) (*IAMRole, error) {
	if name == "" {
		return nil, c.missingParam("RoleName")
	}
	for i := range c.acct.IAM.Roles {
		if deref(c.acct.IAM.Roles[i].Role.RoleName) == name {
			return &c.acct.IAM.Roles[i], nil
		}
	}
	return nil, noSuchEntity("The role with name %s cannot be found.", name)
}

func iamGetRole(c *call) (any, error) {
	r, err := c.role(c.param("RoleName"))
	if err != nil {
		return nil, err
	}
	out := r.Role
	out.AssumeRolePolicyDocument = iamEncode(deref(r.Role.AssumeRolePolicyDocument))
	return &iam.GetRoleOutput{Role: &out}, nil
}

func iamCreateRole(c *call) (any, error) {
	name := c.param("RoleName")
	if _, err := c.role(name); err == nil {
		return nil, entityExists("Role with name %s already exists.", name)
	} else if name == "" {
		return nil, err
	}
	doc, err := c.policyParam("AssumeRolePolicyDocument")
	if err != nil {
		return nil, err
	}
	r := iamtypes.Role{
		RoleName: ptr(name), Arn: ptr(c.iamARN("role", name)), Path: ptr("/"), RoleId: ptr(fmt.Sprintf("AROA%016d", len(c.acct.IAM.Roles)+1)),
		AssumeRolePolicyDocument: ptr(doc), CreateDate: ptr(time.Now().UTC().Truncate(time.Second)), Tags: c.iamTags(),
	}
	if d := c.param("Description"); d != "" {
		r.Description = ptr(d)
	}
	c.acct.IAM.Roles = append(c.acct.IAM.Roles, IAMRole{Role: r})
	out := r
	out.AssumeRolePolicyDocument = iamEncode(doc)
	return &iam.CreateRoleOutput{Role: &out}, nil
}

func iamDeleteRole(c *call) (any, error) {
	name := c.param("RoleName")
	r, err := c.role(name)
	if err != nil {
		return nil, err
	}
	if len(r.AttachedPolicies) > 0 {
		return nil, deleteConflict("Cannot delete entity, must detach all policies first.")
	}
	for _, p := range c.acct.IAM.InstanceProfiles {
		if slices.Contains(p.RoleNames, name) {
			return nil, deleteConflict("Cannot delete entity, must remove roles from instance profile first.")
		}
	}
	c.acct.IAM.Roles = slices.DeleteFunc(c.acct.IAM.Roles, func(x IAMRole) bool { return deref(x.Role.RoleName) == name })
	return &iam.DeleteRoleOutput{}, nil
}

func iamTagRole(c *call) (any, error) {
	r, err := c.role(c.param("RoleName"))
	if err != nil {
		return nil, err
	}
	r.Role.Tags = mergeIAMTags(r.Role.Tags, c.iamTags())
	return &iam.TagRoleOutput{}, nil
}

func iamUpdateAssumeRolePolicy(c *call) (any, error) {
	r, err := c.role(c.param("RoleName"))
	if err != nil {
		return nil, err
	}
	doc, err := c.policyParam("PolicyDocument")
	if err != nil {
		return nil, err
	}
	r.Role.AssumeRolePolicyDocument = ptr(doc)
	return &iam.UpdateAssumeRolePolicyOutput{}, nil
}

// iamPage paginates with Marker/MaxItems.
func iamPage[T any](c *call, items []T) ([]T, *string, bool, error) {
	max, err := c.int32Param("MaxItems")
	if err != nil {
		return nil, nil, false, err
	}
	page, next, err := paginate(c, items, c.param("Marker"), max, 100, 1000)
	return page, nonEmpty(next), next != "", err
}

func iamListAttachedRolePolicies(c *call) (any, error) {
	r, err := c.role(c.param("RoleName"))
	if err != nil {
		return nil, err
	}
	all := make([]iamtypes.AttachedPolicy, 0, len(r.AttachedPolicies))
	for _, arn := range r.AttachedPolicies {
		all = append(all, iamtypes.AttachedPolicy{PolicyArn: ptr(arn), PolicyName: ptr(arn[strings.LastIndex(arn, "/")+1:])})
	}
	page, marker, more, err := iamPage(c, all)
	if err != nil {
		return nil, err
	}
	return &iam.ListAttachedRolePoliciesOutput{AttachedPolicies: page, Marker: marker, IsTruncated: more}, nil
}

// awsManagedPolicies are the AWS managed policies the fake knows: those
// the tool attaches to the node role, and the node and cluster policies
// clusters commonly carry. Attaching any other fails with NoSuchEntity, as
// in IAM (moto, loaded with AWS's managed policies, agrees).
var awsManagedPolicies = map[string]bool{
	"AmazonEKSWorkerNodePolicy": true, "AmazonEKS_CNI_Policy": true, "AmazonEC2ContainerRegistryPullOnly": true,
	"AmazonEC2ContainerRegistryReadOnly": true, "AmazonSSMManagedInstanceCore": true, "AmazonEKSClusterPolicy": true,
}

// policyExists accepts the AWS managed policies above and the account's own.
func (c *call) policyExists(arn string) bool {
	if name, ok := strings.CutPrefix(arn, "arn:aws:iam::aws:policy/"); ok {
		return awsManagedPolicies[name]
	}
	_, err := c.policy(arn)
	return err == nil
}

func iamAttachRolePolicy(c *call) (any, error) {
	r, err := c.role(c.param("RoleName"))
	if err != nil {
		return nil, err
	}
	arn := c.param("PolicyArn")
	if !c.policyExists(arn) {
		return nil, noSuchEntity("Policy %s does not exist or is not attachable.", arn)
	}
	if !slices.Contains(r.AttachedPolicies, arn) {
		r.AttachedPolicies = append(r.AttachedPolicies, arn)
		if p, err := c.policy(arn); err == nil {
			p.Policy.AttachmentCount = ptr(deref(p.Policy.AttachmentCount) + 1)
		}
	}
	return &iam.AttachRolePolicyOutput{}, nil
}

func iamDetachRolePolicy(c *call) (any, error) {
	r, err := c.role(c.param("RoleName"))
	if err != nil {
		return nil, err
	}
	arn := c.param("PolicyArn")
	if !slices.Contains(r.AttachedPolicies, arn) {
		return nil, noSuchEntity("Policy %s was not found.", arn)
	}
	r.AttachedPolicies = slices.DeleteFunc(r.AttachedPolicies, func(a string) bool { return a == arn })
	if p, err := c.policy(arn); err == nil {
		p.Policy.AttachmentCount = ptr(deref(p.Policy.AttachmentCount) - 1)
	}
	return &iam.DetachRolePolicyOutput{}, nil
}

func (c *call) profile(name string) (*IAMInstanceProfile, error) {
	if name == "" {
		return nil, c.missingParam("InstanceProfileName")
	}
	for i := range c.acct.IAM.InstanceProfiles {
		if deref(c.acct.IAM.InstanceProfiles[i].InstanceProfile.InstanceProfileName) == name {
			return &c.acct.IAM.InstanceProfiles[i], nil
		}
	}
	return nil, noSuchEntity("Instance Profile %s cannot be found.", name)
}

func (c *call) profileOut(p *IAMInstanceProfile) *iamtypes.InstanceProfile {
	out := p.InstanceProfile
	out.Roles = nil
	for _, n := range p.RoleNames {
		if r, err := c.role(n); err == nil {
			role := r.Role
			role.AssumeRolePolicyDocument = iamEncode(deref(role.AssumeRolePolicyDocument))
			out.Roles = append(out.Roles, role)
		}
	}
	return &out
}

func iamGetInstanceProfile(c *call) (any, error) {
	p, err := c.profile(c.param("InstanceProfileName"))
	if err != nil {
		return nil, err
	}
	return &iam.GetInstanceProfileOutput{InstanceProfile: c.profileOut(p)}, nil
}

func iamCreateInstanceProfile(c *call) (any, error) {
	name := c.param("InstanceProfileName")
	if _, err := c.profile(name); err == nil {
		return nil, entityExists("Instance Profile %s already exists.", name)
	} else if name == "" {
		return nil, err
	}
	p := IAMInstanceProfile{InstanceProfile: iamtypes.InstanceProfile{
		InstanceProfileName: ptr(name), Arn: ptr(c.iamARN("instance-profile", name)), Path: ptr("/"),
		InstanceProfileId: ptr(fmt.Sprintf("AIPA%016d", len(c.acct.IAM.InstanceProfiles)+1)),
		CreateDate:        ptr(time.Now().UTC().Truncate(time.Second)), Tags: c.iamTags(),
	}}
	c.acct.IAM.InstanceProfiles = append(c.acct.IAM.InstanceProfiles, p)
	return &iam.CreateInstanceProfileOutput{InstanceProfile: c.profileOut(&p)}, nil
}

func iamTagInstanceProfile(c *call) (any, error) {
	p, err := c.profile(c.param("InstanceProfileName"))
	if err != nil {
		return nil, err
	}
	p.InstanceProfile.Tags = mergeIAMTags(p.InstanceProfile.Tags, c.iamTags())
	return &iam.TagInstanceProfileOutput{}, nil
}

func iamAddRoleToInstanceProfile(c *call) (any, error) {
	p, err := c.profile(c.param("InstanceProfileName"))
	if err != nil {
		return nil, err
	}
	name := c.param("RoleName")
	if _, err := c.role(name); err != nil {
		return nil, err
	}
	if len(p.RoleNames) > 0 {
		return nil, errorf(http.StatusConflict, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	p.RoleNames = append(p.RoleNames, name)
	return &iam.AddRoleToInstanceProfileOutput{}, nil
}

func iamRemoveRoleFromInstanceProfile(c *call) (any, error) {
	p, err := c.profile(c.param("InstanceProfileName"))
	if err != nil {
		return nil, err
	}
	name := c.param("RoleName")
	if !slices.Contains(p.RoleNames, name) {
		return nil, noSuchEntity("The role with name %s cannot be found in the instance profile.", name)
	}
	p.RoleNames = slices.DeleteFunc(p.RoleNames, func(n string) bool { return n == name })
	return &iam.RemoveRoleFromInstanceProfileOutput{}, nil
}

func iamDeleteInstanceProfile(c *call) (any, error) {
	name := c.param("InstanceProfileName")
	p, err := c.profile(name)
	if err != nil {
		return nil, err
	}
	if len(p.RoleNames) > 0 {
		return nil, deleteConflict("Cannot delete entity, must remove roles from instance profile first.")
	}
	c.acct.IAM.InstanceProfiles = slices.DeleteFunc(c.acct.IAM.InstanceProfiles, func(x IAMInstanceProfile) bool {
		return deref(x.InstanceProfile.InstanceProfileName) == name
	})
	return &iam.DeleteInstanceProfileOutput{}, nil
}

func (c *call) policy(arn string) (*IAMPolicy, error) {
	if arn == "" {
		return nil, c.missingParam("PolicyArn")
	}
	for i := range c.acct.IAM.Policies {
		if deref(c.acct.IAM.Policies[i].Policy.Arn) == arn {
			return &c.acct.IAM.Policies[i], nil
		}
	}
	return nil, noSuchEntity("Policy %s was not found.", arn)
}

func iamGetPolicy(c *call) (any, error) {
	p, err := c.policy(c.param("PolicyArn"))
	if err != nil {
		return nil, err
	}
	out := p.Policy
	return &iam.GetPolicyOutput{Policy: &out}, nil
}

func iamGetPolicyVersion(c *call) (any, error) {
	p, err := c.policy(c.param("PolicyArn"))
	if err != nil {
		return nil, err
	}
	id := c.param("VersionId")
	for _, v := range p.Versions {
		if deref(v.VersionId) == id {
			v.Document = iamEncode(deref(v.Document))
			return &iam.GetPolicyVersionOutput{PolicyVersion: &v}, nil
		}
	}
	return nil, noSuchEntity("Policy %s version %s does not exist.", deref(p.Policy.Arn), id)
}

func iamCreatePolicy(c *call) (any, error) {
	name := c.param("PolicyName")
	if name == "" {
		return nil, c.missingParam("PolicyName")
	}
	arn := c.iamARN("policy", name)
	if _, err := c.policy(arn); err == nil {
		return nil, entityExists("A policy called %s already exists. Duplicate names are not allowed.", name)
	}
	doc, err := c.policyParam("PolicyDocument")
	if err != nil {
		return nil, err
	}
	now := ptr(time.Now().UTC().Truncate(time.Second))
	p := IAMPolicy{
		Policy: iamtypes.Policy{
			PolicyName: ptr(name), Arn: ptr(arn), Path: ptr("/"), DefaultVersionId: ptr("v1"), AttachmentCount: ptr(int32(0)),
			PolicyId: ptr(fmt.Sprintf("ANPA%016d", len(c.acct.IAM.Policies)+1)), IsAttachable: true,
			CreateDate: now, UpdateDate: now, Tags: c.iamTags(),
		},
		Versions: []iamtypes.PolicyVersion{{VersionId: ptr("v1"), IsDefaultVersion: true, Document: ptr(doc), CreateDate: now}},
	}
	if d := c.param("Description"); d != "" {
		p.Policy.Description = ptr(d)
	}
	c.acct.IAM.Policies = append(c.acct.IAM.Policies, p)
	out := p.Policy
	return &iam.CreatePolicyOutput{Policy: &out}, nil
}

func iamCreatePolicyVersion(c *call) (any, error) {
	p, err := c.policy(c.param("PolicyArn"))
	if err != nil {
		return nil, err
	}
	doc, err := c.policyParam("PolicyDocument")
	if err != nil {
		return nil, err
	}
	if len(p.Versions) >= 5 {
		return nil, errorf(http.StatusConflict, "LimitExceeded", "A managed policy can have up to 5 versions. Before you create a new version, you must delete an existing version.")
	}
	n := 0
	for _, v := range p.Versions {
		if k, err := strconv.Atoi(strings.TrimPrefix(deref(v.VersionId), "v")); err == nil && k > n {
			n = k
		}
	}
	v := iamtypes.PolicyVersion{VersionId: ptr("v" + strconv.Itoa(n+1)), Document: ptr(doc), CreateDate: ptr(time.Now().UTC())}
	if b, _ := c.boolParam("SetAsDefault"); b != nil && *b {
		for i := range p.Versions {
			p.Versions[i].IsDefaultVersion = false
		}
		v.IsDefaultVersion = true
		p.Policy.DefaultVersionId = v.VersionId
	}
	p.Versions = append(p.Versions, v)
	out := v
	out.Document = nil
	return &iam.CreatePolicyVersionOutput{PolicyVersion: &out}, nil
}

func iamListPolicyVersions(c *call) (any, error) {
	p, err := c.policy(c.param("PolicyArn"))
	if err != nil {
		return nil, err
	}
	all := make([]iamtypes.PolicyVersion, 0, len(p.Versions))
	for _, v := range p.Versions {
		v.Document = nil
		all = append(all, v)
	}
	page, marker, more, err := iamPage(c, all)
	if err != nil {
		return nil, err
	}
	return &iam.ListPolicyVersionsOutput{Versions: page, Marker: marker, IsTruncated: more}, nil
}

func iamDeletePolicyVersion(c *call) (any, error) {
	p, err := c.policy(c.param("PolicyArn"))
	if err != nil {
		return nil, err
	}
	id := c.param("VersionId")
	i := slices.IndexFunc(p.Versions, func(v iamtypes.PolicyVersion) bool { return deref(v.VersionId) == id })
	if i < 0 {
		return nil, noSuchEntity("Policy version %s does not exist.", id)
	}
	if p.Versions[i].IsDefaultVersion {
		return nil, deleteConflict("Cannot delete a policy version that is the default version.")
	}
	p.Versions = slices.Delete(p.Versions, i, i+1)
	return &iam.DeletePolicyVersionOutput{}, nil
}

func iamDeletePolicy(c *call) (any, error) {
	arn := c.param("PolicyArn")
	p, err := c.policy(arn)
	if err != nil {
		return nil, err
	}
	if deref(p.Policy.AttachmentCount) > 0 {
		return nil, deleteConflict("Cannot delete a policy attached to entities.")
	}
	if len(p.Versions) > 1 {
		return nil, deleteConflict("This policy has more than one version. Before you delete a policy, you must delete the policy's versions. The default version is deleted with the policy.")
	}
	c.acct.IAM.Policies = slices.DeleteFunc(c.acct.IAM.Policies, func(x IAMPolicy) bool { return deref(x.Policy.Arn) == arn })
	return &iam.DeletePolicyOutput{}, nil
}

func iamTagPolicy(c *call) (any, error) {
	p, err := c.policy(c.param("PolicyArn"))
	if err != nil {
		return nil, err
	}
	p.Policy.Tags = mergeIAMTags(p.Policy.Tags, c.iamTags())
	return &iam.TagPolicyOutput{}, nil
}

func (c *call) oidc(arn string) (*IAMOIDCProvider, error) {
	if arn == "" {
		return nil, c.missingParam("OpenIDConnectProviderArn")
	}
	for i := range c.acct.IAM.OIDCProviders {
		if c.acct.IAM.OIDCProviders[i].ARN == arn {
			return &c.acct.IAM.OIDCProviders[i], nil
		}
	}
	return nil, noSuchEntity("OpenIDConnect Provider not found for arn %s", arn)
}

func iamGetOIDC(c *call) (any, error) {
	p, err := c.oidc(c.param("OpenIDConnectProviderArn"))
	if err != nil {
		return nil, err
	}
	return &iam.GetOpenIDConnectProviderOutput{Url: ptr(p.URL), ClientIDList: p.ClientIDList, Tags: p.Tags}, nil
}

func iamCreateOIDC(c *call) (any, error) {
	u := c.param("Url")
	if u == "" {
		return nil, c.missingParam("Url")
	}
	hostPath := strings.TrimPrefix(u, "https://")
	arn := c.iamARN("oidc-provider", hostPath)
	if _, err := c.oidc(arn); err == nil {
		return nil, entityExists("Provider with url %s already exists.", u)
	}
	c.acct.IAM.OIDCProviders = append(c.acct.IAM.OIDCProviders, IAMOIDCProvider{ARN: arn, URL: hostPath, ClientIDList: c.list("ClientIDList.member"), Tags: c.iamTags()})
	return &iam.CreateOpenIDConnectProviderOutput{OpenIDConnectProviderArn: ptr(arn)}, nil
}

func iamDeleteOIDC(c *call) (any, error) {
	arn := c.param("OpenIDConnectProviderArn")
	if _, err := c.oidc(arn); err != nil {
		return nil, err
	}
	c.acct.IAM.OIDCProviders = slices.DeleteFunc(c.acct.IAM.OIDCProviders, func(p IAMOIDCProvider) bool { return p.ARN == arn })
	return &iam.DeleteOpenIDConnectProviderOutput{}, nil
}
