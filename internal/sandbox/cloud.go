package sandbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// Cloud is the sandbox's view of the AWS account: the EKS cluster, its
// ASG-backed node groups and every EC2 instance (Karpenter's included). The
// account itself is served by pkg/aws/awsfake on loopback (see AWSConfig);
// the view follows its ASGs every tick.
type Cloud struct {
	Cluster   inventory.Cluster
	groups    map[string]*inventory.NodeGroup
	instances map[string]*Instance
	seq       int
	// asg and eks are SDK clients on the AWS fake (set by Load).
	asg *autoscaling.Client
	eks *eks.Client
}

// Instance is an EC2 instance.
type Instance struct {
	ID           string    `json:"id"`
	InstanceType string    `json:"instanceType"`
	Zone         string    `json:"zone"`
	CapacityType string    `json:"capacityType"`
	Group        string    `json:"group,omitempty"`
	NodePool     string    `json:"nodePool,omitempty"`
	NodeClaim    string    `json:"nodeClaim,omitempty"`
	LaunchedAt   time.Time `json:"launchedAt"`
	// NodeName is set once the instance has joined the cluster.
	NodeName string `json:"nodeName,omitempty"`
	seq      int
	hostname string
}

// ProviderID is the node's spec.providerID for the instance.
func (i Instance) ProviderID() string { return "aws:///" + i.Zone + "/" + i.ID }

func newCloud() *Cloud {
	return &Cloud{groups: map[string]*inventory.NodeGroup{}, instances: map[string]*Instance{}}
}

// Groups returns every node group with its live instances, sorted by name.
func (c *Cloud) Groups() []inventory.NodeGroup {
	names := make([]string, 0, len(c.groups))
	for n := range c.groups {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]inventory.NodeGroup, 0, len(names))
	for _, n := range names {
		g := *c.groups[n]
		g.Instances = nil
		for _, in := range c.groupInstances(n) {
			g.Instances = append(g.Instances, inventory.Instance{
				ID: in.ID, InstanceType: in.InstanceType, Zone: in.Zone, CapacityType: in.CapacityType, LifecycleState: "InService",
			})
		}
		out = append(out, g)
	}
	return out
}

// Group returns one node group.
func (c *Cloud) Group(name string) (inventory.NodeGroup, bool) {
	for _, g := range c.Groups() {
		if g.Name == name {
			return g, true
		}
	}
	return inventory.NodeGroup{}, false
}

// Instances returns every running instance, sorted by ID.
func (c *Cloud) Instances() []Instance {
	out := make([]Instance, 0, len(c.instances))
	for _, id := range c.instanceIDs() {
		out = append(out, *c.instances[id])
	}
	return out
}

func (c *Cloud) groupNames() []string {
	var out []string
	for n := range c.groups {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (c *Cloud) instanceIDs() []string {
	ids := make([]string, 0, len(c.instances))
	for id := range c.instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// claimNodes is, for each NodeClaim with an instance, the node of its
// first instance by ID.
func (c *Cloud) claimNodes() map[string]string {
	out := map[string]string{}
	for _, id := range c.instanceIDs() {
		in := c.instances[id]
		if _, ok := out[in.NodeClaim]; !ok {
			out[in.NodeClaim] = in.NodeName
		}
	}
	return out
}

func (c *Cloud) groupInstances(group string) []*Instance {
	var out []*Instance
	for _, id := range c.instanceIDs() {
		if in := c.instances[id]; in.Group == group {
			out = append(out, in)
		}
	}
	return out
}

// launch starts an instance; it joins the cluster after the launch delay.
func (s *Sandbox) launch(in Instance) *Instance {
	s.cloud.seq++
	in.seq = s.cloud.seq
	if in.ID == "" {
		in.ID = fmt.Sprintf("i-0%016x", s.rng.Uint64()>>4)
	}
	if in.hostname == "" {
		in.hostname = s.nodeName(&in)
	}
	if in.LaunchedAt.IsZero() {
		in.LaunchedAt = s.Now()
	}
	p := &in
	s.cloud.instances[in.ID] = p
	s.stats.NodesLaunched++
	return p
}

// terminate stops an instance and removes its node; pods on it are gone
// with it (the pod GC runs in the kubelet controller).
func (s *Sandbox) terminate(ctx context.Context, id string) error {
	in, ok := s.cloud.instances[id]
	if !ok {
		return nil
	}
	delete(s.cloud.instances, id)
	s.stats.NodesTerminated++
	if in.NodeName == "" {
		return nil
	}
	pods := s.listPods()
	for _, p := range pods {
		if p.Spec.NodeName == in.NodeName && kube.LostWithNode(p) {
			s.stats.LostPods = append(s.stats.LostPods, fmt.Sprintf("%s/%s on %s", p.Namespace, p.Name, in.NodeName))
		}
	}
	err := s.kube.CoreV1().Nodes().Delete(ctx, in.NodeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s of terminated instance %s: %w", in.NodeName, id, err)
	}
	return nil
}

// reconcileCloud mirrors the AWS fake's ASGs: instances the ASGs launched
// become sandbox instances (nodes after the launch delay) and instances
// they terminated lose their nodes; then booted instances register.
func (s *Sandbox) reconcileCloud(ctx context.Context) error {
	views := s.readASGs()
	for _, name := range s.cloud.groupNames() {
		g := s.cloud.groups[name]
		v, ok := views[g.ASGName]
		if !ok {
			continue
		}
		g.MinSize, g.MaxSize, g.DesiredSize = v.min, v.max, v.desired
		if v.managed {
			g.Taints, g.Labels = v.taints, v.labels // EKS taints and labels the nodes it launches as its config says
		}
		live := s.cloud.groupInstances(name)
		known := map[string]bool{}
		for _, in := range live {
			known[in.ID] = true
		}
		seen := map[string]bool{}
		for _, ai := range v.instances {
			id := awssdk.ToString(ai.InstanceId)
			seen[id] = true
			if known[id] {
				continue
			}
			_, ct := s.nextGroupOffering(g, live)
			live = append(live, s.launch(Instance{ID: id, InstanceType: awssdk.ToString(ai.InstanceType), Zone: awssdk.ToString(ai.AvailabilityZone), CapacityType: ct, Group: name}))
		}
		for _, in := range live {
			if !seen[in.ID] {
				if err := s.terminate(ctx, in.ID); err != nil {
					return err
				}
			}
		}
	}
	for _, id := range s.cloud.instanceIDs() {
		in := s.cloud.instances[id]
		if in.NodeName != "" || s.Now().Before(in.LaunchedAt.Add(s.opts.LaunchDelay)) {
			continue
		}
		if err := s.register(ctx, in); err != nil {
			return err
		}
	}
	return nil
}

// seedInstances gives every group its desired number of instances, as if
// they had been running for a while (snapshot nodes count).
func (s *Sandbox) seedInstances() {
	for _, name := range s.cloud.groupNames() {
		g := s.cloud.groups[name]
		live := s.cloud.groupInstances(name)
		for n := int32(len(live)); n < g.DesiredSize; n++ {
			it, ct := s.nextGroupOffering(g, live)
			live = append(live, s.launch(Instance{InstanceType: it, Zone: s.nextGroupZone(g, live), CapacityType: ct, Group: name,
				LaunchedAt: s.Now().Add(-s.opts.LaunchDelay)}))
		}
	}
}

func (s *Sandbox) nextGroupOffering(g *inventory.NodeGroup, live []*Instance) (string, string) {
	counts := map[string]int{}
	onDemand := 0
	for _, in := range live {
		counts[in.InstanceType]++
		if in.CapacityType == inventory.CapacityOnDemand {
			onDemand++
		}
	}
	it := ""
	for _, t := range g.InstanceTypes {
		if _, ok := s.cat.Get(t); !ok {
			continue
		}
		if it == "" || counts[t] < counts[it] {
			it = t
		}
	}
	if it == "" {
		it = "m5.large"
	}
	ct := g.CapacityType
	if g.Mixed != nil {
		above := len(live) - int(g.Mixed.OnDemandBaseCapacity)
		odAbove := onDemand - int(g.Mixed.OnDemandBaseCapacity)
		switch {
		case onDemand < int(g.Mixed.OnDemandBaseCapacity):
			ct = inventory.CapacityOnDemand
		case odAbove*100 < int(g.Mixed.OnDemandPercentageAboveBaseCapacity)*(above+1):
			ct = inventory.CapacityOnDemand
		default:
			ct = inventory.CapacitySpot
		}
	}
	if ct != inventory.CapacitySpot {
		ct = inventory.CapacityOnDemand
	}
	return it, ct
}

func (s *Sandbox) nextGroupZone(g *inventory.NodeGroup, live []*Instance) string {
	zones := g.Zones
	if len(zones) == 0 {
		zones = []string{s.cloud.Cluster.Region + "a"}
	}
	counts := map[string]int{}
	for _, in := range live {
		counts[in.Zone]++
	}
	best := zones[0]
	for _, z := range zones[1:] {
		if counts[z] < counts[best] {
			best = z
		}
	}
	return best
}

// register creates the Node object of an instance that finished booting.
func (s *Sandbox) register(ctx context.Context, in *Instance) error {
	it, ok := s.cat.Get(in.InstanceType)
	if !ok {
		return fmt.Errorf("instance %s: type %q is not in the sandbox catalog", in.ID, in.InstanceType)
	}
	name := in.hostname
	lbl := map[string]string{
		corev1.LabelHostname:           name,
		corev1.LabelInstanceTypeStable: in.InstanceType,
		corev1.LabelTopologyZone:       in.Zone,
		corev1.LabelTopologyRegion:     s.cloud.Cluster.Region,
		corev1.LabelArchStable:         it.Arch,
		corev1.LabelOSStable:           "linux",
	}
	var taints []corev1.Taint
	if g, ok := s.cloud.groups[in.Group]; ok {
		for k, v := range g.Labels {
			lbl[k] = v
		}
		taints = append(taints, g.Taints...)
		if g.Kind == inventory.Managed {
			lbl["eks.amazonaws.com/nodegroup"] = g.Name
			lbl["eks.amazonaws.com/capacityType"] = map[string]string{inventory.CapacitySpot: "SPOT"}[in.CapacityType]
			if lbl["eks.amazonaws.com/capacityType"] == "" {
				lbl["eks.amazonaws.com/capacityType"] = "ON_DEMAND"
			}
		}
	}
	if in.NodePool != "" {
		pool, err := s.getNodePool(ctx, in.NodePool)
		if err != nil {
			return fmt.Errorf("register instance %s of NodePool %s: %w", in.ID, in.NodePool, err)
		}
		if pool != nil {
			for k, v := range pool.Spec.Template.ObjectMeta.Labels {
				lbl[k] = v
			}
			taints = append(taints, pool.Spec.Template.Spec.Taints...)
		}
		for k, v := range offeringLabels(it, in.Zone, in.CapacityType) {
			lbl[k] = v
		}
		lbl[apisv1.NodePoolLabelKey] = in.NodePool
		lbl[apisv1.NodeRegisteredLabelKey] = "true"
		lbl[apisv1.NodeInitializedLabelKey] = "true"
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		Spec:       corev1.NodeSpec{ProviderID: in.ProviderID(), Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    it.Capacity(catalog.Kubelet{}),
			Allocatable: allocatable(it),
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastTransitionTime: metav1.NewTime(s.Now()), LastHeartbeatTime: metav1.NewTime(s.Now()),
			}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.35.4-eks-sandbox", Architecture: it.Arch, OperatingSystem: "linux"},
		},
	}
	node.CreationTimestamp = metav1.NewTime(in.LaunchedAt.Add(s.opts.LaunchDelay))
	if _, err := s.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s for instance %s: %w", name, in.ID, err)
	}
	in.NodeName = name
	if in.NodeClaim != "" {
		return s.markClaimRegistered(ctx, in)
	}
	return nil
}

// nodeName is the EC2 private DNS name EKS nodes use.
func (s *Sandbox) nodeName(in *Instance) string {
	zi := 0
	if in.Zone != "" {
		zi = int(in.Zone[len(in.Zone)-1]-'a') % 16
	}
	return fmt.Sprintf("ip-10-0-%d-%d.%s.compute.internal", zi*16+in.seq/250%16, in.seq%250+4, s.cloud.Cluster.Region)
}
