package demo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var demoSeeds = flag.Int("demo-seeds", 0, "TestDemoFiguresAgree: also run seeds 1..N in each of dev, staging and prod")

// counter is a "done/total" figure in a progress message.
var counter = regexp.MustCompile(`\b(\d+)/(\d+)\b`)

// checkFigures holds one run's figures to each other on every surface
// the demo has: its progress events, its summary, the summary's JSON and
// its table (#32). It fails on a counter above its total, waves that do
// not add up to the run, a table that says another figure than the JSON,
// and an interrupted run showing figures it did not measure.
func checkFigures(t *testing.T, name string, sum *Summary, events []Event) {
	t.Helper()
	// Events: no counter above its total; a wait counted to its end.
	var lastClaims string
	var rollbackDrain []string      // the rollback's "N pods to move off M nodes"
	movedOff := map[string]string{} // each step's last "n/m pods moved off"
	for _, e := range events {
		if e.Step == "rollback" {
			if m := drainOff.FindStringSubmatch(e.Message); m != nil {
				rollbackDrain = m
			}
		}
		if strings.Contains(e.Message, "pods moved off") {
			movedOff[e.Step] = e.Message
		}
		for _, m := range counter.FindAllStringSubmatch(e.Message, -1) {
			done, _ := strconv.Atoi(m[1])
			total, _ := strconv.Atoi(m[2])
			if done > total {
				t.Errorf("%s: %s %s: counter %s above its total", name, e.Step, e.Message, m[0])
			}
		}
		if e.Progress > 1 {
			t.Errorf("%s: %s %s: progress %.2f", name, e.Step, e.Message, e.Progress)
		}
		if strings.Contains(e.Message, "NodeClaims to be removed") {
			lastClaims = e.Message
		}
	}
	if m := counter.FindStringSubmatch(lastClaims); m != nil && m[1] != m[2] && !sum.Interrupted {
		t.Errorf("%s: the wait for NodeClaims ended at %q, not counted to its end", name, lastClaims)
	}

	for step, msg := range movedOff {
		if m := counter.FindStringSubmatch(msg); m != nil && m[1] != m[2] && sum.Done(step) {
			t.Errorf("%s: %s is done, its drain ended at %q", name, step, msg)
		}
	}

	// Waves: each within its total, together the run's.
	moves, evicted := sum.ControllerRoomEvictions, sum.ControllerRoomEvictions
	for _, w := range sum.Waves {
		if w.Evicted+w.Replaced+w.Gone > w.PodsToMove {
			t.Errorf("%s: %s moved %d+%d+%d pods off its nodes, counted %d to move", name, w.ID, w.Evicted, w.Replaced, w.Gone, w.PodsToMove)
		}
		if w.Done && w.Evicted+w.Replaced+w.Gone != w.PodsToMove {
			t.Errorf("%s: %s done with %d evicted, %d replaced, %d gone of its %d pods to move", name, w.ID, w.Evicted, w.Replaced, w.Gone, w.PodsToMove)
		}
		moves += w.Moves
		evicted += w.Evicted
	}
	if moves != sum.Moves || evicted != sum.Evictions {
		t.Errorf("%s: the waves and the controller's room make %d moves, %d evictions; the run %d, %d", name, moves, evicted, sum.Moves, sum.Evictions)
	}
	// A pod leaves a node group by a move, or preempted by the scheduler
	// (the control plane's kube-scheduler may preempt one for the
	// DaemonSet pod of a node it had filled); Cluster Autoscaler's, which
	// the runbook stops, are not pods to move.
	if sum.Done("apply") && sum.PodsToMove > 0 && sum.Moves+sum.Sandbox.Preempted < sum.PodsToMove {
		t.Errorf("%s: %d moves and %d pods preempted for %d pods to move", name, sum.Moves, sum.Sandbox.Preempted, sum.PodsToMove)
	}

	// Table and JSON: the same figures, or "-" where the JSON has none.
	js, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(js, &j); err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	if err := WriteTable(&tb, sum); err != nil {
		t.Fatal(err)
	}
	table := tb.String()
	num := func(m map[string]any, key, format string) string {
		v, ok := m[key].(float64)
		if !ok {
			return "-"
		}
		if format == "%d" {
			return fmt.Sprintf("%d", int(v))
		}
		return fmt.Sprintf(format, v)
	}
	row := func(pattern string, want ...string) {
		t.Helper()
		m := regexp.MustCompile(`(?m)` + pattern).FindStringSubmatch(table)
		if m == nil {
			t.Errorf("%s: the table has no row %q:\n%s", name, pattern, table)
			return
		}
		if got := strings.Join(m[1:], " "); got != strings.Join(want, " ") {
			t.Errorf("%s: table row %q says %s, the JSON %s", name, m[0], got, strings.Join(want, " "))
		}
	}
	row(`^nodes +(\S+) +(\S+)$`, num(j, "nodesBefore", "%d"), num(j, "nodesAfter", "%d"))
	row(`^\$/hour +(\S+) +(\S+) +\(plan predicted (\S+)\)`, num(j, "costPerHourBefore", "%.4f"), num(j, "costPerHourAfter", "%.4f"), num(j, "plannedCostPerHour", "%.4f"))
	secs := func(m map[string]any, key string) string {
		if v, ok := m[key].(float64); ok {
			return fmtSeconds(v)
		}
		return "-"
	}
	row(`^waves' makespan +(\S+) +\(plan predicted (\S+), lower bound (\S+)\)`, secs(j, "makespanSeconds"), secs(j, "predictedSeconds"), secs(j, "boundSeconds"))
	row(`^moves +(\d+) +\((\d+) evictions`, num(j, "moves", "%d"), num(j, "evictions", "%d"))
	row(`^PDB violations +(\d+) +\((\d+) evictions refused with 429 and retried\)`, num(j, "pdbViolations", "%d"), num(j, "pdbRejections", "%d"))
	if _, ok := j["podsToMove"]; ok {
		row(`^pods to move +(\d+) +\(the pods on node groups that left them; besides, (\d+) stopped`, num(j, "podsToMove", "%d"), num(j, "podsStopped", "%d"))
	} else if strings.Contains(table, "\npods to move") {
		t.Errorf("%s: the table shows pods to move the JSON does not have", name)
	}
	waves, _ := j["waves"].([]any)
	for _, x := range waves {
		w := x.(map[string]any)
		g, _ := w["gone"].(float64)
		moved := int(w["evicted"].(float64) + w["replaced"].(float64) + g)
		row(`^(`+regexp.QuoteMeta(w["id"].(string))+`) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(\S+) +(\S+)$`, w["id"].(string), num(w, "plannedNodes", "%d"),
			num(w, "plannedPods", "%d"), num(w, "podsToMove", "%d"), strconv.Itoa(moved), num(w, "moves", "%d"), secs(w, "seconds"), secs(w, "predictedSeconds"))
	}
	if rb, ok := j["rollback"].(map[string]any); ok {
		checkRollback(t, name, rb, table, rollbackDrain, lastClaims, sum.Engine)
	}

	// Interrupted: it says so, and shows nothing it did not measure.
	if sum.Interrupted != strings.Contains(table, "INTERRUPTED") {
		t.Errorf("%s: interrupted %t; the table says:\n%s", name, sum.Interrupted, table)
	}
	for step, keys := range measuredBy {
		for _, k := range keys {
			if _, ok := j[k]; ok != sum.Done(step) {
				t.Errorf("%s: step %s done %t, JSON has %s %t", name, step, sum.Done(step), k, ok)
			}
		}
	}
}

// drainOff is a drain's start as the runner reports it.
var drainOff = regexp.MustCompile(`(\d+) pods to move off (\d+) nodes`)

// checkRollback holds a rollback's figures (its JSON) to each other, to
// the table and to the events: every Karpenter node is drained by it or
// removed by Karpenter itself, with the NodePools or before, the NodeClaims
// waited for are those there as the NodePools went, and the pods its drain
// set out to move are evicted, replaced or gone, and those on Karpenter
// nodes at its start less those that left plus those that came.
func checkRollback(t *testing.T, name string, rb map[string]any, table string, drain []string, claimsWait, engine string) {
	t.Helper()
	n := func(key string) int {
		v, ok := rb[key].(float64)
		if !ok {
			t.Errorf("%s: the rollback's JSON has no %s", name, key)
		}
		return int(v)
	}
	if rb["restored"] == true {
		if start, launched, before, during, with := n("karpenterNodesAtStart"), n("karpenterNodesLaunched"), n("nodesRemovedBeforeDrain"), n("nodesRemovedDuringDrain"), n("nodesRemovedWithNodePools"); start+launched != before+during+with {
			t.Errorf("%s: rollback: %d Karpenter nodes (+%d launched) but %d removed before the drain, %d during it, %d with the NodePools", name, start, launched, before, during, with)
		}
		if drained, during, with := n("nodesDrained"), n("nodesRemovedDuringDrain"), n("nodesRemovedWithNodePools"); drained != during+with {
			t.Errorf("%s: rollback: %d nodes drained, but %d removed by Karpenter during the drain and %d with the NodePools", name, drained, during, with)
		}
		if toMove, ev, rep, gone := n("podsToMove"), n("evictions"), n("replaced"), n("gone"); toMove != ev+rep+gone {
			t.Errorf("%s: rollback: %d pods to move, %d evicted + %d replaced + %d gone", name, toMove, ev, rep, gone)
		}
		if start, left, came, toMove := n("podsMoved"), n("podsLeftBeforeDrain"), n("podsArrivedBeforeDrain"), n("podsToMove"); start-left+came != toMove {
			t.Errorf("%s: rollback: %d pods on Karpenter nodes at the start, %d left and %d came before the drain, which counted %d", name, start, left, came, toMove)
		}
	}
	if drain != nil && (drain[1] != strconv.Itoa(n("podsToMove")) || drain[2] != strconv.Itoa(n("nodesDrained"))) {
		t.Errorf("%s: the rollback's drain said %q; its summary %d pods to move off %d nodes", name, drain[0], n("podsToMove"), n("nodesDrained"))
	}
	if m := counter.FindStringSubmatch(claimsWait); m != nil && m[2] != strconv.Itoa(n("nodeClaimsRemoved")) {
		t.Errorf("%s: the rollback waited for %s NodeClaims; its summary says %d were there as the NodePools were deleted", name, m[2], n("nodeClaimsRemoved"))
	}
	if c, ok := rb["consolidation"].(map[string]any); ok {
		if nodes := int(c["nodes"].(float64)); nodes != n("nodesRemovedBeforeDrain")+n("nodesRemovedDuringDrain") {
			t.Errorf("%s: the Karpenter stand-in consolidated %d nodes during the rollback; the rollback counts %d+%d removed by Karpenter itself", name, nodes, n("nodesRemovedBeforeDrain"), n("nodesRemovedDuringDrain"))
		}
	} else if engine == EngineSandbox {
		t.Errorf("%s: a sandbox rollback without the stand-in's consolidation", name)
	}
	row := func(pattern string, want ...int) {
		t.Helper()
		m := regexp.MustCompile(`(?m)` + pattern).FindStringSubmatch(table)
		if m == nil {
			t.Errorf("%s: the table has no row %q:\n%s", name, pattern, table)
			return
		}
		for i, w := range want {
			if got := cmp.Or(m[i+1], "0"); got != strconv.Itoa(w) {
				t.Errorf("%s: table row %q: figure %d is %s, the JSON %d", name, m[0], i+1, m[i+1], w)
			}
		}
	}
	row(`^Karpenter nodes +(\d+)(?: \(\+(\d+) launched meanwhile\))? → (\d+) +(\d+) drained by the rollback; removed: (\d+) with their NodePools \((\d+) NodeClaims\), \d+ by Karpenter itself before the NodePools were deleted \((\d+) before the drain, (\d+) during it\)`,
		n("karpenterNodesAtStart"), n("karpenterNodesLaunched"), n("karpenterNodes"), n("nodesDrained"), n("nodesRemovedWithNodePools"), n("nodeClaimsRemoved"), n("nodesRemovedBeforeDrain"), n("nodesRemovedDuringDrain"))
	row(`^pods on them +(\d+) → \d+ +at the start → as the drain started \((\d+) left them before it, (\d+) came onto them\)`, n("podsMoved"), n("podsLeftBeforeDrain"), n("podsArrivedBeforeDrain"))
	row(`^pods to move +(\d+) +by the rollback's drain: (\d+) evicted, (\d+) replaced by surge restart, (\d+) gone`, n("podsToMove"), n("evictions"), n("replaced"), n("gone"))
	row(`^PDB violations +(\d+) +\((\d+) evictions refused with 429 and retried, during the rollback\)`, n("pdbViolations"), n("pdbRejections"))
	restored := regexp.MustCompile(`(?m)^ROLLBACK +restored: (\S+) +(\d+) nodes, \$(\S+)/h \(before the migration \$(\S+)/h\)`).FindStringSubmatch(table)
	if restored == nil || restored[1] != fmt.Sprint(rb["restored"]) || restored[2] != strconv.Itoa(n("nodesAfter")) ||
		restored[3] != fmt.Sprintf("%.4f", rb["costPerHour"]) || restored[4] != fmt.Sprintf("%.4f", rb["costPerHourBefore"]) {
		t.Errorf("%s: the table's ROLLBACK row %q; the JSON restored %v, %d nodes, $%v/h, before $%v/h", name, restored, rb["restored"], n("nodesAfter"), rb["costPerHour"], rb["costPerHourBefore"])
	}
	if changed, _ := rb["typesChanged"].([]any); len(changed) > 0 && !strings.Contains(table, "not as before") {
		t.Errorf("%s: the rollback's instance types changed (%v) and the table does not say so", name, changed)
	}
}

// migrationJSON is a summary's JSON without what differs between a run
// with --rollback and one without: the rollback, the steps but the
// migration's, the clocks and the directory.
func migrationJSON(t *testing.T, sum *Summary) string {
	t.Helper()
	c := *sum
	c.Rollback, c.Steps, c.SimulatedSeconds, c.WallSeconds, c.OutDir = nil, nil, 0, 0, ""
	for _, id := range []string{"discover", "plan", "apply", "final-state"} {
		if sum.Done(id) {
			c.Steps = append(c.Steps, StepResult{ID: id, Status: StatusDone})
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// demoRun is one demo run, made once for every test that asks for it.
type demoRun struct {
	once   sync.Once
	sum    *Summary
	events []Event
	dir    string
	err    error
}

// runKey names a demo run: its seed, environment and whether it rolls back.
type runKey struct {
	seed     uint64
	env      string
	rollback bool
}

var (
	demoRunsMu sync.Mutex
	demoRuns   = map[runKey]*demoRun{}
)

// sharedRun is the demo run for a seed and environment, with or without
// a rollback, made by the first test that asks for it and shared with the
// others (a whole migration takes seconds, tens under -race): its summary,
// events and output directory, which they read and do not change. A run
// that failed fails every test that asks for it.
func sharedRun(t *testing.T, seed uint64, env string, rollback bool) (*Summary, []Event, string) {
	t.Helper()
	k := runKey{seed, env, rollback}
	demoRunsMu.Lock()
	r, ok := demoRuns[k]
	if !ok {
		r = &demoRun{}
		demoRuns[k] = r
	}
	demoRunsMu.Unlock()
	r.once.Do(func() {
		if r.dir, r.err = os.MkdirTemp("", "demo-run-"); r.err != nil {
			return
		}
		start := time.Now()
		r.sum, r.err = Run(context.Background(), Options{Seed: seed, Environment: env, Rollback: rollback, OutDir: r.dir,
			Events: func(e Event) { r.events = append(r.events, e) }})
		t.Logf("demo seed %d %s rollback %t: %.1fs", seed, env, rollback, time.Since(start).Seconds())
	})
	if r.err != nil {
		t.Fatalf("demo seed %d %s rollback %t: %v", seed, env, rollback, r.err)
	}
	return r.sum, r.events, r.dir
}

// TestMain removes the shared runs' output directories.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, r := range demoRuns {
		if r.dir != "" {
			os.RemoveAll(r.dir)
		}
	}
	os.Exit(code)
}

// TestDemoFiguresAgree holds the figures of a run in dev to each other
// (checkFigures): seed 1 with a rollback, the run TestParityWithControlPlane
// compares with the control plane's; with TestDemoMigratesAndRollsBack,
// TestDemoIsReproducible (seed 1, prod, with and without rollback) and
// TestDemoReplaysSnapshot (seed 9 in staging, with a rollback) that is
// every environment, migrated and rolled back. -demo-seeds N adds seeds
// 1..N in every environment, with a rollback. No pod of these runs waits 5s
// or more for a node.
func TestDemoFiguresAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("whole migrations; TestDemoMigratesAndRollsBack checks one in short mode")
	}
	runs := []runKey{{1, DevEnv, true}}
	for s := 1; s <= *demoSeeds; s++ {
		for _, env := range []string{"dev", "staging", "prod"} {
			if k := (runKey{uint64(s), env, true}); !slices.Contains(runs, k) {
				runs = append(runs, k)
			}
		}
	}
	for _, c := range runs {
		sum, events, _ := sharedRun(t, c.seed, c.env, c.rollback)
		name := fmt.Sprintf("seed %d %s", c.seed, c.env)
		checkFigures(t, name, sum, events)
		// Every wave's capacity launches as the first starts (the demo's
		// prepareAhead); none of it may be consolidated away before its
		// pods come (dev's consolidateAfter is 30s).
		if sum.LongestWaitSeconds >= 5 {
			t.Errorf("%s: longest wait for a node %.0fs (%s); want under 5s", name, sum.LongestWaitSeconds, sum.LongestWaitPod)
		}
	}
}

// TestDemoInterruptedShowsWhatItMeasured stops a demo in its second wave,
// as Ctrl-C does: the summary (returned, written, as table and JSON) says
// it was interrupted and has no after-state, only the moves it made.
func TestDemoInterruptedShowsWhatItMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	var events []Event
	sum, err := Run(ctx, Options{Seed: 1, OutDir: dir, Events: func(e Event) {
		events = append(events, e)
		if strings.HasPrefix(e.Step, "wave-2") {
			cancel()
		}
	}})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err %v, want context.Canceled", err)
	}
	if !sum.Interrupted || sum.Done("final-state") || len(sum.Waves) < 2 || sum.Moves == 0 {
		t.Fatalf("summary: interrupted %t, final-state done %t, %d waves, %d moves; want interrupted in wave 2 with the moves so far", sum.Interrupted, sum.Done("final-state"), len(sum.Waves), sum.Moves)
	}
	checkFigures(t, "interrupted", sum, events)
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var written map[string]any
	if err := json.Unmarshal(b, &written); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodesAfter", "costPerHourAfter", "podsToMove", "groupsScaled"} {
		if v, ok := written[k]; ok {
			t.Errorf("summary.json of an interrupted run has %s = %v, which it did not measure", k, v)
		}
	}
	if written["interrupted"] != true || written["nodesBefore"] == nil || written["moves"] == nil {
		t.Errorf("summary.json: interrupted %v, nodesBefore %v, moves %v; want true and the figures it measured", written["interrupted"], written["nodesBefore"], written["moves"])
	}
	var tb bytes.Buffer
	if err := WriteTable(&tb, sum); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^nodes +23 +-$`).MatchString(tb.String()) || !regexp.MustCompile(`(?m)^\$/hour +3\.0600 +- `).MatchString(tb.String()) {
		t.Errorf("the table of an interrupted run shows an after-state it did not measure:\n%s", tb.String())
	}
}
