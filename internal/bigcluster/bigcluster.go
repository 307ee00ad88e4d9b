// Package bigcluster builds large cluster inventories for benchmarks: the
// demo account's snapshot (what `demo --out DIR` writes as snapshot.json),
// replicated N times as N independent copies of its workloads in one
// cluster.
package bigcluster

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/demo"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/discover"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// labelEKSNodeGroup names a managed node group's nodes.
const labelEKSNodeGroup = "eks.amazonaws.com/nodegroup"

// DemoSeed is the demo's default seed (`demo --seed`).
const DemoSeed = 1

// DemoSnapshot discovers the sandbox loaded with the demo account, as the
// demo's first two steps do: the inventory `demo --seed SEED --out DIR`
// writes to DIR/snapshot.json (4 node groups, 23 nodes, 294 pods).
func DemoSnapshot(ctx context.Context, seed uint64) (*inventory.Inventory, error) {
	sb, err := sandbox.New(sandbox.Options{Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer sb.Close()
	if err := sb.Load(ctx, sandbox.DemoInventory()); err != nil {
		return nil, fmt.Errorf("sandbox: load the demo account: %w", err)
	}
	cl, ctx, cancel := sb.Clients(ctx)
	defer cancel()
	inv, err := action.ForSandbox(cl, "", "", "bigcluster").Discover(ctx, action.Discover{Cluster: sb.Cloud().Cluster.Name})
	if err != nil {
		return nil, fmt.Errorf("discover the sandbox: %w", err)
	}
	return inv, nil
}

// SharedNamespace keeps its name in every copy (the cluster's own
// add-ons run there); copies of its pods, workloads and PDBs are told
// apart by the suffix on their names and on their selector label values.
const SharedNamespace = "kube-system"

// Options shape a replication.
type Options struct {
	// SplitGroups gives each copy node groups of its own (the group, its
	// ASG, its nodes' nodegroup label and the node selectors naming it,
	// suffixed) instead of raising the original groups' sizes N times.
	SplitGroups bool
	// GroupSets, when SplitGroups is off and it is above 1, has the copies
	// share that many sets of node groups, round robin: copy k joins set
	// k mod GroupSets, whose groups are named as copy (k mod GroupSets)'s
	// would be with SplitGroups and sized for the copies in the set (the
	// demo's 4 groups × 50 sets = 200 node groups).
	GroupSets int
}

// Replicate returns inv with n copies of everything that runs in it: copy 0
// is inv itself, copy k (k ≥ 1) suffixes "-r<k+1>" to the name of every
// node, workload, PDB and PersistentVolume, to every namespace but
// kube-system, and to a pod's name after its owner's (copier.podName). Node providerIDs and ASG instances get new instance IDs;
// node groups keep their names and have their min, max and desired sizes
// raised n times (or are copied, with SplitGroups, or GroupSets sets). DaemonSets, subnets,
// prices and the cluster are shared. The result is sorted as discover
// sorts it; replicating 1 time returns an equal inventory.
func Replicate(inv inventory.Inventory, n int, o Options) (inventory.Inventory, error) {
	if n < 1 {
		return inventory.Inventory{}, fmt.Errorf("replicate %d times: want at least 1", n)
	}
	out := inv
	out.NodeGroups, out.Nodes, out.Pods, out.Workloads, out.PDBs, out.PersistentVolumes = nil, nil, nil, nil, nil, nil
	groups := map[string]bool{}
	for _, g := range inv.NodeGroups {
		groups[g.Name] = true
	}
	sets := min(max(o.GroupSets, 1), n)
	if o.SplitGroups {
		sets = n
	}
	for k := range n {
		c := copier{k: k, set: k % sets, groups: groups}
		for i, g := range inv.NodeGroups {
			if k >= sets {
				// The copy's instances join its set's group.
				for _, in := range g.Instances {
					in.ID = c.instanceID(in.ID)
					j := c.set*len(inv.NodeGroups) + i
					out.NodeGroups[j].Instances = append(out.NodeGroups[j].Instances, in)
				}
				continue
			}
			inSet := n / sets
			if c.set < n%sets {
				inSet++
			}
			out.NodeGroups = append(out.NodeGroups, c.nodeGroup(g, inSet))
		}
		for _, nd := range inv.Nodes {
			out.Nodes = append(out.Nodes, c.node(nd))
		}
		for _, p := range inv.Pods {
			out.Pods = append(out.Pods, c.pod(p))
		}
		for _, w := range inv.Workloads {
			w.Namespace, w.Name, w.Selector = c.ns(w.Namespace), c.name(w.Name), c.selector(w.Namespace, w.Selector)
			out.Workloads = append(out.Workloads, w)
		}
		for _, pdb := range inv.PDBs {
			pdb.Namespace, pdb.Name, pdb.Selector = c.ns(pdb.Namespace), c.name(pdb.Name), c.selector(pdb.Namespace, pdb.Selector)
			out.PDBs = append(out.PDBs, pdb)
		}
		for _, pv := range inv.PersistentVolumes {
			pv.Name, pv.ClaimNamespace = c.name(pv.Name), c.ns(pv.ClaimNamespace)
			out.PersistentVolumes = append(out.PersistentVolumes, pv)
		}
	}
	sortLikeDiscover(&out)
	seen := map[string]bool{}
	for _, nd := range out.Nodes {
		if seen[nd.InstanceID] && nd.InstanceID != "" {
			return inventory.Inventory{}, fmt.Errorf("replicate: instance ID %s given twice", nd.InstanceID)
		}
		seen[nd.InstanceID] = true
	}
	return out, nil
}

// copier renames the objects of copy k.
type copier struct {
	k int
	// set is the set of node groups the copy's nodes join (0: the original
	// groups); it is named after the set's first copy.
	set int
	// groups are the original node groups' names.
	groups map[string]bool
}

func (c copier) suffix() string { return copySuffix(c.k) }

func copySuffix(k int) string {
	if k == 0 {
		return ""
	}
	return fmt.Sprintf("-r%d", k+1)
}

func (c copier) name(s string) string { return s + c.suffix() }

func (c copier) ns(s string) string {
	if s == SharedNamespace || s == "" {
		return s
	}
	return c.name(s)
}

// group is the name of a node group in this copy.
func (c copier) group(s string) string {
	if !c.groups[s] {
		return s
	}
	return s + copySuffix(c.set)
}

// instanceID keeps an EC2-shaped ID (i- and 17 hex digits): copy k
// replaces the first four digits with 8000+k in hex (EC2's, and the
// sandbox's, start with 0).
func (c copier) instanceID(id string) string {
	hex, ok := strings.CutPrefix(id, "i-")
	if c.k == 0 || !ok || len(hex) < 5 {
		return id
	}
	return fmt.Sprintf("i-%04x%s", 0x8000+c.k, hex[4:])
}

// nodeGroup is g for the first copy of a set: with its sizes raised for
// the n copies the set holds and, but for set 0, renamed; the copy's
// instances are its first.
func (c copier) nodeGroup(g inventory.NodeGroup, n int) inventory.NodeGroup {
	g.Instances = slices.Clone(g.Instances)
	g.MinSize, g.MaxSize, g.DesiredSize = g.MinSize*int32(n), g.MaxSize*int32(n), g.DesiredSize*int32(n)
	if c.set == 0 {
		return g
	}
	g.Name, g.ASGName = c.group(g.Name), g.ASGName+copySuffix(c.set)
	if g.ARN != "" {
		g.ARN += copySuffix(c.set)
	}
	g.Tags = maps.Clone(g.Tags)
	if _, ok := g.Tags[discover.TagEKSNodegroupName]; ok {
		g.Tags[discover.TagEKSNodegroupName] = g.Name
	}
	for i := range g.Instances {
		g.Instances[i].ID = c.instanceID(g.Instances[i].ID)
	}
	return g
}

func (c copier) node(nd inventory.Node) inventory.Node {
	id := c.instanceID(nd.InstanceID)
	if nd.ProviderID != "" && nd.InstanceID != "" {
		nd.ProviderID = strings.TrimSuffix(nd.ProviderID, nd.InstanceID) + id
	}
	nd.Name, nd.InstanceID, nd.NodeGroup = c.name(nd.Name), id, c.group(nd.NodeGroup)
	nd.Labels = maps.Clone(nd.Labels)
	if _, ok := nd.Labels[catalog.LabelHostname]; ok {
		nd.Labels[catalog.LabelHostname] = nd.Name
	}
	if g, ok := nd.Labels[labelEKSNodeGroup]; ok {
		nd.Labels[labelEKSNodeGroup] = c.group(g)
	}
	return nd
}

func (c copier) pod(p inventory.Pod) inventory.Pod {
	ns := p.Namespace
	p.Name = c.podName(p)
	if p.NodeName != "" {
		p.NodeName = c.name(p.NodeName)
	}
	if p.OwnerKind == inventory.OwnerDaemonSet {
		// The DaemonSet is the cluster's one; its pod on the copied node is new.
		return p
	}
	p.Namespace = c.ns(ns)
	if p.OwnerName != "" {
		p.OwnerName = c.name(p.OwnerName)
	}
	if g, ok := p.NodeSelector[labelEKSNodeGroup]; ok && c.set > 0 {
		p.NodeSelector = maps.Clone(p.NodeSelector)
		p.NodeSelector[labelEKSNodeGroup] = c.group(g)
	}
	if c.shared(ns) {
		p.Labels = c.values(p.Labels)
	}
	if a := p.Affinity; a != nil {
		a = a.DeepCopy()
		if pa := a.PodAffinity; pa != nil {
			c.terms(ns, pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			c.terms(ns, pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		p.Affinity = a
	}
	if len(p.TopologySpreadConstraints) > 0 {
		tsc := make([]corev1.TopologySpreadConstraint, len(p.TopologySpreadConstraints))
		for i, t := range p.TopologySpreadConstraints {
			t.LabelSelector = c.selector(ns, t.LabelSelector)
			tsc[i] = t
		}
		p.TopologySpreadConstraints = tsc
	}
	return p
}

// podName is a copy's name for p: a controller's pod is named as the
// copy's controller names its pods, the suffix after the owner's name
// ("web-r2-7d9c5-x2x4q" for "web-7d9c5-x2x4q"), so the ReplicaSet or
// StatefulSet ordinal a loader reads from it is the copy's own; any other
// pod gets the suffix at the end.
func (c copier) podName(p inventory.Pod) string {
	if p.OwnerKind != inventory.OwnerDaemonSet && p.OwnerName != "" {
		if rest, ok := strings.CutPrefix(p.Name, p.OwnerName+"-"); ok {
			return c.name(p.OwnerName) + "-" + rest
		}
	}
	return c.name(p.Name)
}

// terms points a copy's pod (anti-)affinity terms, in place, at the
// copy's own pods.
func (c copier) terms(ns string, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
	fix := func(t *corev1.PodAffinityTerm) {
		t.LabelSelector = c.selector(ns, t.LabelSelector)
		for i, tn := range t.Namespaces {
			t.Namespaces[i] = c.ns(tn)
		}
	}
	for i := range required {
		fix(&required[i])
	}
	for i := range preferred {
		fix(&preferred[i].PodAffinityTerm)
	}
}

// shared reports whether objects of ns keep their namespace in copy k, so
// their labels and selectors carry the suffix instead.
func (c copier) shared(ns string) bool { return c.k > 0 && c.ns(ns) == ns }

// values suffixes every value of a label map.
func (c copier) values(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = c.name(v)
	}
	return out
}

// selector is a copy's selector for objects of ns: unchanged where the
// namespace tells the copies apart, matching the suffixed labels where not.
func (c copier) selector(ns string, s *metav1.LabelSelector) *metav1.LabelSelector {
	if s == nil || !c.shared(ns) {
		return s
	}
	s = s.DeepCopy()
	s.MatchLabels = c.values(s.MatchLabels)
	for i := range s.MatchExpressions {
		for j, v := range s.MatchExpressions[i].Values {
			s.MatchExpressions[i].Values[j] = c.name(v)
		}
	}
	return s
}

// sortLikeDiscover orders the replicated objects as discover orders a
// cluster's.
func sortLikeDiscover(inv *inventory.Inventory) {
	slices.SortFunc(inv.NodeGroups, func(a, b inventory.NodeGroup) int { return cmp.Compare(a.Name, b.Name) })
	for i := range inv.NodeGroups {
		slices.SortFunc(inv.NodeGroups[i].Instances, func(a, b inventory.Instance) int { return cmp.Compare(a.ID, b.ID) })
	}
	slices.SortFunc(inv.Nodes, func(a, b inventory.Node) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(inv.Pods, func(a, b inventory.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(inv.Workloads, func(a, b inventory.Workload) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(inv.PDBs, func(a, b inventory.PDB) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(inv.PersistentVolumes, func(a, b inventory.PersistentVolume) int { return cmp.Compare(a.Name, b.Name) })
}

// Files are a replicated demo laid out as the CLI reads it:
//
//	karpenter-migrate plan --env prod --snapshot SNAPSHOT --dir TREE --config CONFIG
type Files struct {
	Snapshot string
	// Tree is what `generate --snapshot SNAPSHOT --out TREE` writes.
	Tree string
	// Config is the demo's prod.yaml for the cluster.
	Config                  string
	Nodes, Pods, NodeGroups int
}

// WriteDemo writes the demo's snapshot replicated n times, the tree
// generate writes for it (overlays dev, staging and prod, generate's
// defaults) and the demo's environment config into dir.
func WriteDemo(ctx context.Context, dir string, n int, o Options) (Files, error) {
	demoInv, err := DemoSnapshot(ctx, DemoSeed)
	if err != nil {
		return Files{}, err
	}
	inv, err := Replicate(*demoInv, n, o)
	if err != nil {
		return Files{}, err
	}
	f := Files{Snapshot: filepath.Join(dir, "snapshot.json"), Tree: filepath.Join(dir, "karpenter"), Config: filepath.Join(dir, demo.ConfigFile),
		Nodes: len(inv.Nodes), Pods: len(inv.Pods), NodeGroups: len(inv.NodeGroups)}
	if err := inventory.NewSnapshot(inv, time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)).WriteFile(f.Snapshot); err != nil {
		return Files{}, err
	}
	if _, err := generate.Run(ctx, &inv, generate.DefaultOptions(), generate.TreeOptions{Dir: f.Tree, Envs: []string{"dev", "staging", demo.Env}}); err != nil {
		return Files{}, fmt.Errorf("generate: %w", err)
	}
	b, err := yaml.Marshal(demo.PlanConfig(inv.Cluster))
	if err != nil {
		return Files{}, fmt.Errorf("render %s: %w", f.Config, err)
	}
	if err := atomicfile.WriteFile(f.Config, b, 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}
