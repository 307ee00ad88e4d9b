package awsfake

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// EKSAccessState holds the EKS access entries and pod identity
// associations of every cluster in the account.
type EKSAccessState struct {
	AccessEntries           []ekstypes.AccessEntry            `json:"accessEntries,omitempty"`
	PodIdentityAssociations []ekstypes.PodIdentityAssociation `json:"podIdentityAssociations,omitempty"`
	seq                     int
}

// registerEKSAccess adds the EKS (restJson1) access-entry and pod identity
// operations, and TagResource for both.
func registerEKSAccess(s *Server) {
	s.registerREST("eks", "CreateAccessEntry", "POST /clusters/{name}/access-entries", eksCreateAccessEntry)
	s.registerREST("eks", "DescribeAccessEntry", "GET /clusters/{name}/access-entries/{principalArn}", eksDescribeAccessEntry)
	s.registerREST("eks", "DeleteAccessEntry", "DELETE /clusters/{name}/access-entries/{principalArn}", eksDeleteAccessEntry)
	s.registerREST("eks", "CreatePodIdentityAssociation", "POST /clusters/{name}/pod-identity-associations", eksCreatePIA)
	s.registerREST("eks", "ListPodIdentityAssociations", "GET /clusters/{name}/pod-identity-associations", eksListPIA)
	s.registerREST("eks", "DescribePodIdentityAssociation", "GET /clusters/{name}/pod-identity-associations/{id}", eksDescribePIA)
	s.registerREST("eks", "UpdatePodIdentityAssociation", "POST /clusters/{name}/pod-identity-associations/{id}", eksUpdatePIA)
	s.registerREST("eks", "DeletePodIdentityAssociation", "DELETE /clusters/{name}/pod-identity-associations/{id}", eksDeletePIA)
	s.registerREST("eks", "TagResource", "POST /tags/{arn}", eksTagResource)
}

func (c *call) accessEntry(cluster, principal string) int {
	return slices.IndexFunc(c.acct.EKSAccess.AccessEntries, func(e ekstypes.AccessEntry) bool {
		return deref(e.ClusterName) == cluster && deref(e.PrincipalArn) == principal
	})
}

func eksCreateAccessEntry(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	var in eks.CreateAccessEntryInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	name, principal := deref(cl.Cluster.Name), deref(in.PrincipalArn)
	if principal == "" {
		return nil, c.missingParam("principalArn")
	}
	if !c.iamPrincipalExists(principal) {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "The specified principalArn is invalid: invalid principal %s", principal)
	}
	if c.accessEntry(name, principal) >= 0 {
		return nil, errorf(http.StatusConflict, "ResourceInUseException", "The specified access entry resource is already in use on this cluster.")
	}
	typ := deref(in.Type)
	if typ == "" {
		typ = "STANDARD"
	}
	now := time.Now().UTC().Truncate(time.Second)
	e := ekstypes.AccessEntry{
		ClusterName: ptr(name), PrincipalArn: ptr(principal), Type: ptr(typ), Tags: maps.Clone(in.Tags),
		AccessEntryArn: ptr(fmt.Sprintf("arn:aws:eks:%s:%s:access-entry/%s/role/%s/%d", c.acct.Region, c.acct.ID, name, c.acct.ID, len(c.acct.EKSAccess.AccessEntries)+1)),
		CreatedAt:      &now, ModifiedAt: &now, KubernetesGroups: in.KubernetesGroups, Username: in.Username,
	}
	c.acct.EKSAccess.AccessEntries = append(c.acct.EKSAccess.AccessEntries, e)
	return &eks.CreateAccessEntryOutput{AccessEntry: &e}, nil
}

// iamPrincipalExists checks a role ARN against the account's IAM roles.
func (c *call) iamPrincipalExists(arn string) bool {
	name, ok := strings.CutPrefix(arn, "arn:aws:iam::"+c.acct.ID+":role/")
	if !ok {
		return true // users and other accounts are not modelled
	}
	_, err := c.role(name[strings.LastIndex(name, "/")+1:])
	return err == nil
}

func eksDescribeAccessEntry(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	i := c.accessEntry(deref(cl.Cluster.Name), c.pathValue("principalArn"))
	if i < 0 {
		return nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "The specified access entry resource can't be found.")
	}
	e := c.acct.EKSAccess.AccessEntries[i]
	return &eks.DescribeAccessEntryOutput{AccessEntry: &e}, nil
}

func eksDeleteAccessEntry(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	i := c.accessEntry(deref(cl.Cluster.Name), c.pathValue("principalArn"))
	if i < 0 {
		return nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "The specified access entry resource can't be found.")
	}
	c.acct.EKSAccess.AccessEntries = slices.Delete(c.acct.EKSAccess.AccessEntries, i, i+1)
	return &eks.DeleteAccessEntryOutput{}, nil
}

func (c *call) pia(cluster, id string) int {
	return slices.IndexFunc(c.acct.EKSAccess.PodIdentityAssociations, func(a ekstypes.PodIdentityAssociation) bool {
		return deref(a.ClusterName) == cluster && deref(a.AssociationId) == id
	})
}

func eksCreatePIA(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	var in eks.CreatePodIdentityAssociationInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	name := deref(cl.Cluster.Name)
	if !c.iamPrincipalExists(deref(in.RoleArn)) {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "Role %s does not exist or is not assumable by pods.eks.amazonaws.com", deref(in.RoleArn))
	}
	for _, a := range c.acct.EKSAccess.PodIdentityAssociations {
		if deref(a.ClusterName) == name && deref(a.Namespace) == deref(in.Namespace) && deref(a.ServiceAccount) == deref(in.ServiceAccount) {
			return nil, errorf(http.StatusConflict, "ResourceInUseException", "Association already exists: %s", deref(a.AssociationId))
		}
	}
	c.acct.EKSAccess.seq++
	id := fmt.Sprintf("a-%017d", c.acct.EKSAccess.seq)
	now := time.Now().UTC().Truncate(time.Second)
	a := ekstypes.PodIdentityAssociation{
		AssociationId: ptr(id), ClusterName: ptr(name), Namespace: in.Namespace, ServiceAccount: in.ServiceAccount, RoleArn: in.RoleArn,
		AssociationArn: ptr(fmt.Sprintf("arn:aws:eks:%s:%s:podidentityassociation/%s/%s", c.acct.Region, c.acct.ID, name, id)),
		Tags:           maps.Clone(in.Tags), CreatedAt: &now, ModifiedAt: &now,
	}
	c.acct.EKSAccess.PodIdentityAssociations = append(c.acct.EKSAccess.PodIdentityAssociations, a)
	return &eks.CreatePodIdentityAssociationOutput{Association: &a}, nil
}

func eksListPIA(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	q := c.req.URL.Query()
	var all []ekstypes.PodIdentityAssociationSummary
	for _, a := range c.acct.EKSAccess.PodIdentityAssociations {
		if deref(a.ClusterName) != deref(cl.Cluster.Name) ||
			(q.Get("namespace") != "" && deref(a.Namespace) != q.Get("namespace")) ||
			(q.Get("serviceAccount") != "" && deref(a.ServiceAccount) != q.Get("serviceAccount")) {
			continue
		}
		all = append(all, ekstypes.PodIdentityAssociationSummary{
			AssociationId: a.AssociationId, AssociationArn: a.AssociationArn, ClusterName: a.ClusterName,
			Namespace: a.Namespace, ServiceAccount: a.ServiceAccount,
		})
	}
	page, next, err := eksPage(c, all)
	if err != nil {
		return nil, err
	}
	return &eks.ListPodIdentityAssociationsOutput{Associations: page, NextToken: next}, nil
}

func (c *call) piaFromPath() (int, error) {
	cl, err := c.cluster()
	if err != nil {
		return -1, err
	}
	i := c.pia(deref(cl.Cluster.Name), c.pathValue("id"))
	if i < 0 {
		return -1, errorf(http.StatusNotFound, "ResourceNotFoundException", "Association %s not found.", c.pathValue("id"))
	}
	return i, nil
}

func eksDescribePIA(c *call) (any, error) {
	i, err := c.piaFromPath()
	if err != nil {
		return nil, err
	}
	a := c.acct.EKSAccess.PodIdentityAssociations[i]
	return &eks.DescribePodIdentityAssociationOutput{Association: &a}, nil
}

func eksUpdatePIA(c *call) (any, error) {
	i, err := c.piaFromPath()
	if err != nil {
		return nil, err
	}
	var in eks.UpdatePodIdentityAssociationInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	a := &c.acct.EKSAccess.PodIdentityAssociations[i]
	if in.RoleArn != nil {
		a.RoleArn = in.RoleArn
	}
	out := *a
	return &eks.UpdatePodIdentityAssociationOutput{Association: &out}, nil
}

func eksDeletePIA(c *call) (any, error) {
	i, err := c.piaFromPath()
	if err != nil {
		return nil, err
	}
	a := c.acct.EKSAccess.PodIdentityAssociations[i]
	c.acct.EKSAccess.PodIdentityAssociations = slices.Delete(c.acct.EKSAccess.PodIdentityAssociations, i, i+1)
	return &eks.DeletePodIdentityAssociationOutput{Association: &a}, nil
}

func eksTagResource(c *call) (any, error) {
	arn := c.pathValue("arn")
	var in eks.TagResourceInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	for i := range c.acct.EKSAccess.AccessEntries {
		if e := &c.acct.EKSAccess.AccessEntries[i]; deref(e.AccessEntryArn) == arn {
			if e.Tags == nil {
				e.Tags = map[string]string{}
			}
			maps.Copy(e.Tags, in.Tags)
			return &eks.TagResourceOutput{}, nil
		}
	}
	for i := range c.acct.EKSAccess.PodIdentityAssociations {
		if a := &c.acct.EKSAccess.PodIdentityAssociations[i]; deref(a.AssociationArn) == arn {
			if a.Tags == nil {
				a.Tags = map[string]string{}
			}
			maps.Copy(a.Tags, in.Tags)
			return &eks.TagResourceOutput{}, nil
		}
	}
	return nil, errorf(http.StatusNotFound, "NotFoundException", "Resource %s not found.", arn)
}
