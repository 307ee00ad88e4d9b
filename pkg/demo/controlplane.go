package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// Wall-time budgets of the control plane.
const (
	cpSettleTimeout = 5 * time.Minute
	// cpConsolidationTimeout bounds Karpenter's settling after the waves:
	// rounds of consolidateAfter (30s in dev), its 10s polling and 15s
	// validation.
	cpConsolidationTimeout = 10 * time.Minute
	// cpQuiet is how long nothing may change in Karpenter's fleet, with no
	// node disrupted, for it to count as settled: longer than a round of
	// consolidateAfter (dev's 30s) plus validation.
	cpQuiet = 75 * time.Second
)

// controlPlane is the demo on real parts: the account and cluster the
// sandbox builds for the seed are copied — the AWS account into a second
// AWS fake, the cluster's objects into a real control plane (internal/
// testenv) with the real Karpenter's kwok provider given the catalogue the
// sandbox prices with — and a hook plays EC2 and the kubelet for the node
// groups: every InService instance of an ASG is a kwok node modelled on its
// group's, and a terminated one's node goes away with its pods.
type controlPlane struct {
	seed uint64
	dir  string
	env  *testenv.Env
	aws  *awsfake.Server
	// groupOf maps ASG names to node groups; model is a node of each group
	// that new instances' nodes copy; capacity the seeded instances'
	// capacity types.
	groupOf  map[string]*inventory.NodeGroup
	model    map[string]*corev1.Node
	capacity map[string]string

	// hook plays EC2 and the kubelet for the node groups.
	hook   *testenv.NodeHook
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	watchers []func(context.Context, kubernetes.Interface, func(string) bool) error
	// stopInformers ends the informers WatchWaits started.
	stopInformers []context.CancelFunc
}

func newControlPlane(seed uint64) *controlPlane {
	return &controlPlane{seed: seed}
}

func (c *controlPlane) Engine() string { return EngineControlPlane }

func (c *controlPlane) Now() time.Time { return time.Now() }

// Stats has only the pods lost with a node and those kube-scheduler
// preempted (its Preempted events): the rest are the sandbox's own
// counters.
func (c *controlPlane) Stats() sandbox.Stats {
	if c.hook == nil {
		return sandbox.Stats{}
	}
	st := sandbox.Stats{LostPods: c.hook.Lost()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.env.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=Preempted"})
	if err != nil {
		st.PreemptedPods = []string{fmt.Sprintf("(could not list Preempted events: %v)", err)}
		return st
	}
	for _, e := range events.Items {
		st.Preempted += max(int(e.Count), 1)
		st.PreemptedPods = append(st.PreemptedPods, fmt.Sprintf("%s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message))
	}
	return st
}

func (c *controlPlane) Consolidations() []sandbox.ConsolidationCommand { return nil }

func (c *controlPlane) Watch(f func(context.Context, kubernetes.Interface, func(string) bool) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchers = append(c.watchers, f)
}

// WatchWaits feeds w a pod informer's events: every state of a pod the
// API server sends (creation, binding, deletion), timed by the API
// server's own timestamps (whole seconds), not by a poll.
func (c *controlPlane) WatchWaits(ctx context.Context, w *waitWatcher) error {
	infCtx, stop := context.WithCancel(context.Background())
	c.mu.Lock()
	c.stopInformers = append(c.stopInformers, stop)
	c.mu.Unlock()
	inf := coreinformers.NewPodInformer(c.env.Client, metav1.NamespaceAll, 0, cache.Indexers{})
	seen := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			w.seen(p, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.gone(p, time.Now())
			}
		},
	}); err != nil {
		return fmt.Errorf("wait watcher: %w", err)
	}
	go inf.Run(infCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("wait watcher: the pod informer did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Close stops the hook, the informers, the control plane and the AWS fake
// and removes the control plane's run directory.
func (c *controlPlane) Close() {
	for _, stop := range c.stopInformers {
		stop()
	}
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	if c.env != nil {
		c.env.Stop()
	}
	if c.aws != nil {
		c.aws.Close()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// ControlPlaneLogs is the file in the output directory that keeps the end
// of every component's log when a control-plane demo fails.
const ControlPlaneLogs = "controlplane-logs.txt"

// LogTails is the end of every component's log (etcd, kube-apiserver,
// scheduler, controller-manager, kwok, Karpenter).
func (c *controlPlane) LogTails(n int) string {
	if c.env == nil {
		return ""
	}
	return c.env.LogTails(n)
}

// ErrNoControlPlane is returned when the control plane's binaries are missing.
var ErrNoControlPlane = errors.New("the control-plane binaries are not built: run `make demo-real` (it builds them first, once, into ~/.cache/karpenter-migrate)")

func (c *controlPlane) Load(ctx context.Context, inv inventory.Inventory, namespace, outDir string) (*action.Configuration, context.Context, context.CancelFunc, error) {
	fail := func(err error) (*action.Configuration, context.Context, context.CancelFunc, error) {
		return nil, nil, nil, err
	}
	// The sandbox builds the account and cluster for the seed; the control
	// plane gets a copy of both.
	sb, err := sandbox.New(sandbox.Options{Seed: c.seed})
	if err != nil {
		return fail(err)
	}
	defer sb.Close()
	if err := sb.Load(ctx, inv); err != nil {
		return fail(err)
	}
	acct, err := sb.AccountCopy()
	if err != nil {
		return fail(err)
	}
	c.capacity = map[string]string{}
	for _, in := range sb.Cloud().Instances() {
		c.capacity[in.ID] = in.CapacityType
	}
	c.groupOf = map[string]*inventory.NodeGroup{}
	for _, g := range sb.Cloud().Groups() {
		g := g
		c.groupOf[g.ASGName] = &g
	}
	if c.dir, err = os.MkdirTemp("", "karpenter-migrate-controlplane-"); err != nil {
		return fail(fmt.Errorf("control plane run directory: %w", err))
	}
	opts, err := c.options(inv)
	if err != nil {
		return fail(err)
	}
	if c.env, err = testenv.Launch(ctx, c.dir, opts); err != nil {
		if strings.Contains(err.Error(), "control plane binaries missing") || strings.Contains(err.Error(), "versions.env") {
			return fail(fmt.Errorf("%w\n(%v)", ErrNoControlPlane, err))
		}
		return fail(fmt.Errorf("start the control plane: %w", err))
	}
	c.aws = awsfake.New(acct)
	c.hook = &testenv.NodeHook{Client: c.env.Client, AWS: c.aws, Node: c.nodeOf}
	if err := c.copyCluster(ctx, sb.Kube()); err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	hookCtx, stop := context.WithCancel(context.Background())
	c.cancel, c.done = stop, make(chan struct{})
	go c.loop(hookCtx, func(err error) { cancel(err) })
	if err := c.Settle(runCtx); err != nil {
		cancel(err)
		return fail(fmt.Errorf("load the cluster: %w", err))
	}
	cfg, err := action.ForLive(ctx, action.Live{REST: c.env.Config, AWS: &kmaws.Options{
		Region: acct.Region, EndpointURL: c.aws.URL(), MaxBackoff: 50 * time.Millisecond,
		Credentials: credentials.NewStaticCredentialsProvider("AKIADEMO", "demo", ""),
	}})
	if err != nil {
		cancel(err)
		return fail(err)
	}
	cfg.Namespace, cfg.OutDir, cfg.Operator, cfg.Identity = namespace, outDir, "demo", "karpenter-migrate demo"
	// A drained node's pods are evicted at once, as apply does (the
	// sandbox evicts one at a time only to step its simulation from one
	// goroutine); the plan, and so the nodes drained at once, is the same.
	cfg.PollInterval = time.Second
	return cfg, runCtx, func() { cancel(context.Canceled) }, nil
}

func (c *controlPlane) CountedKube(req *kube.Requests) (kubernetes.Interface, error) {
	rc := rest.CopyConfig(c.env.Config)
	rc.Wrap(req.Wrap)
	cfg, err := action.ForLive(context.Background(), action.Live{REST: rc})
	if err != nil {
		return nil, err
	}
	return cfg.Kube, nil
}

// options are the control plane's: Karpenter with the catalogue in the
// cluster's zones, and kwok's stages with Job pods running until deleted.
func (c *controlPlane) options(inv inventory.Inventory) (testenv.Options, error) {
	var zones []string
	for _, s := range inv.Subnets {
		if !slices.Contains(zones, s.Zone) {
			zones = append(zones, s.Zone)
		}
	}
	types, err := testenv.KwokTypes(catalog.Default(), zones...)
	if err != nil {
		return testenv.Options{}, err
	}
	typesFile := filepath.Join(c.dir, "instance-types.json")
	if err := testenv.WriteInstanceTypes(typesFile, types); err != nil {
		return testenv.Options{}, err
	}
	def, err := testenv.Stages()
	if err != nil {
		return testenv.Options{}, err
	}
	b, err := os.ReadFile(def)
	if err != nil {
		return testenv.Options{}, fmt.Errorf("kwok stages: %w", err)
	}
	// The sandbox's Jobs run until their pods are deleted, so kwok's stage
	// that completes a Job's pod at once becomes the kubelet killing it
	// when it is deleted (phase Failed, which releases the Job controller's
	// finalizer); copyCluster gives the Jobs a podFailurePolicy that does
	// not count an eviction as a failure, so they replace evicted pods.
	docs := strings.Split(string(b), "\n---\n")
	for i, doc := range docs {
		if !strings.Contains(doc, "name: pod-complete\n") {
			continue
		}
		doc = strings.Replace(doc, "name: pod-complete\n", "name: pod-killed-job\n", 1)
		doc = strings.Replace(doc, "operator: 'DoesNotExist'", "operator: 'Exists'", 1)
		doc = strings.Replace(doc, "exitCode: 0", "exitCode: 137", 1)
		doc = strings.Replace(doc, "reason: Completed", "reason: Error", 1)
		doc = strings.Replace(doc, "phase: Succeeded", "phase: Failed", 1)
		docs[i] = doc
	}
	// A Job pod keeps the Job controller's finalizer until it is terminal:
	// kwok deletes a terminating pod once it has none left.
	for i, doc := range docs {
		if strings.Contains(doc, "name: pod-delete\n") {
			docs[i] = strings.Replace(doc, "    matchExpressions:\n", "    matchExpressions:\n    - key: '.metadata.finalizers'\n      operator: 'DoesNotExist'\n", 1)
		}
	}
	keep := docs
	stages := filepath.Join(c.dir, "stages.yaml")
	if err := os.WriteFile(stages, []byte(strings.Join(keep, "\n---\n")), 0o644); err != nil {
		return testenv.Options{}, fmt.Errorf("kwok stages: %w", err)
	}
	return testenv.Options{Karpenter: true, InstanceTypesFile: typesFile, KwokStages: stages}, nil
}

// copyCluster creates the sandbox cluster's objects in the control plane:
// namespaces, ConfigMaps, volumes, workloads, PDBs and the node groups'
// nodes (as kwok nodes). ReplicaSets and pods are left to the real
// controllers and scheduler.
func (c *controlPlane) copyCluster(ctx context.Context, from kubernetes.Interface) error {
	to := c.env.Client
	clean := func(m *metav1.ObjectMeta) {
		*m = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations}
	}
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("copy %s to the control plane: %w", what, err)
		}
		return nil
	}
	nss, err := from.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		clean(&ns.ObjectMeta)
		ns.Spec, ns.Status = corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
		_, err := to.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{})
		if err := create("namespace "+ns.Name, err); err != nil {
			return err
		}
	}
	nodes, err := from.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	c.model = map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := kwokNode(&nodes.Items[i])
		if g := c.groupOfNode(n); g != "" && c.model[g] == nil {
			c.model[g] = n.DeepCopy()
		}
		_, err := to.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err := create("node "+n.Name, err); err != nil {
			return err
		}
	}
	cms, err := from.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, cm := range cms.Items {
		clean(&cm.ObjectMeta)
		_, err := to.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, &cm, metav1.CreateOptions{})
		if err := create("ConfigMap "+cm.Name, err); err != nil {
			return err
		}
	}
	pvs, err := from.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		clean(&pv.ObjectMeta)
		pv.Status = corev1.PersistentVolumeStatus{}
		if pv.Spec.ClaimRef != nil {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pv.Spec.ClaimRef.Namespace, Name: pv.Spec.ClaimRef.Name}
		}
		// The API server wants a source; EBS's CSI driver is what EKS runs.
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + pv.Name}
		_, err := to.CoreV1().PersistentVolumes().Create(ctx, &pv, metav1.CreateOptions{})
		if err := create("PersistentVolume "+pv.Name, err); err != nil {
			return err
		}
	}
	pvcs, err := from.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pvc := range pvcs.Items {
		clean(&pvc.ObjectMeta)
		pvc.Status = corev1.PersistentVolumeClaimStatus{}
		if pvc.Spec.Resources.Requests == nil {
			pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		}
		_, err := to.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, &pvc, metav1.CreateOptions{})
		if err := create("PersistentVolumeClaim "+pvc.Name, err); err != nil {
			return err
		}
	}
	classes := &priorityClasses{kube: to, names: map[int32]string{}}
	// DaemonSets first: their pods come with the nodes, before the
	// workloads the scheduler then fits around them (as in the sandbox).
	dss, err := from.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ds := range dss.Items {
		clean(&ds.ObjectMeta)
		ds.Status = appsv1.DaemonSetStatus{}
		// The sandbox binds a DaemonSet's pod to its node whatever room is
		// left, as the scheduler does for a system-node-critical pod (it
		// preempts to make room, and nothing preempts it).
		if ds.Spec.Template.Spec.PriorityClassName == "" && ds.Spec.Template.Spec.Priority == nil {
			ds.Spec.Template.Spec.PriorityClassName = "system-node-critical"
		}
		if err := classes.adapt(ctx, &ds.Spec.Template.Spec); err != nil {
			return err
		}
		_, err := to.AppsV1().DaemonSets(ds.Namespace).Create(ctx, &ds, metav1.CreateOptions{})
		if err := create("DaemonSet "+ds.Namespace+"/"+ds.Name, err); err != nil {
			return err
		}
	}
	// Their pods first too: one the DaemonSet controller creates after the
	// workloads filled its node preempts one of them (kube-proxy did, in a
	// parity run, through a PDB already at its minimum).
	if err := c.waitDaemonSets(ctx); err != nil {
		return err
	}
	deps, err := from.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, d := range deps.Items {
		clean(&d.ObjectMeta)
		d.Status = appsv1.DeploymentStatus{}
		if err := classes.adapt(ctx, &d.Spec.Template.Spec); err != nil {
			return err
		}
		_, err := to.AppsV1().Deployments(d.Namespace).Create(ctx, &d, metav1.CreateOptions{})
		if err := create("Deployment "+d.Namespace+"/"+d.Name, err); err != nil {
			return err
		}
	}
	stss, err := from.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range stss.Items {
		clean(&s.ObjectMeta)
		s.Status = appsv1.StatefulSetStatus{}
		if err := classes.adapt(ctx, &s.Spec.Template.Spec); err != nil {
			return err
		}
		_, err := to.AppsV1().StatefulSets(s.Namespace).Create(ctx, &s, metav1.CreateOptions{})
		if err := create("StatefulSet "+s.Namespace+"/"+s.Name, err); err != nil {
			return err
		}
	}
	jobs, err := from.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, j := range jobs.Items {
		clean(&j.ObjectMeta)
		j.Status = batchv1.JobStatus{}
		// The Job controller generates the selector and its labels; an
		// evicted pod is replaced, not counted as a failure.
		j.Spec.Selector, j.Spec.ManualSelector = nil, nil
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		}}}
		if err := classes.adapt(ctx, &j.Spec.Template.Spec); err != nil {
			return err
		}
		_, err := to.BatchV1().Jobs(j.Namespace).Create(ctx, &j, metav1.CreateOptions{})
		if err := create("Job "+j.Namespace+"/"+j.Name, err); err != nil {
			return err
		}
	}
	pdbs, err := from.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pdbs.Items {
		clean(&p.ObjectMeta)
		p.Status = policyv1.PodDisruptionBudgetStatus{}
		_, err := to.PolicyV1().PodDisruptionBudgets(p.Namespace).Create(ctx, &p, metav1.CreateOptions{})
		if err := create("PodDisruptionBudget "+p.Namespace+"/"+p.Name, err); err != nil {
			return err
		}
	}
	return nil
}

// priorityClasses gives pod specs what the Priority admission plugin
// wants: no spec.priority, and a PriorityClass for a priority the sandbox
// set without one.
type priorityClasses struct {
	kube  kubernetes.Interface
	names map[int32]string
}

func (p *priorityClasses) adapt(ctx context.Context, spec *corev1.PodSpec) error {
	prio := spec.Priority
	spec.Priority = nil
	if prio == nil || spec.PriorityClassName != "" {
		return nil
	}
	name, ok := p.names[*prio]
	if !ok {
		name = fmt.Sprintf("demo-priority-%d", *prio)
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: *prio,
			Description: "the priority the demo's pods carry in the sandbox"}
		if _, err := p.kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PriorityClass %s: %w", name, err)
		}
		p.names[*prio] = name
	}
	spec.PriorityClassName = name
	return nil
}

// kwokNode is a copy of a sandbox node for kwok to run: the same name,
// labels, taints, capacity and providerID, no status but its resources.
func kwokNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: maps.Clone(n.Labels), Annotations: maps.Clone(n.Annotations)},
		Spec:       corev1.NodeSpec{ProviderID: n.Spec.ProviderID, Taints: slices.Clone(n.Spec.Taints), Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{Capacity: n.Status.Capacity.DeepCopy(), Allocatable: n.Status.Allocatable.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{Architecture: n.Status.NodeInfo.Architecture, OperatingSystem: "linux"}},
	}
	testenv.MarkKwok(out)
	return out
}

// groupOfNode is the node group of a legacy node, by its instance.
func (c *controlPlane) groupOfNode(n *corev1.Node) string {
	if g := inventory.NodeGroupOf(n.Labels); g != "" {
		return g
	}
	for _, g := range c.groupOf {
		for _, in := range g.Instances {
			if strings.HasSuffix(n.Spec.ProviderID, "/"+in.ID) {
				return g.Name
			}
		}
	}
	return ""
}

// loop runs the node hook and the watchers until ctx ends; an error of
// either cancels the run.
func (c *controlPlane) loop(ctx context.Context, fail func(error)) {
	defer close(c.done)
	tick := time.NewTicker(testenv.NodeHookInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := c.hook.Sync(ctx)
		if err == nil {
			err = c.releaseKilledJobPods(ctx)
		}
		c.mu.Lock()
		watchers := slices.Clone(c.watchers)
		c.mu.Unlock()
		for _, w := range watchers {
			if err == nil {
				err = w(ctx, c.env.Client, func(string) bool { return true })
			}
		}
		if err != nil && ctx.Err() == nil {
			fail(fmt.Errorf("control plane: %w", err))
			return
		}
	}
}

// waitDaemonSets waits until every DaemonSet has a Ready pod on each node
// it wants one on.
func (c *controlPlane) waitDaemonSets(ctx context.Context) error {
	deadline := time.Now().Add(cpSettleTimeout)
	for {
		dss, err := c.env.Client.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		waiting := ""
		for _, ds := range dss.Items {
			st := ds.Status
			if st.ObservedGeneration < ds.Generation || st.NumberReady < st.DesiredNumberScheduled {
				waiting = fmt.Sprintf("DaemonSet %s/%s: %d of %d pods Ready", ds.Namespace, ds.Name, st.NumberReady, st.DesiredNumberScheduled)
				break
			}
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the DaemonSets' pods did not start in %s: %s", cpSettleTimeout, waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nodeOf is the node of a node group's new instance: a copy of the
// group's model node with the instance's name, zone and type, and the
// taints EKS gives a managed group's nodes. Instances of other ASGs get
// none.
func (c *controlPlane) nodeOf(in testenv.ASGInstance) (*corev1.Node, error) {
	grp := c.groupOf[in.ASG]
	if grp == nil {
		return nil, nil
	}
	model := c.model[grp.Name]
	if model == nil {
		return nil, fmt.Errorf("no node of node group %s to model its node on", grp.Name)
	}
	var taints []corev1.Taint
	c.aws.Account(func(a *awsfake.Account) {
		for _, cl := range a.EKS.Clusters {
			for _, ng := range cl.Nodegroups {
				if awssdk.ToString(ng.NodegroupName) != grp.Name {
					continue
				}
				for _, t := range ng.Taints {
					taints = append(taints, kmaws.KubeTaint(t))
				}
			}
		}
	})
	n := model.DeepCopy()
	n.Name = fmt.Sprintf("%s-%s", grp.Name, strings.TrimPrefix(in.ID, "i-"))
	n.Spec.ProviderID = "aws:///" + in.Zone + "/" + in.ID
	n.Labels[corev1.LabelHostname], n.Labels[corev1.LabelTopologyZone] = n.Name, in.Zone
	if in.InstanceType != "" {
		n.Labels[corev1.LabelInstanceTypeStable] = in.InstanceType
	}
	if taints != nil || model.Labels["eks.amazonaws.com/nodegroup"] != "" {
		n.Spec.Taints = taints // EKS taints a managed group's nodes as its config says
	}
	return n, nil
}

// releaseKilledJobPods removes the Job controller's tracking finalizer
// from the Job pods kwok killed (deleted, Failed): the controller does too,
// but only on its next sync of the Job, after its failure backoff, which
// outlasts a drain's wait for the pod to go.
func (c *controlPlane) releaseKilledJobPods(ctx context.Context) error {
	pods, err := c.env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Failed"})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil || !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			continue
		}
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == batchv1.JobTrackingFinalizer })
		if _, err := c.env.Client.CoreV1().Pods(p.Namespace).Update(ctx, &p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("release Job pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// Settle waits until every pod is Ready (but finished ones), every ASG
// instance has a Ready node and every NodeClaim is registered.
func (c *controlPlane) Settle(ctx context.Context) error {
	deadline := time.Now().Add(cpSettleTimeout)
	for {
		busy, err := c.busy(ctx)
		if err != nil {
			return err
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the control plane did not settle in %s: %s", cpSettleTimeout, busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// busy says what the cluster is still doing ("" for nothing).
func (c *controlPlane) busy(ctx context.Context) (string, error) {
	pods, err := c.env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.DeletionTimestamp != nil || !testenv.PodHealthy(p) {
			return fmt.Sprintf("pod %s/%s is not Ready", p.Namespace, p.Name), nil
		}
	}
	// The controllers have caught up: what the runbook's preflight reads
	// (a Deployment's available replicas) says what the pods say.
	deps, err := c.env.Client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, d := range deps.Items {
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < ptr.Deref(d.Spec.Replicas, 1) {
			return fmt.Sprintf("Deployment %s/%s has %d of %d replicas available", d.Namespace, d.Name, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1)), nil
		}
	}
	instances, err := c.Instances(ctx)
	if err != nil {
		return "", err
	}
	for _, in := range instances {
		if in.NodeName == "" {
			return fmt.Sprintf("instance %s is launching", in.ID), nil
		}
	}
	claims, err := c.env.Dynamic.Resource(sandbox.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, cl := range claims.Items {
		if cl.GetDeletionTimestamp() != nil {
			return fmt.Sprintf("NodeClaim %s is terminating", cl.GetName()), nil
		}
		if node, _, _ := unstructured.NestedString(cl.Object, "status", "nodeName"); node == "" {
			return fmt.Sprintf("NodeClaim %s is launching", cl.GetName()), nil
		}
	}
	return "", nil
}

// SettleConsolidation waits until Karpenter leaves the fleet alone: the
// cluster settled, no node tainted karpenter.sh/disrupted, and Karpenter's
// nodes unchanged for cpQuiet.
func (c *controlPlane) SettleConsolidation(ctx context.Context) error {
	deadline := time.Now().Add(cpConsolidationTimeout)
	var last string
	since := time.Now()
	for {
		busy, err := c.busy(ctx)
		if err != nil {
			return err
		}
		nodes, err := c.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.NodePoolLabelKey})
		if err != nil {
			return err
		}
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
			if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == apisv1.DisruptedTaintKey }) && busy == "" {
				busy = "node " + n.Name + " is being disrupted"
			}
		}
		slices.Sort(names)
		fleet := strings.Join(names, ",")
		if busy != "" || fleet != last {
			last, since = fleet, time.Now()
		}
		if busy == "" && time.Since(since) >= cpQuiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consolidation by the real Karpenter did not settle in %s: %s", cpConsolidationTimeout, cmp.Or(busy, "its fleet kept changing"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Instances are the node groups' instances (from the AWS fake, with the
// node the hook made for each) and Karpenter's nodes.
func (c *controlPlane) Instances(ctx context.Context) ([]sandbox.Instance, error) {
	nodes, err := c.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byID := map[string]*corev1.Node{}
	var out []sandbox.Instance
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if pool := n.Labels[apisv1.NodePoolLabelKey]; pool != "" {
			out = append(out, sandbox.Instance{ID: testenv.InstanceID(n.Spec.ProviderID), InstanceType: n.Labels[corev1.LabelInstanceTypeStable],
				Zone: n.Labels[corev1.LabelTopologyZone], CapacityType: n.Labels[apisv1.CapacityTypeLabelKey], NodePool: pool, NodeName: n.Name})
			continue
		}
		if testenv.NodeReady(n) {
			byID[testenv.InstanceID(n.Spec.ProviderID)] = n
		}
	}
	for _, g := range c.groups() {
		for _, in := range g.Instances {
			ct := c.capacity[in.ID]
			if ct == "" {
				ct = cmp.Or(g.CapacityType, inventory.CapacityOnDemand)
			}
			si := sandbox.Instance{ID: in.ID, InstanceType: in.InstanceType, Zone: in.Zone, CapacityType: ct, Group: g.Name}
			if n := byID[in.ID]; n != nil {
				si.NodeName = n.Name
			}
			out = append(out, si)
		}
	}
	slices.SortFunc(out, func(a, b sandbox.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Groups are the node groups with the sizes and InService instances the
// AWS fake's ASGs have.
func (c *controlPlane) Groups(context.Context) ([]inventory.NodeGroup, error) {
	return c.groups(), nil
}

func (c *controlPlane) groups() []inventory.NodeGroup {
	var out []inventory.NodeGroup
	c.aws.Account(func(a *awsfake.Account) {
		for _, asg := range a.AutoScaling.Groups {
			grp := c.groupOf[awssdk.ToString(asg.AutoScalingGroupName)]
			if grp == nil {
				continue
			}
			g := *grp
			g.MinSize, g.MaxSize, g.DesiredSize = awssdk.ToInt32(asg.MinSize), awssdk.ToInt32(asg.MaxSize), awssdk.ToInt32(asg.DesiredCapacity)
			g.Instances = nil
			for _, in := range asg.Instances {
				if in.LifecycleState == astypes.LifecycleStateInService || in.LifecycleState == "" {
					g.Instances = append(g.Instances, inventory.Instance{ID: awssdk.ToString(in.InstanceId), InstanceType: awssdk.ToString(in.InstanceType),
						Zone: awssdk.ToString(in.AvailabilityZone), LifecycleState: "InService"})
				}
			}
			out = append(out, g)
		}
	})
	slices.SortFunc(out, func(a, b inventory.NodeGroup) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PrepareTree points overlays/<env>'s NodePools at the kwok provider's
// node class (testenv.PointNodePoolsAtKwok): the kwok provider launches
// nodes only for its own.
func (c *controlPlane) PrepareTree(dir, env string) (string, error) {
	if err := testenv.PointNodePoolsAtKwok(filepath.Join(dir, "overlays", env)); err != nil {
		return "", err
	}
	return fmt.Sprintf("overlay %s's NodePools point at the kwok provider's KWOKNodeClass default", env), nil
}
