package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Offering is one instance type in one zone at one capacity type.
type Offering struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

// Claim is a node the provisioner would launch and the pods it is for.
type Claim struct {
	NodePool string   `json:"nodePool"`
	Offering Offering `json:"offering"`
	// Pods are namespace/name keys.
	Pods []string `json:"pods"`
}

// ProvisionRequest is the input of Provision: pending pods and the
// NodePools that may take them.
type ProvisionRequest struct {
	Pods       []*corev1.Pod
	NodePools  []apisv1.NodePool
	DaemonSets []appsv1.DaemonSet
	Zones      []string
	Region     string
	// Volumes returns the node affinity of the PVs bound to a pod's
	// claims, by claim name.
	Volumes func(*corev1.Pod) map[string]*corev1.NodeSelector
	// CPUInUse is each NodePool's launched vCPUs; a pool whose
	// spec.limits.cpu is reached takes no more pods.
	CPUInUse map[string]int64
}

// ProvisionResult is the NodeClaims to create and the pods no NodePool can take.
type ProvisionResult struct {
	Claims        []Claim           `json:"claims"`
	Unschedulable map[string]string `json:"unschedulable,omitempty"`
}

// Cost is the USD/hour of the claims.
func (r ProvisionResult) Cost() float64 {
	total := 0.0
	for _, c := range r.Claims {
		total += c.Offering.Price
	}
	return total
}

func cheaper(a, b Offering) bool {
	if a.Price != b.Price {
		return a.Price < b.Price
	}
	if a.InstanceType != b.InstanceType {
		return a.InstanceType < b.InstanceType
	}
	if a.Zone != b.Zone {
		return a.Zone < b.Zone
	}
	return a.CapacityType < b.CapacityType
}

func subtract(dst, src corev1.ResourceList) {
	for k, v := range src {
		if k == corev1.ResourcePods {
			continue
		}
		cur, ok := dst[k]
		if !ok {
			continue
		}
		cur.Sub(v)
		dst[k] = cur
	}
}

func sortPools(pools []apisv1.NodePool) {
	sort.SliceStable(pools, func(i, j int) bool {
		wi, wj := int32(0), int32(0)
		if pools[i].Spec.Weight != nil {
			wi = *pools[i].Spec.Weight
		}
		if pools[j].Spec.Weight != nil {
			wj = *pools[j].Spec.Weight
		}
		if wi != wj {
			return wi > wj
		}
		return pools[i].Name < pools[j].Name
	})
}

// offeringLabels are the well-known labels a node of this offering carries.
func offeringLabels(it *catalog.InstanceType, zone, capacityType string) map[string]string {
	l := map[string]string{
		corev1.LabelInstanceTypeStable:   it.Name,
		corev1.LabelTopologyZone:         zone,
		corev1.LabelArchStable:           it.Arch,
		corev1.LabelOSStable:             "linux",
		apisv1.CapacityTypeLabelKey:      capacityType,
		apisv1.LabelInstanceFamily:       it.Family,
		apisv1.LabelInstanceCategory:     it.Category,
		apisv1.LabelInstanceGeneration:   strconv.Itoa(it.Generation),
		apisv1.LabelInstanceSize:         it.Size,
		apisv1.LabelInstanceCPU:          strconv.Itoa(it.VCPU),
		apisv1.LabelInstanceMemory:       strconv.FormatInt(it.MemoryMiB, 10),
		apisv1.LabelInstanceGPUCount:     strconv.Itoa(it.GPUCount),
		apisv1.LabelInstanceHypervisor:   "nitro",
		"karpenter.k8s.aws/instance-gpu": strconv.FormatBool(it.GPUCount > 0),
	}
	if it.GPUName != "" {
		l[apisv1.LabelInstanceGPUName] = it.GPUName
		l[apisv1.LabelInstanceGPUManufacturer] = it.GPUManufacturer
	}
	return l
}

// offeringNode is the node a pool would launch for an offering, for
// matching pods' selectors and tolerations against it.
func offeringNode(pool *apisv1.NodePool, it *catalog.InstanceType, off Offering, region string) *corev1.Node {
	lbl := map[string]string{}
	for k, v := range pool.Spec.Template.ObjectMeta.Labels {
		lbl[k] = v
	}
	for k, v := range offeringLabels(it, off.Zone, off.CapacityType) {
		lbl[k] = v
	}
	lbl[apisv1.NodePoolLabelKey] = pool.Name
	lbl[corev1.LabelTopologyRegion] = region
	lbl[corev1.LabelHostname] = pool.Name + "-new"
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: pool.Name + "-new", Labels: lbl},
		Spec:       corev1.NodeSpec{Taints: pool.Spec.Template.Spec.Taints},
	}
}

// poolOfferings lists what a NodePool's requirements allow, sorted by price.
func (s *Sandbox) poolOfferings(pool *apisv1.NodePool, zones []string, region string) []Offering {
	sel := requirementsSelector(pool.Spec.Template.Spec.Requirements)
	// Narrow by instance type and family first: building a node for each of
	// the catalogue's types and zones is the slow part.
	allowed := func(key string) map[string]bool {
		var set map[string]bool
		for _, r := range pool.Spec.Template.Spec.Requirements {
			if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
				next := map[string]bool{}
				for _, v := range r.Values {
					if set == nil || set[v] {
						next[v] = true
					}
				}
				set = next
			}
		}
		return set
	}
	names, families := allowed(corev1.LabelInstanceTypeStable), allowed(apisv1.LabelInstanceFamily)
	var out []Offering
	for _, it := range s.cat.Types() {
		if (names != nil && !names[it.Name]) || (families != nil && !families[it.Family]) {
			continue
		}
		for _, z := range zones {
			for _, ct := range []string{inventory.CapacitySpot, inventory.CapacityOnDemand} {
				off := Offering{InstanceType: it.Name, Zone: z, CapacityType: ct, Price: s.price(it.Name, z, ct)}
				if sel != nil && !sel.Match(offeringNode(pool, it, off, region)) {
					continue
				}
				out = append(out, off)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return cheaper(out[i], out[j]) })
	return out
}

// requirementsSelector turns NodePool/NodeClaim requirements into a node
// selector; Karpenter's own label defaults (on-demand when capacity type is
// unconstrained) apply.
func requirementsSelector(reqs []apisv1.NodeSelectorRequirementWithMinValues) *nodeaffinity.NodeSelector {
	term := corev1.NodeSelectorTerm{}
	hasCapacity := false
	for _, r := range reqs {
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
		if r.Key == apisv1.CapacityTypeLabelKey {
			hasCapacity = true
		}
	}
	if !hasCapacity {
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: apisv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{inventory.CapacityOnDemand}})
	}
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}})
	if err != nil {
		return nil
	}
	return sel
}

// listNodePools reads the applied NodePools, highest weight first.
func (s *Sandbox) listNodePools(ctx context.Context) ([]apisv1.NodePool, error) {
	list, err := s.dyn.Resource(NodePoolGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list NodePools: %w", err)
	}
	var out []apisv1.NodePool
	for i := range list.Items {
		np, err := plan.DecodeNodePool(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *np)
	}
	sortPools(out)
	return out, nil
}

func (s *Sandbox) getNodePool(ctx context.Context, name string) (*apisv1.NodePool, error) {
	u, err := s.dyn.Resource(NodePoolGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get NodePool %s: %w", name, err)
	}
	return plan.DecodeNodePool(u)
}

// NewNodeClaim builds the NodeClaim object for a claim; creating it (by the
// provisioner or by a runbook's pre-provisioning) makes Karpenter launch it.
func NewNodeClaim(pool *apisv1.NodePool, off Offering, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodeClaim",
		"metadata": map[string]any{
			"generateName": pool.Name + "-",
			"labels":       map[string]any{apisv1.NodePoolLabelKey: pool.Name},
		},
		"spec": map[string]any{
			"requirements": []any{
				map[string]any{"key": corev1.LabelInstanceTypeStable, "operator": "In", "values": []any{off.InstanceType}},
				map[string]any{"key": corev1.LabelTopologyZone, "operator": "In", "values": []any{off.Zone}},
				map[string]any{"key": apisv1.CapacityTypeLabelKey, "operator": "In", "values": []any{off.CapacityType}},
			},
		},
	}}
	if ref := pool.Spec.Template.Spec.NodeClassRef; ref != nil {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"group": ref.Group, "kind": ref.Kind, "name": ref.Name}, "spec", "nodeClassRef")
	}
	if len(annotations) > 0 {
		u.SetAnnotations(annotations)
	}
	return u
}

// reconcileNodeClaims is Karpenter's lifecycle controller: it launches
// instances for new NodeClaims, deletes NodeClaims of deleted NodePools and
// terminates instances whose NodeClaim is gone.
//
// What it does follows from the NodeClaims, the NodePools and the
// instances launched for NodeClaims alone, so a run on those as a run
// that did nothing found them (claimsIdle: the dynamic client's writes,
// the instances launched) is skipped: listing a thousand NodeClaims after
// every write of the cluster cost more than anything they decide.
func (s *Sandbox) reconcileNodeClaims(ctx context.Context) error {
	idle := claimsRun{dynamic: s.changes.dynamic, launched: s.cloud.seq}
	if s.claimsIdle != nil && *s.claimsIdle == idle {
		return nil
	}
	s.claimsIdle = nil
	before := s.changes.count
	if err := s.reconcileNodeClaimsNow(ctx); err != nil {
		return err
	}
	if s.changes.count == before && s.cloud.seq == idle.launched {
		s.claimsIdle = &idle
	}
	return nil
}

// claimsRun is what reconcileNodeClaims last found nothing to do on.
type claimsRun struct {
	dynamic  uint64
	launched int
}

// reconcileNodeClaimsNow is reconcileNodeClaims's work.
func (s *Sandbox) reconcileNodeClaimsNow(ctx context.Context) error {
	claims, err := s.dyn.Resource(NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list NodeClaims: %w", err)
	}
	sort.Slice(claims.Items, func(i, j int) bool { return claims.Items[i].GetName() < claims.Items[j].GetName() })
	// The NodePools read once, not once per NodeClaim.
	pools, err := s.listNodePools(ctx)
	if err != nil {
		return err
	}
	byName := map[string]*apisv1.NodePool{}
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	live := map[string]bool{}
	for i := range claims.Items {
		u := &claims.Items[i]
		poolName := u.GetLabels()[apisv1.NodePoolLabelKey]
		pool := byName[poolName]
		if pool == nil {
			if err := s.dyn.Resource(NodeClaimGVR).Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete NodeClaim %s of deleted NodePool %s: %w", u.GetName(), poolName, err)
			}
			continue
		}
		live[u.GetName()] = true
		if pid, _, _ := unstructured.NestedString(u.Object, "status", "providerID"); pid != "" {
			continue
		}
		var reqs []apisv1.NodeSelectorRequirementWithMinValues
		raw, _, _ := unstructured.NestedSlice(u.Object, "spec", "requirements")
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &reqs); err != nil {
			return fmt.Errorf("NodeClaim %s spec.requirements: %w", u.GetName(), err)
		}
		claimPool := *pool
		claimPool.Spec.Template.Spec.Requirements = append(append([]apisv1.NodeSelectorRequirementWithMinValues(nil), pool.Spec.Template.Spec.Requirements...), reqs...)
		offs := s.poolOfferings(&claimPool, s.zones(), s.cloud.Cluster.Region)
		if len(offs) == 0 {
			return fmt.Errorf("NodeClaim %s: no instance type in the sandbox catalog satisfies its requirements and NodePool %s's", u.GetName(), poolName)
		}
		in := s.launch(Instance{InstanceType: offs[0].InstanceType, Zone: offs[0].Zone, CapacityType: offs[0].CapacityType, NodePool: poolName, NodeClaim: u.GetName()})
		_ = unstructured.SetNestedField(u.Object, in.ProviderID(), "status", "providerID")
		_ = unstructured.SetNestedField(u.Object, in.InstanceType, "status", "instanceType")
		if _, err := s.dyn.Resource(NodeClaimGVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update NodeClaim %s status: %w", u.GetName(), err)
		}
	}
	for _, id := range s.cloud.instanceIDs() {
		in := s.cloud.instances[id]
		if in.NodeClaim != "" && !live[in.NodeClaim] {
			if err := s.terminate(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Sandbox) markClaimRegistered(ctx context.Context, in *Instance) error {
	u, err := s.dyn.Resource(NodeClaimGVR).Get(ctx, in.NodeClaim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get NodeClaim %s: %w", in.NodeClaim, err)
	}
	_ = unstructured.SetNestedField(u.Object, in.NodeName, "status", "nodeName")
	_ = unstructured.SetNestedSlice(u.Object, []any{
		map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": s.Now().Format(time.RFC3339)},
	}, "status", "conditions")
	if _, err := s.dyn.Resource(NodeClaimGVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update NodeClaim %s: %w", in.NodeClaim, err)
	}
	return nil
}

// provision launches NodeClaims for pods the scheduler could not place and
// that no in-flight NodeClaim is already for.
func (s *Sandbox) provision(ctx context.Context) error {
	pools, err := s.listNodePools(ctx)
	if err != nil || len(pools) == 0 {
		return err
	}
	// A nomination ends as its pod is bound or deleted; the pods are
	// looked up by nomination, not the nominations by pod.
	for key := range s.nominated {
		ns, name, _ := strings.Cut(key, "/")
		if p := s.pods.get(ns, name); p != nil && (p.Spec.NodeName != "" || p.DeletionTimestamp != nil) {
			delete(s.nominated, key)
		}
	}
	// The pending pods, oldest first, from the pod cache's unbound pods
	// (every pod with no node is among them).
	var unbound []*corev1.Pod
	for _, p := range s.pods.on("") {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			unbound = append(unbound, p)
		}
	}
	if len(unbound) == 0 {
		return nil
	}
	slices.SortFunc(unbound, cmpAge)
	claims, err := s.dyn.Resource(NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list NodeClaims: %w", err)
	}
	inflight := map[string]bool{}
	for _, c := range claims.Items {
		if n, _, _ := unstructured.NestedString(c.Object, "status", "nodeName"); n == "" {
			inflight[c.GetName()] = true
		}
	}
	var pending []*corev1.Pod
	for _, p := range unbound {
		if c, ok := s.nominated[podKey(p)]; ok && inflight[c] {
			continue
		}
		pending = append(pending, p)
	}
	if len(pending) == 0 {
		return nil
	}
	dss, err := s.kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list DaemonSets: %w", err)
	}
	inUse := map[string]int64{}
	for _, in := range s.cloud.instances {
		if it, ok := s.cat.Get(in.InstanceType); ok && in.NodePool != "" {
			inUse[in.NodePool] += int64(it.VCPU)
		}
	}
	res := s.Provision(ProvisionRequest{
		Pods: pending, NodePools: pools, DaemonSets: dss.Items, Zones: s.zones(), Region: s.cloud.Cluster.Region, CPUInUse: inUse,
		Volumes: func(p *corev1.Pod) map[string]*corev1.NodeSelector { return s.claimSelectors(ctx, p) },
	})
	byName := map[string]*apisv1.NodePool{}
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	for _, c := range res.Claims {
		u, err := s.dyn.Resource(NodeClaimGVR).Create(ctx, NewNodeClaim(byName[c.NodePool], c.Offering, nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create NodeClaim for NodePool %s: %w", c.NodePool, err)
		}
		for _, k := range c.Pods {
			s.nominated[k] = u.GetName()
		}
	}
	return nil
}

func (s *Sandbox) instanceOfNode(node string) *Instance {
	for _, id := range s.cloud.instanceIDs() {
		if in := s.cloud.instances[id]; in.NodeName == node {
			return in
		}
	}
	return nil
}

// zones are the zones of the cluster's subnets, or of its groups.
func (s *Sandbox) zones() []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range s.cloud.groups {
		for _, z := range g.Zones {
			if !seen[z] {
				seen[z] = true
				out = append(out, z)
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = []string{s.cloud.Cluster.Region + "a"}
	}
	return out
}
