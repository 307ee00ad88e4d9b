package plan

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Timing is the plan's duration model (docs/ARCHITECTURE.md, "How long
// a migration takes"): its inputs besides the budget (concurrency,
// pre-provisioning) and what it predicts for the waves in all.
type Timing struct {
	// PredictedSeconds is the waves' predicted duration, one drain group
	// after another: the sum of the groups' PredictedSeconds less each
	// one's EarlySeconds (WaveTiming).
	PredictedSeconds float64 `json:"predictedSeconds"`
	// BoundSeconds is a lower bound on the waves' duration however they
	// overlap: every wave's capacity launched at once, and each budget
	// moving as many pods at a time as it allows. BoundBy names what
	// makes it (a budget, or the launch and one replacement).
	BoundSeconds float64 `json:"boundSeconds"`
	BoundBy      string  `json:"boundBy,omitempty"`
	// NodeLaunchSeconds is Karpenter's launch-to-Ready time of a node and
	// PodReadySeconds the time an evicted pod's replacement takes to be
	// Ready (rollout.nodeLaunchTime, rollout.podReadyTime).
	NodeLaunchSeconds float64 `json:"nodeLaunchSeconds"`
	PodReadySeconds   float64 `json:"podReadySeconds"`
	// PodsPerSecond is how many replacements the cluster brings to Ready
	// a second with many in flight (its control plane, scheduler and
	// nodes); 0 leaves it unbounded (throughput.go).
	PodsPerSecond float64 `json:"podsPerSecond,omitempty"`
}

// WaveTiming is how a wave's predicted duration is made up: the launch of
// its capacity, the surge restarts of Deployments whose budget allows no
// eviction, and the drain.
type WaveTiming struct {
	LaunchSeconds  float64 `json:"launchSeconds,omitempty"`
	RestartSeconds float64 `json:"restartSeconds,omitempty"`
	DrainSeconds   float64 `json:"drainSeconds"`
	// EarlySeconds is how long before the drain group ahead of it ends
	// the wave starts: its surge restarts run while that group's gate
	// waits for the last replacements (a restart disrupts nothing), its
	// capacity being Ready by then. The plan's total counts it once.
	EarlySeconds float64 `json:"earlySeconds,omitempty"`
	// BoundBy says what makes the drain as long as it is: a budget ("PDB
	// api/web: 6 pods, 1 at a time") or the nodes drained at a time.
	BoundBy string `json:"boundBy,omitempty"`
}

// budget is a PodDisruptionBudget as the model reads it: its selector
// parsed and the disruptions it allows with every pod it expects healthy.
type budget struct {
	key     string
	ns      string
	sel     labels.Selector
	allowed int
}

// timer computes the waves' timing as BuildPlan cuts them, and the bound
// over all of them.
type timer struct {
	launch, ready float64
	concurrency   int
	restart       bool
	budgets       []budget
	// moved are the pods of each budget the waves move so far, and
	// firstLaunch the launch phase of the first wave that moves one.
	moved       map[string]int
	firstLaunch map[string]float64
	// minLaunch is the shortest launch phase of a wave that moves pods:
	// no pod without a budget moves before it and a replacement's start.
	minLaunch float64
	anyPods   bool
	// rate is Timing.PodsPerSecond and pods the pods the waves move.
	rate float64
	pods int
	// prepareAhead is Budget.PrepareAhead; now is the predicted time at
	// which the next wave starts (the waves so far, one after another),
	// and started each wave's start (from the first wave's), when it
	// creates the later waves' placeholders with its own.
	prepareAhead int
	now          float64
	started      []float64
	// gated is whether the last group timed drained pods: it ends with a
	// gate the next group's restarts may run during.
	gated bool
}

func newTimer(inv *inventory.Inventory, b Budget, t Timing) *timer {
	tm := &timer{launch: t.NodeLaunchSeconds, ready: t.PodReadySeconds, rate: t.PodsPerSecond, concurrency: max(1, b.Concurrency), restart: b.RestartBlocked,
		moved: map[string]int{}, firstLaunch: map[string]float64{}, minLaunch: math.Inf(1), prepareAhead: b.PrepareAhead}
	for _, pdb := range inv.PDBs {
		if pdb.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Selector)
		if err != nil || sel.Empty() {
			continue // an invalid or empty selector selects nothing (the disruption controller's reading)
		}
		tm.budgets = append(tm.budgets, budget{key: pdb.Namespace + "/" + pdb.Name, ns: pdb.Namespace, sel: sel, allowed: allowedHealthy(pdb, inv.Pods, sel)})
	}
	return tm
}

// allowedHealthy is how many disruptions a budget allows with every pod it
// expects healthy (the disruption controller's arithmetic: percentages
// round up), whatever it allowed when discovered.
func allowedHealthy(pdb inventory.PDB, pods []inventory.Pod, sel labels.Selector) int {
	expected := int(pdb.ExpectedPods)
	if expected == 0 {
		for _, p := range pods {
			if p.Namespace == pdb.Namespace && p.OwnerKind != inventory.OwnerDaemonSet && sel.Matches(labels.Set(p.Labels)) {
				expected++
			}
		}
	}
	switch {
	case pdb.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.MaxUnavailable, expected, true)
		if err == nil {
			return v
		}
	case pdb.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.MinAvailable, expected, true)
		if err == nil {
			return expected - v
		}
	}
	return int(pdb.DisruptionsAllowed)
}

// of returns the budgets selecting a pod.
func (tm *timer) of(p inventory.Pod) []*budget {
	var out []*budget
	for i := range tm.budgets {
		b := &tm.budgets[i]
		if b.ns == p.Namespace && b.sel.Matches(labels.Set(p.Labels)) {
			out = append(out, b)
		}
	}
	return out
}

// waveIn is a wave as the timer reads it: its nodes in drain order, the
// pods it moves, and whether it launches capacity (hasNodes) and
// pre-provisions it.
type waveIn struct {
	nodes                  []WaveNode
	pods                   []inventory.Pod
	hasNodes, preProvision bool
}

// wave times one wave drained alone, the next after those timed so far.
func (tm *timer) wave(nodes []WaveNode, pods []inventory.Pod, hasNodes, preProvision bool) WaveTiming {
	return tm.group([]waveIn{{nodes, pods, hasNodes, preProvision}})
}

// group times waves drained together (a drain group: Wave.DrainGroup),
// the next after those timed so far: each wave's capacity launches as
// the group starts, the group's drain starts once the last is up, its
// surge restarts go at once, and its nodes drain c at a time
// in one drain, each budget as it allows (the group's waves share none).
//
// A group whose capacity is Ready one replacement start before it starts
// and that restarts Deployments starts early by that much (EarlySeconds):
// its cordon and restarts go while the gate of the group ahead waits for
// that group's last replacements, and its drain as the gate passes.
func (tm *timer) group(ws []waveIn) WaveTiming {
	wt, readyEarly := tm.timeGroup(ws)
	if tm.gated && readyEarly && wt.RestartSeconds > 0 {
		wt.EarlySeconds = min(wt.RestartSeconds, tm.ready)
	}
	for range ws {
		tm.started = append(tm.started, tm.now-wt.EarlySeconds)
	}
	tm.now += wt.LaunchSeconds + wt.RestartSeconds + wt.DrainSeconds - wt.EarlySeconds
	tm.gated = wt.DrainSeconds > 0
	return wt
}

// timeGroup times the group starting now (tm.now); readyEarly is whether
// its capacity is Ready one replacement start earlier already.
func (tm *timer) timeGroup(ws []waveIn) (wt WaveTiming, readyEarly bool) {
	readyEarly = true
	// Pods per budget in the group, and each node's pods with their
	// budgets; Deployments whose budget allows no eviction are restarted
	// with surge, all at once.
	inGroup := map[string]int{}
	onNode := map[string]*DrainNode{}
	allowed := map[string]int{}
	restarted := map[string]bool{}
	byKey := map[string]*budget{}
	var nodes []*DrainNode
	moves := 0
	for k, w := range ws {
		if len(w.pods) == 0 {
			continue
		}
		tm.anyPods = true
		moves += len(w.pods)
		for _, n := range w.nodes {
			if onNode[n.Name] == nil {
				onNode[n.Name] = &DrainNode{Name: n.Name}
				nodes = append(nodes, onNode[n.Name])
			}
		}
		full, launch := tm.launchOf(len(tm.started)+k, w.hasNodes, w.preProvision, tm.now)
		wt.LaunchSeconds = max(wt.LaunchSeconds, launch)
		_, early := tm.launchOf(len(tm.started)+k, w.hasNodes, w.preProvision, tm.now-tm.ready)
		readyEarly = readyEarly && early == 0
		tm.minLaunch = min(tm.minLaunch, full)
		for _, p := range w.pods {
			var keys []string
			for _, b := range tm.of(p) {
				byKey[b.key] = b
				if _, seen := tm.firstLaunch[b.key]; !seen {
					tm.firstLaunch[b.key] = full
				}
				tm.moved[b.key]++
				if b.allowed < 1 {
					if tm.restart && p.OwnerKind == inventory.OwnerDeployment {
						restarted[p.Namespace+"/"+p.OwnerName] = true
					}
					continue
				}
				inGroup[b.key]++
				allowed[b.key] = b.allowed
				keys = append(keys, b.key)
			}
			if onNode[p.NodeName] == nil { // a pod of a node the wave does not list
				onNode[p.NodeName] = &DrainNode{Name: p.NodeName}
				nodes = append(nodes, onNode[p.NodeName])
			}
			onNode[p.NodeName].Pods = append(onNode[p.NodeName].Pods, keys)
		}
	}
	if moves == 0 {
		return wt, false
	}
	if len(restarted) > 0 { // restarted together, each Ready P later
		wt.RestartSeconds = tm.ready
	}

	// The nodes drain c at a time in the order DrainOrder gives them (the
	// runner's), each budget letting `allowed` go per replacement Ready;
	// the last round's pods are gone without waiting for their
	// replacements, which the gate waits for once, at the end.
	in := make([]DrainNode, 0, len(nodes))
	for _, n := range nodes {
		if len(n.Pods) > 0 {
			in = append(in, *n)
		}
	}
	_, last := DrainOrder(in, allowed, tm.ready, tm.concurrency)
	wt.DrainSeconds = last + tm.ready
	wt.BoundBy = fmt.Sprintf("%d nodes drained %d at a time", len(in), tm.concurrency)
	if wt.DrainSeconds == tm.ready {
		wt.BoundBy = "one replacement start: every pod evicted at once"
	}
	// No budget moves more than it allows per replacement, whatever the
	// nodes: the group's pods of a budget over several nodes wait on it.
	for _, key := range slices.Sorted(maps.Keys(inGroup)) {
		b := byKey[key]
		if d := float64(ceilDiv(inGroup[key], b.allowed)) * tm.ready; d > wt.DrainSeconds || (d == wt.DrainSeconds && !strings.HasPrefix(wt.BoundBy, "PodDisruptionBudget")) {
			wt.DrainSeconds = d
			wt.BoundBy = fmt.Sprintf("PodDisruptionBudget %s: %d pods, %d at a time", key, inGroup[key], b.allowed)
		}
	}
	tm.throughput(&wt, moves)
	return wt, readyEarly
}

// drainOrdered are a wave's pods in the order its drain evicts them, as
// far as the wave alone says: by their node's place in DrainOrder over the
// wave's nodes (the runner's order; in a drain group other waves' nodes
// interleave), in the given order on a node. The headroom simulation
// places them in this order, as kube-scheduler will.
func (tm *timer) drainOrdered(nodes []WaveNode, pods []inventory.Pod) []inventory.Pod {
	onNode := map[string]*DrainNode{}
	in := make([]DrainNode, 0, len(nodes))
	for _, n := range nodes {
		in = append(in, DrainNode{Name: n.Name})
	}
	for i := range in {
		onNode[in[i].Name] = &in[i]
	}
	allowed := map[string]int{}
	for _, p := range pods {
		var keys []string
		for _, b := range tm.of(p) {
			if b.allowed > 0 {
				allowed[b.key] = b.allowed
				keys = append(keys, b.key)
			}
		}
		if n := onNode[p.NodeName]; n != nil {
			n.Pods = append(n.Pods, keys)
		}
	}
	order, _ := DrainOrder(slices.DeleteFunc(in, func(n DrainNode) bool { return len(n.Pods) == 0 }), allowed, tm.ready, tm.concurrency)
	rank := map[string]int{}
	for i, n := range order {
		rank[n] = i
	}
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b inventory.Pod) int { return cmp.Compare(rank[a.NodeName], rank[b.NodeName]) })
	return out
}

// launchOf is the launch phase of the k-th wave (from 0) starting at now:
// full is the phase of a wave whose capacity launches as it starts (what
// the bound counts, every wave's capacity launched at once), launch what
// the wave waits for of it.
func (tm *timer) launchOf(k int, hasNodes, preProvision bool, now float64) (full, launch float64) {
	switch {
	case preProvision:
		// The placeholders' nodes launch at once; the drain starts once
		// the placeholder pods run on them.
		full = tm.launch + tm.ready
		// Prepared ahead (Budget.PrepareAhead) by the first wave within
		// reach, as that wave started: only what is left of the launch is
		// waited for. One of this group (or the wave itself) starts now.
		if j := max(0, k-tm.prepareAhead); tm.prepareAhead > 0 && j < len(tm.started) {
			return full, max(0, tm.started[j]+full-now)
		}
		return full, full
	case hasNodes:
		// The first evicted pods wait for nodes launched for them.
		return tm.launch, tm.launch
	}
	return 0, 0
}

// bound is the lower bound over all the waves (Timing.BoundSeconds) and
// what makes it.
func (tm *timer) bound() (float64, string) {
	if !tm.anyPods {
		return 0, ""
	}
	best, by := tm.minLaunch+tm.ready, "the first capacity's launch and one replacement start"
	for _, b := range tm.budgets {
		n := tm.moved[b.key]
		if n == 0 {
			continue
		}
		rounds := 1 // a budget that allows none: one surge restart
		if b.allowed > 0 {
			rounds = ceilDiv(n, b.allowed)
		}
		if d := tm.firstLaunch[b.key] + float64(rounds)*tm.ready; d > best {
			best, by = d, fmt.Sprintf("PodDisruptionBudget %s: %d pods, %d at a time", b.key, n, b.allowed)
		}
	}
	return tm.throughputBound(best, by)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// String is the timing in a line: predicted against the bound.
func (t Timing) String() string {
	s := fmt.Sprintf("predicted %s for the waves, each drain group after the one before; lower bound %s", Seconds(t.PredictedSeconds), Seconds(t.BoundSeconds))
	if t.BoundBy != "" {
		s += " (" + t.BoundBy + ")"
	}
	return s + fmt.Sprintf("; nodes Ready %s after launch, replacements Ready %s after eviction", Seconds(t.NodeLaunchSeconds), Seconds(t.PodReadySeconds))
}

// Seconds renders a duration in seconds as Go does (1h2m3s), to the second.
func Seconds(s float64) string {
	return time.Duration(math.Round(s) * float64(time.Second)).String()
}

// drainGroups cuts the waves (each with the pods it moves) into drain
// groups: runs of consecutive waves drained together (Budget.DrainTogether;
// without it every wave drains alone). A wave joins the group before it
// unless
//   - a budget selecting one of its pods selects one another wave of the
//     group moves: a budget's pods go wave by wave, each behind a gate, as
//     without groups (pods without a budget conflict with none), or
//   - one of its NodePools is unproven (no earlier group's gate passed on
//     it) and another wave of the group uses it: no NodePool takes more
//     than one wave's pods before a gate has passed on it, so the first
//     wave, and the first of each NodePool, is a canary.
//
// It returns each group's waves by their position in waves.
func (tm *timer) drainGroups(waves []Wave, pods [][]inventory.Pod, together bool) [][]int {
	var groups [][]int
	proven := map[string]bool{}  // NodePools an earlier group used
	inGroup := map[string]bool{} // NodePools the group uses
	budgets := map[string]bool{} // budgets of the group's pods
	for i, w := range waves {
		mine := map[string]bool{}
		for _, p := range pods[i] {
			for _, b := range tm.of(p) {
				mine[b.key] = true
			}
		}
		joins := together && len(groups) > 0
		for key := range mine {
			joins = joins && !budgets[key]
		}
		for _, pool := range w.NodePools {
			joins = joins && (proven[pool] || !inGroup[pool])
		}
		if !joins {
			for pool := range inGroup {
				proven[pool] = true
			}
			groups, inGroup, budgets = append(groups, nil), map[string]bool{}, map[string]bool{}
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], i)
		for _, pool := range w.NodePools {
			inGroup[pool] = true
		}
		for key := range mine {
			budgets[key] = true
		}
	}
	return groups
}
