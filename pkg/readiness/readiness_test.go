package readiness

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func i32(v int32) *int32 { return &v }

// zeroBudgetOver makes the clean cluster's budget select its pod, owned by
// kind, and allow no disruption with all three expected pods healthy.
func zeroBudgetOver(inv *inventory.Inventory, kind string) {
	inv.Pods[0].OwnerKind, inv.Pods[0].Labels = kind, map[string]string{"app": "web"}
	inv.PDBs[0] = inventory.PDB{Namespace: "app", Name: "web", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		ExpectedPods: 3, CurrentHealthy: 3, DesiredHealthy: 3}
}

// clean is a cluster ready to move: nothing must be reported.
func clean() *inventory.Inventory {
	return &inventory.Inventory{
		Cluster: inventory.Cluster{Name: "prod"},
		NodeGroups: []inventory.NodeGroup{{Name: "ng", Kind: inventory.SelfManaged, Zones: []string{"us-east-1a"},
			Labels:         map[string]string{"kubernetes.io/arch": "amd64"},
			LaunchTemplate: &inventory.LaunchTemplate{MetadataOptions: &inventory.MetadataOptions{HTTPPutResponseHopLimit: i32(1)}}}},
		Nodes: []inventory.Node{{Name: "n1", NodeGroup: "ng", Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}},
		Pods: []inventory.Pod{{Namespace: "app", Name: "web-1", NodeName: "n1", OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Volumes: []inventory.Volume{{Name: "data", Kind: inventory.VolumePVC, ClaimName: "d"}}}},
		Workloads:         []inventory.Workload{{Kind: inventory.OwnerDeployment, Namespace: "app", Name: "web", Replicas: 3}},
		PDBs:              []inventory.PDB{{Namespace: "app", Name: "web", DisruptionsAllowed: 1, ExpectedPods: 3}},
		PersistentVolumes: []inventory.PersistentVolume{{Name: "pv", Zones: []string{"us-east-1a"}}},
		DaemonSets:        []inventory.DaemonSet{{Namespace: "kube-system", Name: "agent", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
		ClusterAutoscaler: &inventory.ClusterAutoscaler{Namespace: "kube-system", Name: "cluster-autoscaler", Replicas: 0},
		Karpenter: &inventory.KarpenterInstall{Installed: true, Namespace: "karpenter", Deployment: "karpenter",
			ControllerAffinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}},
	}
}

var taints = []corev1.Taint{{Key: "karpenter.sh/migrated", Effect: corev1.TaintEffectNoSchedule}}

func TestCleanClusterHasNoFindings(t *testing.T) {
	r := Evaluate(clean(), Options{NodeTaints: taints})
	if len(r.Findings) != 0 || r.Worst() != "" {
		t.Fatalf("clean cluster reported %+v", r.Findings)
	}
}

// TestEachFinding adds one problem at a time to the clean cluster: exactly
// that finding must appear, naming the object.
func TestEachFinding(t *testing.T) {
	for _, tc := range []struct {
		id, object string
		sev        Severity
		mutate     func(*inventory.Inventory)
	}{
		{IDPDBZeroDisruptions, "PodDisruptionBudget app/web", Blocker, func(inv *inventory.Inventory) {
			inv.PDBs[0].DisruptionsAllowed, inv.PDBs[0].CurrentHealthy, inv.PDBs[0].DesiredHealthy = 0, 3, 3
		}},
		// A surge restart moves a Deployment's pods; a StatefulSet's stay.
		{IDPDBZeroMoved, "PodDisruptionBudget app/web", Warning, func(inv *inventory.Inventory) { zeroBudgetOver(inv, inventory.OwnerDeployment) }},
		{IDPDBZeroDisruptions, "PodDisruptionBudget app/web", Blocker, func(inv *inventory.Inventory) { zeroBudgetOver(inv, inventory.OwnerStatefulSet) }},
		// Short of healthy pods now: the drain waits until they are.
		{IDPDBZeroMoved, "PodDisruptionBudget app/web", Warning, func(inv *inventory.Inventory) {
			zeroBudgetOver(inv, inventory.OwnerStatefulSet)
			inv.PDBs[0].CurrentHealthy, inv.PDBs[0].DesiredHealthy = 1, 2
		}},
		{IDSingleReplica, "Deployment app/web", Warning, func(inv *inventory.Inventory) { inv.Workloads[0].Replicas = 1 }},
		{IDNoController, "Pod app/web-1", Blocker, func(inv *inventory.Inventory) { inv.Pods[0].OwnerKind, inv.Pods[0].OwnerName = "", "" }},
		{IDLocalData, "Deployment app/web (emptyDir scratch)", Warning, func(inv *inventory.Inventory) {
			inv.Pods[0].Volumes = append(inv.Pods[0].Volumes, inventory.Volume{Name: "scratch", Kind: inventory.VolumeEmptyDir})
		}},
		{IDSafeToEvictFalse, "Deployment app/web", Warning, func(inv *inventory.Inventory) {
			inv.Pods[0].Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
		}},
		{IDPinnedToNodeGroup, "Deployment app/web (eks.amazonaws.com/nodegroup)", Blocker, func(inv *inventory.Inventory) {
			inv.Pods[0].NodeSelector = map[string]string{"eks.amazonaws.com/nodegroup": "ng"}
		}},
		{IDPinnedToNodeGroup, "Deployment app/web (team)", Blocker, func(inv *inventory.Inventory) {
			inv.NodeGroups[0].Labels["team"] = "data"
			inv.Pods[0].Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"data"}}}}}}}}
		}},
		{IDZonalVolume, "PersistentVolume pv (us-east-1c, claim /)", Blocker, func(inv *inventory.Inventory) { inv.PersistentVolumes[0].Zones = []string{"us-east-1c"} }},
		{IDPodTooLarge, "Deployment app/web", Blocker, func(inv *inventory.Inventory) { inv.Pods[0].Requests[corev1.ResourceCPU] = resource.MustParse("8") }},
		{IDDaemonSetNoToleration, "DaemonSet kube-system/agent (karpenter.sh/migrated:NoSchedule)", Warning, func(inv *inventory.Inventory) { inv.DaemonSets[0].Tolerations = nil }},
		{IDCARunning, "Deployment kube-system/cluster-autoscaler", Warning, func(inv *inventory.Inventory) { inv.ClusterAutoscaler.Replicas = 1 }},
		{IDIaCOwned, "node group ng (CloudFormation)", Warning, func(inv *inventory.Inventory) {
			inv.NodeGroups[0].Tags = map[string]string{"aws:cloudformation:stack-name": "eksctl-prod-nodegroup-ng"}
		}},
		{IDIMDSHopLimit, "node group ng", Warning, func(inv *inventory.Inventory) {
			inv.NodeGroups[0].LaunchTemplate.MetadataOptions.HTTPPutResponseHopLimit = i32(2)
		}},
		{IDKarpenterSelfHosted, "Deployment karpenter/karpenter", Blocker, func(inv *inventory.Inventory) { inv.Karpenter.ControllerAffinity = nil }},
	} {
		t.Run(tc.id, func(t *testing.T) {
			inv := clean()
			tc.mutate(inv)
			r := Evaluate(inv, Options{NodeTaints: taints})
			if len(r.Findings) != 1 {
				t.Fatalf("want exactly %s, got %+v", tc.id, r.Findings)
			}
			f := r.Findings[0]
			if f.ID != tc.id || f.Severity != tc.sev || len(f.Objects) != 1 || f.Objects[0] != tc.object || f.Why == "" || f.Fix == "" {
				t.Errorf("got %+v, want %s (%s) on %q", f, tc.id, tc.sev, tc.object)
			}
			if r.Worst() != tc.sev {
				t.Errorf("Worst = %s", r.Worst())
			}
		})
	}
}

// TestPinnedNeedsKeyAndValue: a pin to a node-group label is handled only
// by a pool the pod would land on carrying the same key and value — not by
// a pool keeping the key with another value, nor one whose taints the pod
// does not tolerate.
func TestPinnedNeedsKeyAndValue(t *testing.T) {
	const ngKey = "eks.amazonaws.com/nodegroup"
	selector := func(p *inventory.Pod) { p.NodeSelector = map[string]string{ngKey: "ng"} }
	affinityIn := func(p *inventory.Pod) {
		p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ngKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"ng", "ng2"}}}}}}}}
	}
	groupLabel := func(p *inventory.Pod) { p.NodeSelector = map[string]string{"role": "web"} }
	dedicated := []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name   string
		pin    func(*inventory.Pod)
		pools  []PoolNodes
		pinned bool
	}{
		{"selector, no pool keeps the key", selector, []PoolNodes{{NodePool: "default"}}, true},
		{"selector, pool keeps key and value", selector, []PoolNodes{{NodePool: "default"}, {NodePool: "ng", Labels: map[string]string{ngKey: "ng"}}}, false},
		{"selector, another pool keeps the key with another value", selector, []PoolNodes{{NodePool: "other", Labels: map[string]string{ngKey: "other"}}}, true},
		{"affinity In, a pool carries one accepted value", affinityIn, []PoolNodes{{NodePool: "ng2", Labels: map[string]string{ngKey: "ng2"}}}, false},
		{"affinity In, pool carries a value not accepted", affinityIn, []PoolNodes{{NodePool: "ng3", Labels: map[string]string{ngKey: "ng3"}}}, true},
		{"group label, pool keeps it", groupLabel, []PoolNodes{{NodePool: "web", Labels: map[string]string{"role": "web"}}}, false},
		{"group label, pool keeps the key with another value", groupLabel, []PoolNodes{{NodePool: "batch", Labels: map[string]string{"role": "batch"}}}, true},
		{"group label, the pool carrying it is tainted against the pod", groupLabel, []PoolNodes{{NodePool: "web", Labels: map[string]string{"role": "web"}, Taints: dedicated}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := clean()
			inv.NodeGroups[0].Labels["role"] = "web"
			tc.pin(&inv.Pods[0])
			r := Evaluate(inv, Options{NodeTaints: taints, Pools: tc.pools})
			got := len(r.Findings) == 1 && r.Findings[0].ID == IDPinnedToNodeGroup
			if got != tc.pinned || (!tc.pinned && len(r.Findings) != 0) {
				t.Fatalf("pinned reported = %v, want %v: %+v", got, tc.pinned, r.Findings)
			}
		})
	}
}
