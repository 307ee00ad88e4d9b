package awsfake

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// registerAutoScaling adds Auto Scaling (awsquery): what discover reads and
// what the rollout changes.
func registerAutoScaling(s *Server) {
	s.register("autoscaling", "DescribeAutoScalingGroups", asDescribeGroups)
	s.register("autoscaling", "DescribeLaunchConfigurations", asDescribeLaunchConfigurations)
	s.register("autoscaling", "DescribeTags", asDescribeTags)
	s.register("autoscaling", "UpdateAutoScalingGroup", asUpdateGroup)
	s.register("autoscaling", "SetDesiredCapacity", asSetDesiredCapacity)
	s.register("autoscaling", "SuspendProcesses", asSuspendProcesses)
	s.register("autoscaling", "ResumeProcesses", asResumeProcesses)
	s.register("autoscaling", "TerminateInstanceInAutoScalingGroup", asTerminateInstance)
	s.register("autoscaling", "CreateOrUpdateTags", asCreateOrUpdateTags)
	s.register("autoscaling", "DeleteTags", asDeleteTags)
}

// asProcesses are the scaling processes SuspendProcesses accepts.
var asProcesses = []string{"Launch", "Terminate", "AddToLoadBalancer", "AlarmNotification", "AZRebalance",
	"HealthCheck", "InstanceRefresh", "ReplaceUnhealthy", "ScheduledActions"}

func (a *Account) asg(name string) (*astypes.AutoScalingGroup, bool) {
	for i := range a.AutoScaling.Groups {
		if deref(a.AutoScaling.Groups[i].AutoScalingGroupName) == name {
			return &a.AutoScaling.Groups[i], true
		}
	}
	return nil, false
}

func (c *call) group(param string) (*astypes.AutoScalingGroup, error) {
	name := c.param(param)
	if name == "" {
		return nil, c.missingParam(param)
	}
	g, ok := c.acct.asg(name)
	if !ok {
		return nil, validationError("AutoScalingGroup name not found - AutoScalingGroup '%s' not found", name)
	}
	return g, nil
}

func asgTags(g *astypes.AutoScalingGroup) map[string]string {
	m := make(map[string]string, len(g.Tags))
	for _, t := range g.Tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	return m
}

func asDescribeGroups(c *call) (any, error) {
	names := c.list("AutoScalingGroupNames.member")
	filters := c.filters("Filters.member", "Values.member")
	max, err := c.int32Param("MaxRecords")
	if err != nil {
		return nil, err
	}
	var out []astypes.AutoScalingGroup
	for _, g := range c.acct.AutoScaling.Groups {
		if len(names) > 0 && !matchValue(names, deref(g.AutoScalingGroupName)) {
			continue
		}
		tags := asgTags(&g)
		ok := true
		for _, f := range filters {
			m, handled := matchTags(f, tags)
			if !handled {
				return nil, validationError("Filter name '%s' is not valid; use tag-key, tag-value or tag:<key>", f.Name)
			}
			ok = ok && m
		}
		if ok {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return deref(out[i].AutoScalingGroupName) < deref(out[j].AutoScalingGroupName) })
	page, next, err := paginate(c, out, c.param("NextToken"), max, 50, 100)
	if err != nil {
		return nil, err
	}
	return &autoscaling.DescribeAutoScalingGroupsOutput{AutoScalingGroups: page, NextToken: nonEmpty(next)}, nil
}

func asDescribeLaunchConfigurations(c *call) (any, error) {
	names := c.list("LaunchConfigurationNames.member")
	max, err := c.int32Param("MaxRecords")
	if err != nil {
		return nil, err
	}
	var out []astypes.LaunchConfiguration
	for _, lc := range c.acct.AutoScaling.LaunchConfigurations {
		if len(names) == 0 || matchValue(names, deref(lc.LaunchConfigurationName)) {
			out = append(out, lc)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return deref(out[i].LaunchConfigurationName) < deref(out[j].LaunchConfigurationName)
	})
	page, next, err := paginate(c, out, c.param("NextToken"), max, 50, 100)
	if err != nil {
		return nil, err
	}
	return &autoscaling.DescribeLaunchConfigurationsOutput{LaunchConfigurations: page, NextToken: nonEmpty(next)}, nil
}

func asDescribeTags(c *call) (any, error) {
	filters := c.filters("Filters.member", "Values.member")
	max, err := c.int32Param("MaxRecords")
	if err != nil {
		return nil, err
	}
	var out []astypes.TagDescription
	for _, g := range c.acct.AutoScaling.Groups {
		for _, t := range g.Tags {
			ok := true
			for _, f := range filters {
				switch f.Name {
				case "auto-scaling-group":
					ok = ok && matchValue(f.Values, deref(g.AutoScalingGroupName))
				case "key":
					ok = ok && matchValue(f.Values, deref(t.Key))
				case "value":
					ok = ok && matchValue(f.Values, deref(t.Value))
				case "propagate-at-launch":
					ok = ok && matchValue(f.Values, fmt.Sprint(deref(t.PropagateAtLaunch)))
				default:
					return nil, validationError("Filter name '%s' is not valid; use auto-scaling-group, key, value or propagate-at-launch", f.Name)
				}
			}
			if ok {
				out = append(out, astypes.TagDescription{Key: t.Key, Value: t.Value, PropagateAtLaunch: t.PropagateAtLaunch,
					ResourceId: g.AutoScalingGroupName, ResourceType: ptr("auto-scaling-group")})
			}
		}
	}
	page, next, err := paginate(c, out, c.param("NextToken"), max, 50, 100)
	if err != nil {
		return nil, err
	}
	return &autoscaling.DescribeTagsOutput{Tags: page, NextToken: nonEmpty(next)}, nil
}

func asUpdateGroup(c *call) (any, error) {
	g, err := c.group("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	min, err := c.int32Param("MinSize")
	if err != nil {
		return nil, err
	}
	max, err := c.int32Param("MaxSize")
	if err != nil {
		return nil, err
	}
	desired, err := c.int32Param("DesiredCapacity")
	if err != nil {
		return nil, err
	}
	protect, err := c.boolParam("NewInstancesProtectedFromScaleIn")
	if err != nil {
		return nil, err
	}
	nmin, nmax, ndes := pick(min, g.MinSize), pick(max, g.MaxSize), pick(desired, g.DesiredCapacity)
	if desired == nil { // AWS clamps desired into a new min/max when it is not given
		ndes = clamp(ndes, nmin, nmax)
	}
	if nmin > nmax {
		return nil, validationError("Max bound, %d, must be greater than or equal to min bound, %d", nmax, nmin)
	}
	if ndes < nmin || ndes > nmax {
		return nil, validationError("Desired capacity:%d must be between the specified min size:%d and max size:%d", ndes, nmin, nmax)
	}
	g.MinSize, g.MaxSize, g.DesiredCapacity = &nmin, &nmax, &ndes
	if protect != nil {
		g.NewInstancesProtectedFromScaleIn = protect
	}
	c.acct.reconcileASG(g)
	return &autoscaling.UpdateAutoScalingGroupOutput{}, nil
}

func asSetDesiredCapacity(c *call) (any, error) {
	g, err := c.group("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	desired, err := c.int32Param("DesiredCapacity")
	if err != nil {
		return nil, err
	}
	if desired == nil {
		return nil, c.missingParam("DesiredCapacity")
	}
	if *desired > deref(g.MaxSize) {
		return nil, validationError("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", *desired, deref(g.MaxSize))
	}
	if *desired < deref(g.MinSize) {
		return nil, validationError("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", *desired, deref(g.MinSize))
	}
	g.DesiredCapacity = desired
	c.acct.reconcileASG(g)
	return &autoscaling.SetDesiredCapacityOutput{}, nil
}

func (c *call) processes() ([]string, error) {
	procs := c.list("ScalingProcesses.member")
	if len(procs) == 0 {
		return asProcesses, nil
	}
	for _, p := range procs {
		if !matchValue(asProcesses, p) {
			return nil, validationError("Valid processes are %s; %q is not one", strings.Join(asProcesses, ", "), p)
		}
	}
	return procs, nil
}

func asSuspendProcesses(c *call) (any, error) {
	g, err := c.group("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	procs, err := c.processes()
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		if !suspended(g, p) {
			g.SuspendedProcesses = append(g.SuspendedProcesses, astypes.SuspendedProcess{ProcessName: ptr(p), SuspensionReason: ptr("User suspended at awsfake")})
		}
	}
	return &autoscaling.SuspendProcessesOutput{}, nil
}

func asResumeProcesses(c *call) (any, error) {
	g, err := c.group("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	procs, err := c.processes()
	if err != nil {
		return nil, err
	}
	kept := g.SuspendedProcesses[:0]
	for _, sp := range g.SuspendedProcesses {
		if !matchValue(procs, deref(sp.ProcessName)) {
			kept = append(kept, sp)
		}
	}
	g.SuspendedProcesses = kept
	c.acct.reconcileASG(g)
	return &autoscaling.ResumeProcessesOutput{}, nil
}

func suspended(g *astypes.AutoScalingGroup, process string) bool {
	for _, sp := range g.SuspendedProcesses {
		if deref(sp.ProcessName) == process {
			return true
		}
	}
	return false
}

func asTerminateInstance(c *call) (any, error) {
	id := c.param("InstanceId")
	if id == "" {
		return nil, c.missingParam("InstanceId")
	}
	dec, err := c.boolParam("ShouldDecrementDesiredCapacity")
	if err != nil {
		return nil, err
	}
	if dec == nil {
		return nil, c.missingParam("ShouldDecrementDesiredCapacity")
	}
	for gi := range c.acct.AutoScaling.Groups {
		g := &c.acct.AutoScaling.Groups[gi]
		for i, in := range g.Instances {
			if deref(in.InstanceId) != id {
				continue
			}
			if *dec {
				if deref(g.DesiredCapacity)-1 < deref(g.MinSize) {
					return nil, validationError("Currently, desiredSize equals minSize (%d). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.", deref(g.MinSize))
				}
				g.DesiredCapacity = ptr(deref(g.DesiredCapacity) - 1)
			}
			g.Instances = append(g.Instances[:i:i], g.Instances[i+1:]...)
			c.acct.terminateEC2(id)
			c.acct.reconcileASG(g)
			desc := fmt.Sprintf("Terminating EC2 instance: %s", id)
			return &autoscaling.TerminateInstanceInAutoScalingGroupOutput{Activity: &astypes.Activity{
				ActivityId: ptr(c.s.nextActivityID()), AutoScalingGroupName: g.AutoScalingGroupName,
				Cause: ptr("At user request, instance " + id + " was taken out of service"), Description: &desc,
				StatusCode: astypes.ScalingActivityStatusCodeInProgress, Progress: ptr(int32(0)),
			}}, nil
		}
	}
	return nil, validationError("Instance Id not found - No managed instance found for instance ID: %s", id)
}

func (c *call) asTags() ([]astypes.Tag, error) {
	var out []astypes.Tag
	for _, i := range c.indexes("Tags.member") {
		p := fmt.Sprintf("Tags.member.%d.", i)
		t := astypes.Tag{Key: ptr(c.param(p + "Key")), ResourceId: ptr(c.param(p + "ResourceId")), ResourceType: ptr(c.param(p + "ResourceType"))}
		if c.hasParam(p + "Value") {
			t.Value = ptr(c.param(p + "Value"))
		}
		prop, err := c.boolParam(p + "PropagateAtLaunch")
		if err != nil {
			return nil, err
		}
		t.PropagateAtLaunch = prop
		if deref(t.Key) == "" {
			return nil, c.missingParam(p + "Key")
		}
		if _, ok := c.acct.asg(deref(t.ResourceId)); !ok {
			return nil, validationError("AutoScalingGroup name not found - AutoScalingGroup '%s' not found", deref(t.ResourceId))
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, c.missingParam("Tags")
	}
	return out, nil
}

func asCreateOrUpdateTags(c *call) (any, error) {
	tags, err := c.asTags()
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		g, _ := c.acct.asg(deref(t.ResourceId))
		td := astypes.TagDescription{Key: t.Key, Value: nonNil(t.Value), PropagateAtLaunch: ptr(deref(t.PropagateAtLaunch)),
			ResourceId: t.ResourceId, ResourceType: ptr("auto-scaling-group")}
		replaced := false
		for i := range g.Tags {
			if deref(g.Tags[i].Key) == deref(t.Key) {
				g.Tags[i], replaced = td, true
			}
		}
		if !replaced {
			g.Tags = append(g.Tags, td)
		}
		sort.Slice(g.Tags, func(i, j int) bool { return deref(g.Tags[i].Key) < deref(g.Tags[j].Key) })
	}
	return &autoscaling.CreateOrUpdateTagsOutput{}, nil
}

func asDeleteTags(c *call) (any, error) {
	tags, err := c.asTags()
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		g, _ := c.acct.asg(deref(t.ResourceId))
		kept := g.Tags[:0]
		for _, have := range g.Tags {
			if deref(have.Key) != deref(t.Key) || (t.Value != nil && deref(have.Value) != deref(t.Value)) {
				kept = append(kept, have)
			}
		}
		g.Tags = kept
	}
	return &autoscaling.DeleteTagsOutput{}, nil
}

// reconcileASG launches or terminates instances until the group has its
// desired capacity, as AWS does unless Launch or Terminate is suspended.
// Scale-in terminates the newest unprotected instances first.
func (a *Account) reconcileASG(g *astypes.AutoScalingGroup) {
	want := int(deref(g.DesiredCapacity))
	for len(g.Instances) > want && !suspended(g, "Terminate") {
		victim := -1
		for i := len(g.Instances) - 1; i >= 0; i-- {
			if !deref(g.Instances[i].ProtectedFromScaleIn) {
				victim = i
				break
			}
		}
		if victim < 0 {
			return // every instance is protected from scale-in
		}
		a.terminateEC2(deref(g.Instances[victim].InstanceId))
		g.Instances = append(g.Instances[:victim:victim], g.Instances[victim+1:]...)
	}
	for len(g.Instances) < want && !suspended(g, "Launch") {
		a.launchSeq++
		id := fmt.Sprintf("i-%017x", a.launchSeq)
		zone := "us-east-1a"
		if len(g.AvailabilityZones) > 0 {
			zone = g.AvailabilityZones[len(g.Instances)%len(g.AvailabilityZones)]
		}
		g.Instances = append(g.Instances, astypes.Instance{
			InstanceId: &id, AvailabilityZone: &zone, InstanceType: ptr(a.asgInstanceType(g)),
			LifecycleState: astypes.LifecycleStateInService, HealthStatus: ptr("Healthy"),
			ProtectedFromScaleIn: ptr(deref(g.NewInstancesProtectedFromScaleIn)),
			LaunchTemplate:       g.LaunchTemplate, LaunchConfigurationName: g.LaunchConfigurationName,
		})
	}
	a.syncASGInstances()
}

// asgInstanceType is the type a new instance of g gets: the first
// MixedInstancesPolicy override, else the launch template's or launch
// configuration's type.
func (a *Account) asgInstanceType(g *astypes.AutoScalingGroup) string {
	if m := g.MixedInstancesPolicy; m != nil && m.LaunchTemplate != nil {
		for _, o := range m.LaunchTemplate.Overrides {
			if t := deref(o.InstanceType); t != "" {
				return t
			}
		}
	}
	if lc := deref(g.LaunchConfigurationName); lc != "" {
		for _, l := range a.AutoScaling.LaunchConfigurations {
			if deref(l.LaunchConfigurationName) == lc {
				return deref(l.InstanceType)
			}
		}
	}
	if lt := g.LaunchTemplate; lt != nil {
		if v, ok := a.resolveLaunchTemplateVersion(deref(lt.LaunchTemplateId), deref(lt.LaunchTemplateName), deref(lt.Version)); ok && v.LaunchTemplateData != nil {
			return string(v.LaunchTemplateData.InstanceType)
		}
	}
	return "m5.large"
}

// terminateEC2 marks an EC2 instance terminated.
func (a *Account) terminateEC2(id string) {
	for i := range a.EC2.Instances {
		if deref(a.EC2.Instances[i].InstanceId) == id {
			a.EC2.Instances[i].State = &ec2types.InstanceState{Code: ptr(int32(48)), Name: ec2types.InstanceStateNameTerminated}
		}
	}
}

func (s *Server) nextActivityID() string {
	s.acct.launchSeq++
	return fmt.Sprintf("a0000000-0000-4000-8000-%012d", s.acct.launchSeq)
}

func pick(v, def *int32) int32 {
	if v != nil {
		return *v
	}
	return deref(def)
}

func clamp(v, lo, hi int32) int32 {
	return max(lo, min(v, hi))
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil(s *string) *string {
	if s == nil {
		return ptr("")
	}
	return s
}
