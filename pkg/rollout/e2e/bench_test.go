package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

const (
	benchNodes       = 100
	benchDeployments = 50
	benchReplicas    = 20 // 1,000 pods
	benchWaveSize    = 20
	benchTargets     = 25 // 16-CPU nodes standing in for pre-provisioned Karpenter capacity
)

// benchControlPlane lifts the control plane's own limits, which a
// 1,000-pod drain otherwise measures instead of the drain:
// kube-controller-manager's clients default to 20 QPS / 30 burst per
// controller (the ReplicaSet controller re-creates every evicted pod, the
// disruption controller rewrites a PDB's status after every change) with 5
// ReplicaSet and 5 Deployment workers, and kube-scheduler's client to 50 QPS
// / 100 burst (one binding per pod). Its --kube-api-* flags are deprecated
// in favour of a config file but still honoured without --config (v1.35).
func benchControlPlane(b *testing.B) testenv.Options {
	conf := filepath.Join(b.TempDir(), "kwok.yaml")
	if err := os.WriteFile(conf, []byte(kwokConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	return testenv.Options{
		ControllerManagerArgs: []string{"--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-replicaset-syncs=20", "--concurrent-deployment-syncs=20"},
		SchedulerArgs:         []string{"--kube-api-qps=200", "--kube-api-burst=400"},
		KwokArgs:              []string{"--config", conf},
	}
}

// kwokConfig raises kwok's pod stage workers from 4 to 16: they delete
// evicted pods and mark their replacements Ready, 2,000 transitions in this
// drain. A configuration file is not defaulted, so it spells out kwok
// v0.8.0's other defaults.
const kwokConfig = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enableDebuggingHandlers: true
  enableProfilingHandler: true
  enableContentionProfiling: false
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
`

// benchCluster starts a control plane with benchNodes legacy nodes running
// benchDeployments × benchReplicas pods, each Deployment behind a PDB
// maxUnavailable 10%, measures P and R there (benchPodReady), then adds
// the target capacity. It returns the env, the legacy node names, the
// budgets, P and R.
func benchCluster(b *testing.B) (*testenv.Env, []string, []budget, time.Duration, float64) {
	b.Helper()
	env := testenv.Start(b, benchControlPlane(b))
	ctx := b.Context()
	var legacy []string
	for i := range benchNodes {
		name := fmt.Sprintf("legacy-%03d", i)
		if _, err := env.CreateKwokNode(ctx, testenv.NodeSpec{Name: name, NodeGroup: "legacy", Zone: zones[i%len(zones)]}); err != nil {
			b.Fatal(err)
		}
		legacy = append(legacy, name)
	}
	if err := env.WaitForNodesReady(ctx, legacy...); err != nil {
		b.Fatal(err)
	}
	ns := env.Namespace(b)
	var budgets []budget
	for i := range benchDeployments {
		name := fmt.Sprintf("app-%02d", i)
		d := deployment(ns, name, benchReplicas, "100m")
		if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromString("10%")), Selector: &metav1.LabelSelector{MatchLabels: labelsOf(name)}}}
		if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		budgets = append(budgets, budget{name: name, selector: labels.SelectorFromSet(labelsOf(name)), min: benchReplicas - benchReplicas/10})
	}
	for _, bg := range budgets {
		if _, err := env.WaitForPodsRunning(ctx, ns, "app="+bg.name, benchReplicas); err != nil {
			b.Fatal(err)
		}
	}
	// Before the target capacity exists, so that the replacements land
	// on legacy nodes and the drain moves every pod.
	ready, rate, err := benchPodReady(ctx, b, env.Client, ns, budgets)
	if err != nil {
		b.Fatal(err)
	}
	var targets []string
	for i := range benchTargets {
		name := fmt.Sprintf("karpenter-%02d", i)
		if _, err := env.CreateKwokNode(ctx, testenv.NodeSpec{Name: name, Zone: zones[i%len(zones)], CPU: "16", Memory: "64Gi", Pods: "110",
			Labels: map[string]string{"karpenter.sh/nodepool": "bench"}}); err != nil {
			b.Fatal(err)
		}
		targets = append(targets, name)
	}
	if err := env.WaitForNodesReady(ctx, targets...); err != nil {
		b.Fatal(err)
	}
	return env, legacy, budgets, ready, rate
}

// BenchmarkDrain100Nodes compares, on the real control plane (etcd,
// apiserver, scheduler, controller-manager, kwok; capacity pre-provisioned
// as the rollout does, Karpenter itself not running), the rollout's wave
// drain of 100 legacy nodes holding 1,000 PDB-protected pods with a
// sequential kubectl-style drain (drain.Helper, one node after another,
// kubectl's 5s retry after a 429) of the same nodes on a fresh cluster.
//
//	go test ./pkg/rollout/e2e/ -run '^$' -bench Drain100Nodes -benchtime 1x -timeout 60m
//
// The sequential sub-benchmark reports waves-speedup-x when both ran.
//
// Each reports, besides the drain's figures, the plan's duration model
// (plan.PredictWaves) for the same pods, budgets and waves: predicted-s and
// bound-s against makespan-s (the drain's start to every pod Running
// again), with the model's inputs measured on this control plane:
// nodelaunch-s L (benchNodeLaunch), podready-s P and podrate/s R, the
// replacements Ready a second under a wave's load (benchPodReady). The
// capacity is Ready before the drain starts, so no wave launches any: L
// only enters the model through a launch.
func BenchmarkDrain100Nodes(b *testing.B) {
	launch := benchNodeLaunch(b)
	var wave time.Duration
	b.Run("waves", func(b *testing.B) {
		for range b.N {
			wave, _, _ = benchRun(b, drainWaves, benchWaveSize, launch)
		}
	})
	b.Run("sequential", func(b *testing.B) {
		for range b.N {
			d, _, _ := benchRun(b, drainSequential, 1, launch)
			if wave > 0 {
				b.ReportMetric(d.Seconds()/wave.Seconds(), "waves-speedup-x")
			}
		}
	})
}

// benchRun drains the legacy nodes of a fresh cluster with drainFn while a
// watch counts healthy pods per PDB; it returns the drain's wall time, the
// longest pod wait for a node and how many PDBs dropped below minimum, and
// reports them with the API requests the drain's client sent per pod
// moved, by verb (evictions, gets, lists, watches), and with what the
// plan's duration model predicts for drainFn's waves of waveSize nodes
// drained all at once, given L (launch) and P measured on the cluster.
func benchRun(b *testing.B, drainFn func(context.Context, testing.TB, kubernetes.Interface, []string) error, waveSize int, launch time.Duration) (time.Duration, time.Duration, int) {
	b.StopTimer()
	env, legacy, budgets, ready, rate := benchCluster(b)
	ctx := b.Context()
	predicted, waveTimes, err := benchPredict(ctx, env.Client, legacy, waveSize, launch, ready, rate)
	if err != nil {
		b.Fatal(err)
	}
	w, err := watchPods(ctx, env.Client, "", budgets)
	if err != nil {
		b.Fatal(err)
	}
	reqs := &kube.Requests{}
	counted := rest.CopyConfig(env.Config)
	counted.Wrap(reqs.Wrap)
	client, err := kubernetes.NewForConfig(counted)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	began := time.Now()
	if err := drainFn(ctx, b, client, legacy); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	// The drain is done when the evicted pods run again elsewhere.
	for _, bg := range budgets {
		if _, err := env.WaitForPodsRunning(ctx, "", bg.selector.String(), benchReplicas); err != nil {
			b.Fatal(err)
		}
	}
	settled := time.Since(began)
	lowest, pending, err := w.stop()
	if err != nil {
		b.Fatal(err)
	}
	violations := 0
	for _, bg := range budgets {
		if lowest[bg.name] < bg.min {
			violations++
		}
	}
	sent := reqs.Counts()
	b.Logf("drained in %s (all pods Running again after %s); longest wait for a node %s; %d PDBs below minimum; requests: %s",
		elapsed.Round(time.Millisecond), settled.Round(time.Millisecond), pending.Round(time.Millisecond), violations, sent)
	b.Logf("model: %s; makespan %.2f× the prediction, %.2f× the bound; waves predicted %s",
		predicted, settled.Seconds()/predicted.PredictedSeconds, settled.Seconds()/predicted.BoundSeconds, waveTimes)
	b.ReportMetric(predicted.PredictedSeconds, "predicted-s")
	b.ReportMetric(predicted.BoundSeconds, "bound-s")
	b.ReportMetric(predicted.NodeLaunchSeconds, "nodelaunch-s")
	b.ReportMetric(predicted.PodReadySeconds, "podready-s")
	b.ReportMetric(predicted.PodsPerSecond, "podrate/s")
	b.ReportMetric(elapsed.Seconds(), "drain-s")
	b.ReportMetric(settled.Seconds(), "makespan-s")
	b.ReportMetric(pending.Seconds(), "maxwait-s")
	b.ReportMetric(float64(violations), "pdb-violations")
	for unit, v := range sent.PerPod(benchDeployments * benchReplicas) {
		b.ReportMetric(v, unit)
	}
	return elapsed, pending, violations
}

// drainWaves is the rollout's drain: waves of benchWaveSize nodes, each
// cordoned, then drained concurrently with kube.Drainer (the code path of
// a wave's drain phase). It logs where the time went (drainProfile).
func drainWaves(ctx context.Context, tb testing.TB, client kubernetes.Interface, nodes []string) error {
	opts := kube.DefaultDrainOptions()
	opts.Timeout = 10 * time.Minute
	opts.Watch = true // as the rollout drains on the wall clock
	prof := newDrainProfile()
	d := &kube.Drainer{Client: client, Clock: clock.RealClock{}, Options: opts, OnEvent: prof.observe}
	for i := 0; i < len(nodes); i += benchWaveSize {
		wave := nodes[i:min(i+benchWaveSize, len(nodes))]
		began := time.Now()
		prof.start(began)
		for _, n := range wave {
			if err := kube.Cordon(ctx, client, n, true); err != nil {
				return err
			}
		}
		res, err := d.DrainNodes(ctx, wave, len(wave))
		if err != nil {
			return err
		}
		for _, r := range res {
			if !r.Complete() {
				return fmt.Errorf("node %s: pods left: %v", r.Node, r.Skipped)
			}
		}
		prof.wave(time.Since(began))
	}
	tb.Log(prof.String())
	return nil
}

// drainProfile records, from the Drainer's events, where a wave drain
// spends its time: eviction requests and how many were refused with 429 (a
// PDB at its minimum: every request but each pod's last), how long pods
// waited for their eviction to be accepted, how long an accepted eviction
// took to terminate the pod, and the most pods being evicted at once.
type drainProfile struct {
	mu                 sync.Mutex
	first, last        map[string]time.Time // first and latest eviction request per pod
	attempts           int
	inFlight, peak     int
	pdbWait, terminate []time.Duration
	waves              []time.Duration
	// waveStart is when the current wave began; setup is, per wave, the
	// time to its first eviction request (cordon, pod listing, PDB sync).
	waveStart time.Time
	setup     []time.Duration
}

func (p *drainProfile) start(t time.Time) {
	p.mu.Lock()
	p.waveStart = t
	p.mu.Unlock()
}

func newDrainProfile() *drainProfile {
	return &drainProfile{first: map[string]time.Time{}, last: map[string]time.Time{}}
}

func (p *drainProfile) observe(e kube.DrainEvent) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.first[e.Pod]; !ok && (e.Type == kube.DrainEvicting || e.Type == kube.DrainBlocked) {
		p.first[e.Pod] = now // asked, or held for its PDB
		p.inFlight++
		p.peak = max(p.peak, p.inFlight)
	}
	if !p.waveStart.IsZero() {
		p.setup = append(p.setup, now.Sub(p.waveStart).Round(time.Millisecond))
		p.waveStart = time.Time{}
	}
	switch e.Type {
	case kube.DrainEvicting:
		p.attempts++
		p.last[e.Pod] = now
	case kube.DrainEvicted:
		p.inFlight--
		p.pdbWait = append(p.pdbWait, p.last[e.Pod].Sub(p.first[e.Pod]))
		p.terminate = append(p.terminate, now.Sub(p.last[e.Pod]))
	}
}

func (p *drainProfile) wave(d time.Duration) {
	p.mu.Lock()
	p.waves = append(p.waves, d.Round(time.Millisecond))
	p.mu.Unlock()
}

func (p *drainProfile) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("waves %v (to the first eviction: %v); %d pods, %d eviction requests (%d refused with 429), at most %d pods in flight; "+
		"waiting for a PDB to allow the eviction: %s; accepted eviction to pod gone: %s",
		p.waves, p.setup, len(p.first), p.attempts, p.attempts-len(p.first), p.peak, summary(p.pdbWait), summary(p.terminate))
}

// summary renders durations as mean / p50 / p95 / max.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("mean %s p50 %s p95 %s max %s", r(sum/time.Duration(len(s))), r(s[len(s)/2]), r(s[len(s)*95/100]), r(s[len(s)-1]))
}

// drainSequential is `kubectl drain` run node after node.
func drainSequential(ctx context.Context, _ testing.TB, client kubernetes.Interface, nodes []string) error {
	h := &drain.Helper{Ctx: ctx, Client: client, Force: false, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, Timeout: 10 * time.Minute, EvictErrorRetryDelay: 5 * time.Second, Out: io.Discard, ErrOut: io.Discard}
	for _, n := range nodes {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := drain.RunCordonOrUncordon(h, node, true); err != nil {
			return err
		}
		if err := drain.RunNodeDrain(h, n); err != nil {
			return fmt.Errorf("drain %s: %w", n, err)
		}
	}
	return nil
}
