// Package readiness checks an Inventory for what would block or endanger a
// move from Cluster Autoscaler node groups to Karpenter. It is pure: the same
// inventory always gives the same report, so discover, plan, rollout, the
// wizard and CI scripts can all call it.
package readiness

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Severity orders findings.
type Severity string

const (
	Info    Severity = "info"
	Warning Severity = "warning"
	Blocker Severity = "blocker"
)

func (s Severity) rank() int {
	switch s {
	case Blocker:
		return 2
	case Warning:
		return 1
	}
	return 0
}

// AtLeast reports whether s is as severe as t.
func (s Severity) AtLeast(t Severity) bool { return s.rank() >= t.rank() }

// Finding IDs, stable for scripts and suppressions.
const (
	IDPDBZeroDisruptions    = "pdb-zero-disruptions"
	IDPDBZeroMoved          = "pdb-zero-disruptions-moved"
	IDSingleReplica         = "single-replica"
	IDNoController          = "no-controller"
	IDLocalData             = "local-data"
	IDSafeToEvictFalse      = "safe-to-evict-false"
	IDPinnedToNodeGroup     = "pinned-to-node-group"
	IDZonalVolume           = "zonal-volume-uncovered"
	IDVolumeZoneNoPool      = "volume-zone-no-receiving-pool"
	IDStatefulSetOneZone    = "statefulset-volumes-one-zone"
	IDPodTooLarge           = "pod-fits-no-instance-type"
	IDDaemonSetNoToleration = "daemonset-does-not-tolerate"
	IDCARunning             = "cluster-autoscaler-running"
	IDIaCOwned              = "node-group-owned-by-iac"
	IDIMDSHopLimit          = "imds-hop-limit-2"
	IDKarpenterSelfHosted   = "karpenter-can-run-on-own-nodes"
)

// Finding is one problem with the objects it concerns.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Objects  []string `json:"objects"`
	Why      string   `json:"why"`
	Fix      string   `json:"fix"`
}

// Report is the result of Evaluate, findings sorted by severity then ID.
type Report struct {
	Findings []Finding `json:"findings"`
	Blockers int       `json:"blockers"`
	Warnings int       `json:"warnings"`
}

// Worst is the highest severity in the report ("" when clean).
func (r Report) Worst() Severity {
	var w Severity
	for _, f := range r.Findings {
		if w == "" || f.Severity.rank() > w.rank() {
			w = f.Severity
		}
	}
	return w
}

// Options tune the checks.
type Options struct {
	// Zones the NodePools will cover; default: every zone of the node groups.
	Zones []string
	// NodeTaints are the taints Karpenter nodes will carry (generate's
	// choice); DaemonSets must tolerate them.
	NodeTaints []corev1.Taint
	// MaxAllocatable is the largest node the NodePools may launch (CPU and
	// memory); default: the largest allocatable among the current nodes.
	MaxAllocatable corev1.ResourceList
	// Rooms, when set, are the instance types the NodePools allow with the
	// room they leave for pods (see FromNodePools): a pod must fit one whose
	// taints it tolerates, which is stricter than fitting MaxAllocatable
	// resource by resource.
	Rooms []Room
	// Pools are the labels and taints of each NodePool's nodes (see
	// FromNodePools): a pod pinned to node-group labels is not reported when
	// a pool whose taints it tolerates carries every pinned key with a value
	// the pod accepts — the key alone is not enough.
	Pools []PoolNodes
	// Controller, when set, is where the Karpenter controller must still
	// be able to run after the rollout (the plan's decision): a blocker
	// when it could not.
	Controller *Controller
}

// PoolNodes is what a NodePool's nodes carry that decides whether a pinned
// pod can land on them.
type PoolNodes struct {
	NodePool string
	Labels   map[string]string
	Taints   []corev1.Taint
	// Zones are the zones the pool may launch in (nil: not known, any).
	Zones []string
}

// nodeGroupLabelKeys are labels only node-group nodes carry.
var nodeGroupLabelKeys = []string{"eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name", "eks.amazonaws.com/nodegroup-image", "node.kubernetes.io/lifecycle"}

// Evaluate runs every check.
func Evaluate(inv *inventory.Inventory, opts Options) Report {
	e := &eval{inv: inv, opts: opts, found: map[string]*Finding{}}
	e.pdbs()
	e.singleReplicas()
	e.pods()
	e.zonalVolumes()
	e.podVolumeZones()
	e.daemonSets()
	e.clusterAutoscaler()
	e.nodeGroups()
	e.karpenter()
	e.controllerHome()
	var r Report
	for _, f := range e.found {
		sort.Strings(f.Objects)
		r.Findings = append(r.Findings, *f)
		switch f.Severity {
		case Blocker:
			r.Blockers++
		case Warning:
			r.Warnings++
		}
	}
	sort.Slice(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Severity.rank() != b.Severity.rank() {
			return a.Severity.rank() > b.Severity.rank()
		}
		return a.ID < b.ID
	})
	return r
}

type eval struct {
	inv   *inventory.Inventory
	opts  Options
	found map[string]*Finding
}

func (e *eval) add(id string, sev Severity, title, why, fix string, objects ...string) {
	f, ok := e.found[id]
	if !ok {
		f = &Finding{ID: id, Severity: sev, Title: title, Why: why, Fix: fix}
		e.found[id] = f
	}
	for _, o := range objects {
		if !contains(f.Objects, o) {
			f.Objects = append(f.Objects, o)
		}
	}
}

func (e *eval) pdbs() {
	for _, p := range e.inv.PDBs {
		if p.ExpectedPods == 0 || p.DisruptionsAllowed > 0 {
			continue
		}
		obj := "PodDisruptionBudget " + p.Namespace + "/" + p.Name
		if ZeroBudgetStuck(p, e.inv.Pods) {
			e.add(IDPDBZeroDisruptions, Blocker, "PodDisruptionBudgets allow no disruption, and nothing moves their pods",
				"a drain waits forever on pods whose PDB allows 0 disruptions and that no surge restart can replace (not a Deployment's), so their nodes can never be retired",
				"scale the workload up (or relax minAvailable/maxUnavailable) so the PDB allows at least 1 disruption during the move", obj)
			continue
		}
		e.add(IDPDBZeroMoved, Warning, "PodDisruptionBudgets allow no disruption now",
			"a Deployment's pods are moved by a surge restart (its new pod Ready first), and a budget short of healthy pods now lets the drain go once they are; either takes longer than an eviction",
			"nothing needed; to move them by eviction, scale the workload up or relax minAvailable/maxUnavailable", obj)
	}
}

// ZeroBudgetStuck reports whether a PodDisruptionBudget that allows no
// disruption stops a drain for good. It does not when it is only short of
// healthy pods now (with every expected pod healthy it would allow one:
// the drain waits for that), nor when every pod it selects is a
// Deployment's (the rollout replaces those by a surge restart). A budget
// whose pods the inventory does not hold is taken as stuck.
func ZeroBudgetStuck(pdb inventory.PDB, pods []inventory.Pod) bool {
	if pdb.ExpectedPods > pdb.DesiredHealthy {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Selector)
	if pdb.Selector == nil || err != nil {
		return true
	}
	selected := 0
	for _, p := range pods {
		if p.Namespace != pdb.Namespace || p.OwnerKind == inventory.OwnerDaemonSet || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if p.OwnerKind != inventory.OwnerDeployment {
			return true
		}
		selected++
	}
	return selected == 0
}

func (e *eval) singleReplicas() {
	for _, w := range e.inv.Workloads {
		if (w.Kind == inventory.OwnerDeployment || w.Kind == inventory.OwnerStatefulSet) && w.Replicas == 1 {
			e.add(IDSingleReplica, Warning, "Single-replica workloads",
				"draining the node of a single replica takes the workload down until its replacement is ready",
				"run at least 2 replicas (with a PDB) for the move, or accept a short outage",
				w.Kind+" "+w.Namespace+"/"+w.Name)
		}
	}
}

// pinnable are the label keys only node-group nodes carry: the well-known
// ones and the groups' own labels.
func (e *eval) pinnable() []string {
	pinned := append([]string{}, nodeGroupLabelKeys...)
	for _, ng := range e.inv.NodeGroups {
		for k := range ng.Labels {
			if !contains(pinned, k) && !wellKnown(k) {
				pinned = append(pinned, k)
			}
		}
	}
	return pinned
}

func (e *eval) pods() {
	pinned := e.pinnable()
	maxAlloc := e.opts.MaxAllocatable
	if maxAlloc == nil {
		maxAlloc = corev1.ResourceList{}
		for _, n := range e.inv.Nodes {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := n.Allocatable[r]; ok {
					if cur, ok := maxAlloc[r]; !ok || q.Cmp(cur) > 0 {
						maxAlloc[r] = q
					}
				}
			}
		}
	}
	for _, p := range e.inv.Pods {
		name := "Pod " + p.Namespace + "/" + p.Name
		owner := name
		if p.OwnerKind != "" {
			owner = p.OwnerKind + " " + p.Namespace + "/" + p.OwnerName
		}
		if p.OwnerKind == inventory.OwnerDaemonSet {
			continue
		}
		if p.OwnerKind == inventory.OwnerNone && p.NodeName != "" {
			e.add(IDNoController, Blocker, "Pods with no controller",
				"a pod no controller owns is deleted by the drain and never recreated",
				"put it under a Deployment, StatefulSet or Job, or recreate it by hand after the move", name)
		}
		for _, v := range p.Volumes {
			if v.Kind == inventory.VolumeEmptyDir || v.Kind == inventory.VolumeHostPath {
				e.add(IDLocalData, Warning, "Pods keep data on the node (emptyDir/hostPath)",
					"data in emptyDir or hostPath volumes is lost when the pod moves to a Karpenter node",
					"make sure the data is disposable, or move it to a PersistentVolume", owner+" ("+v.Kind+" "+v.Name+")")
			}
		}
		if p.Annotations[inventory.AnnotationSafeToEvict] == "false" {
			e.add(IDSafeToEvictFalse, Warning, "Pods marked safe-to-evict: false",
				"Karpenter ignores Cluster Autoscaler's annotation; after the move it may disrupt these pods during consolidation",
				`annotate them with karpenter.sh/do-not-disrupt: "true" (and drain their old nodes deliberately)`, owner)
		}
		keys := pinnedKeys(p, pinned)
		if len(keys) > 0 && !slices.ContainsFunc(e.opts.Pools, func(pool PoolNodes) bool { return receives(pool, &p, keys) }) {
			for _, key := range keys {
				e.add(IDPinnedToNodeGroup, Blocker, "Pods pinned to node-group labels",
					"no NodePool that will receive these pods carries the node-group label they select (key and value), so they would stay Pending after their nodes are drained",
					"remove the selector/affinity, or have generate keep the label on the NodePool (e.g. eks.amazonaws.com/nodegroup=<group> as a NodePool label)",
					owner+" ("+key+")")
			}
		}
		if e.tooLarge(&p, maxAlloc) {
			e.add(IDPodTooLarge, Blocker, "Pods no allowed instance type can hold",
				"their requests exceed the largest node the NodePools may launch, so they would stay Pending",
				"allow larger instance types in the NodePool or lower the requests", owner)
		}
	}
}

// pinnedKeys lists the node-group label keys a pod's nodeSelector or
// required node affinity depends on.
func pinnedKeys(p inventory.Pod, keys []string) []string {
	var out []string
	for k := range p.NodeSelector {
		if contains(keys, k) {
			out = append(out, k)
		}
	}
	if a := p.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, ex := range t.MatchExpressions {
				if contains(keys, ex.Key) && (ex.Operator == corev1.NodeSelectorOpIn || ex.Operator == corev1.NodeSelectorOpExists) {
					out = append(out, ex.Key)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// receives reports whether a pool's nodes would take a pod pinned on keys:
// the pod tolerates the pool's taints and the pool's labels satisfy the
// pod's nodeSelector and required node affinity restricted to those keys
// (a pool keeping the key with another value does not).
func receives(pool PoolNodes, p *inventory.Pod, keys []string) bool {
	if !tolerates(p.Tolerations, pool.Taints) {
		return false
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{}}}
	for k, v := range p.NodeSelector {
		if contains(keys, k) {
			pod.Spec.NodeSelector[k] = v
		}
	}
	if a := p.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var terms []corev1.NodeSelectorTerm
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var exprs []corev1.NodeSelectorRequirement
			for _, ex := range t.MatchExpressions {
				if contains(keys, ex.Key) {
					exprs = append(exprs, ex)
				}
			}
			if len(exprs) == 0 {
				return true // a term without a pinned key lets the pod land elsewhere
			}
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	node := &corev1.Node{}
	node.Labels = pool.Labels
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

func (e *eval) tooLarge(p *inventory.Pod, max corev1.ResourceList) bool {
	if len(e.opts.Rooms) > 0 {
		return !fitsSomeRoom(p, e.opts.Rooms)
	}
	req := p.Requests
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := req[r]
		m, has := max[r]
		if ok && has && q.Cmp(m) > 0 {
			return true
		}
	}
	return false
}

func (e *eval) zonalVolumes() {
	zones := e.opts.Zones
	if len(zones) == 0 {
		for _, ng := range e.inv.NodeGroups {
			zones = append(zones, ng.Zones...)
		}
	}
	for _, pv := range e.inv.PersistentVolumes {
		covered := false
		for _, z := range pv.Zones {
			covered = covered || contains(zones, z)
		}
		if !covered && len(pv.Zones) > 0 {
			e.add(IDZonalVolume, Blocker, "Zonal volumes in zones no NodePool covers",
				"a pod using a zonal volume can only run in its zone; with no NodePool there it stays Pending",
				"add the zone's subnets to the EC2NodeClass, or migrate the volume",
				fmt.Sprintf("PersistentVolume %s (%s, claim %s/%s)", pv.Name, strings.Join(pv.Zones, ","), pv.ClaimNamespace, pv.ClaimName))
		}
	}
}

// podVolumeZones judges each pod's zonal volumes against the NodePools
// that will receive the pod (receives: their taints tolerated, their
// labels accepted): a volume in a zone none of them covers keeps the pod
// Pending after its eviction, a blocker; a StatefulSet whose volumes all
// sit in one zone loses every replica with that zone, a warning.
func (e *eval) podVolumeZones() {
	if len(e.opts.Pools) == 0 {
		return
	}
	pvs := map[string]inventory.PersistentVolume{}
	for _, pv := range e.inv.PersistentVolumes {
		if pv.ClaimName != "" {
			pvs[pv.ClaimNamespace+"/"+pv.ClaimName] = pv
		}
	}
	pinned := e.pinnable()
	stsZones := map[string][]string{}
	stsVolumes := map[string]int{}
	for _, p := range e.inv.Pods {
		if p.OwnerKind == inventory.OwnerDaemonSet {
			continue
		}
		keys := pinnedKeys(p, pinned)
		var pools []PoolNodes
		for _, pool := range e.opts.Pools {
			if receives(pool, &p, keys) {
				pools = append(pools, pool)
			}
		}
		for _, v := range p.Volumes {
			pv, ok := pvs[p.Namespace+"/"+v.ClaimName]
			if v.ClaimName == "" || !ok || len(pv.Zones) == 0 {
				continue
			}
			if p.OwnerKind == inventory.OwnerStatefulSet {
				k := p.Namespace + "/" + p.OwnerName
				stsZones[k] = append(stsZones[k], pv.Zones...)
				stsVolumes[k]++
			}
			if slices.ContainsFunc(pools, func(pool PoolNodes) bool {
				return pool.Zones == nil || slices.ContainsFunc(pv.Zones, func(z string) bool { return contains(pool.Zones, z) })
			}) {
				continue
			}
			names := make([]string, len(pools))
			for i, pool := range pools {
				names[i] = fmt.Sprintf("%s (%s)", pool.NodePool, strings.Join(pool.Zones, ","))
			}
			receiving := "none: it tolerates no NodePool's taints or accepts no NodePool's labels"
			if len(names) > 0 {
				receiving = strings.Join(names, ", ")
			}
			e.add(IDVolumeZoneNoPool, Blocker, "Pods whose volume is in a zone no NodePool receiving them covers",
				"a pod bound to a zonal PersistentVolume runs only in the volume's zone; none of the NodePools that would take it launches there, so it would stay Pending after its eviction",
				"add the zone to a NodePool that takes the pod (its zone requirement, or the EC2NodeClass's subnets; for a single-zone group, the pool generated for that zone), let the pod tolerate such a pool's taints, or migrate the volume",
				fmt.Sprintf("Pod %s/%s (volume %s: PersistentVolume %s in %s; NodePools receiving it: %s)", p.Namespace, p.Name, v.Name, pv.Name, strings.Join(pv.Zones, ","), receiving))
		}
	}
	for k, zs := range stsZones {
		slices.Sort(zs)
		if zs = slices.Compact(zs); len(zs) == 1 && stsVolumes[k] > 1 {
			e.add(IDStatefulSetOneZone, Warning, "StatefulSets whose volumes all sit in one zone",
				"each replica can only run in its volume's zone: if that zone has no capacity (or fails) every replica is Pending at once",
				"spread the StatefulSet's volumes over zones (topology spread on the zone with a WaitForFirstConsumer StorageClass), or accept it",
				fmt.Sprintf("StatefulSet %s (%d volumes in %s)", k, stsVolumes[k], zs[0]))
		}
	}
}

func (e *eval) daemonSets() {
	if len(e.opts.NodeTaints) == 0 {
		return
	}
	for _, ds := range e.inv.DaemonSets {
		for _, t := range e.opts.NodeTaints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				continue
			}
			tolerated := false
			for _, tol := range ds.Tolerations {
				tolerated = tolerated || tol.ToleratesTaint(klog.Background(), &t, false)
			}
			if !tolerated {
				e.add(IDDaemonSetNoToleration, Warning, "DaemonSets that will not run on the new nodes",
					"Karpenter nodes will carry taints these DaemonSets do not tolerate, so agents (logging, CNI, monitoring) would be missing there",
					"add tolerations for the NodePool taints to the DaemonSets, or drop the taints",
					fmt.Sprintf("DaemonSet %s/%s (%s:%s)", ds.Namespace, ds.Name, t.Key, t.Effect))
			}
		}
	}
}

func (e *eval) clusterAutoscaler() {
	if ca := e.inv.ClusterAutoscaler; ca != nil && ca.Replicas > 0 {
		e.add(IDCARunning, Warning, "Cluster Autoscaler is still running",
			"Cluster Autoscaler and Karpenter would both react to pending pods and fight over capacity",
			"scale Cluster Autoscaler to 0 before draining (the rollout does this as a recorded, reversible step)",
			"Deployment "+ca.Namespace+"/"+ca.Name)
	}
}

// iacTags identify node groups owned by infrastructure-as-code.
var iacTags = map[string]string{
	"aws:cloudformation:stack-name": "CloudFormation", "alpha.eksctl.io/cluster-name": "eksctl", "eksctl.cluster.k8s.io/v1alpha1/cluster-name": "eksctl",
	"terraform": "Terraform", "ManagedBy": "", "managed-by": "",
}

func (e *eval) nodeGroups() {
	for _, ng := range e.inv.NodeGroups {
		for k, tool := range iacTags {
			v, ok := ng.Tags[k]
			if !ok {
				continue
			}
			if tool == "" {
				if !strings.Contains(strings.ToLower(v), "terraform") && !strings.Contains(strings.ToLower(v), "pulumi") {
					continue
				}
				tool = v
			}
			e.add(IDIaCOwned, Warning, "Node groups owned by infrastructure-as-code",
				"the next apply of the owning stack would restore the old sizes and undo the scale-down",
				"change the desired/min size in the stack (or ignore it there) as part of the move", fmt.Sprintf("node group %s (%s)", ng.Name, tool))
		}
		if lt := ng.LaunchTemplate; lt != nil && lt.MetadataOptions != nil && lt.MetadataOptions.HTTPPutResponseHopLimit != nil && *lt.MetadataOptions.HTTPPutResponseHopLimit >= 2 {
			e.add(IDIMDSHopLimit, Warning, "IMDS hop limit 2 in use",
				"Karpenter v1 defaults the hop limit to 1, which breaks pods without hostNetwork that call IMDS (AWS Load Balancer Controller, EBS CSI)",
				"set metadataOptions.httpPutResponseHopLimit: 2 in the EC2NodeClass, or give those pods IRSA/Pod Identity",
				"node group "+ng.Name)
		}
	}
}

func (e *eval) karpenter() {
	k := e.inv.Karpenter
	if k == nil || !k.Installed {
		return
	}
	// Karpenter must run on nodes it does not manage: a required
	// karpenter.sh/nodepool DoesNotExist term (or Fargate/node-group pinning).
	safe := false
	if _, ok := k.ControllerNodeSelector["eks.amazonaws.com/nodegroup"]; ok {
		safe = true
	}
	if a := k.ControllerAffinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		all := len(terms) > 0
		for _, t := range terms {
			has := false
			for _, ex := range t.MatchExpressions {
				has = has || (ex.Key == "karpenter.sh/nodepool" && ex.Operator == corev1.NodeSelectorOpDoesNotExist) ||
					(ex.Key == "eks.amazonaws.com/nodegroup" && ex.Operator == corev1.NodeSelectorOpIn)
			}
			all = all && has
		}
		safe = safe || all
	}
	if !safe {
		e.add(IDKarpenterSelfHosted, Blocker, "The Karpenter controller can land on its own nodes",
			"if Karpenter runs on a node it manages, consolidating that node stops the controller and nothing replaces it",
			"require karpenter.sh/nodepool DoesNotExist in the controller's node affinity (the chart default) and keep a small node group or Fargate for it",
			"Deployment "+k.Namespace+"/"+k.Deployment)
	}
}

func wellKnown(k string) bool {
	return strings.HasPrefix(k, "kubernetes.io/") || strings.HasPrefix(k, "node.kubernetes.io/instance-type") ||
		strings.HasPrefix(k, "topology.kubernetes.io/") || strings.HasPrefix(k, "karpenter.")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
