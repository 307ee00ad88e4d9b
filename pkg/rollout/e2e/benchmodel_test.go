package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// launchTaint keeps every pod but benchNodeLaunch's off its NodePool.
const launchTaint = "bench.karpenter-migrate.io/launch"

// launchNodePool is a NodePool on the kwok provider's node class
// (testenv.KWOKNodeClass: nodes register a second after launch).
var launchNodePool = fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: launch
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: kubernetes.io/os, operator: In, values: ["linux"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      taints:
        - {key: %s, value: "true", effect: NoSchedule}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
`, launchTaint)

// benchNodeLaunch measures L (rollout.nodeLaunchTime) on this control
// plane: on one of its own, started with benchControlPlane's options and
// Karpenter's kwok provider, a pending pod makes Karpenter create a
// NodeClaim, and L runs from when the NodeClaim is seen to when its node is
// Ready. That control plane is stopped before the drain's starts, so that
// Karpenter adds no load to the drain.
func benchNodeLaunch(b *testing.B) time.Duration {
	b.Helper()
	opts := benchControlPlane(b)
	opts.Karpenter = true
	opts.InstanceTypesFile = writeInstanceTypes(b, b.TempDir())
	env := testenv.Start(b, opts)
	defer env.Stop()
	ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
	defer cancel()
	if _, err := env.ApplyYAML(ctx, "", []byte(testenv.KWOKNodeClass+"---\n"+launchNodePool)); err != nil {
		b.Fatal(err)
	}
	// In "default", not env.Namespace's: its cleanup would run after the
	// control plane stopped. Its service account may not be there yet.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "launch"}, Spec: podSpec("100m")}
	pod.Spec.NodeSelector = map[string]string{"karpenter.sh/nodepool": "launch"}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: launchTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	err := env.WaitFor(ctx, "the launch pod created", func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	claims := env.Dynamic.Resource(kube.NodeClaimGVK.GroupVersion().WithResource("nodeclaims"))
	var claimed, ready time.Time
	err = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		if claimed.IsZero() {
			claimed = time.Now()
		}
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=launch"})
		if err != nil {
			return false, err
		}
		if slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return testenv.NodeReady(&n) }) {
			ready = time.Now()
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		b.Fatalf("wait for Karpenter's node to be Ready: %v", err)
	}
	b.Logf("Karpenter's node Ready %s after its NodeClaim was seen", ready.Sub(claimed).Round(time.Millisecond))
	return ready.Sub(claimed)
}

// benchPodReady measures P (rollout.podReadyTime) and the cluster's
// replacement rate R (Timing.PodsPerSecond) on this control plane. P runs
// from one eviction, alone, to its budget's pods all healthy again (the
// replacement Running and Ready). R is the replacements a second the
// budgets count again under a wave's load: it evicts at once what a
// wave's first round does, as many pods of every budget as the budget
// allows, and divides them by the time to every budget's status allowing
// as many disruptions again — what the drain's gate waits for before the
// next round, the disruption controller's update after the replacements
// are Ready. It logs the rate to the replacements Ready too, and the
// medians over the budgets.
func benchPodReady(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns string, budgets []budget) (time.Duration, float64, error) {
	alone, _, _, _, err := podReadyRound(ctx, client, ns, budgets[:1], 1)
	if err != nil {
		return 0, 0, err
	}
	allowed := benchReplicas / 10 // the budgets' maxUnavailable 10%
	ready, gate, allReady, allGate, err := podReadyRound(ctx, client, ns, budgets, allowed)
	if err != nil {
		return 0, 0, err
	}
	n := float64(len(budgets) * allowed)
	tb.Logf("P %s for one eviction alone; %d budgets × %d evictions at once: every replacement Ready after %s (%.1f a second), every budget allowing %d again after %s (R = %.1f a second); a budget's median %s and %s",
		alone.Round(time.Millisecond), len(budgets), allowed, allReady.Round(time.Millisecond), n/allReady.Seconds(), allowed, allGate.Round(time.Millisecond), n/allGate.Seconds(),
		ready.Round(time.Millisecond), gate.Round(time.Millisecond))
	return alone, n / allGate.Seconds(), nil
}

// podReadyRound evicts n pods of each budget at once and returns the
// medians over the budgets of the time to their pods all healthy again
// and to their status allowing n disruptions again, then the time, from
// the first eviction, to every budget's pods healthy and to every budget
// allowing n again.
func podReadyRound(ctx context.Context, client kubernetes.Interface, ns string, budgets []budget, n int) (ready, gate, allReady, allGate time.Duration, err error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	began := make([]time.Time, len(budgets))
	evicted := map[types.UID]bool{}
	var victims [][]corev1.Pod
	for _, bg := range budgets {
		var vs []corev1.Pod
		for _, p := range pods.Items {
			if len(vs) < n && bg.selector.Matches(labels.Set(p.Labels)) {
				vs = append(vs, p)
				evicted[p.UID] = true
			}
		}
		victims = append(victims, vs)
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, vs := range victims {
		g.Go(func() error {
			for _, v := range vs {
				// The disruption controller may not have counted the
				// budget's pods yet: a 429 until it has.
				err := wait.PollUntilContextCancel(gctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
					asked := time.Now()
					err := client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.Name}})
					if apierrors.IsTooManyRequests(err) {
						return false, nil
					}
					if err == nil && began[i].IsZero() {
						began[i] = asked
					}
					return err == nil, err
				})
				if err != nil {
					return fmt.Errorf("evict %s: %w", v.Name, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, 0, 0, err
	}
	readyAt := make([]time.Duration, len(budgets))
	gateAt := make([]time.Duration, len(budgets))
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pdbs, err := client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		now, done := time.Now(), true
		for i, bg := range budgets {
			if readyAt[i] == 0 {
				healthy := 0
				for j := range pods.Items {
					if p := &pods.Items[j]; !evicted[p.UID] && bg.selector.Matches(labels.Set(p.Labels)) && testenv.PodHealthy(p) {
						healthy++
					}
				}
				if healthy == benchReplicas {
					readyAt[i] = now.Sub(began[i])
				}
			}
			if gateAt[i] == 0 {
				for _, pdb := range pdbs.Items {
					if pdb.Name == bg.name && pdb.Status.CurrentHealthy == benchReplicas && int(pdb.Status.DisruptionsAllowed) >= n && readyAt[i] > 0 {
						gateAt[i] = now.Sub(began[i])
					}
				}
			}
			done = done && readyAt[i] > 0 && gateAt[i] > 0
		}
		return done, nil
	})
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("wait for the replacements: %w", err)
	}
	first := slices.MinFunc(began, func(a, b time.Time) int { return a.Compare(b) })
	for i := range budgets {
		allReady = max(allReady, began[i].Add(readyAt[i]).Sub(first))
		allGate = max(allGate, began[i].Add(gateAt[i]).Sub(first))
	}
	slices.Sort(readyAt)
	slices.Sort(gateAt)
	return readyAt[len(readyAt)/2], gateAt[len(gateAt)/2], allReady, allGate, nil
}

// benchPredict is the plan's duration model for the drain of the legacy
// nodes in waves of waveSize, each wave's nodes all drained at once, on
// capacity Ready before the drain, with L = launch, P = ready and R =
// rate: the cluster's pods and budgets as they are now read as an
// inventory.
func benchPredict(ctx context.Context, client kubernetes.Interface, legacy []string, waveSize int, launch, ready time.Duration, rate float64) (plan.Timing, string, error) {
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return plan.Timing{}, "", err
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return plan.Timing{}, "", err
	}
	inv := &inventory.Inventory{}
	for _, p := range pods.Items {
		ip := inventory.Pod{Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, Phase: p.Status.Phase, Labels: p.Labels, Annotations: p.Annotations}
		if ref := metav1.GetControllerOf(&p); ref != nil {
			ip.OwnerKind, ip.OwnerName = ref.Kind, ref.Name
		}
		inv.Pods = append(inv.Pods, ip)
	}
	for _, p := range pdbs.Items {
		inv.PDBs = append(inv.PDBs, inventory.PDB{Namespace: p.Namespace, Name: p.Name, Selector: p.Spec.Selector, MinAvailable: p.Spec.MinAvailable, MaxUnavailable: p.Spec.MaxUnavailable})
	}
	var waves [][]plan.WaveNode
	for nodes := range slices.Chunk(legacy, waveSize) {
		var w []plan.WaveNode
		for _, n := range nodes {
			w = append(w, plan.WaveNode{Name: n})
		}
		waves = append(waves, w)
	}
	wts, t := plan.PredictWaves(inv, plan.Budget{Concurrency: waveSize}, plan.Timing{NodeLaunchSeconds: launch.Seconds(), PodReadySeconds: ready.Seconds(), PodsPerSecond: rate}, waves, false)
	var each []string
	for _, wt := range wts {
		each = append(each, fmt.Sprintf("%.1fs (%s)", wt.DrainSeconds, wt.BoundBy))
	}
	if len(each) > 5 {
		each = append(each[:5], fmt.Sprintf("… (%d waves)", len(each)))
	}
	return t, strings.Join(each, ", "), nil
}
