package inventory

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A snapshot written before claims and classes were recorded (a pod's
// claim volume without topology, a zonal PV naming the claim) loads with
// the volume's zone on the pod: older snapshots plan with volume topology
// too.
func TestParseSnapshotResolvesOlderVolumes(t *testing.T) {
	inv := sample()
	inv.Pods[0].Volumes = []Volume{{Name: "data", Kind: VolumePVC, ClaimName: "data-web-1"}}
	inv.PersistentVolumes = []PersistentVolume{{Name: "pv-1", ClaimNamespace: "default", ClaimName: "data-web-1", Zones: []string{"us-east-1b"}}}
	b, err := NewSnapshot(inv, time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Inventory.Pods[0].Volumes[0].Topology
	if len(got) != 1 || len(got[0].MatchExpressions) != 1 || got[0].MatchExpressions[0].Key != corev1.LabelTopologyZone || got[0].MatchExpressions[0].Values[0] != "us-east-1b" {
		t.Fatalf("topology %v, want zone In [us-east-1b]", got)
	}
}

// A claim bound to a volume takes the volume's zones even when its class
// would allow others; an unbound claim of a class takes the class's
// allowedTopologies and its provisioner's CSI name (in-tree EBS → the EBS
// CSI driver); a claim the inventory does not know keeps what the pod says.
func TestResolveVolumes(t *testing.T) {
	class := StorageClass{Name: "gp2", Provisioner: "kubernetes.io/aws-ebs", VolumeBindingMode: "WaitForFirstConsumer",
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: []string{"us-east-1a", "us-east-1c"}}}}}}
	preset := ZoneTerms([]string{"us-east-1c"})
	inv := Inventory{
		Pods: []Pod{{Namespace: "db", Name: "db-0", Volumes: []Volume{
			{Name: "bound", Kind: VolumePVC, ClaimName: "bound"},
			{Name: "unbound", Kind: VolumePVC, ClaimName: "unbound"},
			{Name: "unknown", Kind: VolumePVC, ClaimName: "unknown", Topology: preset},
			{Name: "scratch", Kind: VolumeEmptyDir},
		}}},
		PersistentVolumes: []PersistentVolume{{Name: "pv-bound", Zones: []string{"us-east-1b"}, Driver: EBSCSIDriver}},
		Claims: []PersistentVolumeClaim{{Namespace: "db", Name: "bound", StorageClass: "gp2", VolumeName: "pv-bound"},
			{Namespace: "db", Name: "unbound", StorageClass: "gp2"}},
		StorageClasses: []StorageClass{class},
	}
	inv.ResolveVolumes()
	vols := inv.Pods[0].Volumes
	if t0 := vols[0].Topology; len(t0) != 1 || t0[0].MatchExpressions[0].Values[0] != "us-east-1b" || vols[0].Driver != EBSCSIDriver {
		t.Errorf("bound claim: %+v, want the PV's zone us-east-1b and driver", vols[0])
	}
	if t1 := vols[1].Topology; len(t1) != 1 || len(t1[0].MatchExpressions[0].Values) != 2 || vols[1].Driver != EBSCSIDriver {
		t.Errorf("unbound claim: %+v, want the class's two zones and %s", vols[1], EBSCSIDriver)
	}
	if len(vols[2].Topology) != 1 || vols[2].Topology[0].MatchExpressions[0].Values[0] != "us-east-1c" {
		t.Errorf("unknown claim: %+v, want its own topology kept", vols[2])
	}
	if len(vols[3].Topology) != 0 || vols[3].Driver != "" || !inv.Pods[0].VolumesConstrain() {
		t.Errorf("emptyDir: %+v", vols[3])
	}
}
