package engine

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// The tests below follow Karpenter v1.14's volume scheduling tests
// (provisioning/suite_test.go "Volume Topology Requirements",
// scheduling/suite_test.go "VolumeUsage"), on its fake instance types.

const csiDriver = "fake.csi.provider"

// volPod is a pending pod mounting the claims.
func volPod(name, cpu string, claims ...string) inventory.Pod {
	p := inventory.Pod{Namespace: "default", Name: name, Phase: corev1.PodPending,
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	for _, c := range claims {
		p.Volumes = append(p.Volumes, inventory.Volume{Name: c, Kind: inventory.VolumePVC, ClaimName: c})
	}
	return p
}

// resolved runs the pods' claims through the inventory as discover records
// them: what the engine reads is what Karpenter reads of the objects.
func resolved(inv inventory.Inventory) []inventory.Pod {
	inv.ResolveVolumes()
	return inv.Pods
}

// boundPV is a PersistentVolume in the zones, bound to the claim.
func boundPV(claim string, zones ...string) (inventory.PersistentVolume, inventory.PersistentVolumeClaim) {
	return inventory.PersistentVolume{Name: "pv-" + claim, ClaimNamespace: "default", ClaimName: claim, Zones: zones, Driver: csiDriver},
		inventory.PersistentVolumeClaim{Namespace: "default", Name: claim, StorageClass: "my-storage-class", VolumeName: "pv-" + claim}
}

func wffcClass(zones ...string) inventory.StorageClass {
	sc := inventory.StorageClass{Name: "my-storage-class", Provisioner: csiDriver, VolumeBindingMode: string(storagev1.VolumeBindingWaitForFirstConsumer)}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: catalog.LabelZone, Values: zones}}}}
	}
	return sc
}

func solveChecked(t *testing.T, in Input) Result {
	t.Helper()
	res, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Check(in, res) {
		t.Error("Check:", e)
	}
	return res
}

func claimZones(res Result) []string {
	var out []string
	for _, nc := range res.NodeClaims {
		out = append(out, nc.Zone)
	}
	return out
}

// "should schedule to volume zones if volume already bound".
func TestVolumeBoundPVZone(t *testing.T) {
	pv, pvc := boundPV("claim-a", "test-zone-3")
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{volPod("a", "1", "claim-a")},
		PersistentVolumes: []inventory.PersistentVolume{pv}, Claims: []inventory.PersistentVolumeClaim{pvc}})
	if got := pods[0].Volumes[0].Topology; len(got) != 1 {
		t.Fatalf("resolved topology = %v, want the PV's zone", got)
	}
	res := solveChecked(t, Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if z := claimZones(res); len(z) != 1 || z[0] != "test-zone-3" {
		t.Fatalf("claims in zones %v, want [test-zone-3] (the volume's)", z)
	}
	// Without the volume, the cheapest offering (spot, in test-zone-1) wins.
	res = solveChecked(t, Input{Pods: []inventory.Pod{volPod("a", "1")}, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if z := claimZones(res); len(z) != 1 || z[0] == "test-zone-3" {
		t.Fatalf("without a volume: claims in %v; the test needs another zone to be cheaper", z)
	}
}

// Two pods whose volumes sit in one zone and that do not fit one node:
// two nodes, both in that zone.
func TestVolumeTwoPodsOneZoneTwoNodes(t *testing.T) {
	pva, pvca := boundPV("claim-a", "test-zone-2")
	pvb, pvcb := boundPV("claim-b", "test-zone-2")
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{volPod("a", "3", "claim-a"), volPod("b", "3", "claim-b")},
		PersistentVolumes: []inventory.PersistentVolume{pva, pvb}, Claims: []inventory.PersistentVolumeClaim{pvca, pvcb}})
	res := solveChecked(t, Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if z := claimZones(res); len(z) != 2 || z[0] != "test-zone-2" || z[1] != "test-zone-2" {
		t.Fatalf("claims in zones %v, want two in test-zone-2", z)
	}
}

// "should schedule pods using a PV with multiple zones": the node is in
// one of them.
func TestVolumePVWithMultipleZones(t *testing.T) {
	pv, pvc := boundPV("claim-a", "test-zone-2", "test-zone-3")
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{volPod("a", "1", "claim-a")},
		PersistentVolumes: []inventory.PersistentVolume{pv}, Claims: []inventory.PersistentVolumeClaim{pvc}})
	res := solveChecked(t, Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if z := claimZones(res); len(z) != 1 || (z[0] != "test-zone-2" && z[0] != "test-zone-3") {
		t.Fatalf("claims in zones %v, want one in test-zone-2 or test-zone-3", z)
	}
}

// "should schedule to storage class zones if volume does not exist" and
// "should not schedule if storage class zones are incompatible".
func TestVolumeWaitForFirstConsumerAllowedTopologies(t *testing.T) {
	inv := inventory.Inventory{Pods: []inventory.Pod{volPod("a", "1", "claim-a")},
		Claims:         []inventory.PersistentVolumeClaim{{Namespace: "default", Name: "claim-a", StorageClass: "my-storage-class"}},
		StorageClasses: []inventory.StorageClass{wffcClass("test-zone-3")}}
	pods := resolved(inv)
	if pods[0].Volumes[0].Driver != csiDriver {
		t.Errorf("driver = %q, want the class's provisioner %s", pods[0].Volumes[0].Driver, csiDriver)
	}
	res := solveChecked(t, Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if z := claimZones(res); len(z) != 1 || z[0] != "test-zone-3" {
		t.Fatalf("claims in zones %v, want [test-zone-3] (the class's allowed topology)", z)
	}
	inv.Pods = []inventory.Pod{volPod("a", "1", "claim-a")}
	inv.Pods[0].NodeSelector = map[string]string{catalog.LabelZone: "test-zone-1"}
	res = solveChecked(t, Input{Pods: resolved(inv), NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if len(res.NodeClaims) != 0 || len(res.Unschedulable) != 1 {
		t.Fatalf("a pod in test-zone-1 with a volume only allowed in test-zone-3: %d claims, %v unschedulable; want it unschedulable", len(res.NodeClaims), res.Unschedulable)
	}
}

// "should schedule pods using a StorageClass with multiple zones in
// AllowedTopologies": two terms, one zone each, are alternatives.
func TestVolumeAllowedTopologiesTermsAreAlternatives(t *testing.T) {
	sc := wffcClass()
	sc.AllowedTopologies = []corev1.TopologySelectorTerm{
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: catalog.LabelZone, Values: []string{"test-zone-2"}}}},
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: catalog.LabelZone, Values: []string{"test-zone-3"}}}},
	}
	pod := volPod("a", "1", "claim-a")
	pod.NodeSelector = map[string]string{catalog.LabelZone: "test-zone-3"}
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{pod},
		Claims:         []inventory.PersistentVolumeClaim{{Namespace: "default", Name: "claim-a", StorageClass: "my-storage-class"}},
		StorageClasses: []inventory.StorageClass{sc}})
	res := solveChecked(t, Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if z := claimZones(res); len(z) != 1 || z[0] != "test-zone-3" {
		t.Fatalf("claims in zones %v, want [test-zone-3] (the second term)", z)
	}
}

// A PV with no zone constrains nothing: the pod lands where it would
// without the volume.
func TestVolumeWithoutZoneIsUnconstrained(t *testing.T) {
	pv, pvc := boundPV("claim-a")
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{volPod("a", "1", "claim-a")},
		PersistentVolumes: []inventory.PersistentVolume{pv}, Claims: []inventory.PersistentVolumeClaim{pvc}})
	if len(pods[0].Volumes[0].Topology) != 0 {
		t.Fatalf("topology %v for a volume with no zone", pods[0].Volumes[0].Topology)
	}
	pools := []NodePool{hugePool("default", fakeInstanceTypes(4))}
	with := solveChecked(t, Input{Pods: pods, NodePools: pools})
	without := solveChecked(t, Input{Pods: []inventory.Pod{volPod("a", "1")}, NodePools: pools})
	if fmt.Sprint(claimZones(with)) != fmt.Sprint(claimZones(without)) || with.Cost != without.Cost {
		t.Fatalf("with a zoneless volume: %v $%.3f; without: %v $%.3f", claimZones(with), with.Cost, claimZones(without), without.Cost)
	}
}

// The volume's zone narrows the node, not the domains the pod's own
// topology spread counts (Karpenter keeps volume requirements out of the
// pod's strict requirements): with one pod in test-zone-2 and one in
// test-zone-3, a third whose volume is in test-zone-3 would make a skew of
// 2 against the empty test-zone-1, so it stays pending; counted over its
// volume's zone alone it would pass.
func TestVolumeZoneDoesNotNarrowSpreadDomains(t *testing.T) {
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: catalog.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	pv, pvc := boundPV("claim-c", "test-zone-3")
	pod := volPod("c", "1", "claim-c")
	pod.Labels, pod.TopologySpreadConstraints = map[string]string{"app": "db"}, spread
	var existing []ExistingNode
	for i, z := range []string{"test-zone-2", "test-zone-3"} {
		placed := volPod(fmt.Sprintf("db-%d", i), "1")
		placed.Labels, placed.TopologySpreadConstraints, placed.Phase = map[string]string{"app": "db"}, spread, corev1.PodRunning
		existing = append(existing, ExistingNode{Node: inventory.Node{Name: "n-" + z, Labels: map[string]string{catalog.LabelZone: z},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10")}},
			Pods: []inventory.Pod{placed}})
	}
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{pod},
		PersistentVolumes: []inventory.PersistentVolume{pv}, Claims: []inventory.PersistentVolumeClaim{pvc}})
	res := solveChecked(t, Input{Pods: pods, ExistingNodes: existing, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if len(res.NodeClaims) != 0 || len(res.Unschedulable) != 1 {
		t.Fatalf("claims in zones %v; want the pod unschedulable (skew 2 against test-zone-1)", claimZones(res))
	}
}

// attachNode is an existing node with a CSINode limit for csiDriver.
func attachNode(limit int32) ExistingNode {
	return ExistingNode{Node: inventory.Node{Name: "existing", Labels: map[string]string{catalog.LabelZone: "test-zone-1"},
		Allocatable:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1024"), corev1.ResourceMemory: resource.MustParse("1024Gi"), corev1.ResourcePods: resource.MustParse("1024")},
		VolumeLimits: map[string]int32{csiDriver: limit}}}
}

// "should launch multiple nodes if required due to volume limits": an
// existing node whose CSINode allows 10 volumes takes five of six pods
// with two claims each; the sixth goes to a new node (new NodeClaims have
// no limit in Karpenter: their CSINode does not exist yet).
func TestVolumeAttachLimitOnExistingNode(t *testing.T) {
	inv := inventory.Inventory{StorageClasses: []inventory.StorageClass{wffcClass("test-zone-1")}}
	for i := range 6 {
		a, b := fmt.Sprintf("my-claim-a-%d", i), fmt.Sprintf("my-claim-b-%d", i)
		inv.Pods = append(inv.Pods, volPod(fmt.Sprintf("p-%d", i), "100m", a, b))
		inv.Claims = append(inv.Claims, inventory.PersistentVolumeClaim{Namespace: "default", Name: a, StorageClass: "my-storage-class"},
			inventory.PersistentVolumeClaim{Namespace: "default", Name: b, StorageClass: "my-storage-class"})
	}
	in := Input{Pods: resolved(inv), ExistingNodes: []ExistingNode{attachNode(10)}, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}}
	res := solveChecked(t, in)
	if len(res.Placements) != 5 || len(res.NodeClaims) != 1 || len(res.NodeClaims[0].Pods) != 1 {
		t.Fatalf("%d placed on the existing node, %d new claims; want 5 and one claim with the sixth pod", len(res.Placements), len(res.NodeClaims))
	}
	// The limit counts the node's own pods' claims too.
	in.ExistingNodes[0].Pods = []inventory.Pod{in.Pods[0]}
	in.ExistingNodes[0].Pods[0].Phase = corev1.PodRunning
	in.Pods = in.Pods[1:]
	res = solveChecked(t, in)
	if len(res.Placements) != 4 {
		t.Fatalf("%d placed beside a pod holding two volumes, want 4", len(res.Placements))
	}
}

// "should launch a single node if all pods use the same PVC".
func TestVolumeAttachLimitCountsClaimsOnce(t *testing.T) {
	inv := inventory.Inventory{StorageClasses: []inventory.StorageClass{wffcClass("test-zone-1")},
		Claims: []inventory.PersistentVolumeClaim{{Namespace: "default", Name: "shared", StorageClass: "my-storage-class"}}}
	for i := range 100 {
		inv.Pods = append(inv.Pods, volPod(fmt.Sprintf("p-%02d", i), "100m", "shared"))
	}
	res := solveChecked(t, Input{Pods: resolved(inv), ExistingNodes: []ExistingNode{attachNode(1)}, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}})
	if len(res.Placements) != 100 || len(res.NodeClaims) != 0 {
		t.Fatalf("%d placed, %d claims; want all 100 on the existing node", len(res.Placements), len(res.NodeClaims))
	}
}

// Check judges volume zones and attach limits with code of its own.
func TestCheckRejectsVolumeViolations(t *testing.T) {
	pv, pvc := boundPV("claim-a", "test-zone-3")
	pods := resolved(inventory.Inventory{Pods: []inventory.Pod{volPod("a", "1", "claim-a")},
		PersistentVolumes: []inventory.PersistentVolume{pv}, Claims: []inventory.PersistentVolumeClaim{pvc}})
	in := Input{Pods: pods, NodePools: []NodePool{hugePool("default", fakeInstanceTypes(4))}}
	res := solveChecked(t, in)
	bad := res
	bad.NodeClaims = append([]NodeClaim(nil), res.NodeClaims...)
	bad.NodeClaims[0].Zone = "test-zone-1"
	bad.NodeClaims[0].Requirements = nil
	if errs := Check(in, bad); !anyContains(errs, "volume claim-a (claim claim-a) cannot be reached") {
		t.Errorf("a volume pod moved to test-zone-1: Check says %v", errs)
	}

	// Two pods with a volume each on a node that attaches one.
	var two []inventory.Pod
	for _, c := range []string{"c1", "c2"} {
		p := volPod(c, "100m", c)
		p.Volumes[0].Driver = csiDriver
		two = append(two, p)
	}
	in = Input{Pods: two, ExistingNodes: []ExistingNode{attachNode(1)}}
	res = Result{Placements: []Placement{{Pod: PodRef{"default", "c1"}, Node: "existing", Seq: 1}, {Pod: PodRef{"default", "c2"}, Node: "existing", Seq: 2}}}
	if errs := Check(in, res); !anyContains(errs, "over the node's limit of 1") {
		t.Errorf("two volumes on a node that attaches one: Check says %v", errs)
	}
}

func anyContains(errs []error, s string) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), s) {
			return true
		}
	}
	return false
}
