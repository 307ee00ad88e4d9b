package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// dataNS holds the stateful scenario's databases.
const dataNS = "data"

// ebsDriver is the CSI driver of the scenario's volumes (EBS's, as on EKS).
const ebsDriver = "ebs.csi.aws.com"

// dedicated is the taint of the database groups, which their pods tolerate.
var dedicated = corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// statefulGroups: Cluster Autoscaler's balance-similar pattern, one
// single-zone group per zone for the databases (tainted, labelled), and a
// system group of three nodes the controller is kept on (two of them).
var statefulGroups = []legacyGroup{
	{name: "ng-system", asg: "eks-ng-system-asg", managed: true, min: 2, max: 4, nodes: 3},
	{name: "db-a", asg: "eks-db-a-asg", managed: true, min: 1, max: 4, nodes: 2, zone: "us-east-1a",
		labels: map[string]string{"workload": "db"}, taints: []corev1.Taint{dedicated}},
	{name: "db-b", asg: "eks-db-b-asg", managed: true, min: 1, max: 4, nodes: 2, zone: "us-east-1b",
		labels: map[string]string{"workload": "db"}, taints: []corev1.Taint{dedicated}},
}

// statefulConfig: the dev profile's 30s consolidateAfter lets Karpenter
// settle within the test; waves of two nodes, two drained at once.
const statefulConfig = `apiVersion: karpenter-migrate.io/v1alpha1
kind: MigrationConfig
environment: e2e
cluster: e2e
region: us-east-1
rollout:
  waveSize: "2"
  concurrency: 2
  preProvision: true
gates:
  nodeReadyTimeout: 3m
  podPendingTimeout: 2m
  pdbWaitTimeout: 3m
`

// statefulSet is a database: replicas pods of cpu and memory on the
// database groups, each with a claim data-<name>-<i> whose static volume
// sits in zones[i%len(zones)], pre-bound both ways.
type statefulSet struct {
	name        string
	replicas    int32
	cpu, memory string
	zones       []string
	pdb         policyv1.PodDisruptionBudgetSpec
	min         int // healthy pods the budget requires
}

var statefulSets = []statefulSet{
	{name: "pg", replicas: 4, cpu: "1500m", memory: "3Gi", zones: zones, min: 3,
		pdb: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
	{name: "redis", replicas: 2, cpu: "1", memory: "2Gi", zones: zones, min: 1,
		pdb: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}},
}

// claimState is what a claim is bound to.
type claimState struct {
	UID    types.UID
	Volume string
	PVUID  types.UID
	Zone   string
}

// TestRolloutStateful migrates StatefulSets whose volumes are pinned to
// zones, across single-zone groups (generated into one NodePool for both
// zones, --strategy single), on the real control plane with the
// real Karpenter (kwok provider, given the engine's catalogue and prices)
// installed by step 07 from the official chart: a CSIDriver, a
// WaitForFirstConsumer StorageClass with allowedTopologies, static
// PersistentVolumes with zone nodeAffinity pre-bound to the claims, the
// attach/detach controller of kube-controller-manager and a stand-in for
// the CSI external-attacher (testenv.Attacher). It asserts every pod ends
// in its volume's zone, every claim keeps its volume (same UIDs), no budget
// below its minimum, at most 1.05 evictions per pod to move, every
// placeholder in a zone its wave needs, the controller's replicas only on
// the kept nodes, and the plan's forecast after consolidation within 5 %
// of the fleet Karpenter settles into; it logs the plan against what
// happened, wave by wave.
func TestRolloutStateful(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the end-to-end rollout takes minutes")
	}
	began := time.Now()
	kwokTypes, err := testenv.KwokTypes(catalog.Default(), zones...)
	if err != nil {
		t.Fatal(err)
	}
	typesFile := filepath.Join(t.TempDir(), "catalogue.json")
	if err := testenv.WriteInstanceTypes(typesFile, kwokTypes); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, statefulGroups, 0, func(o *testenv.Options) { o.InstanceTypesFile = typesFile })
	// One NodePool for both zones' database groups: the volumes, not the
	// pool, say which zone each pod needs.
	w.base, w.config, w.generate = "dev", statefulConfig, []string{"--strategy", "single"}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	attacher := &testenv.Attacher{Client: w.env.Client, Driver: ebsDriver}
	actx, stopAttacher := context.WithCancel(ctx)
	attached := make(chan struct{})
	t.Cleanup(func() { stopAttacher(); <-attached })
	go func() { defer close(attached); attacher.Run(actx, t.Logf) }()
	zoneOf := watchNodeZones(ctx, t, w)

	seedStateful(ctx, t, w)
	claimsBefore := claims(ctx, t, w)
	waitAttached(ctx, t, w)
	tree, cfg := w.prepare(ctx)
	out := w.mustRun(ctx, "plan", "--env", "e2e", "--cluster", clusterName, "--dir", tree, "--config", cfg, "--identity", "pod-identity",
		"--karpenter-chart", testenv.ControlPlaneChart(t), "-f", "plan.yaml", "-o", "json")
	var planned plan.Plan
	if err := json.Unmarshal([]byte(out), &planned); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	for _, f := range planned.Findings {
		if f.Severity == "blocker" {
			t.Errorf("unexpected blocker: %+v", f)
		}
	}
	checkControllerPlan(t, &planned, plan.ControllerFromValues, "ng-system")
	needs := zonesWavesNeed(ctx, t, w, &planned, claimsBefore)

	budgets := []budget{{name: "karpenter", selector: controllerSelector, min: 1, appears: true}}
	for _, s := range statefulSets {
		budgets = append(budgets, budget{name: s.name, selector: labels.SelectorFromSet(labelsOf(s.name)), min: s.min})
	}
	watch, err := watchPods(ctx, w.env.Client, "", budgets)
	if err != nil {
		t.Fatal(err)
	}
	toMove := podsToMove(ctx, t, w, dataNS)
	applied := time.Now()
	stdout, stderr, code := w.run(ctx, "apply", "--plan", "plan.yaml", "--dir", tree, "--yes", "--poll-interval", "500ms")
	t.Logf("apply (exit %d) took %s:\n%s%s", code, time.Since(applied).Round(time.Second), stdout, stderr)
	if code != 0 {
		t.FailNow()
	}
	// The moves are apply's: Karpenter's consolidation afterwards is not.
	moved := watch.deletions(dataNS)
	if err := w.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	settled, fleet := waitSettled(ctx, t, w)
	lowest, pending, err := watch.stop()
	if err != nil {
		t.Fatal(err)
	}
	if n := watch.violationCount(); n != 0 {
		t.Errorf("%d PDB violations: %v", n, watch.violationLog())
	}
	t.Logf("lowest healthy per PDB %v; longest wait for a node %s", lowest, pending.Round(time.Millisecond))

	// Every pod in its volume's zone; every claim bound to the volume it had.
	claimsAfter := claims(ctx, t, w)
	if !maps.Equal(claimsBefore, claimsAfter) {
		t.Errorf("claims before apply %v, after %v; want each bound to the same volume (same UIDs)", claimsBefore, claimsAfter)
	}
	checkPodZones(ctx, t, w, claimsAfter)

	t.Logf("apply: %d evictions for %d pods to move: %s; after apply: %v", len(moved), toMove, strings.Join(moved, ", "), watch.deletions(dataNS)[len(moved):])
	if toMove == 0 || float64(len(moved)) > 1.05*float64(toMove) {
		t.Errorf("%d evictions for %d pods to move; want at least one pod and at most 1.05 evictions per pod", len(moved), toMove)
	}

	placed := watch.placements()
	for _, pl := range placed {
		if pl.namespace == dataNS || strings.HasPrefix(pl.name, "km-placeholder-") {
			t.Logf("%s %s/%s (%s) on %s (%s)", pl.at.Format("15:04:05.000"), pl.namespace, pl.name, pl.uid, pl.node, zoneOf(pl.node))
		}
	}
	checkPlaceholders(t, &planned, needs, placed, zoneOf)
	// The kept nodes are labelled and the chart's values require the
	// label (#31 item 5): no replica on the system group's third node,
	// which a wave drains.
	for _, v := range controllerOffKept(ctx, t, w, placed) {
		t.Error(v)
	}

	// The forecast against the fleet Karpenter settled into.
	forecast := planned.SteadyState
	if forecast == nil {
		t.Fatal("the plan has no steady state")
	}
	f := forecast.AfterConsolidation
	t.Logf("forecast after consolidation: %d nodes, $%.4f/h %v; Karpenter settled (%s after apply): %d nodes, $%.4f/h %v",
		f.Nodes, f.PricePerHour, f.Types, settled.Round(time.Second), fleet.nodes, fleet.price, fleet.types)
	if math.Abs(float64(fleet.nodes-f.Nodes)) > 0.05*float64(fleet.nodes) || math.Abs(fleet.price-f.PricePerHour) > 0.05*fleet.price {
		t.Errorf("forecast %d nodes $%.4f/h, Karpenter runs %d nodes $%.4f/h; want within 5 %%", f.Nodes, f.PricePerHour, fleet.nodes, fleet.price)
	}
	logWaves(t, &planned, moved, placed, zoneOf)
	t.Logf("TestRolloutStateful took %s", time.Since(began).Round(time.Second))
}

// seedStateful creates the scenario's cluster: aws-auth, Cluster
// Autoscaler (balancing similar groups), a DaemonSet, the CSIDriver, the
// StorageClass, the volumes and claims, the StatefulSets and their budgets,
// and waits until every pod runs and every budget is observed.
func seedStateful(ctx context.Context, t testing.TB, w *world) {
	t.Helper()
	c := w.env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dataNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitServiceAccount(ctx, w, dataNS); err != nil {
		t.Fatal(err)
	}
	createAWSAuth(ctx, t, w)
	ca := clusterAutoscaler("--cloud-provider=aws", "--balance-similar-node-groups",
		"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/"+clusterName)
	ca.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("600Mi")
	if _, err := c.AppsV1().Deployments(ca.Namespace).Create(ctx, ca, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createAgent(ctx, t, w, dataNS)
	if _, err := c.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: ebsDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: ebsDriver,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer), ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain),
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: zones}}}}}
	if _, err := c.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range statefulSets {
		for i := range s.replicas {
			claim, volume, zone := fmt.Sprintf("data-%s-%d", s.name, i), fmt.Sprintf("pv-%s-%d", s.name, i), s.zones[int(i)%len(s.zones)]
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume}, Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class.Name,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: ebsDriver, VolumeHandle: "vol-" + volume, FSType: "ext4"}},
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: dataNS, Name: claim},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}},
			}}
			if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: dataNS, Name: claim, Labels: labelsOf(s.name)},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: pv.Spec.AccessModes, StorageClassName: ptr.To(class.Name), VolumeName: volume,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
			if _, err := c.CoreV1().PersistentVolumeClaims(dataNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		spec := podSpec(s.cpu)
		spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(s.memory)
		spec.NodeSelector = map[string]string{"workload": "db"}
		spec.Tolerations = []corev1.Toleration{{Key: dedicated.Key, Operator: corev1.TolerationOpEqual, Value: dedicated.Value, Effect: dedicated.Effect}}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: dataNS, Name: s.name, Labels: labelsOf(s.name)},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(s.replicas), ServiceName: s.name, PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labelsOf(s.name)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsOf(s.name)}, Spec: spec},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labelsOf(s.name)},
					Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(class.Name),
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}},
			},
		}
		if _, err := c.AppsV1().StatefulSets(dataNS).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: dataNS, Name: s.name}, Spec: s.pdb}
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: labelsOf(s.name)}
		if _, err := c.PolicyV1().PodDisruptionBudgets(dataNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range statefulSets {
		if _, err := w.env.WaitForPodsRunning(ctx, dataNS, "app="+s.name, int(s.replicas)); err != nil {
			t.Fatal(err)
		}
	}
	waitCAAndBudgets(ctx, t, w, dataNS, true)
}

// claims is every claim of dataNS with its volume, the volume's UID and zone.
func claims(ctx context.Context, t testing.TB, w *world) map[string]claimState {
	t.Helper()
	list, err := w.env.Client.CoreV1().PersistentVolumeClaims(dataNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]claimState{}
	for _, c := range list.Items {
		s := claimState{UID: c.UID, Volume: c.Spec.VolumeName}
		if c.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim %s is %s, want Bound to %s", c.Name, c.Status.Phase, c.Spec.VolumeName)
		}
		pv, err := w.env.Client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.PVUID = pv.UID
		if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
			for _, term := range a.Required.NodeSelectorTerms {
				for _, r := range term.MatchExpressions {
					if r.Key == corev1.LabelTopologyZone && len(r.Values) == 1 {
						s.Zone = r.Values[0]
					}
				}
			}
		}
		out[c.Name] = s
	}
	return out
}

// claimOf is the claim of a pod of the scenario's StatefulSets.
func claimOf(pod string) string { return "data-" + pod }

// waitAttached waits until every volume is attached to the node of its
// pod: the attach/detach controller created the VolumeAttachments and the
// stand-in attacher marked them.
func waitAttached(ctx context.Context, t testing.TB, w *world) {
	t.Helper()
	err := w.env.WaitFor(ctx, "every volume attached to its pod's node", func(ctx context.Context) (bool, error) {
		pods, err := w.env.Client.CoreV1().Pods(dataNS).List(ctx, metav1.ListOptions{LabelSelector: "app in (pg,redis)"})
		if err != nil {
			return false, err
		}
		vas, err := w.env.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		attached := map[string]bool{}
		for _, va := range vas.Items {
			if va.Status.Attached && va.Spec.Source.PersistentVolumeName != nil {
				attached[*va.Spec.Source.PersistentVolumeName+" on "+va.Spec.NodeName] = true
			}
		}
		for _, p := range pods.Items {
			pvc, err := w.env.Client.CoreV1().PersistentVolumeClaims(dataNS).Get(ctx, claimOf(p.Name), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !attached[pvc.Spec.VolumeName+" on "+p.Spec.NodeName] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// watchNodeZones records the zone of every node that ever exists (a node
// Karpenter consolidated away keeps its entry), for placements read later.
func watchNodeZones(ctx context.Context, t testing.TB, w *world) func(node string) string {
	t.Helper()
	var mu sync.Mutex
	zoneOf := map[string]string{}
	record := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			mu.Lock()
			zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
			mu.Unlock()
		}
	}
	factory := informers.NewSharedInformerFactory(w.env.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	return func(node string) string {
		mu.Lock()
		defer mu.Unlock()
		return zoneOf[node]
	}
}

// zonesWavesNeed is, per wave, the zones of the volumes of the pods on its
// nodes (empty for a wave whose pods have no zonal volume).
func zonesWavesNeed(ctx context.Context, t testing.TB, w *world, p *plan.Plan, cl map[string]claimState) map[int][]string {
	t.Helper()
	pods, err := w.env.Client.CoreV1().Pods(dataNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]string{}
	for _, wave := range p.Waves {
		for _, n := range wave.Nodes {
			for _, pod := range pods.Items {
				if c, ok := cl[claimOf(pod.Name)]; ok && pod.Spec.NodeName == n.Name && !slices.Contains(out[wave.Index], c.Zone) {
					out[wave.Index] = append(out[wave.Index], c.Zone)
				}
			}
		}
		sort.Strings(out[wave.Index])
	}
	return out
}

// checkPodZones: every pod of a claim runs in its volume's zone.
func checkPodZones(ctx context.Context, t testing.TB, w *world, cl map[string]claimState) {
	t.Helper()
	pods, err := w.env.Client.CoreV1().Pods(dataNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range pods.Items {
		c, ok := cl[claimOf(p.Name)]
		if !ok {
			continue
		}
		seen++
		n, err := w.env.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("pod %s on %q: %v", p.Name, p.Spec.NodeName, err)
			continue
		}
		if z := n.Labels[corev1.LabelTopologyZone]; z != c.Zone || n.Labels["karpenter.sh/nodepool"] == "" || !healthy(&p) {
			t.Errorf("pod %s on %s (zone %s, nodepool %q, healthy %t); want it healthy on a Karpenter node in %s, its volume %s's zone",
				p.Name, n.Name, z, n.Labels["karpenter.sh/nodepool"], healthy(&p), c.Zone, c.Volume)
		}
	}
	if seen != len(cl) {
		t.Errorf("%d pods with a claim, want %d", seen, len(cl))
	}
}

// checkPlaceholders: every placeholder pod ran in a zone its wave needs,
// and in its planned zone when the plan gives one; a wave whose pods have
// zonal volumes pins its placeholders to those zones.
func checkPlaceholders(t testing.TB, p *plan.Plan, needs map[int][]string, placed []placement, zoneOf func(string) string) {
	t.Helper()
	seen := 0
	for _, pl := range placed {
		var wave, i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(pl.name, "km-placeholder-"+p.Environment+"-"), "w%d-%d", &wave, &i); err != nil || !strings.HasPrefix(pl.name, "km-placeholder-") {
			continue
		}
		seen++
		z := zoneOf(pl.node)
		if need := needs[wave]; len(need) > 0 && !slices.Contains(need, z) {
			t.Errorf("placeholder %s ran on %s in %s; its wave %d needs %v", pl.name, pl.node, z, wave, need)
		}
		if wave >= 1 && wave <= len(p.Waves) && i < len(p.Waves[wave-1].PreProvision) {
			if want := p.Waves[wave-1].PreProvision[i].Zone; want != "" && z != want {
				t.Errorf("placeholder %s ran in %s, planned for %s", pl.name, z, want)
			}
		}
	}
	for _, wave := range p.Waves {
		for _, ph := range wave.PreProvision {
			if len(needs[wave.Index]) > 0 && !slices.Contains(needs[wave.Index], ph.Zone) {
				t.Errorf("wave %d plans a placeholder in %q; its pods' volumes are in %v", wave.Index, ph.Zone, needs[wave.Index])
			}
		}
	}
	if seen == 0 {
		t.Errorf("no placeholder pod ran; the plan pre-provisions %v", p.Waves)
	}
}

// controllerOffKept names every replica of the controller placed on a
// node the kept group does not still have; it fails t unless two replicas
// ran and two nodes are kept.
func controllerOffKept(ctx context.Context, t testing.TB, w *world, placed []placement) []string {
	t.Helper()
	nodes, err := w.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "eks.amazonaws.com/nodegroup=ng-system"})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, n := range nodes.Items {
		kept[n.Name] = true
	}
	replicas := 0
	var off []string
	for _, pl := range placed {
		if pl.namespace != controllerNS || !controllerSelector.Matches(labels.Set(pl.labels)) {
			continue
		}
		replicas++
		if !kept[pl.node] {
			off = append(off, fmt.Sprintf("controller replica %s ran on %s, not a kept node %v", pl.name, pl.node, slices.Sorted(maps.Keys(kept))))
		}
	}
	if replicas < 2 || len(kept) != 2 {
		t.Errorf("%d controller replicas placed, %d kept nodes; want 2 on 2", replicas, len(kept))
	}
	return off
}

// settledFleet is what Karpenter runs once settled, with the kept nodes.
type settledFleet struct {
	nodes int
	price float64
	types []string
}

// waitSettled waits until the nodes stop changing for settleQuiet (longer
// than the dev profile's consolidateAfter and Karpenter's validation) with
// none being disrupted, and returns how long after apply that was and the
// fleet, priced as the plan prices it (the engine's catalogue).
func waitSettled(ctx context.Context, t testing.TB, w *world) (time.Duration, settledFleet) {
	t.Helper()
	const settleQuiet = 60 * time.Second
	start, last, since := time.Now(), "", time.Now()
	var fleet settledFleet
	for {
		nodes, err := w.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fleet = settledFleet{}
		var names []string
		disrupting := false
		count := map[string]int{}
		for _, n := range nodes.Items {
			capacity := n.Labels["karpenter.sh/capacity-type"]
			if n.Labels["karpenter.sh/nodepool"] == "" {
				capacity = strings.ReplaceAll(strings.ToLower(n.Labels["eks.amazonaws.com/capacityType"]), "_", "-")
			}
			disrupting = disrupting || n.DeletionTimestamp != nil || slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == "karpenter.sh/disrupted" })
			it, zone := n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone]
			price, ok := catalog.Default().Price(it, capacity, zone)
			if !ok {
				t.Errorf("node %s: no price for %s %s in %s", n.Name, it, capacity, zone)
			}
			fleet.nodes++
			fleet.price += price
			count[it+" "+capacity]++
			names = append(names, n.Name)
		}
		for _, k := range slices.Sorted(maps.Keys(count)) {
			fleet.types = append(fleet.types, fmt.Sprintf("%d× %s", count[k], k))
		}
		fleet.price = math.Round(fleet.price*1e4) / 1e4
		sort.Strings(names)
		if now := strings.Join(names, ","); now != last || disrupting {
			last, since = now, time.Now()
		}
		if time.Since(since) >= settleQuiet {
			return time.Since(start) - settleQuiet, fleet
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Karpenter did not settle: %v; last fleet %v", ctx.Err(), fleet)
		case <-time.After(2 * time.Second):
		}
	}
}

// logWaves logs, per wave, the plan (pods, predicted nodes and
// placeholders by zone) against what happened (pods evicted from its
// nodes, and the nodes by zone their replacements first ran on).
func logWaves(t testing.TB, p *plan.Plan, moved []string, placed []placement, zoneOf func(string) string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%-5s | %-5s %-28s %-22s | %-5s %s\n", "wave", "pods", "planned nodes by zone", "placeholders by zone", "moved", "nodes they landed on, by zone")
	for _, wave := range p.Waves {
		onWave := map[string]bool{}
		for _, n := range wave.Nodes {
			onWave[n.Name] = true
		}
		predicted, holders := map[string][]string{}, map[string]int{}
		for _, n := range wave.PredictedNodes {
			predicted[n.Zone] = append(predicted[n.Zone], n.InstanceType+" "+n.CapacityType)
		}
		for _, ph := range wave.PreProvision {
			holders[cmpZone(ph.Zone)]++
		}
		landed, count := map[string]map[string]bool{}, 0
		for _, m := range moved {
			name, node, _ := strings.Cut(m, " on ")
			if !onWave[node] {
				continue
			}
			count++
			// The pod's first placement after the one on the wave's node.
			from := slices.IndexFunc(placed, func(pl placement) bool { return pl.name == name && pl.node == node })
			for _, pl := range placed[from+1:] {
				if pl.name == name && pl.namespace == dataNS {
					z := zoneOf(pl.node)
					if landed[z] == nil {
						landed[z] = map[string]bool{}
					}
					landed[z][pl.node] = true
					break
				}
			}
		}
		var plannedCol, holdersCol, landedCol []string
		for _, z := range slices.Sorted(maps.Keys(predicted)) {
			plannedCol = append(plannedCol, fmt.Sprintf("%s: %d (%s)", cmpZone(z), len(predicted[z]), strings.Join(predicted[z], ", ")))
		}
		for _, z := range slices.Sorted(maps.Keys(holders)) {
			holdersCol = append(holdersCol, fmt.Sprintf("%s: %d", z, holders[z]))
		}
		for _, z := range slices.Sorted(maps.Keys(landed)) {
			landedCol = append(landedCol, fmt.Sprintf("%s: %d", z, len(landed[z])))
		}
		fmt.Fprintf(&b, "%-5d | %-5d %-28s %-22s | %-5d %s\n", wave.Index, wave.Pods, strings.Join(plannedCol, "; "), strings.Join(holdersCol, "; "), count, strings.Join(landedCol, "; "))
	}
	t.Logf("plan against what happened, per wave:\n%s", b.String())
}

// cmpZone names an empty zone.
func cmpZone(z string) string {
	if z == "" {
		return "any zone"
	}
	return z
}
