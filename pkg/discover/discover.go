// Package discover builds the Inventory of a cluster from AWS (EKS, Auto
// Scaling, EC2) and Kubernetes: every node group Cluster Autoscaler manages,
// joined to its nodes and pods. Reads are paginated and batched — the number
// of calls grows with pages, never with instances.
package discover

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"k8s.io/client-go/kubernetes"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// AutoScalingAPI is the Auto Scaling subset discover reads.
type AutoScalingAPI interface {
	autoscaling.DescribeAutoScalingGroupsAPIClient
	autoscaling.DescribeLaunchConfigurationsAPIClient
}

// EC2API is the EC2 subset discover reads.
type EC2API interface {
	ec2.DescribeInstancesAPIClient
	ec2.DescribeLaunchTemplateVersionsAPIClient
	ec2.DescribeSubnetsAPIClient
	ec2.DescribeSecurityGroupsAPIClient
	ec2.DescribeSpotPriceHistoryAPIClient
}

// EKSAPI is the EKS subset discover reads.
type EKSAPI interface {
	eks.DescribeClusterAPIClient
	eks.ListNodegroupsAPIClient
	eks.DescribeNodegroupAPIClient
	eks.ListFargateProfilesAPIClient
	DescribeFargateProfile(ctx context.Context, in *eks.DescribeFargateProfileInput, optFns ...func(*eks.Options)) (*eks.DescribeFargateProfileOutput, error)
}

// Sources are the clients discover reads from. EKS may be nil for a
// non-EKS (self-managed Kubernetes on EC2) cluster; Kube may be nil to read
// AWS only; Prices may be nil to read no prices (offline: the embedded
// us-east-1 list stands in, and only the spot prices of the types in use
// are read).
type Sources struct {
	AutoScaling AutoScalingAPI
	EC2         EC2API
	EKS         EKSAPI
	Kube        kubernetes.Interface
	// Prices reads the region's instance types, offerings, spot and
	// on-demand prices (pkg/aws.CatalogSource).
	Prices catalog.Source
}

// Options control a discovery.
type Options struct {
	// ClusterName is the EKS cluster (and the Cluster Autoscaler tag suffix).
	ClusterName string
	Region      string
	// IncludeUserData keeps launch template user data in the inventory;
	// by default it is parsed, then redacted.
	IncludeUserData bool
	// Progress, if set, is told each step as it starts.
	Progress func(step string)
	// Now is the clock for the spot price window (default time.Now).
	Now func() time.Time
	// PriceCache, when set, keeps the prices Sources.Prices read on disk
	// for a day, so that the next discover of the region reads none.
	PriceCache *catalog.Cache
}

// Tag keys discover reads.
const (
	TagCANodeTemplate   = "k8s.io/cluster-autoscaler/node-template/"
	TagEKSClusterName   = "eks:cluster-name"
	TagEKSNodegroupName = "eks:nodegroup-name"
	TagASGName          = "aws:autoscaling:groupName"
	TagKubernetesOwned  = "kubernetes.io/cluster/"
)

// Run discovers the cluster.
func Run(ctx context.Context, src Sources, opts Options) (*inventory.Inventory, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("discover: no cluster name; pass --cluster")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	d := &run{src: src, opts: opts, progress: progress, inv: &inventory.Inventory{
		Cluster: inventory.Cluster{Name: opts.ClusterName, Region: opts.Region},
	}}
	steps := []struct {
		name string
		fn   func(context.Context) error
		skip func() bool
	}{
		{"EKS cluster and managed node groups", d.eks, func() bool { return src.EKS == nil }},
		{"Auto Scaling groups", d.asgs, func() bool { return src.AutoScaling == nil }},
		{"launch templates and configurations", d.launchTemplates, func() bool { return src.EC2 == nil || src.AutoScaling == nil }},
		{"EC2 instances, subnets and security groups", d.ec2, func() bool { return src.EC2 == nil }},
		{"instance types, offerings and prices of " + opts.Region, d.prices, func() bool { return src.Prices == nil }},
		// The live prices include every type's spot prices.
		{"spot prices", d.spotPrices, func() bool {
			return src.EC2 == nil || d.inv.Prices != nil && d.inv.Prices.Source == inventory.PricesLive
		}},
		{"Kubernetes nodes, pods and policies", d.kube, func() bool { return src.Kube == nil }},
	}
	for _, s := range steps {
		if s.skip() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		progress(s.name)
		if err := s.fn(ctx); err != nil {
			return nil, fmt.Errorf("discover %s: %w", s.name, err)
		}
	}
	d.join()
	sortInventory(d.inv)
	d.inv.ResolveVolumes()
	if err := d.inv.Validate(); err != nil {
		return nil, fmt.Errorf("discover: the cluster as read does not make a valid inventory: %w (fix or delete that object, then run discover again)", err)
	}
	return d.inv, nil
}

type run struct {
	src      Sources
	opts     Options
	progress func(string)
	inv      *inventory.Inventory

	groups     []astypes.AutoScalingGroup
	mngByASG   map[string]string // ASG name -> managed node group name
	groupByASG map[string]int    // ASG name -> index in inv.NodeGroups
	asgOfInst  map[string]string // instance ID -> ASG name
	instances  map[string]ec2types.Instance
	ltVersions map[string]ec2types.LaunchTemplateVersion // "id|version" -> version
	launchCfgs map[string]astypes.LaunchConfiguration
	instTypes  map[string]bool
}

// managed reports whether an ASG is one Cluster Autoscaler discovers for
// this cluster, or an EKS managed node group's.
func (d *run) managed(g astypes.AutoScalingGroup) bool {
	tags := asgTagMap(g.Tags)
	if _, ok := d.mngByASG[deref(g.AutoScalingGroupName)]; ok {
		return true
	}
	if tags[TagEKSClusterName] == d.opts.ClusterName {
		return true
	}
	_, enabled := tags[inventory.TagCAEnabled]
	_, mine := tags[inventory.TagCAPrefix+d.opts.ClusterName]
	return enabled && mine
}

func (d *run) asgs(ctx context.Context) error {
	d.groupByASG, d.asgOfInst = map[string]int{}, map[string]string{}
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(d.src.AutoScaling, &autoscaling.DescribeAutoScalingGroupsInput{
		MaxRecords: ptr(int32(100)),
		Filters: []astypes.Filter{{Name: ptr("tag-key"), Values: []string{
			inventory.TagCAPrefix + d.opts.ClusterName, TagEKSClusterName, TagKubernetesOwned + d.opts.ClusterName,
		}}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, g := range page.AutoScalingGroups {
			if d.managed(g) {
				d.groups = append(d.groups, g)
			}
		}
	}
	for _, g := range d.groups {
		name := deref(g.AutoScalingGroupName)
		ng := nodeGroupFromASG(g)
		if mng, ok := d.mngByASG[name]; ok {
			existing, _ := d.inv.NodeGroup(mng)
			mergeASG(existing, ng)
			d.groupByASG[name] = indexOf(d.inv, mng)
		} else {
			d.inv.NodeGroups = append(d.inv.NodeGroups, ng)
			d.groupByASG[name] = len(d.inv.NodeGroups) - 1
		}
		for _, in := range g.Instances {
			d.asgOfInst[deref(in.InstanceId)] = name
		}
	}
	return nil
}

func indexOf(inv *inventory.Inventory, name string) int {
	for i := range inv.NodeGroups {
		if inv.NodeGroups[i].Name == name {
			return i
		}
	}
	return -1
}

func (d *run) launchTemplates(ctx context.Context) error {
	d.ltVersions, d.launchCfgs = map[string]ec2types.LaunchTemplateVersion{}, map[string]astypes.LaunchConfiguration{}
	var numbered []templateRef
	needAliases := false
	var lcNames []string
	for _, g := range d.groups {
		for _, r := range groupTemplateRefs(g) {
			switch r.version {
			case "", "$Default", "$Latest":
				needAliases = true
			default:
				numbered = append(numbered, r)
			}
		}
		if lc := deref(g.LaunchConfigurationName); lc != "" {
			lcNames = append(lcNames, lc)
		}
	}
	if needAliases {
		// One paginated call reads the default and latest version of every template.
		p := ec2.NewDescribeLaunchTemplateVersionsPaginator(d.src.EC2, &ec2.DescribeLaunchTemplateVersionsInput{
			Versions: []string{"$Default", "$Latest"}, MaxResults: ptr(int32(200)),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, v := range page.LaunchTemplateVersions {
				d.addLTVersion(v)
			}
		}
	}
	for _, r := range numbered {
		if _, ok := d.ltVersions[ltKey(r.id, r.name, r.version)]; ok {
			continue
		}
		in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{r.version}}
		if r.id != "" {
			in.LaunchTemplateId = &r.id
		} else {
			in.LaunchTemplateName = &r.name
		}
		out, err := d.src.EC2.DescribeLaunchTemplateVersions(ctx, in)
		if err != nil {
			return fmt.Errorf("launch template %s%s version %s: %w", r.id, r.name, r.version, err)
		}
		for _, v := range out.LaunchTemplateVersions {
			d.addLTVersion(v)
		}
	}
	for _, chunk := range chunks(unique(lcNames), 50) {
		p := autoscaling.NewDescribeLaunchConfigurationsPaginator(d.src.AutoScaling, &autoscaling.DescribeLaunchConfigurationsInput{LaunchConfigurationNames: chunk})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, lc := range page.LaunchConfigurations {
				d.launchCfgs[deref(lc.LaunchConfigurationName)] = lc
			}
		}
	}
	for _, g := range d.groups {
		ng := &d.inv.NodeGroups[d.groupByASG[deref(g.AutoScalingGroupName)]]
		d.applyTemplate(ng, g)
	}
	return nil
}

// addLTVersion indexes a version under its number and, when it is the
// default, under $Default (and "") — by ID and by name.
func (d *run) addLTVersion(v ec2types.LaunchTemplateVersion) {
	id, name := deref(v.LaunchTemplateId), deref(v.LaunchTemplateName)
	n := fmt.Sprint(deref(v.VersionNumber))
	keys := []string{n}
	if deref(v.DefaultVersion) {
		keys = append(keys, "$Default", "")
	}
	for _, k := range keys {
		d.ltVersions[ltKey(id, "", k)] = v
		d.ltVersions[ltKey("", name, k)] = v
	}
	// $Latest is the highest number seen.
	if cur, ok := d.ltVersions[ltKey(id, "", "$Latest")]; !ok || deref(cur.VersionNumber) < deref(v.VersionNumber) {
		d.ltVersions[ltKey(id, "", "$Latest")] = v
		d.ltVersions[ltKey("", name, "$Latest")] = v
	}
}

func ltKey(id, name, version string) string {
	if id != "" {
		return id + "|" + version
	}
	return "name:" + name + "|" + version
}

// ASGInstances calls fn for every instance of an Auto Scaling group (tagged
// with its name) that is not terminated, page by page.
func ASGInstances(ctx context.Context, client ec2.DescribeInstancesAPIClient, fn func(ec2types.Instance)) error {
	p := ec2.NewDescribeInstancesPaginator(client, &ec2.DescribeInstancesInput{
		MaxResults: ptr(int32(1000)),
		Filters: []ec2types.Filter{
			{Name: ptr("tag-key"), Values: []string{TagASGName}},
			{Name: ptr("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
		},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				fn(in)
			}
		}
	}
	return nil
}

func (d *run) ec2(ctx context.Context) error {
	d.instances = map[string]ec2types.Instance{}
	if len(d.asgOfInst) > 0 {
		err := ASGInstances(ctx, d.src.EC2, func(in ec2types.Instance) {
			if _, mine := d.asgOfInst[deref(in.InstanceId)]; mine {
				d.instances[deref(in.InstanceId)] = in
			}
		})
		if err != nil {
			return err
		}
	}
	d.fillInstances()

	subnets := append([]string{}, d.inv.Cluster.SubnetIDs...)
	sgs := append([]string{}, d.inv.Cluster.SecurityGroupIDs...)
	if d.inv.Cluster.ClusterSecurityGroupID != "" {
		sgs = append(sgs, d.inv.Cluster.ClusterSecurityGroupID)
	}
	for _, ng := range d.inv.NodeGroups {
		subnets = append(subnets, ng.SubnetIDs...)
		sgs = append(sgs, ng.SecurityGroupIDs...)
	}
	for _, chunk := range chunks(unique(subnets), 200) {
		p := ec2.NewDescribeSubnetsPaginator(d.src.EC2, &ec2.DescribeSubnetsInput{SubnetIds: chunk})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, s := range page.Subnets {
				d.inv.Subnets = append(d.inv.Subnets, inventory.Subnet{ID: deref(s.SubnetId), Zone: deref(s.AvailabilityZone),
					VPCID: deref(s.VpcId), CIDR: deref(s.CidrBlock), AvailableIPs: deref(s.AvailableIpAddressCount), Tags: ec2TagMap(s.Tags)})
			}
		}
	}
	for _, chunk := range chunks(unique(sgs), 200) {
		p := ec2.NewDescribeSecurityGroupsPaginator(d.src.EC2, &ec2.DescribeSecurityGroupsInput{GroupIds: chunk})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, s := range page.SecurityGroups {
				d.inv.SecurityGroups = append(d.inv.SecurityGroups, inventory.SecurityGroup{ID: deref(s.GroupId), Name: deref(s.GroupName),
					VPCID: deref(s.VpcId), Tags: ec2TagMap(s.Tags)})
			}
		}
	}
	d.fillZones()
	return nil
}

// fillInstances records each group's instances with their capacity type.
func (d *run) fillInstances() {
	d.instTypes = map[string]bool{}
	for _, g := range d.groups {
		ng := &d.inv.NodeGroups[d.groupByASG[deref(g.AutoScalingGroupName)]]
		for _, gi := range g.Instances {
			id := deref(gi.InstanceId)
			inst := inventory.Instance{ID: id, InstanceType: deref(gi.InstanceType), Zone: deref(gi.AvailabilityZone),
				LifecycleState: string(gi.LifecycleState), ProtectedFromScaleIn: deref(gi.ProtectedFromScaleIn), CapacityType: inventory.CapacityOnDemand}
			if in, ok := d.instances[id]; ok {
				if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
					inst.CapacityType = inventory.CapacitySpot
				}
				if inst.InstanceType == "" {
					inst.InstanceType = string(in.InstanceType)
				}
			}
			d.instTypes[inst.InstanceType] = true
			ng.Instances = append(ng.Instances, inst)
		}
	}
}

// fillZones sets each group's zones from its subnets (or its ASG's AZs).
func (d *run) fillZones() {
	zoneOf := map[string]string{}
	for _, s := range d.inv.Subnets {
		zoneOf[s.ID] = s.Zone
	}
	for i := range d.inv.NodeGroups {
		ng := &d.inv.NodeGroups[i]
		var zones []string
		for _, s := range ng.SubnetIDs {
			if z := zoneOf[s]; z != "" {
				zones = append(zones, z)
			}
		}
		if len(zones) > 0 {
			ng.Zones = unique(zones)
		}
	}
}

// prices reads the region's offerings, on-demand and spot prices (through
// the cache when one is given). A failure does not fail discover: the
// inventory records why, and the embedded prices stand in.
func (d *run) prices(ctx context.Context) error {
	region, now := d.opts.Region, d.opts.Now()
	var snap *catalog.Snapshot
	var err error
	if d.opts.PriceCache != nil {
		snap, err = catalog.Refresh(ctx, d.src.Prices, *d.opts.PriceCache, region, now)
	} else {
		snap, err = catalog.Fetch(ctx, d.src.Prices, region, now)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if snap == nil {
		d.inv.Prices = &inventory.Prices{PriceSource: inventory.PriceSource{Region: region, Source: inventory.PricesEmbedded, Note: err.Error()}}
		return nil
	}
	p := &inventory.Prices{PriceSource: inventory.PriceSource{Region: snap.Region, Source: inventory.PricesLive, FetchedAt: snap.FetchedAt},
		OnDemand: snap.OnDemandPrices, Zones: map[string][]string{}}
	switch {
	case err != nil && snap.FetchedAt.Equal(now.UTC()):
		p.Note = "read, but not cached: " + err.Error()
	case err != nil:
		p.Note = fmt.Sprintf("prices cached at %s, not refreshed: %v", snap.FetchedAt.UTC().Format(time.RFC3339), err)
	}
	for _, o := range snap.Offerings {
		p.Zones[o.InstanceType] = append(p.Zones[o.InstanceType], o.Zone)
	}
	d.inv.Prices = p
	d.inv.SpotPrices = snap.SpotPrices
	return nil
}

func (d *run) spotPrices(ctx context.Context) error {
	var types []string
	for t := range d.instTypes {
		if t != "" {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return nil
	}
	sort.Strings(types)
	latest := map[string]ec2types.SpotPrice{}
	for _, chunk := range chunks(types, 100) {
		p := ec2.NewDescribeSpotPriceHistoryPaginator(d.src.EC2, &ec2.DescribeSpotPriceHistoryInput{
			InstanceTypes:       toInstanceTypes(chunk),
			ProductDescriptions: []string{"Linux/UNIX"},
			StartTime:           ptr(d.opts.Now().Add(-time.Hour)),
			MaxResults:          ptr(int32(1000)),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, sp := range page.SpotPriceHistory {
				k := string(sp.InstanceType) + "|" + deref(sp.AvailabilityZone)
				if cur, ok := latest[k]; !ok || deref(cur.Timestamp).Before(deref(sp.Timestamp)) {
					latest[k] = sp
				}
			}
		}
	}
	for _, sp := range latest {
		var price float64
		if _, err := fmt.Sscan(deref(sp.SpotPrice), &price); err != nil {
			continue // AWS always sends a decimal; skip anything else
		}
		d.inv.SpotPrices = append(d.inv.SpotPrices, inventory.SpotPrice{InstanceType: string(sp.InstanceType), Zone: deref(sp.AvailabilityZone), Price: price})
	}
	return nil
}

func toInstanceTypes(s []string) []ec2types.InstanceType {
	out := make([]ec2types.InstanceType, len(s))
	for i, t := range s {
		out[i] = ec2types.InstanceType(t)
	}
	return out
}

// join maps nodes to node groups through providerID -> instance -> ASG,
// falling back on the node-group labels (inventory.NodeGroupOf: never a
// Karpenter node). Self-managed nodes carry no capacity-type label, so
// their capacity type comes from the instance: a mixed-instances group's
// spot nodes would otherwise be priced on demand.
func (d *run) join() {
	for i := range d.inv.Nodes {
		n := &d.inv.Nodes[i]
		if in, ok := d.instances[n.InstanceID]; ok && n.CapacityType == "" {
			n.CapacityType = inventory.CapacityOnDemand
			if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
				n.CapacityType = inventory.CapacitySpot
			}
		}
		if asg, ok := d.asgOfInst[n.InstanceID]; ok {
			if gi, ok := d.groupByASG[asg]; ok {
				n.NodeGroup = d.inv.NodeGroups[gi].Name
				continue
			}
		}
		// A Karpenter node keeping a node-group label is not the group's.
		if g := inventory.NodeGroupOf(n.Labels); g != "" {
			if _, ok := d.inv.NodeGroup(g); ok {
				n.NodeGroup = g
			}
		}
	}
}

func sortInventory(inv *inventory.Inventory) {
	sort.Slice(inv.NodeGroups, func(i, j int) bool { return inv.NodeGroups[i].Name < inv.NodeGroups[j].Name })
	for i := range inv.NodeGroups {
		ins := inv.NodeGroups[i].Instances
		sort.Slice(ins, func(a, b int) bool { return ins[a].ID < ins[b].ID })
	}
	sort.Slice(inv.Nodes, func(i, j int) bool { return inv.Nodes[i].Name < inv.Nodes[j].Name })
	sort.Slice(inv.Pods, func(i, j int) bool {
		return nsLess(inv.Pods[i].Namespace, inv.Pods[i].Name, inv.Pods[j].Namespace, inv.Pods[j].Name)
	})
	sort.Slice(inv.Workloads, func(i, j int) bool {
		a, b := inv.Workloads[i], inv.Workloads[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return nsLess(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	sort.Slice(inv.DaemonSets, func(i, j int) bool {
		return nsLess(inv.DaemonSets[i].Namespace, inv.DaemonSets[i].Name, inv.DaemonSets[j].Namespace, inv.DaemonSets[j].Name)
	})
	sort.Slice(inv.PDBs, func(i, j int) bool {
		return nsLess(inv.PDBs[i].Namespace, inv.PDBs[i].Name, inv.PDBs[j].Namespace, inv.PDBs[j].Name)
	})
	sort.Slice(inv.PersistentVolumes, func(i, j int) bool { return inv.PersistentVolumes[i].Name < inv.PersistentVolumes[j].Name })
	sort.Slice(inv.Claims, func(i, j int) bool {
		return nsLess(inv.Claims[i].Namespace, inv.Claims[i].Name, inv.Claims[j].Namespace, inv.Claims[j].Name)
	})
	sort.Slice(inv.StorageClasses, func(i, j int) bool { return inv.StorageClasses[i].Name < inv.StorageClasses[j].Name })
	sort.Slice(inv.Subnets, func(i, j int) bool { return inv.Subnets[i].ID < inv.Subnets[j].ID })
	sort.Slice(inv.SecurityGroups, func(i, j int) bool { return inv.SecurityGroups[i].ID < inv.SecurityGroups[j].ID })
	sort.Slice(inv.SpotPrices, func(i, j int) bool {
		a, b := inv.SpotPrices[i], inv.SpotPrices[j]
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		return a.Zone < b.Zone
	})
}

func nsLess(ns1, n1, ns2, n2 string) bool {
	if ns1 != ns2 {
		return ns1 < ns2
	}
	return n1 < n2
}

func unique(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func chunks(s []string, n int) [][]string {
	var out [][]string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func splitCSV(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
