package readiness

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func pool(name string, taints []corev1.Taint, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = name
	np.Spec.Template.Spec.Taints = taints
	np.Spec.Template.Spec.Requirements = reqs
	return np
}

func in(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func rl(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

// TestFromNodePools checks that the pool-dependent findings fire from the
// facts FromNodePools derives, and only when the pools cause them.
func TestFromNodePools(t *testing.T) {
	types := func(names ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return in(corev1.LabelInstanceTypeStable, names...)
	}
	dedicated := []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name   string
		pools  []*karpv1.NodePool
		mutate func(*inventory.Inventory)
		want   []string // finding IDs
	}{
		{"clean", []*karpv1.NodePool{pool("a", nil, types("m5.xlarge"))}, nil, nil},
		{"new taint not tolerated", []*karpv1.NodePool{pool("a", dedicated, types("m5.xlarge"))}, func(inv *inventory.Inventory) {
			inv.DaemonSets[0].Tolerations = nil
		}, []string{IDDaemonSetNoToleration}},
		{"zone the pools leave out", []*karpv1.NodePool{pool("a", nil, types("m5.xlarge"), in(corev1.LabelTopologyZone, "us-east-1b"))}, nil,
			[]string{IDZonalVolume}},
		{"zone covered by a second pool", []*karpv1.NodePool{
			pool("a", nil, types("m5.xlarge"), in(corev1.LabelTopologyZone, "us-east-1b")),
			pool("b", nil, types("m5.xlarge"), in(corev1.LabelTopologyZone, "us-east-1a")),
		}, nil, nil},
		{"pod larger than every allowed type", []*karpv1.NodePool{pool("a", nil, types("m5.large"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("3", "1Gi") // the current 4-CPU nodes hold it; m5.large does not
		}, []string{IDPodTooLarge}},
		{"daemonset overhead leaves no room", []*karpv1.NodePool{pool("a", nil, types("m5.xlarge"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("3500m", "1Gi")
			inv.DaemonSets[0].Requests = rl("500m", "100Mi")
		}, []string{IDPodTooLarge}},
		{"daemonset selecting other nodes costs nothing", []*karpv1.NodePool{pool("a", nil, types("m5.xlarge"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("3500m", "1Gi")
			inv.DaemonSets[0].Requests = rl("500m", "100Mi")
			inv.DaemonSets[0].NodeSelector = map[string]string{"gpu": "true"}
		}, nil},
		{"fits only a pool whose taint it does not tolerate", []*karpv1.NodePool{pool("a", nil, types("m5.large")), pool("b", dedicated, types("m5.xlarge"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("3", "1Gi")
			inv.DaemonSets[0].Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}, []string{IDPodTooLarge}},
		{"tolerates the pool it fits", []*karpv1.NodePool{pool("a", nil, types("m5.large")), pool("b", dedicated, types("m5.xlarge"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("3", "1Gi")
			inv.Pods[0].Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
			inv.DaemonSets[0].Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}, nil},
		{"fits the largest CPU and the largest memory but no one type", []*karpv1.NodePool{pool("a", nil, types("c5.4xlarge", "r5.2xlarge"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("12", "48Gi")
		}, []string{IDPodTooLarge}},
		{"fits one type", []*karpv1.NodePool{pool("a", nil, types("c5.4xlarge", "r5.2xlarge"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Requests = rl("7", "48Gi")
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := clean()
			inv.NodeGroups[0].Zones = []string{"us-east-1a", "us-east-1b"}
			inv.PersistentVolumes[0].Zones = []string{"us-east-1a"}
			if tc.mutate != nil {
				tc.mutate(inv)
			}
			r := Evaluate(inv, FromNodePools(inv, tc.pools, nil, catalog.Default()))
			var got []string
			for _, f := range r.Findings {
				got = append(got, f.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v (%+v)", got, tc.want, r.Findings)
			}
		})
	}
}

func TestFromNodePoolsWithoutPoolsIsTheDefault(t *testing.T) {
	o := FromNodePools(clean(), nil, nil, nil)
	if o.NodeTaints != nil || o.Zones != nil || o.MaxAllocatable != nil || o.Rooms != nil {
		t.Fatalf("got %+v, want zero options", o)
	}
}

// TestFromGenerate runs generate in memory, as discover and readiness do:
// a tainted node group becomes a tainted pool, and a DaemonSet that does not
// tolerate the taint is reported.
func TestFromGenerate(t *testing.T) {
	inv := clean()
	inv.NodeGroups[0].InstanceTypes = []string{"m5.xlarge"}
	inv.NodeGroups[0].Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	inv.DaemonSets[0].Tolerations = []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}
	res, err := generate.Generate(inv, generate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := FromNodePools(inv, res.NodePools, res.NodeClasses, nil)
	if len(o.NodeTaints) != 1 || o.NodeTaints[0].Key != "dedicated" || !slices.Equal(o.Zones, []string{"us-east-1a"}) || len(o.Rooms) != 1 || o.Rooms[0].InstanceType != "m5.xlarge" {
		t.Fatalf("options from generate: %+v", o)
	}
	r := Evaluate(inv, o)
	if len(r.Findings) != 1 || r.Findings[0].ID != IDDaemonSetNoToleration || r.Findings[0].Objects[0] != "DaemonSet kube-system/agent (dedicated:NoSchedule)" {
		t.Fatalf("findings %+v", r.Findings)
	}
}

// TestVolumeZoneAgainstReceivingPools: a pod's zonal volume must sit in a
// zone some NodePool that would take the pod covers — a pool it does not
// tolerate does not count — else a blocker names the pod, the volume, its
// zone and the pools; a StatefulSet whose volumes all sit in one zone is a
// warning.
func TestVolumeZoneAgainstReceivingPools(t *testing.T) {
	types := in(corev1.LabelInstanceTypeStable, "m5.xlarge")
	zone := func(z string) karpv1.NodeSelectorRequirementWithMinValues { return in(corev1.LabelTopologyZone, z) }
	dedicated := []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	const blocked = "Pod app/web-1 (volume data: PersistentVolume pv in us-east-1a; NodePools receiving it: a (us-east-1b))"
	for _, tc := range []struct {
		name   string
		pools  []*karpv1.NodePool
		mutate func(*inventory.Inventory)
		want   map[string][]string // finding ID -> objects
	}{
		{"the zone's pool is tainted against the pod", []*karpv1.NodePool{pool("a", nil, types, zone("us-east-1b")), pool("b", dedicated, types, zone("us-east-1a"))}, nil,
			map[string][]string{IDVolumeZoneNoPool: {blocked}}},
		{"the pod tolerates the zone's pool", []*karpv1.NodePool{pool("a", nil, types, zone("us-east-1b")), pool("b", dedicated, types, zone("us-east-1a"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}, nil},
		{"the overlay narrows the zones", []*karpv1.NodePool{pool("a", nil, types, zone("us-east-1b"))}, nil,
			map[string][]string{IDVolumeZoneNoPool: {blocked}, IDZonalVolume: {"PersistentVolume pv (us-east-1a, claim app/d)"}}},
		{"a pool with no zone requirement", []*karpv1.NodePool{pool("a", nil, types)}, nil, nil},
		{"no pool takes the pod", []*karpv1.NodePool{pool("b", dedicated, types, zone("us-east-1a"))}, nil,
			map[string][]string{IDVolumeZoneNoPool: {"Pod app/web-1 (volume data: PersistentVolume pv in us-east-1a; NodePools receiving it: none: it tolerates no NodePool's taints or accepts no NodePool's labels)"}}},
		{"a StatefulSet in one zone", []*karpv1.NodePool{pool("a", nil, types, zone("us-east-1a"))}, func(inv *inventory.Inventory) {
			inv.Pods[0].OwnerKind, inv.Pods[0].OwnerName = inventory.OwnerStatefulSet, "db"
			p := inv.Pods[0]
			p.Name, p.Volumes = "web-2", []inventory.Volume{{Name: "data", Kind: inventory.VolumePVC, ClaimName: "e"}}
			inv.Pods = append(inv.Pods, p)
			inv.PersistentVolumes = append(inv.PersistentVolumes, inventory.PersistentVolume{Name: "pv2", ClaimNamespace: "app", ClaimName: "e", Zones: []string{"us-east-1a"}})
		}, map[string][]string{IDStatefulSetOneZone: {"StatefulSet app/db (2 volumes in us-east-1a)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := clean()
			inv.NodeGroups[0].Zones = []string{"us-east-1a", "us-east-1b"}
			inv.PersistentVolumes[0].ClaimNamespace, inv.PersistentVolumes[0].ClaimName = "app", "d"
			if tc.mutate != nil {
				tc.mutate(inv)
			}
			got := map[string][]string{}
			for _, f := range Evaluate(inv, FromNodePools(inv, tc.pools, nil, catalog.Default())).Findings {
				if f.ID == IDVolumeZoneNoPool && f.Severity != Blocker || f.ID == IDStatefulSetOneZone && f.Severity != Warning {
					t.Errorf("%s is a %s", f.ID, f.Severity)
				}
				got[f.ID] = f.Objects
			}
			if len(got) != len(tc.want) {
				t.Errorf("findings %v, want %v", got, tc.want)
			}
			for id, objs := range tc.want {
				if !slices.Equal(got[id], objs) {
					t.Errorf("%s names %q, want %q", id, got[id], objs)
				}
			}
		})
	}
}
