package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// consolidationPool is an on-demand NodePool of the given instance types
// (or families) that consolidates after a minute.
func consolidationPool(policy apisv1.ConsolidationPolicy, budgets []apisv1.Budget, key string, values ...string) apisv1.NodePool {
	return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{
		Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimTemplateSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values},
			{Key: apisv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{inventory.CapacityOnDemand}},
		}}},
		Disruption: apisv1.Disruption{ConsolidationPolicy: policy, ConsolidateAfter: apisv1.NewNillableDuration(time.Minute), Budgets: budgets},
	}}
}

// karpenterCluster loads a sandbox with no legacy node, applies pool,
// launches one NodeClaim per instance type, waits for their nodes, then
// runs replicas of the 500m/512Mi web Deployment (spread one per node by
// the default scheduler) under pdb, and waits until they are Ready. It
// returns the sandbox and the nodes' names, in order.
func karpenterCluster(t *testing.T, pool apisv1.NodePool, types []string, replicas int32, pdb *inventory.PDB) (*Sandbox, []string) {
	t.Helper()
	ctx := context.Background()
	s := load(t, smallInventory(0, pdb, func(inv *inventory.Inventory) { inv.NodeGroups[0].DesiredSize = 0 }))
	u, err := toUnstructuredForTest(pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Dynamic().Resource(NodePoolGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		off := Offering{InstanceType: it, Zone: "us-east-1a", CapacityType: inventory.CapacityOnDemand}
		if _, err := s.Dynamic().Resource(NodeClaimGVR).Create(ctx, NewNodeClaim(&pool, off, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := scaleDeployment(ctx, s, "app", "web", replicas); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	names := nodeNamesOf(t, s)
	if len(names) != len(types) {
		t.Fatalf("nodes %v, want %d", names, len(types))
	}
	return s, names
}

func nodeNamesOf(t *testing.T, s *Sandbox) []string {
	t.Helper()
	l, err := s.Kube().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range l.Items {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// podsPerNode counts the web pods on each node.
func podsPerNode(t *testing.T, s *Sandbox) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range pods(t, s, "app") {
		out[p.Spec.NodeName]++
	}
	return out
}

func TestStandInConsolidation(t *testing.T) {
	zero := func(v int) *intstr.IntOrString { x := intstr.FromInt32(int32(v)); return &x }
	xlarge := []string{"m5.xlarge", "m5.xlarge"}
	tests := []struct {
		name     string
		pool     apisv1.NodePool
		types    []string
		replicas int32
		pdb      *inventory.PDB
		// wantNodes is how many nodes remain; wantCommands the executed
		// commands' method and action.
		wantNodes    int
		wantCommands []string
		// wantEvictions are the evictions consolidation made.
		wantEvictions int
	}{
		{
			name: "underutilised node whose pod fits elsewhere is deleted",
			pool: consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, corev1.LabelInstanceTypeStable, "m5.xlarge"),
			// One pod on each node; either node holds both.
			types: xlarge, replicas: 2,
			wantNodes: 1, wantCommands: []string{"SingleNodeConsolidation Delete"}, wantEvictions: 1,
		},
		{
			name:  "node whose only pod has a PDB allowing 0 disruptions is kept",
			pool:  consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, corev1.LabelInstanceTypeStable, "m5.xlarge"),
			types: xlarge, replicas: 2, pdb: &inventory.PDB{MinAvailable: zero(2)},
			wantNodes: 2,
		},
		{
			name:  "budget of 0 nodes blocks",
			pool:  consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, []apisv1.Budget{{Nodes: "0"}}, corev1.LabelInstanceTypeStable, "m5.xlarge"),
			types: xlarge, replicas: 2,
			wantNodes: 2,
		},
		{
			name:  "budget of 0 for Underutilized still lets Empty act",
			pool:  consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, []apisv1.Budget{{Nodes: "0", Reasons: []apisv1.DisruptionReason{apisv1.DisruptionReasonUnderutilized}}}, corev1.LabelInstanceTypeStable, "m5.xlarge"),
			types: []string{"m5.xlarge", "m5.xlarge", "m5.xlarge"}, replicas: 2,
			wantNodes: 2, wantCommands: []string{"Emptiness Delete"},
		},
		{
			name: "WhenEmpty pool only loses its empty node",
			pool: consolidationPool(apisv1.ConsolidationPolicyWhenEmpty, nil, corev1.LabelInstanceTypeStable, "m5.xlarge"),
			// Two nodes with a pod each, one empty.
			types: []string{"m5.xlarge", "m5.xlarge", "m5.xlarge"}, replicas: 2,
			wantNodes: 2, wantCommands: []string{"Emptiness Delete"},
		},
		{
			name:  "WhenEmptyOrUnderutilized pool also packs the underutilised nodes",
			pool:  consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, corev1.LabelInstanceTypeStable, "m5.xlarge"),
			types: []string{"m5.xlarge", "m5.xlarge", "m5.xlarge"}, replicas: 2,
			wantNodes: 1, wantCommands: []string{"Emptiness Delete", "SingleNodeConsolidation Delete"}, wantEvictions: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, before := karpenterCluster(t, tt.pool, tt.types, tt.replicas, tt.pdb)
			// Within consolidateAfter nothing may happen.
			if err := s.Step(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := nodeNamesOf(t, s); len(got) != len(before) || len(s.Consolidations()) != 0 {
				t.Fatalf("within consolidateAfter: nodes %v, commands %+v; want %v untouched", got, s.Consolidations(), before)
			}
			if err := s.SettleConsolidation(ctx, 20*time.Minute); err != nil {
				t.Fatal(err)
			}
			// Long after, the cluster is still as settled.
			if err := s.Step(ctx, 10*time.Minute); err != nil {
				t.Fatal(err)
			}
			after := nodeNamesOf(t, s)
			var executed []string
			for _, c := range s.Consolidations() {
				if c.Status != CommandExecuted {
					t.Errorf("command %s %s of %v: %s %v", c.Method, c.Action, c.Nodes, c.Status, c.Problems)
					continue
				}
				executed = append(executed, string(c.Method)+" "+string(c.Action))
			}
			if len(after) != tt.wantNodes || !equalStrings(executed, tt.wantCommands) {
				t.Fatalf("nodes %v → %v, commands %v; want %d nodes, commands %v", before, after, executed, tt.wantNodes, tt.wantCommands)
			}
			placed := podsPerNode(t, s)
			total := 0
			for node, n := range placed {
				if !contains(after, node) {
					t.Errorf("%d web pods on %q, not a remaining node %v", n, node, after)
				}
				total += n
			}
			if total != int(tt.replicas) {
				t.Errorf("%d web pods, want %d", total, tt.replicas)
			}
			for _, p := range pods(t, s, "app") {
				if !podutils.IsPodReady(&p) {
					t.Errorf("pod %s not Ready after consolidation", p.Name)
				}
			}
			st := s.Stats()
			if st.Consolidations != len(tt.wantCommands) || st.ConsolidationEvictions != tt.wantEvictions || st.PDBViolations != 0 {
				t.Errorf("stats %+v; want %d consolidations, %d evictions, no PDB violation", st, len(tt.wantCommands), tt.wantEvictions)
			}
			if want := float64(len(before)-len(after)) * s.price("m5.xlarge", "us-east-1a", inventory.CapacityOnDemand); !near(st.ConsolidationSavings, want) {
				t.Errorf("saved $%.4f/h, want $%.4f/h (the removed nodes)", st.ConsolidationSavings, want)
			}
		})
	}
}

// TestStandInReplaceLaunchesFirst: a node far larger than its one pod is
// replaced by one cheaper node, which is Ready before the pod is evicted.
func TestStandInReplaceLaunchesFirst(t *testing.T) {
	ctx := context.Background()
	pool := consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, apisv1.LabelInstanceFamily, "m5")
	s, before := karpenterCluster(t, pool, []string{"m5.4xlarge"}, 1, nil)
	old := before[0]
	launched := s.Stats().NodesLaunched
	var replacementReady, evicted time.Time
	s.OnTick(func(ctx context.Context) error {
		nodes, err := s.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range nodes.Items {
			if n := &nodes.Items[i]; n.Name != old && nodeReady(n) && replacementReady.IsZero() {
				replacementReady = s.Now()
			}
		}
		ps, err := s.Kube().CoreV1().Pods("app").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		onOld := 0
		for _, p := range ps.Items {
			if p.Spec.NodeName == old {
				onOld++
			}
		}
		if onOld == 0 && evicted.IsZero() {
			evicted = s.Now()
		}
		return nil
	})
	if err := s.SettleConsolidation(ctx, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	cmds := s.Consolidations()
	if len(cmds) != 1 || cmds[0].Action != disruption.ActionReplace || cmds[0].Status != CommandExecuted || cmds[0].Replacement == nil {
		t.Fatalf("commands %+v; want one executed Replace", cmds)
	}
	c := cmds[0]
	after := nodeNamesOf(t, s)
	if len(after) != 1 || after[0] == old || after[0] != c.Replacement.Name {
		t.Fatalf("nodes %v → %v; want only the replacement %q", before, after, c.Replacement.Name)
	}
	if got := s.Stats().NodesLaunched - launched; got != 1 {
		t.Errorf("%d nodes launched during the replace, want exactly 1", got)
	}
	if replacementReady.IsZero() || evicted.IsZero() || evicted.Before(replacementReady) {
		t.Errorf("replacement Ready at %s, old node's pod gone at %s; want Ready first", replacementReady, evicted)
	}
	oldPrice := s.price("m5.4xlarge", "us-east-1a", inventory.CapacityOnDemand)
	if c.Replacement.Price >= oldPrice || !near(c.Savings, oldPrice-c.Replacement.Price) || !near(s.Stats().ConsolidationSavings, c.Savings) {
		t.Errorf("replacement %s at $%.4f/h for $%.4f/h, saving %.4f (stats %.4f)", c.Replacement.InstanceType, c.Replacement.Price, oldPrice, c.Savings, s.Stats().ConsolidationSavings)
	}
	for _, p := range pods(t, s, "app") {
		if p.Spec.NodeName != c.Replacement.Name || !podutils.IsPodReady(&p) {
			t.Errorf("pod %s on %q (Ready %t), want Ready on the replacement", p.Name, p.Spec.NodeName, podutils.IsPodReady(&p))
		}
	}
}

// TestStandInRevalidatesAfterTTL: a command whose node is annotated
// do-not-disrupt while it waits out the validation delay is dropped as
// invalid, and the node kept (later passes may remove the other node).
func TestStandInRevalidatesAfterTTL(t *testing.T) {
	ctx := context.Background()
	pool := consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, corev1.LabelInstanceTypeStable, "m5.xlarge")
	s, before := karpenterCluster(t, pool, []string{"m5.xlarge", "m5.xlarge"}, 2, nil)
	protected := false
	s.OnTick(func(ctx context.Context) error {
		if protected || len(s.dis.pending) == 0 {
			return nil
		}
		for _, ref := range s.dis.pending[0].rec.Nodes {
			n, err := s.Kube().CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Annotations = map[string]string{apisv1.DoNotDisruptAnnotationKey: "true"}
			if _, err := s.Kube().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		protected = true
		return nil
	})
	if err := s.SettleConsolidation(ctx, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	if !protected {
		t.Fatal("no command was decided")
	}
	cmds := s.Consolidations()
	if len(cmds) == 0 || cmds[0].Status != CommandInvalid || len(cmds[0].Problems) == 0 {
		t.Fatalf("commands %+v; want the first one invalid with its problems", cmds)
	}
	if st := s.Stats(); st.ConsolidationsInvalid != 1 {
		t.Errorf("stats %+v; want one invalid command", st)
	}
	kept := cmds[0].Nodes[0].Name
	if got := nodeNamesOf(t, s); !contains(got, kept) {
		t.Errorf("nodes %v → %v; the do-not-disrupt node %s must stay", before, got, kept)
	}
	// Later passes see the annotation: the other node may go, not this one.
	for _, c := range cmds[1:] {
		for _, n := range c.Nodes {
			if n.Name == kept {
				t.Errorf("command %s %s (%s) disrupts the do-not-disrupt node %s", c.Method, c.Action, c.Status, kept)
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestSettleConsolidationSaysWhatItWaitsFor: a settle that runs out of
// time while a node waits out consolidateAfter names the node, when it
// reaches consolidateAfter and what Karpenter did meanwhile (the demo
// replicated 6 times and more cycled for 4 h: each Delete left a pod its
// simulation had placed elsewhere pending, Karpenter launched a node for
// it, and that node was consolidated 15 minutes later; the error said only
// "Karpenter nodes are waiting out consolidateAfter").
func TestSettleConsolidationSaysWhatItWaitsFor(t *testing.T) {
	ctx := context.Background()
	pool := consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, corev1.LabelInstanceTypeStable, "m5.xlarge")
	pool.Spec.Disruption.ConsolidateAfter = apisv1.NewNillableDuration(time.Hour)
	s, nodes := karpenterCluster(t, pool, []string{"m5.xlarge"}, 1, nil)
	err := s.SettleConsolidation(ctx, 10*time.Minute)
	if !errors.Is(err, ErrNotSettled) {
		t.Fatalf("settle: %v; want ErrNotSettled", err)
	}
	w := s.dis.wait
	if w.node != nodes[0] || w.until.Sub(w.since) != time.Hour || !w.until.After(s.Now()) {
		t.Fatalf("waiting for %+v at %s; want node %s an hour after its last pod change, still ahead", w, s.Now(), nodes[0])
	}
	for _, want := range []string{
		fmt.Sprintf("node %s reaches it at %s (counted from %s,", nodes[0], w.until.Format(time.RFC3339), w.since.Format(time.RFC3339)),
		"Karpenter executed 0 consolidation commands (0 skipped) and launched 0 nodes",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("settle error %q; want it to say %q", err, want)
		}
	}
}

// TestConsolidationSkipsAnUnchangedCluster: once a disruption pass has
// decided nothing, later passes do not run disruption.Decide again until
// the cluster changes (a write) — a thousand-node apply and settle ran
// it over every Karpenter node every 10 s of simulated time on a cluster
// that had not moved — and the first pass after a change decides on it.
func TestConsolidationSkipsAnUnchangedCluster(t *testing.T) {
	ctx := context.Background()
	two := intstr.FromInt32(2)
	pool := consolidationPool(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil, corev1.LabelInstanceTypeStable, "m5.xlarge")
	s, before := karpenterCluster(t, pool, []string{"m5.xlarge", "m5.xlarge"}, 2, &inventory.PDB{MinAvailable: &two})
	if err := s.Step(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if s.dis.decided != 1 || s.dis.unchanged < 50 || len(s.Consolidations()) != 0 {
		t.Fatalf("Decide ran %d times, %d passes skipped, commands %+v; want it once (the PDB blocks both nodes), then every pass skipped", s.dis.decided, s.dis.unchanged, s.Consolidations())
	}
	pdbs, err := s.Kube().PolicyV1().PodDisruptionBudgets("app").List(ctx, metav1.ListOptions{})
	if err != nil || len(pdbs.Items) != 1 {
		t.Fatalf("PDBs %v: %v", pdbs, err)
	}
	one := intstr.FromInt32(1)
	pdbs.Items[0].Spec.MinAvailable = &one
	if _, err := s.Kube().PolicyV1().PodDisruptionBudgets("app").Update(ctx, &pdbs.Items[0], metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	decided := s.dis.decided
	if err := s.Step(ctx, DisruptionPollPeriod); err != nil {
		t.Fatal(err)
	}
	if s.dis.decided != decided+1 {
		t.Fatalf("Decide ran %d times in the pass after the PDB changed, want once", s.dis.decided-decided)
	}
	if err := s.SettleConsolidation(ctx, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	if cmds := s.Consolidations(); len(cmds) != 1 || cmds[0].Status != CommandExecuted || cmds[0].Action != disruption.ActionDelete {
		t.Fatalf("commands %+v; want one Delete executed once the PDB allows it", cmds)
	}
	if got := nodeNamesOf(t, s); len(got) != 1 {
		t.Errorf("nodes %v → %v; want one left", before, got)
	}
}

// TestNextConsolidatable: the first time after the pass a node (in flight
// or not) reaches its NodePool's consolidateAfter, counted from its last
// pod event or its creation; nodes of a pool that never consolidates, or
// of none, do not count.
func TestNextConsolidatable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pool := func(name string, d apisv1.NillableDuration) engine.NodePool {
		return engine.NodePool{Name: name, Spec: apisv1.NodePoolSpec{Disruption: apisv1.Disruption{ConsolidateAfter: d}}}
	}
	node := func(name, pool string, created, lastPod time.Time) disruption.Node {
		return disruption.Node{ExistingNode: engine.ExistingNode{Node: inventory.Node{Name: name, NodePool: pool, CreatedAt: metav1.NewTime(created)}}, LastPodEventTime: lastPod}
	}
	in := disruption.Input{Now: now, NodePools: []engine.NodePool{pool("a", apisv1.NewNillableDuration(time.Minute)), pool("never", apisv1.NillableDuration{})}}
	if got := nextConsolidatable(in); !got.IsZero() {
		t.Errorf("no node: %s, want zero", got)
	}
	in.Nodes = []disruption.Node{
		node("past", "a", now.Add(-time.Hour), time.Time{}),
		node("by-pod", "a", now.Add(-time.Hour), now.Add(-20*time.Second)),
		node("by-creation", "a", now.Add(-10*time.Second), time.Time{}),
		node("never", "never", now, time.Time{}),
		node("legacy", "", now, time.Time{}),
	}
	if got, want := nextConsolidatable(in), now.Add(40*time.Second); !got.Equal(want) {
		t.Errorf("next %s, want %s (by-pod's last pod event + 1m)", got, want)
	}
}
