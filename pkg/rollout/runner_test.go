package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

type scenario struct {
	kube *fake.Clientset
	asg  *fakeASG
	inv  inventory.Inventory
	plan *plan.Plan
}

// newScenario: two self-managed groups (ng-a: 3 nodes over two zones,
// ng-b: 1 node), Cluster Autoscaler at 2 replicas, a 4-replica Deployment
// with a PDB, a DaemonSet pod per node.
func newScenario(t *testing.T) *scenario {
	t.Helper()
	cs := fake.NewClientset()
	sc := &scenario{kube: cs}
	sc.asg = &fakeASG{groups: map[string]*astypes.AutoScalingGroup{}, kube: cs, nodeOf: map[string]string{}}
	nodes := []scenarioNode{{"a-1", "ng-a", "us-east-1a", "i-0000000000000000a"}, {"a-2", "ng-a", "us-east-1a", "i-0000000000000000b"}, {"a-3", "ng-a", "us-east-1b", "i-0000000000000000c"}, {"b-1", "ng-b", "us-east-1b", "i-0000000000000000d"}}
	for _, g := range scenarioGroups {
		asg := &astypes.AutoScalingGroup{AutoScalingGroupName: ptr.To("asg-" + g.name), MinSize: ptr.To(g.min), MaxSize: ptr.To(g.max),
			Tags: []astypes.TagDescription{{Key: ptr.To("group"), Value: ptr.To(g.name)}}}
		for _, p := range g.suspended {
			asg.SuspendedProcesses = append(asg.SuspendedProcesses, astypes.SuspendedProcess{ProcessName: ptr.To(p)})
		}
		for _, nd := range nodes {
			if nd.group == g.name {
				asg.Instances = append(asg.Instances, astypes.Instance{InstanceId: ptr.To(nd.id)})
				sc.asg.nodeOf[nd.id] = nd.name
			}
		}
		asg.DesiredCapacity = ptr.To(int32(len(asg.Instances)))
		sc.asg.groups[*asg.AutoScalingGroupName] = asg
	}
	sc.inv, sc.plan = kubeScenario(t, cs, scenarioGroups, nodes)
	return sc
}

// scenarioGroup is a legacy node group of a scenario, its ASG named
// asg-<name> unless asg says otherwise.
type scenarioGroup struct {
	name      string
	min, max  int32
	suspended []string
	managed   bool
	asg       string
}

func (g scenarioGroup) asgName() string {
	if g.asg != "" {
		return g.asg
	}
	return "asg-" + g.name
}

var scenarioGroups = []scenarioGroup{{name: "ng-a", min: 2, max: 6}, {name: "ng-b", min: 1, max: 3, suspended: []string{"AZRebalance"}}}

// scenarioNode is a legacy node and the instance behind it.
type scenarioNode struct{ name, group, zone, id string }

// kubeScenario puts the legacy nodes in the clientset with Cluster
// Autoscaler at 2 replicas, a 4-replica Deployment with a PDB and a
// DaemonSet pod per node, and returns the inventory and the rollout plan
// (waves of 2).
func kubeScenario(t *testing.T, cs *fake.Clientset, groups []scenarioGroup, nodes []scenarioNode) (inventory.Inventory, *plan.Plan) {
	t.Helper()
	ctx := context.Background()
	var inv inventory.Inventory
	for _, g := range groups {
		var count int32
		for _, nd := range nodes {
			if nd.group == g.name {
				count++
			}
		}
		kind := inventory.SelfManaged
		if g.managed {
			kind = inventory.Managed
		}
		inv.NodeGroups = append(inv.NodeGroups, inventory.NodeGroup{Name: g.name, Kind: kind, ASGName: g.asgName(), MinSize: g.min, MaxSize: g.max, DesiredSize: count})
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	for _, nd := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, legacyNode(nd.name, nd.group, nd.zone, nd.id), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: nd.name, NodeGroup: nd.group, Zone: nd.zone, InstanceID: nd.id, InstanceType: "m5.xlarge", Allocatable: alloc, Ready: true})
	}
	inv.Cluster = inventory.Cluster{Name: "demo", Region: "us-east-1"}
	inv.ClusterAutoscaler = &inventory.ClusterAutoscaler{Namespace: "kube-system", Name: "cluster-autoscaler", Replicas: 2}
	// web's budget spans every wave: they drain one after another.
	inv.PDBs = []inventory.PDB{{Namespace: "app", Name: "web", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, DisruptionsAllowed: 1}}

	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2))}, Status: appsv1.DeploymentStatus{ReadyReplicas: 2}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(4))}, Status: appsv1.DeploymentStatus{ReadyReplicas: 4}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-1", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 4, DesiredHealthy: 3}},
	}
	for i, nd := range nodes {
		objs = append(objs,
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Controller: ptr.To(true)}}},
				Spec: corev1.PodSpec{NodeName: nd.name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent-" + nd.name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}},
				Spec: corev1.PodSpec{NodeName: nd.name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		inv.Pods = append(inv.Pods, inventory.Pod{Namespace: "app", Name: fmt.Sprintf("web-%d", i), NodeName: nd.name, OwnerKind: inventory.OwnerDeployment, OwnerName: "web", Labels: map[string]string{"app": "web"},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
	}
	for _, o := range objs {
		if err := cs.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	addReactors(cs)
	cfg := config.Default("dev")
	cfg.Rollout.WaveSize = "2"
	cfg.Rollout.PreProvision = false
	p, err := plan.BuildPlan(&inv, plan.PlanOptions{Environment: "dev", Config: cfg, Steps: migrations.Planned(), Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return inv, p
}

// addReactors gives the fake clientset the API server's eviction and
// deployment scale subresources.
func addReactors(cs *fake.Clientset) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	deps := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := ca.GetObject().(*policyv1.Eviction)
		return true, nil, cs.Tracker().Delete(pods, ev.Namespace, ev.Name)
	})
	cs.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		o, err := cs.Tracker().Get(deps, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		d := o.(*appsv1.Deployment)
		return true, &autoscalingv1.Scale{ObjectMeta: d.ObjectMeta, Spec: autoscalingv1.ScaleSpec{Replicas: ptr.Deref(d.Spec.Replicas, 1)}}, nil
	})
	cs.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		o, err := cs.Tracker().Get(deps, s.Namespace, s.Name)
		if err != nil {
			return true, nil, err
		}
		d := o.(*appsv1.Deployment).DeepCopy()
		d.Spec.Replicas = ptr.To(s.Spec.Replicas)
		d.Status.ReadyReplicas = s.Spec.Replicas
		return true, s, cs.Tracker().Update(deps, d, s.Namespace)
	})
}

func (sc *scenario) runner(obs rollout.Observer) *rollout.Runner {
	return newRunner(sc.kube, sc.plan, sc.asg, nil, obs)
}

// newRunner is the whole runbook over the clientset and the AWS clients,
// with millisecond polls.
func newRunner(cs *fake.Clientset, p *plan.Plan, asg rollout.AutoScalingAPI, eks rollout.EKSAPI, obs rollout.Observer) *rollout.Runner {
	drain := kube.DefaultDrainOptions()
	drain.RetryInitial, drain.PollInterval = time.Millisecond, time.Millisecond
	return &rollout.Runner{
		Session: rollout.Session{
			Kube: cs, ASG: asg, EKS: eks, Clock: clock.RealClock{}, Namespace: "karpenter-migrate", Plan: p,
			Options: rollout.Options{Operator: "test", ToolVersion: "v0.0.0-test", Identity: "test-run", PollInterval: time.Millisecond, Drain: &drain, Observer: obs, AckBlockers: true},
		},
		Steps: migrations.All(),
	}
}

func (sc *scenario) group(name string) (min, max, desired int32, suspended []string) {
	g := sc.asg.groups[name]
	for _, p := range g.SuspendedProcesses {
		suspended = append(suspended, *p.ProcessName)
	}
	slices.Sort(suspended)
	return *g.MinSize, *g.MaxSize, *g.DesiredCapacity, suspended
}

func (sc *scenario) caReplicas(t *testing.T) int32 {
	d, err := sc.kube.AppsV1().Deployments("kube-system").Get(context.Background(), "cluster-autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

func TestApplyThenRollback(t *testing.T) {
	sc := newScenario(t)
	ctx := context.Background()
	var mu sync.Mutex
	var events []rollout.Event
	obs := func(e rollout.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }

	if got := len(sc.plan.Waves); got != 3 {
		t.Fatalf("waves = %d, want 3 (ng-a: 2+1, ng-b: 1)", got)
	}
	if err := sc.runner(obs).Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for _, g := range []string{"asg-ng-a", "asg-ng-b"} {
		mn, mx, d, _ := sc.group(g)
		if mn != 0 || mx != 0 || d != 0 || len(sc.asg.groups[g].Instances) != 0 {
			t.Errorf("%s after apply: min/max/desired %d/%d/%d, %d instances; want all zero", g, mn, mx, d, len(sc.asg.groups[g].Instances))
		}
	}
	if _, _, _, susp := sc.group("asg-ng-b"); !slices.Equal(susp, []string{"AZRebalance"}) {
		t.Errorf("ng-b suspended after apply = %v, want the original [AZRebalance] only", susp)
	}
	if r := sc.caReplicas(t); r != 0 {
		t.Errorf("Cluster Autoscaler replicas = %d, want 0", r)
	}
	pods, _ := sc.kube.CoreV1().Pods("app").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("%d app pods left on legacy nodes, want 0", len(pods.Items))
	}
	terminations := 0
	for _, c := range sc.asg.calls {
		if strings.HasPrefix(c, "terminate") {
			terminations++
			if !strings.HasSuffix(c, "decrement=true") {
				t.Errorf("call %q: want a decrementing termination", c)
			}
		}
	}
	if terminations != 4 {
		t.Errorf("terminations = %d, want 4", terminations)
	}
	j, err := rollout.Status(ctx, sc.kube, "karpenter-migrate", "dev")
	if err != nil || j == nil {
		t.Fatalf("Status: %v, %v", j, err)
	}
	if j.State != rollout.StateCompleted || j.PlanHash != sc.plan.Hash || j.Operator != "test" {
		t.Errorf("journal state %q plan %q operator %q", j.State, j.PlanHash, j.Operator)
	}
	if j.Recorded.ClusterAutoscaler == nil || j.Recorded.ClusterAutoscaler.Replicas != 2 {
		t.Errorf("recorded CA = %+v, want replicas 2", j.Recorded.ClusterAutoscaler)
	}
	evictions := 0
	for _, e := range events {
		if e.Kind == rollout.EventEviction && e.Message == "evicted" {
			evictions++
		}
	}
	if evictions != 4 {
		t.Errorf("evicted events = %d, want 4", evictions)
	}

	// A second apply is a no-op: every step already applied.
	calls := len(sc.asg.calls)
	if err := sc.runner(nil).Apply(ctx); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if len(sc.asg.calls) != calls {
		t.Errorf("second apply made AWS calls: %v", sc.asg.calls[calls:])
	}

	if err := sc.runner(nil).Rollback(ctx, ""); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	for g, want := range map[string][4]any{"asg-ng-a": {int32(2), int32(6), int32(3), []string(nil)}, "asg-ng-b": {int32(1), int32(3), int32(1), []string{"AZRebalance"}}} {
		mn, mx, d, susp := sc.group(g)
		if mn != want[0] || mx != want[1] || d != want[2] || !slices.Equal(susp, want[3].([]string)) {
			t.Errorf("%s after rollback: %d/%d/%d suspended %v; want %v", g, mn, mx, d, susp, want)
		}
	}
	if r := sc.caReplicas(t); r != 2 {
		t.Errorf("Cluster Autoscaler replicas after rollback = %d, want 2", r)
	}
	nodes, _ := sc.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			t.Errorf("node %s still cordoned after rollback", n.Name)
		}
	}
	if len(nodes.Items) != 4 {
		t.Errorf("legacy nodes after rollback = %d, want 4", len(nodes.Items))
	}
}

func TestApplyRefusesDrift(t *testing.T) {
	sc := newScenario(t)
	sc.asg.groups["asg-ng-a"].MaxSize = ptr.To(int32(9))
	err := sc.runner(nil).Apply(context.Background())
	var drift *rollout.DriftError
	if !errors.As(err, &drift) || !strings.Contains(err.Error(), "ng-a sizes changed") {
		t.Fatalf("Apply = %v, want DriftError naming ng-a", err)
	}
	if len(sc.asg.calls) != 0 {
		t.Errorf("a refused apply made AWS calls: %v", sc.asg.calls)
	}
}

// A node of a planned group that no wave lists (the group replaced its
// instances since the plan, as after a rollback) would be removed undrained
// by the scale to zero: apply refuses the plan (#19 rung 2).
func TestApplyRefusesReplacedNodes(t *testing.T) {
	sc := newScenario(t)
	if _, err := sc.kube.CoreV1().Nodes().Create(context.Background(), legacyNode("a-9", "ng-a", "us-east-1a", "i-0000000000000009a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := sc.runner(nil).Apply(context.Background())
	var drift *rollout.DriftError
	if !errors.As(err, &drift) || !strings.Contains(err.Error(), "node a-9 of group ng-a is in no wave of the plan") {
		t.Fatalf("Apply = %v, want DriftError naming node a-9", err)
	}
	if len(sc.asg.calls) != 0 {
		t.Errorf("a refused apply made AWS calls: %v", sc.asg.calls)
	}
}

func TestApplyBlockedByLease(t *testing.T) {
	sc := newScenario(t)
	ctx := context.Background()
	l := &kube.Lock{Client: sc.kube, Namespace: "karpenter-migrate", Name: rollout.JournalName("dev"), Identity: "ci-runner-7", Duration: time.Minute, Clock: clock.RealClock{}}
	held, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	err = sc.runner(nil).Apply(ctx)
	var he *kube.HeldError
	if !errors.As(err, &he) || he.Holder != "ci-runner-7" {
		t.Fatalf("Apply while locked = %v, want HeldError naming ci-runner-7", err)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	sc := newScenario(t)
	ctx := context.Background()
	var changes []string
	r := sc.runner(func(e rollout.Event) {
		if e.Kind == rollout.EventChange {
			changes = append(changes, e.Message)
		}
	})
	r.Options.DryRun = true
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if len(sc.asg.calls) != 0 {
		t.Errorf("dry run called AWS: %v", sc.asg.calls)
	}
	if r := sc.caReplicas(t); r != 2 {
		t.Errorf("dry run scaled Cluster Autoscaler to %d", r)
	}
	if j, _ := rollout.Status(ctx, sc.kube, "karpenter-migrate", "dev"); j != nil {
		t.Errorf("dry run wrote a journal: %+v", j)
	}
	joined := strings.Join(changes, "\n")
	for _, want := range []string{"scale Deployment kube-system/cluster-autoscaler replicas 2 -> 0", "cordon node a-1", "evict pod app/web-0 from node a-1", "terminate instance i-0000000000000000d"} {
		if !strings.Contains(joined, want) {
			t.Errorf("dry run did not report %q; got:\n%s", want, joined)
		}
	}
}

// TestResumeAfterInterrupt cancels the run during the first drain, then
// resumes: the journal says where it stopped and the second run finishes.
func TestResumeAfterInterrupt(t *testing.T) {
	sc := newScenario(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := sc.runner(func(e rollout.Event) {
		if e.Kind == rollout.EventEviction && e.Message == "evicted" {
			cancel()
		}
	})
	err := r.Apply(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Apply = %v, want context.Canceled", err)
	}
	j, _ := rollout.Status(context.Background(), sc.kube, "karpenter-migrate", "dev")
	if j.State != rollout.StateInterrupted || j.Current.Step != "10_drain_waves" || j.Current.Wave != 1 {
		t.Fatalf("journal after interrupt: state %q current %+v", j.State, j.Current)
	}
	// The lease was released on the way out, so a resume starts at once.
	if err := sc.runner(nil).Apply(context.Background()); err != nil {
		t.Fatalf("resumed Apply: %v", err)
	}
	j, _ = rollout.Status(context.Background(), sc.kube, "karpenter-migrate", "dev")
	if j.State != rollout.StateCompleted {
		t.Errorf("state after resume = %q", j.State)
	}
	if j.Recorded.ClusterAutoscaler.Replicas != 2 || j.Recorded.Group("ng-a").Desired != 3 {
		t.Errorf("recorded values changed on resume: %+v", j.Recorded)
	}
}

// TestRollbackFailureIsJournalled: a Down that fails leaves the journal
// failed with the reason, not rolled back.
func TestRollbackFailureIsJournalled(t *testing.T) {
	sc := newScenario(t)
	ctx := context.Background()
	r := sc.runner(nil)
	if err := r.Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	r = sc.runner(nil)
	for i := range r.Steps {
		if r.Steps[i].ID == "09_cluster_autoscaler" {
			r.Steps[i].Down = func(context.Context, *rollout.Session) error { return errors.New("scale refused") }
		}
	}
	if err := r.Rollback(ctx, ""); err == nil || !strings.Contains(err.Error(), "scale refused") {
		t.Fatalf("Rollback = %v, want the Down error", err)
	}
	j, err := rollout.Status(ctx, sc.kube, "karpenter-migrate", "dev")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != rollout.StateFailed || !strings.Contains(j.Message, "scale refused") {
		t.Errorf("journal state %q message %q, want failed with the reason", j.State, j.Message)
	}
}

// TestKeptControllerGroup: the group the Karpenter controller lives on is
// kept at its size, the nodes running the controller first; its nodes are
// reserved and only the pods that do not tolerate that move; its Cluster
// Autoscaler tags go; the other legacy nodes are steered away from; and
// rollback restores sizes, tags and taints.
func TestKeptControllerGroup(t *testing.T) {
	sc := newScenario(t)
	ctx := context.Background()
	caTags := []astypes.TagDescription{
		{Key: ptr.To("k8s.io/cluster-autoscaler/enabled"), Value: ptr.To("true"), PropagateAtLaunch: ptr.To(true)},
		{Key: ptr.To("k8s.io/cluster-autoscaler/demo"), Value: ptr.To("owned"), PropagateAtLaunch: ptr.To(true)},
	}
	sc.asg.groups["asg-ng-a"].Tags = append(sc.asg.groups["asg-ng-a"].Tags, caTags...)
	ctrl := map[string]string{"app.kubernetes.io/name": "karpenter"}
	tolerate := []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}
	for _, o := range []runtime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "karpenter"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: ctrl},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Tolerations: tolerate, Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1, AvailableReplicas: 1}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "karpenter-1", Labels: ctrl},
			Spec: corev1.PodSpec{NodeName: "a-3", Tolerations: tolerate}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "coredns-1", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "a-1", Tolerations: tolerate}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	} {
		if err := sc.kube.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	sc.inv.Karpenter = &inventory.KarpenterInstall{Installed: true, Namespace: "kube-system", Deployment: "karpenter", ControllerReplicas: 1,
		ControllerLabels: ctrl, ControllerTolerations: tolerate}
	sc.inv.Pods = append(sc.inv.Pods, inventory.Pod{Namespace: "kube-system", Name: "karpenter-1", NodeName: "a-3", Labels: ctrl, OwnerKind: inventory.OwnerDeployment, OwnerName: "karpenter", Tolerations: tolerate})
	cfg := config.Default("dev")
	cfg.Rollout.WaveSize, cfg.Rollout.PreProvision = "2", false
	p, err := plan.BuildPlan(&sc.inv, plan.PlanOptions{Environment: "dev", Config: cfg, Steps: migrations.Planned(), Now: time.Unix(0, 0),
		Controller: plan.ControllerOptions{NodeGroup: "ng-a"}})
	if err != nil {
		t.Fatal(err)
	}
	sc.plan = p
	if h := p.Controller; h == nil || h.Source != plan.ControllerFromFlag || !h.Kept || h.Size != 2 {
		t.Fatalf("controller home %+v; want ng-a kept at 2 from the flag", h)
	}
	if err := sc.runner(nil).Apply(ctx); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if mn, mx, d, _ := sc.group("asg-ng-a"); mn != 2 || mx != 2 || d != 2 || len(sc.asg.groups["asg-ng-a"].Instances) != 2 {
		t.Errorf("kept group: %d/%d/%d with %d instances; want 2/2/2 and 2", mn, mx, d, len(sc.asg.groups["asg-ng-a"].Instances))
	}
	if mn, _, d, _ := sc.group("asg-ng-b"); mn != 0 || d != 0 {
		t.Errorf("ng-b: min %d desired %d; want zero", mn, d)
	}
	for _, tag := range sc.asg.groups["asg-ng-a"].Tags {
		if strings.HasPrefix(*tag.Key, "k8s.io/cluster-autoscaler/") {
			t.Errorf("kept group still tagged %s", *tag.Key)
		}
	}
	nodes, _ := sc.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "CriticalAddonsOnly" || n.Spec.Unschedulable {
			t.Errorf("kept node %s: taints %v cordoned %t; want reserved, schedulable", n.Name, n.Spec.Taints, n.Spec.Unschedulable)
		}
	}
	// a-3 runs the controller; a-1 and a-2 are both in zone a: a-1 by name.
	if slices.Sort(names); !slices.Equal(names, []string{"a-1", "a-3"}) {
		t.Errorf("nodes left %v; want a-3 (runs the controller) and a-1", names)
	}
	for _, pod := range []string{"karpenter-1", "coredns-1", "agent-a-1", "agent-a-3"} {
		if _, err := sc.kube.CoreV1().Pods("kube-system").Get(ctx, pod, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s was moved off the kept nodes: %v", pod, err)
		}
	}
	if pods, _ := sc.kube.CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d workload pods left on the kept nodes", len(pods.Items))
	}
	j, _ := rollout.Status(ctx, sc.kube, "karpenter-migrate", "dev")
	steered := 0
	for _, nt := range j.Recorded.Tainted {
		if nt.Taint == migrations.SteerTaint {
			steered++
		}
	}
	if steered != 2 || !slices.Equal(j.Recorded.KeptNodes, []string{"a-1", "a-3"}) {
		t.Errorf("recorded taints %v kept %v; want a-2 and b-1 steered, a-1 and a-3 kept", j.Recorded.Tainted, j.Recorded.KeptNodes)
	}
	// The kept nodes carry the label the plan's release requires of the
	// controller's nodes (#31), each recorded in the journal before the
	// node was patched.
	for _, n := range nodes.Items {
		if n.Labels[generate.KeptLabel] != generate.KeptLabelValue {
			t.Errorf("kept node %s: labels %v; want %s=%s", n.Name, n.Labels, generate.KeptLabel, generate.KeptLabelValue)
		}
	}
	want := []rollout.NodeLabel{{Node: "a-1", Key: generate.KeptLabel, Value: "true"}, {Node: "a-3", Key: generate.KeptLabel, Value: "true"}}
	if !slices.Equal(j.Recorded.Labelled, want) {
		t.Errorf("recorded labels %v; want %v", j.Recorded.Labelled, want)
	}
	recorded := map[string]bool{}
	for _, a := range sc.kube.Actions() {
		switch a := a.(type) {
		case k8stesting.UpdateAction:
			if cm, ok := a.GetObject().(*corev1.ConfigMap); ok && cm.Name == rollout.JournalName("dev") {
				for _, doc := range cm.Data {
					var jr rollout.Journal
					if err := json.Unmarshal([]byte(doc), &jr); err != nil {
						t.Fatal(err)
					}
					for _, l := range jr.Recorded.Labelled {
						recorded[l.Node] = true
					}
				}
			}
		case k8stesting.PatchAction:
			if a.GetResource().Resource == "nodes" && strings.Contains(string(a.GetPatch()), generate.KeptLabel) && !recorded[a.GetName()] {
				t.Errorf("node %s labelled before the journal recorded it: %s", a.GetName(), a.GetPatch())
			}
		}
	}

	if err := sc.runner(nil).Rollback(ctx, ""); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if mn, mx, d, _ := sc.group("asg-ng-a"); mn != 2 || mx != 6 || d != 3 {
		t.Errorf("ng-a after rollback %d/%d/%d; want 2/6/3", mn, mx, d)
	}
	if n := len(sc.asg.groups["asg-ng-a"].Tags); n != 3 {
		t.Errorf("ng-a tags after rollback %v; want its Cluster Autoscaler tags back", sc.asg.groups["asg-ng-a"].Tags)
	}
	nodes, _ = sc.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		if len(n.Spec.Taints) != 0 {
			t.Errorf("node %s keeps taints %v after rollback", n.Name, n.Spec.Taints)
		}
		if v, ok := n.Labels[generate.KeptLabel]; ok {
			t.Errorf("node %s keeps the label %s=%s after rollback", n.Name, generate.KeptLabel, v)
		}
	}
}
