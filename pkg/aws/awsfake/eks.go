package awsfake

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// registerEKS adds EKS (restJson1). Access entries belong to the IAM file.
func registerEKS(s *Server) {
	s.registerREST("eks", "ListClusters", "GET /clusters", eksListClusters)
	s.registerREST("eks", "DescribeCluster", "GET /clusters/{name}", eksDescribeCluster)
	s.registerREST("eks", "ListNodegroups", "GET /clusters/{name}/node-groups", eksListNodegroups)
	s.registerREST("eks", "DescribeNodegroup", "GET /clusters/{name}/node-groups/{nodegroupName}", eksDescribeNodegroup)
	s.registerREST("eks", "UpdateNodegroupConfig", "POST /clusters/{name}/node-groups/{nodegroupName}/update-config", eksUpdateNodegroupConfig)
	s.registerREST("eks", "ListFargateProfiles", "GET /clusters/{name}/fargate-profiles", eksListFargateProfiles)
	s.registerREST("eks", "DescribeFargateProfile", "GET /clusters/{name}/fargate-profiles/{fargateProfileName}", eksDescribeFargateProfile)
}

func (c *call) cluster() (*EKSCluster, error) {
	name := c.pathValue("name")
	for i := range c.acct.EKS.Clusters {
		if deref(c.acct.EKS.Clusters[i].Cluster.Name) == name {
			return &c.acct.EKS.Clusters[i], nil
		}
	}
	return nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: %s.", name)
}

func (c *call) nodegroup() (*EKSCluster, *ekstypes.Nodegroup, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, nil, err
	}
	name := c.pathValue("nodegroupName")
	for i := range cl.Nodegroups {
		if deref(cl.Nodegroups[i].NodegroupName) == name {
			return cl, &cl.Nodegroups[i], nil
		}
	}
	return nil, nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "No node group found for name: %s.", name)
}

// eksPage paginates with the restJson1 query parameters maxResults and nextToken.
func eksPage[T any](c *call, items []T) ([]T, *string, error) {
	q := c.req.URL.Query()
	var max *int32
	if s := q.Get("maxResults"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 1 || n > 100 {
			return nil, nil, errorf(http.StatusBadRequest, "InvalidParameterException", "maxResults must be between 1 and 100, got %s", s)
		}
		v := int32(n)
		max = &v
	}
	page, next, err := paginate(c, items, q.Get("nextToken"), max, 100, 100)
	if e, ok := err.(*Error); ok {
		e.Code = "InvalidParameterException"
	}
	return page, nonEmpty(next), err
}

func eksListClusters(c *call) (any, error) {
	names := make([]string, 0, len(c.acct.EKS.Clusters))
	for _, cl := range c.acct.EKS.Clusters {
		names = append(names, deref(cl.Cluster.Name))
	}
	sort.Strings(names)
	page, next, err := eksPage(c, names)
	if err != nil {
		return nil, err
	}
	return &eks.ListClustersOutput{Clusters: page, NextToken: next}, nil
}

func eksDescribeCluster(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	out := cl.Cluster
	return &eks.DescribeClusterOutput{Cluster: &out}, nil
}

func eksListNodegroups(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cl.Nodegroups))
	for _, ng := range cl.Nodegroups {
		names = append(names, deref(ng.NodegroupName))
	}
	sort.Strings(names)
	page, next, err := eksPage(c, names)
	if err != nil {
		return nil, err
	}
	return &eks.ListNodegroupsOutput{Nodegroups: page, NextToken: next}, nil
}

func eksDescribeNodegroup(c *call) (any, error) {
	_, ng, err := c.nodegroup()
	if err != nil {
		return nil, err
	}
	out := *ng
	return &eks.DescribeNodegroupOutput{Nodegroup: &out}, nil
}

// eksUpdateNodegroupConfig applies the change at once (the returned update
// is InProgress, as AWS answers) and resizes the node group's ASG to match.
func eksUpdateNodegroupConfig(c *call) (any, error) {
	_, ng, err := c.nodegroup()
	if err != nil {
		return nil, err
	}
	var in eks.UpdateNodegroupConfigInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	if ng.Status != "" && ng.Status != ekstypes.NodegroupStatusActive {
		return nil, errorf(http.StatusConflict, "ResourceInUseException", "Nodegroup %s is in %s state and cannot be updated", deref(ng.NodegroupName), ng.Status)
	}
	var params []ekstypes.UpdateParam
	if sc := in.ScalingConfig; sc != nil {
		cur := ekstypes.NodegroupScalingConfig{}
		if ng.ScalingConfig != nil {
			cur = *ng.ScalingConfig
		}
		mn, mx, ds := pick(sc.MinSize, cur.MinSize), pick(sc.MaxSize, cur.MaxSize), pick(sc.DesiredSize, cur.DesiredSize)
		if mx < 1 || mn > mx || ds < mn || ds > mx {
			return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "Scaling config is invalid: minSize %d, maxSize %d, desiredSize %d (need 0 <= minSize <= desiredSize <= maxSize and maxSize >= 1)", mn, mx, ds)
		}
		ng.ScalingConfig = &ekstypes.NodegroupScalingConfig{MinSize: &mn, MaxSize: &mx, DesiredSize: &ds}
		params = append(params,
			ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeMinSize, Value: ptr(strconv.Itoa(int(mn)))},
			ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeMaxSize, Value: ptr(strconv.Itoa(int(mx)))},
			ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeDesiredSize, Value: ptr(strconv.Itoa(int(ds)))})
		if ng.Resources != nil {
			for _, a := range ng.Resources.AutoScalingGroups {
				if g, ok := c.acct.asg(deref(a.Name)); ok {
					g.MinSize, g.MaxSize, g.DesiredCapacity = ptr(mn), ptr(mx), ptr(ds)
					c.acct.reconcileASG(g)
				}
			}
		}
	}
	if l := in.Labels; l != nil {
		if ng.Labels == nil {
			ng.Labels = map[string]string{}
		}
		for k, v := range l.AddOrUpdateLabels {
			ng.Labels[k] = v
		}
		for _, k := range l.RemoveLabels {
			delete(ng.Labels, k)
		}
		params = append(params, ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeLabelsToAdd, Value: ptr(strconv.Itoa(len(l.AddOrUpdateLabels)))})
	}
	if t := in.Taints; t != nil {
		kept := ng.Taints[:0]
		for _, have := range ng.Taints {
			drop := false
			for _, rm := range t.RemoveTaints {
				drop = drop || deref(rm.Key) == deref(have.Key) && rm.Effect == have.Effect
			}
			for _, add := range t.AddOrUpdateTaints {
				drop = drop || deref(add.Key) == deref(have.Key) && add.Effect == have.Effect
			}
			if !drop {
				kept = append(kept, have)
			}
		}
		ng.Taints = append(kept, t.AddOrUpdateTaints...)
		params = append(params, ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeTaintsToAdd, Value: ptr(strconv.Itoa(len(t.AddOrUpdateTaints)))})
	}
	if u := in.UpdateConfig; u != nil {
		ng.UpdateConfig = u
		if u.MaxUnavailable != nil {
			params = append(params, ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeMaxUnavailable, Value: ptr(strconv.Itoa(int(*u.MaxUnavailable)))})
		}
	}
	c.acct.launchSeq++
	return &eks.UpdateNodegroupConfigOutput{Update: &ekstypes.Update{
		Id: ptr("u0000000-0000-4000-8000-" + strconv.FormatUint(c.acct.launchSeq+100000000000, 10)), Status: ekstypes.UpdateStatusInProgress,
		Type: ekstypes.UpdateTypeConfigUpdate, Params: params,
	}}, nil
}

func eksListFargateProfiles(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cl.FargateProfiles))
	for _, fp := range cl.FargateProfiles {
		names = append(names, deref(fp.FargateProfileName))
	}
	sort.Strings(names)
	page, next, err := eksPage(c, names)
	if err != nil {
		return nil, err
	}
	return &eks.ListFargateProfilesOutput{FargateProfileNames: page, NextToken: next}, nil
}

func eksDescribeFargateProfile(c *call) (any, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	name := c.pathValue("fargateProfileName")
	for _, fp := range cl.FargateProfiles {
		if deref(fp.FargateProfileName) == name {
			out := fp
			return &eks.DescribeFargateProfileOutput{FargateProfile: &out}, nil
		}
	}
	return nil, errorf(http.StatusNotFound, "ResourceNotFoundException", "No Fargate Profile found with name: %s.", name)
}
