package awsfake

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// registerEC2 adds EC2 (ec2query).
func registerEC2(s *Server) {
	s.register("ec2", "DescribeInstances", ec2DescribeInstances)
	s.register("ec2", "DescribeSubnets", ec2DescribeSubnets)
	s.register("ec2", "DescribeSecurityGroups", ec2DescribeSecurityGroups)
	s.register("ec2", "DescribeLaunchTemplates", ec2DescribeLaunchTemplates)
	s.register("ec2", "DescribeLaunchTemplateVersions", ec2DescribeLaunchTemplateVersions)
	s.register("ec2", "DescribeInstanceTypes", ec2DescribeInstanceTypes)
	s.register("ec2", "DescribeInstanceTypeOfferings", ec2DescribeInstanceTypeOfferings)
	s.register("ec2", "DescribeSpotPriceHistory", ec2DescribeSpotPriceHistory)
	s.register("ec2", "DescribeImages", ec2DescribeImages)
	s.register("ec2", "CreateTags", ec2CreateTags)
	s.register("ec2", "DeleteTags", ec2DeleteTags)
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	return m
}

// ec2Match applies EC2 filters to one resource; fields maps the filter names
// the resource supports to its values.
func (c *call) ec2Match(filters []filter, tags []ec2types.Tag, fields map[string][]string) (bool, error) {
	var tagMap map[string]string
	for _, f := range filters {
		if vals, ok := fields[f.Name]; ok {
			hit := false
			for _, v := range vals {
				hit = hit || matchValue(f.Values, v)
			}
			if !hit {
				return false, nil
			}
			continue
		}
		if tagMap == nil {
			tagMap = ec2Tags(tags)
		}
		m, handled := matchTags(f, tagMap)
		if !handled {
			names := make([]string, 0, len(fields))
			for k := range fields {
				names = append(names, k)
			}
			sort.Strings(names)
			return false, errorf(http.StatusBadRequest, "InvalidParameterValue",
				"The filter '%s' is invalid; awsfake supports %s, tag:<key>, tag-key and tag-value", f.Name, strings.Join(names, ", "))
		}
		if !m {
			return false, nil
		}
	}
	return true, nil
}

// ec2Page paginates an EC2 list: MaxResults within [lo, hi]; everything in
// one page when MaxResults is absent.
func ec2Page[T any](c *call, items []T, lo, hi int32) ([]T, *string, error) {
	max, err := c.int32Param("MaxResults")
	if err != nil {
		return nil, nil, err
	}
	if max == nil && c.param("NextToken") == "" {
		return items, nil, nil
	}
	if max != nil && (*max < lo || *max > hi) {
		return nil, nil, errorf(http.StatusBadRequest, "InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Parameter must be between %d and %d.", *max, lo, hi)
	}
	page, next, err := paginate(c, items, c.param("NextToken"), max, hi, hi)
	return page, nonEmpty(next), err
}

func ec2DescribeInstances(c *call) (any, error) {
	ids := c.list("InstanceId")
	if len(ids) > 0 && c.hasParam("MaxResults") {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	filters := c.filters("Filter", "Value")
	found := map[string]bool{}
	var out []ec2types.Reservation
	for _, in := range c.acct.EC2.Instances {
		id := deref(in.InstanceId)
		if len(ids) > 0 && !matchValue(ids, id) {
			continue
		}
		found[id] = true
		var state, zone string
		if in.State != nil {
			state = string(in.State.Name)
		}
		if in.Placement != nil {
			zone = deref(in.Placement.AvailabilityZone)
		}
		lifecycle := string(in.InstanceLifecycle)
		if lifecycle == "" {
			lifecycle = "normal"
		}
		ok, err := c.ec2Match(filters, in.Tags, map[string][]string{
			"instance-id": {id}, "instance-state-name": {state}, "instance-type": {string(in.InstanceType)},
			"availability-zone": {zone}, "private-dns-name": {deref(in.PrivateDnsName)}, "vpc-id": {deref(in.VpcId)},
			"subnet-id": {deref(in.SubnetId)}, "image-id": {deref(in.ImageId)}, "instance-lifecycle": {lifecycle},
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ec2types.Reservation{ReservationId: ptr("r-" + strings.TrimPrefix(id, "i-")), OwnerId: &c.acct.ID, Instances: []ec2types.Instance{in}})
		}
	}
	for _, id := range ids {
		if !found[id] {
			return nil, errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	page, next, err := ec2Page(c, out, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeInstancesOutput{Reservations: page, NextToken: next}, nil
}

func ec2DescribeSubnets(c *call) (any, error) {
	ids := c.list("SubnetId")
	filters := c.filters("Filter", "Value")
	var out []ec2types.Subnet
	for _, sn := range c.acct.EC2.Subnets {
		if len(ids) > 0 && !matchValue(ids, deref(sn.SubnetId)) {
			continue
		}
		ok, err := c.ec2Match(filters, sn.Tags, map[string][]string{
			"subnet-id": {deref(sn.SubnetId)}, "vpc-id": {deref(sn.VpcId)}, "availability-zone": {deref(sn.AvailabilityZone)},
			"cidr-block": {deref(sn.CidrBlock)},
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sn)
		}
	}
	if err := notFound(ids, out, func(s ec2types.Subnet) string { return deref(s.SubnetId) }, "InvalidSubnetID.NotFound", "subnet ID"); err != nil {
		return nil, err
	}
	page, next, err := ec2Page(c, out, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeSubnetsOutput{Subnets: page, NextToken: next}, nil
}

func ec2DescribeSecurityGroups(c *call) (any, error) {
	ids := c.list("GroupId")
	names := c.list("GroupName")
	filters := c.filters("Filter", "Value")
	var out []ec2types.SecurityGroup
	for _, sg := range c.acct.EC2.SecurityGroups {
		if len(ids) > 0 && !matchValue(ids, deref(sg.GroupId)) {
			continue
		}
		if len(names) > 0 && !matchValue(names, deref(sg.GroupName)) {
			continue
		}
		ok, err := c.ec2Match(filters, sg.Tags, map[string][]string{
			"group-id": {deref(sg.GroupId)}, "group-name": {deref(sg.GroupName)}, "vpc-id": {deref(sg.VpcId)},
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sg)
		}
	}
	if err := notFound(ids, out, func(s ec2types.SecurityGroup) string { return deref(s.GroupId) }, "InvalidGroup.NotFound", "security group"); err != nil {
		return nil, err
	}
	page, next, err := ec2Page(c, out, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: page, NextToken: next}, nil
}

// launchTemplates derives the templates from their versions.
func (a *Account) launchTemplates() []ec2types.LaunchTemplate {
	byID := map[string]*ec2types.LaunchTemplate{}
	var order []string
	for _, v := range a.EC2.LaunchTemplateVersions {
		id := deref(v.LaunchTemplateId)
		lt, ok := byID[id]
		if !ok {
			lt = &ec2types.LaunchTemplate{LaunchTemplateId: v.LaunchTemplateId, LaunchTemplateName: v.LaunchTemplateName,
				CreateTime: v.CreateTime, CreatedBy: v.CreatedBy, DefaultVersionNumber: ptr(int64(1)), LatestVersionNumber: ptr(int64(0))}
			byID[id] = lt
			order = append(order, id)
		}
		n := deref(v.VersionNumber)
		if n > deref(lt.LatestVersionNumber) {
			lt.LatestVersionNumber = &n
		}
		if deref(v.DefaultVersion) {
			lt.DefaultVersionNumber = &n
		}
	}
	out := make([]ec2types.LaunchTemplate, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

// resolveLaunchTemplateVersion finds a version by template ID or name and
// version ("", "$Default", "$Latest" or a number).
func (a *Account) resolveLaunchTemplateVersion(id, name, version string) (ec2types.LaunchTemplateVersion, bool) {
	// One pass over the versions of this template only: building every
	// template (launchTemplates) per lookup is quadratic in templates.
	var tmplID string
	def, latest := int64(1), int64(0)
	for _, v := range a.EC2.LaunchTemplateVersions {
		vid := deref(v.LaunchTemplateId)
		if !((id != "" && vid == id) || (id == "" && name != "" && deref(v.LaunchTemplateName) == name)) {
			continue
		}
		if vid != tmplID { // a later template of the same name wins, as in launchTemplates
			tmplID, def, latest = vid, 1, 0
		}
		if n := deref(v.VersionNumber); n > latest {
			latest = n
		}
		if deref(v.DefaultVersion) {
			def = deref(v.VersionNumber)
		}
	}
	if tmplID == "" {
		return ec2types.LaunchTemplateVersion{}, false
	}
	var n int64
	switch version {
	case "", "$Default":
		n = def
	case "$Latest":
		n = latest
	default:
		var err error
		if n, err = strconv.ParseInt(version, 10, 64); err != nil {
			return ec2types.LaunchTemplateVersion{}, false
		}
	}
	for _, v := range a.EC2.LaunchTemplateVersions {
		if deref(v.LaunchTemplateId) == tmplID && deref(v.VersionNumber) == n {
			return v, true
		}
	}
	return ec2types.LaunchTemplateVersion{}, false
}

func ec2DescribeLaunchTemplates(c *call) (any, error) {
	ids := c.list("LaunchTemplateId")
	names := c.list("LaunchTemplateName")
	filters := c.filters("Filter", "Value")
	var out []ec2types.LaunchTemplate
	for _, lt := range c.acct.launchTemplates() {
		if len(ids) > 0 && !matchValue(ids, deref(lt.LaunchTemplateId)) {
			continue
		}
		if len(names) > 0 && !matchValue(names, deref(lt.LaunchTemplateName)) {
			continue
		}
		ok, err := c.ec2Match(filters, lt.Tags, map[string][]string{"launch-template-name": {deref(lt.LaunchTemplateName)}})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, lt)
		}
	}
	if err := notFound(ids, out, func(l ec2types.LaunchTemplate) string { return deref(l.LaunchTemplateId) }, "InvalidLaunchTemplateId.NotFound", "launch template ID"); err != nil {
		return nil, err
	}
	if err := notFound(names, out, func(l ec2types.LaunchTemplate) string { return deref(l.LaunchTemplateName) }, "InvalidLaunchTemplateName.NotFoundException", "launch template name"); err != nil {
		return nil, err
	}
	page, next, err := ec2Page(c, out, 1, 200)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeLaunchTemplatesOutput{LaunchTemplates: page, NextToken: next}, nil
}

// ec2DescribeLaunchTemplateVersions serves one template's versions, or, with
// no template named, the $Default and/or $Latest version of every template
// (as AWS allows), which lets discover read all templates in one paginated
// call.
func ec2DescribeLaunchTemplateVersions(c *call) (any, error) {
	id, name := c.param("LaunchTemplateId"), c.param("LaunchTemplateName")
	versions := c.list("LaunchTemplateVersion")
	var out []ec2types.LaunchTemplateVersion
	if id == "" && name == "" {
		if len(versions) == 0 {
			return nil, c.missingParam("LaunchTemplateId or LaunchTemplateName")
		}
		for _, v := range versions {
			if v != "$Latest" && v != "$Default" {
				return nil, errorf(http.StatusBadRequest, "InvalidParameterCombination", "Without a launch template ID or name, only $Latest and $Default versions can be described; got %s", v)
			}
		}
		for _, lt := range c.acct.launchTemplates() {
			seen := map[int64]bool{}
			for _, ver := range versions {
				if v, ok := c.acct.resolveLaunchTemplateVersion(deref(lt.LaunchTemplateId), "", ver); ok && !seen[deref(v.VersionNumber)] {
					seen[deref(v.VersionNumber)] = true
					out = append(out, v)
				}
			}
		}
	} else {
		var tmpl *ec2types.LaunchTemplate
		for _, lt := range c.acct.launchTemplates() {
			if (id != "" && deref(lt.LaunchTemplateId) == id) || (id == "" && deref(lt.LaunchTemplateName) == name) {
				lt := lt
				tmpl = &lt
			}
		}
		if tmpl == nil {
			if id != "" {
				return nil, errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
			}
			return nil, errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
		if len(versions) == 0 {
			for _, v := range c.acct.EC2.LaunchTemplateVersions {
				if deref(v.LaunchTemplateId) == deref(tmpl.LaunchTemplateId) {
					out = append(out, v)
				}
			}
		}
		for _, ver := range versions {
			v, ok := c.acct.resolveLaunchTemplateVersion(deref(tmpl.LaunchTemplateId), "", ver)
			if !ok {
				return nil, errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s", ver, deref(tmpl.LaunchTemplateId))
			}
			out = append(out, v)
		}
	}
	page, next, err := ec2Page(c, out, 1, 200)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: page, NextToken: next}, nil
}

func ec2DescribeInstanceTypes(c *call) (any, error) {
	types := c.list("InstanceType")
	var out []ec2types.InstanceTypeInfo
	for _, it := range c.acct.EC2.InstanceTypes {
		if len(types) == 0 || matchValue(types, string(it.InstanceType)) {
			out = append(out, it)
		}
	}
	if err := notFound(types, out, func(i ec2types.InstanceTypeInfo) string { return string(i.InstanceType) }, "InvalidInstanceType", "instance type"); err != nil {
		return nil, err
	}
	page, next, err := ec2Page(c, out, 5, 100)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: page, NextToken: next}, nil
}

// instanceTypeOfferings are the seeded offerings or, when none are seeded,
// every instance type in every zone of the account's subnets (<region>a, b
// and c without subnets), plus one region-level offering per type.
func (a *Account) instanceTypeOfferings() []ec2types.InstanceTypeOffering {
	if len(a.EC2.InstanceTypeOfferings) > 0 {
		return a.EC2.InstanceTypeOfferings
	}
	var zones []string
	seen := map[string]bool{}
	for _, sn := range a.EC2.Subnets {
		if z := deref(sn.AvailabilityZone); z != "" && !seen[z] {
			seen[z] = true
			zones = append(zones, z)
		}
	}
	if len(zones) == 0 {
		zones = []string{a.Region + "a", a.Region + "b", a.Region + "c"}
	}
	sort.Strings(zones)
	var out []ec2types.InstanceTypeOffering
	for _, it := range a.EC2.InstanceTypes {
		out = append(out, ec2types.InstanceTypeOffering{InstanceType: it.InstanceType, Location: ptr(a.Region), LocationType: ec2types.LocationTypeRegion})
		for _, z := range zones {
			out = append(out, ec2types.InstanceTypeOffering{InstanceType: it.InstanceType, Location: ptr(z), LocationType: ec2types.LocationTypeAvailabilityZone})
		}
	}
	return out
}

// ec2DescribeInstanceTypeOfferings serves the offerings of one location type
// (region by default, as in AWS), with the instance-type and location filters.
func ec2DescribeInstanceTypeOfferings(c *call) (any, error) {
	lt := ec2types.LocationType(c.param("LocationType"))
	if lt == "" {
		lt = ec2types.LocationTypeRegion
	}
	switch lt {
	case ec2types.LocationTypeRegion, ec2types.LocationTypeAvailabilityZone, ec2types.LocationTypeAvailabilityZoneId, ec2types.LocationTypeOutpost:
	default:
		return nil, c.invalidParam("LocationType", string(lt))
	}
	filters := c.filters("Filter", "Value")
	var out []ec2types.InstanceTypeOffering
	for _, o := range c.acct.instanceTypeOfferings() {
		if o.LocationType != lt {
			continue
		}
		ok, err := c.ec2Match(filters, nil, map[string][]string{
			"instance-type": {string(o.InstanceType)}, "location": {deref(o.Location)},
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o)
		}
	}
	page, next, err := ec2Page(c, out, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: page, NextToken: next}, nil
}

func ec2DescribeSpotPriceHistory(c *call) (any, error) {
	types := c.list("InstanceType")
	products := c.list("ProductDescription")
	zone := c.param("AvailabilityZone")
	var start time.Time
	if s := c.param("StartTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, c.invalidParam("StartTime", s)
		}
		start = t
	}
	var out []ec2types.SpotPrice
	for _, p := range c.acct.EC2.SpotPrices {
		switch {
		case len(types) > 0 && !matchValue(types, string(p.InstanceType)):
		case len(products) > 0 && !matchValue(products, string(p.ProductDescription)):
		case zone != "" && deref(p.AvailabilityZone) != zone:
		case !start.IsZero() && p.Timestamp != nil && p.Timestamp.Before(start):
		default:
			out = append(out, p)
		}
	}
	page, next, err := ec2Page(c, out, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: page, NextToken: next}, nil
}

func ec2DescribeImages(c *call) (any, error) {
	ids := c.list("ImageId")
	owners := c.list("Owner")
	filters := c.filters("Filter", "Value")
	var out []ec2types.Image
	for _, im := range c.acct.EC2.Images {
		if len(ids) > 0 && !matchValue(ids, deref(im.ImageId)) {
			continue
		}
		if len(owners) > 0 && !matchValue(owners, deref(im.OwnerId)) && !matchValue(owners, deref(im.ImageOwnerAlias)) {
			continue
		}
		ok, err := c.ec2Match(filters, im.Tags, map[string][]string{
			"image-id": {deref(im.ImageId)}, "name": {deref(im.Name)}, "architecture": {string(im.Architecture)},
			"owner-id": {deref(im.OwnerId)}, "state": {string(im.State)},
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, im)
		}
	}
	if err := notFound(ids, out, func(i ec2types.Image) string { return deref(i.ImageId) }, "InvalidAMIID.NotFound", "image ID"); err != nil {
		return nil, err
	}
	page, next, err := ec2Page(c, out, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeImagesOutput{Images: page, NextToken: next}, nil
}

// taggable returns a pointer to the tag list of the resource with id.
func (a *Account) taggable(id string) *[]ec2types.Tag {
	for i := range a.EC2.Instances {
		if deref(a.EC2.Instances[i].InstanceId) == id {
			return &a.EC2.Instances[i].Tags
		}
	}
	for i := range a.EC2.Subnets {
		if deref(a.EC2.Subnets[i].SubnetId) == id {
			return &a.EC2.Subnets[i].Tags
		}
	}
	for i := range a.EC2.SecurityGroups {
		if deref(a.EC2.SecurityGroups[i].GroupId) == id {
			return &a.EC2.SecurityGroups[i].Tags
		}
	}
	for i := range a.EC2.Images {
		if deref(a.EC2.Images[i].ImageId) == id {
			return &a.EC2.Images[i].Tags
		}
	}
	return nil
}

func (c *call) ec2TagArgs() ([]string, []ec2types.Tag, error) {
	ids := c.list("ResourceId")
	if len(ids) == 0 {
		return nil, nil, c.missingParam("ResourceId")
	}
	var tags []ec2types.Tag
	for _, i := range c.indexes("Tag") {
		p := fmt.Sprintf("Tag.%d.", i)
		t := ec2types.Tag{Key: ptr(c.param(p + "Key"))}
		if c.hasParam(p + "Value") {
			t.Value = ptr(c.param(p + "Value"))
		}
		tags = append(tags, t)
	}
	for _, id := range ids {
		if c.acct.taggable(id) == nil {
			prefix, _, _ := strings.Cut(id, "-")
			kind := map[string]string{"i": "InvalidInstanceID", "subnet": "InvalidSubnetID", "sg": "InvalidGroup", "ami": "InvalidAMIID"}[prefix]
			if kind == "" {
				kind = "InvalidID"
				return nil, nil, errorf(http.StatusBadRequest, kind, "The ID '%s' is not valid", id)
			}
			return nil, nil, errorf(http.StatusBadRequest, kind+".NotFound", "The ID '%s' does not exist", id)
		}
	}
	return ids, tags, nil
}

func ec2CreateTags(c *call) (any, error) {
	ids, tags, err := c.ec2TagArgs()
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, c.missingParam("Tag")
	}
	for _, id := range ids {
		have := c.acct.taggable(id)
		for _, t := range tags {
			t.Value = nonNil(t.Value)
			replaced := false
			for i := range *have {
				if deref((*have)[i].Key) == deref(t.Key) {
					(*have)[i], replaced = t, true
				}
			}
			if !replaced {
				*have = append(*have, t)
			}
		}
	}
	return &ec2.CreateTagsOutput{}, nil
}

func ec2DeleteTags(c *call) (any, error) {
	ids, tags, err := c.ec2TagArgs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		have := c.acct.taggable(id)
		kept := (*have)[:0]
		for _, h := range *have {
			drop := len(tags) == 0 // no Tag given: delete every tag
			for _, t := range tags {
				if deref(h.Key) == deref(t.Key) && (t.Value == nil || deref(h.Value) == deref(t.Value)) {
					drop = true
				}
			}
			if !drop {
				kept = append(kept, h)
			}
		}
		*have = kept
	}
	return &ec2.DeleteTagsOutput{}, nil
}

// notFound reports the first requested ID missing from found.
func notFound[T any](ids []string, found []T, key func(T) string, code, what string) error {
	have := make(map[string]bool, len(found))
	for _, f := range found {
		have[key(f)] = true
	}
	for _, id := range ids {
		if !have[id] && !strings.ContainsAny(id, "*?") {
			return errorf(http.StatusBadRequest, code, "The %s '%s' does not exist", what, id)
		}
	}
	return nil
}
