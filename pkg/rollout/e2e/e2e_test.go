package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

const appNS = "shop"

const existingMapRoles = `- rolearn: arn:aws:iam::111122223333:role/eks-node-group-role
  username: system:node:{{EC2PrivateDNSName}}
  groups:
  - system:bootstrappers
  - system:nodes
`

// kwokOverlay is the test-only overlay over the generated staging one (or
// the world's base);
// prepare points its NodePools at the kwok provider's node class
// (testenv.PointNodePoolsAtKwok), so the real Karpenter (kwok provider)
// provisions exactly what generate wrote.
const kwokOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../staging
`

// migrationConfig: waves of two nodes, two drained at once, short gates.
const migrationConfig = `apiVersion: karpenter-migrate.io/v1alpha1
kind: MigrationConfig
environment: e2e
cluster: e2e
region: us-east-1
rollout:
  waveSize: "2"
  concurrency: 2
  preProvision: true
gates:
  nodeReadyTimeout: 4m
  podPendingTimeout: 3m
  pdbWaitTimeout: 4m
`

func labelsOf(app string) map[string]string { return map[string]string{"app": app} }

func podSpec(cpu string) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To(int64(1)),
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}},
	}
}

func deployment(ns, name string, replicas int32, cpu string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labelsOf(name)},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labelsOf(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsOf(name)}, Spec: podSpec(cpu)}},
	}
}

// seedWorkloads creates the scenario's workloads: Cluster Autoscaler, a
// Deployment behind a PDB maxUnavailable 1, a single replica behind
// minAvailable 1, a StatefulSet and a DaemonSet.
func seedWorkloads(ctx context.Context, t testing.TB, w *world) {
	t.Helper()
	c := w.env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitServiceAccount(ctx, w, appNS); err != nil {
		t.Fatal(err)
	}
	createAWSAuth(ctx, t, w)
	for _, d := range []*appsv1.Deployment{clusterAutoscaler(), deployment(appNS, "web", 4, "500m"), deployment(appNS, "solo", 1, "250m")} {
		if _, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "db", Labels: labelsOf("db")},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(2)), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labelsOf("db")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsOf("db")}, Spec: podSpec("250m")}},
	}
	if _, err := c.AppsV1().StatefulSets(appNS).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createAgent(ctx, t, w, appNS)
	for _, pdb := range []*policyv1.PodDisruptionBudget{
		{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labelsOf("web")}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "solo"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labelsOf("solo")}}},
	} {
		if _, err := c.PolicyV1().PodDisruptionBudgets(appNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for sel, n := range map[string]int{"app=web": 4, "app=solo": 1, "app=db": 2} {
		if _, err := w.env.WaitForPodsRunning(ctx, appNS, sel, n); err != nil {
			t.Fatal(err)
		}
	}
	waitCAAndBudgets(ctx, t, w, appNS, false)
}

// waitCAAndBudgets waits for Cluster Autoscaler's pod and for ns's PDBs to
// be observed (and, with healthy, satisfied): discovery reads them.
func waitCAAndBudgets(ctx context.Context, t testing.TB, w *world, ns string, healthy bool) {
	t.Helper()
	if _, err := w.env.WaitForPodsRunning(ctx, "kube-system", "app=cluster-autoscaler", 1); err != nil {
		t.Fatal(err)
	}
	err := w.env.WaitFor(ctx, "PDB status", func(ctx context.Context) (bool, error) {
		list, err := w.env.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.ExpectedPods == 0 || healthy && p.Status.CurrentHealthy < p.Status.DesiredHealthy {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// createAWSAuth writes aws-auth as EKS keeps it: the node groups' role
// mapped. The node access step must keep this entry and back the ConfigMap
// up first.
func createAWSAuth(ctx context.Context, t testing.TB, w *world) {
	t.Helper()
	awsAuth := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: awsauth.Namespace, Name: awsauth.Name}, Data: map[string]string{
		"mapRoles": existingMapRoles,
	}}
	if _, err := w.env.Client.CoreV1().ConfigMaps(awsauth.Namespace).Create(ctx, awsAuth, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// clusterAutoscaler is Cluster Autoscaler's Deployment, run with args.
func clusterAutoscaler(args ...string) *appsv1.Deployment {
	ca := deployment("kube-system", "cluster-autoscaler", 1, "100m")
	ca.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.0"
	ca.Spec.Template.Spec.Containers[0].Args = args
	return ca
}

func waitServiceAccount(ctx context.Context, w *world, ns string) error {
	return w.env.WaitFor(ctx, "default ServiceAccount in "+ns, func(ctx context.Context) (bool, error) {
		_, err := w.env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// prepare writes the generated tree with the kwok overlay, and the config.
func (w *world) prepare(ctx context.Context) (tree, cfg string) {
	w.t.Helper()
	tree = filepath.Join(w.dir, "karpenter")
	base := cmp.Or(w.base, "staging")
	out, errOut, code := w.run(ctx, append([]string{"generate", "--cluster", clusterName, "--out", tree, "--envs", base}, w.generate...)...)
	w.t.Logf("generate (exit %d):\n%s%s", code, out, errOut)
	overlay := filepath.Join(tree, "overlays", "e2e")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(strings.Replace(kwokOverlay, "../staging", "../"+base, 1)), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := testenv.PointNodePoolsAtKwok(overlay); err != nil {
		w.t.Fatal(err)
	}
	cfg = filepath.Join(w.dir, "e2e.yaml")
	if err := os.WriteFile(cfg, []byte(cmp.Or(w.config, migrationConfig)), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return tree, cfg
}

var scenarioGroups = []legacyGroup{
	{name: "ng-managed", asg: "eks-ng-managed-asg", managed: true, min: 1, max: 4},
	{name: "ng-self", asg: "ng-self", min: 1, max: 5, suspended: []string{"AZRebalance"}},
}

// TestRolloutEndToEnd: on a cluster without Karpenter, plan live with the
// local test chart (--karpenter-chart), apply — step 07 installs the
// controller with Helm from the values generate wrote (pinned to the
// managed group) — killed with SIGKILL in a drain, a concurrent apply
// refused by the Lease, the resumed apply completing with every workload
// pod on Karpenter nodes, the controller's Helm release deployed and its
// pods running on their kept group (at 2, reserved, without Cluster
// Autoscaler tags) and no PDB ever below its minimum, then a rollback that
// restores the recorded sizes, processes, replicas, tags and taints and
// uninstalls the release.
func TestRolloutEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the end-to-end rollout takes minutes")
	}
	w := newWorld(t, scenarioGroups, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	seedWorkloads(ctx, t, w)
	before := w.asgs()
	tree, cfg := w.prepare(ctx)
	rowsBefore := groupRows(ctx, t, w)

	// Plan from a live discovery, with the IAM steps and step 07 from the
	// local test chart.
	out := w.mustRun(ctx, "plan", "--env", "e2e", "--cluster", clusterName, "--dir", tree, "--config", cfg, "--identity", "pod-identity",
		"--karpenter-chart", testenv.ControlPlaneChart(t), "-f", "plan.yaml", "-o", "json")
	var planned plan.Plan
	if err := json.Unmarshal([]byte(out), &planned); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	checkPlan(t, &planned)
	checkControllerPlan(t, &planned, plan.ControllerFromValues, "ng-managed")
	if k := planned.Karpenter; k == nil || k.Namespace != controllerNS || k.Release != "karpenter" || k.Chart != testenv.ControlPlaneChart(t) {
		t.Fatalf("plan's Karpenter release %+v, want karpenter in %s from the test chart", k, controllerNS)
	}
	helmc := &helm.Client{REST: w.env.Config}
	if rel, err := helmc.Release(ctx, controllerNS, "karpenter"); err != nil || rel != nil {
		t.Fatalf("a Karpenter release before apply: %+v %v", rel, err)
	}

	budgets := []budget{
		{name: "web", selector: labels.SelectorFromSet(labelsOf("web")), min: 3},
		{name: "solo", selector: labels.SelectorFromSet(labelsOf("solo")), min: 1},
		// Installed by step 07: counted once it has its first replica.
		{name: "karpenter", selector: controllerSelector, min: 1, appears: true},
	}
	watch, err := watchPods(ctx, w.env.Client, "", budgets)
	if err != nil {
		t.Fatal(err)
	}

	toMove := podsToMove(ctx, t, w, appNS)

	// Apply, killed (SIGKILL) as soon as the first pod is evicted.
	apply := []string{"apply", "--plan", "plan.yaml", "--dir", tree, "--yes", "--lease-duration", "8s", "--poll-interval", "500ms", "--ack-blockers"}
	first := w.start(ctx, ": evicted ", apply...)
	select {
	case <-first.seen:
		if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-first.done
	case err := <-first.done:
		t.Fatalf("apply ended (%v) before evicting anything:\n%s", err, first.output())
	}
	j, err := rollout.Status(ctx, w.env.Client, "karpenter-migrate", "e2e")
	if err != nil || j == nil {
		t.Fatalf("journal after SIGKILL: %v, %v", j, err)
	}
	t.Logf("killed at %s wave %d phase %s (state %s)", j.Current.Step, j.Current.Wave, j.Current.Phase, j.State)
	if j.Current.Step != "10_drain_waves" || j.State != rollout.StateRunning {
		t.Errorf("journal after SIGKILL: step %s state %s, want 10_drain_waves running", j.Current.Step, j.State)
	}

	// The dead run's Lease still holds: a second apply is refused.
	_, errOut, code := w.run(ctx, apply...)
	if code == 0 || !strings.Contains(errOut, "is held by") {
		t.Errorf("apply while the killed run's lease holds: exit %d, stderr %s; want a refusal naming the holder", code, errOut)
	}

	// Once it expires, apply resumes; while it runs, another apply is refused.
	time.Sleep(9 * time.Second)
	resumed := w.start(ctx, "RunStarted", apply...)
	select {
	case <-resumed.seen:
	case err := <-resumed.done:
		t.Fatalf("resumed apply ended (%v) before starting:\n%s", err, resumed.output())
	}
	_, errOut, code = w.run(ctx, apply...)
	if code == 0 || !strings.Contains(errOut, "is held by") {
		t.Errorf("concurrent apply: exit %d, stderr %s; want a refusal naming the running apply", code, errOut)
	}
	if err := <-resumed.done; err != nil {
		t.Fatalf("resumed apply: %v\n%s", err, resumed.output())
	}
	t.Logf("resumed apply:\n%s", resumed.output())

	lowest, pending, err := watch.stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range budgets {
		if lowest[b.name] < b.min {
			t.Errorf("PDB %s: healthy pods dropped to %d during the rollout, below its minimum %d", b.name, lowest[b.name], b.min)
		}
	}
	t.Logf("lowest healthy per PDB %v; longest wait for a node %s", lowest, pending.Round(time.Millisecond))
	// Let the hook catch up with the last terminations (EC2 and the node
	// lifecycle controller take their time too).
	if err := w.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	checkMigrated(ctx, t, w)
	rel, err := helmc.Release(ctx, controllerNS, "karpenter")
	if err != nil || rel == nil || rel.Status != rollout.ReleaseDeployed || rel.Chart != "karpenter" || rel.Version != planned.Karpenter.Version {
		t.Errorf("Helm release after apply: %+v %v; want karpenter %s deployed", rel, err, planned.Karpenter.Version)
	}
	placedAfter, on := controllerPlacement(ctx, t, w)
	rowsAfter := groupRows(ctx, t, w)
	if len(placedAfter) != 2 || len(on) != 2 {
		t.Errorf("controller replicas Running and Ready after apply: %v; want 2 on the kept group's nodes", placedAfter)
	}
	for _, where := range placedAfter {
		if !strings.HasSuffix(where, "(ng-managed)") {
			t.Errorf("a controller replica runs on %s, not on the kept group", where)
		}
	}
	// Every pod deleted in the application's namespace while apply ran
	// was moved by it (evicted, or replaced by a surge restart).
	moved := watch.deletions(appNS)
	moves := len(moved)
	t.Logf("Karpenter controller after apply (Helm release revision %d): %v", rel.Revision, placedAfter)
	t.Logf("apply: %d moves for %d pods to move", moves, toMove)
	if !movedOnce(moves, toMove) {
		t.Errorf("%d moves for %d pods; want each pod moved once (one replacement steered onto a legacy node aside); moved: %s\nfirst (killed) apply:\n%s", moves, toMove, strings.Join(moved, ", "), first.output())
	}

	// Rollback restores exactly what was recorded.
	w.mustRun(ctx, "rollback", "--plan", "plan.yaml", "--dir", tree, "--yes", "--poll-interval", "500ms")
	after := w.asgs()
	for name, b := range before {
		a := after[name]
		if a.Min != b.Min || a.Max != b.Max || a.Desired != b.Desired || !slices.Equal(a.Suspended, b.Suspended) {
			t.Errorf("ASG %s after rollback: %+v, want the recorded %+v", name, a, b)
		}
	}
	if err := w.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	rowsBack := groupRows(ctx, t, w)
	logGroups(t, []string{"before", "after apply", "after rollback"}, []map[string]groupRow{rowsBefore, rowsAfter, rowsBack}, w.groups)
	for name, b := range rowsBefore {
		if a := rowsBack[name]; !slices.Equal(a.CATags, b.CATags) || !slices.Equal(a.ConfigTaints, b.ConfigTaints) || len(a.NodeTaints) > 0 {
			t.Errorf("group %s after rollback: %s; want the tags and taints it had: %s", name, a, b)
		}
	}
	d, err := w.env.Client.AppsV1().Deployments("kube-system").Get(ctx, "cluster-autoscaler", metav1.GetOptions{})
	if err != nil || ptr.Deref(d.Spec.Replicas, -1) != 1 {
		t.Errorf("Cluster Autoscaler after rollback: %v replicas (%v), want the recorded 1", d.Spec.Replicas, err)
	}
	j, err = rollout.Status(ctx, w.env.Client, "karpenter-migrate", "e2e")
	if err != nil || j.State != rollout.StateRolledBack {
		t.Errorf("journal after rollback: %+v, %v", j, err)
	}
	// Karpenter was installed by the rollout: rollback uninstalled it.
	if rel, err := helmc.Release(ctx, controllerNS, "karpenter"); err != nil || rel != nil {
		t.Errorf("Helm release after rollback: %+v %v; want it uninstalled", rel, err)
	}
	if _, err := w.env.Client.AppsV1().Deployments(controllerNS).Get(ctx, "karpenter", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("controller Deployment after rollback: %v; want it gone with the release", err)
	}
}

// checkPlan asserts what the plan must say about the scenario.
func checkPlan(t *testing.T, p *plan.Plan) {
	t.Helper()
	if len(p.NodeGroups) != 2 || p.ClusterAutoscaler == nil || p.ClusterAutoscaler.Replicas != 1 {
		t.Errorf("plan groups %+v, Cluster Autoscaler %+v; want two groups and CA at 1", p.NodeGroups, p.ClusterAutoscaler)
	}
	if len(p.Waves) != 2 {
		t.Errorf("%d waves, want 2 (two nodes per group, waves of two)", len(p.Waves))
	}
	// The engine predicts the nodes of the first wave that moves pods;
	// later waves may fit in the room earlier waves' nodes leave, as
	// Karpenter's scheduler would use it. (Which wave moves pods first
	// depends on where kube-scheduler put them: the kept group's nodes may
	// hold none.)
	if i := slices.IndexFunc(p.Waves, func(w plan.Wave) bool { return w.Pods > 0 }); i < 0 {
		t.Errorf("no wave moves a pod: %+v", p.Waves)
	} else if w := p.Waves[i]; len(w.PredictedNodes) == 0 || len(w.PreProvision) == 0 {
		t.Errorf("wave %d moves %d pods: predicted %v placeholders %v; want the engine's nodes on %v", w.Index, w.Pods, w.PredictedNodes, w.PreProvision, w.NodePools)
	}
	for _, f := range p.Findings {
		if f.Severity == "blocker" {
			t.Errorf("unexpected blocker: %+v", f)
		}
	}
	if p.PoolForGroup["ng-managed"] == "" || p.PoolForGroup["ng-self"] == "" {
		t.Errorf("pools for groups %v", p.PoolForGroup)
	}
	reported := false
	for _, f := range p.Findings {
		if strings.Contains(f.Object, appNS+"/solo") && strings.Contains(f.Message, "allows no disruption") {
			reported = true
		}
	}
	if !reported {
		t.Errorf("the single replica behind minAvailable 1 is not reported; findings %+v", p.Findings)
	}
	if p.IAM == nil || p.IAM.Error != "" || p.IAM.NodeAccess != "aws-auth" {
		t.Errorf("IAM %+v, want the steps planned with aws-auth node access", p.IAM)
	}
}

// checkMigrated asserts the end state of apply.
func checkMigrated(ctx context.Context, t *testing.T, w *world) {
	t.Helper()
	rows := groupRows(ctx, t, w)
	for _, g := range w.groups {
		s := rows[g.name]
		if g.name == "ng-managed" {
			// Kept for the Karpenter controller: at 2, nothing scales it,
			// reserved on its config and its nodes.
			if s.Min != 2 || s.Max != 2 || s.Desired != 2 || s.Instances != 2 || len(s.CATags) > 0 ||
				!slices.Equal(s.ConfigTaints, []string{"CriticalAddonsOnly=true:NO_SCHEDULE"}) || len(s.NodeTaints) != 2 {
				t.Errorf("kept group %s after apply: %s; want 2/2/2, 2 instances, no CA tags, its config and both nodes reserved", g.name, s)
			}
			continue
		}
		if s.Min != 0 || s.Desired != 0 || s.Instances != 0 || slices.Contains(s.Suspended, "Launch") {
			t.Errorf("ASG %s after apply: %+v, want min/desired 0, no instances, Launch resumed", g.asg, s)
		}
	}
	d, err := w.env.Client.AppsV1().Deployments("kube-system").Get(ctx, "cluster-autoscaler", metav1.GetOptions{})
	if err != nil || ptr.Deref(d.Spec.Replicas, -1) != 0 {
		t.Errorf("Cluster Autoscaler after apply: %v replicas (%v), want 0", d.Spec.Replicas, err)
	}
	nodes, err := w.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	karpenter, kept := map[string]bool{}, 0
	for _, n := range nodes.Items {
		switch {
		case n.Labels["karpenter.sh/nodepool"] != "":
			karpenter[n.Name] = true
		case n.Labels["eks.amazonaws.com/nodegroup"] == "ng-managed":
			kept++
			if n.Spec.Unschedulable || !slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&generate.ReservedTaint) }) {
				t.Errorf("kept node %s: unschedulable %t, taints %v; want schedulable, reserved", n.Name, n.Spec.Unschedulable, n.Spec.Taints)
			}
		default:
			t.Errorf("legacy node %s still exists", n.Name)
		}
	}
	pods, err := w.env.Client.CoreV1().Pods(appNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		// Only DaemonSet pods stay on the kept nodes with the controller.
		if !karpenter[p.Spec.NodeName] && !strings.HasPrefix(p.Name, "agent-") {
			t.Errorf("pod %s is on %q, not a Karpenter node", p.Name, p.Spec.NodeName)
		}
		if healthy(&p) {
			running++
		}
	}
	if want := 4 + 1 + 2 + len(karpenter) + kept; running < want {
		t.Errorf("%d healthy pods in %s, want %d (web 4, solo 1, db 2, one agent per node)", running, appNS, want)
	}
	j, err := rollout.Status(ctx, w.env.Client, "karpenter-migrate", "e2e")
	if err != nil || j.State != rollout.StateCompleted {
		t.Fatalf("journal %+v, %v; want completed", j, err)
	}
	// The IAM steps ran through pkg/iam: roles and queue in the fake, the
	// node role mapped in aws-auth, its backup recorded.
	w.aws.Account(func(a *awsfake.Account) {
		var roles []string
		for _, r := range a.IAM.Roles {
			roles = append(roles, ptr.Deref(r.Role.RoleName, ""))
		}
		for _, want := range []string{"KarpenterNodeRole-" + clusterName, "KarpenterControllerRole-" + clusterName} {
			if !slices.Contains(roles, want) {
				t.Errorf("IAM roles %v lack %s", roles, want)
			}
		}
		if len(a.SQS.Queues) != 1 {
			t.Errorf("%d SQS queues, want the interruption queue", len(a.SQS.Queues))
		}
	})
	cm, err := w.env.Client.CoreV1().ConfigMaps(awsauth.Namespace).Get(ctx, awsauth.Name, metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["mapRoles"], "KarpenterNodeRole-"+clusterName) || !strings.HasPrefix(cm.Data["mapRoles"], existingMapRoles) {
		t.Errorf("aws-auth: %v (%v), want the existing entry kept byte for byte and the node role mapped", cm.Data, err)
	}
	if j.Recorded.AWSAuthBackup == "" {
		t.Errorf("journal records no aws-auth backup")
	}
}

// movedOnce: every pod to move was moved, and no more than once, but for
// one. SteerTaint only prefers: kube-scheduler's default scores (spread,
// least allocated) can outweigh it and put one replacement on a legacy
// node of a later wave, which then moves it again (seen once in CI: a
// surge-restarted solo pod). A second eviction storm after a resume moves
// many pods again and still fails.
func movedOnce(moves, toMove int) bool {
	return moves >= toMove && moves <= toMove+max(1, toMove/20)
}

// createAgent creates the "agent" DaemonSet in ns: a pod on every node,
// tolerating every taint, as a node agent does.
func createAgent(ctx context.Context, t testing.TB, w *world, ns string) {
	t.Helper()
	spec := podSpec("50m")
	spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Labels: labelsOf("agent")},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labelsOf("agent")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsOf("agent")}, Spec: spec}},
	}
	if _, err := w.env.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
