package e2e

// The chaos ladder (#19): the runbook survives the faults a production run
// meets. `make chaos` runs every rung with every injection point
// (CHAOS_SHARD=all); `make test` runs a rotating shard of the kill points,
// chosen by the day of the year and printed, so a failure is reproduced
// with the CHAOS_SHARD it names.
//
// Kills are deterministic: the binary is built with -tags chaos
// (pkg/cli/chaos.go) and kills itself with SIGKILL at the named progress
// event (KM_CHAOS_KILL_AT, a regular expression over "Kind step wWave phase
// message"), so a point is the same code position in every run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// buildChaosBinary builds the binary with the kill hook, next to the one
// buildBinary built (TestMain removes that directory).
var buildChaosBinary = sync.OnceValues(func() (string, error) {
	bin, err := buildBinary()
	if err != nil {
		return "", err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(filepath.Dir(bin), "karpenter-migrate-chaos")
	cmd := exec.Command("go", "build", "-tags", "chaos", "-o", out, "./cmd/karpenter-migrate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags chaos: %v\n%s", err, b)
	}
	return out, nil
})

// killPoint is where the chaos binary kills itself: the nth event whose
// line matches at.
type killPoint struct {
	name string
	at   string
	nth  int
}

// ladderPoints lists, in the order a run meets them, a kill before and
// after every step and, inside the steps that do work in stages, between
// two of their changes: an IAM object created and the next not yet, one
// object applied of several, every wave phase entered, placeholders
// created and not yet running, one node cordoned of two, the first
// eviction done with others in flight, the gate evaluated, one instance
// terminated of two, one group scaled of two. Steps are known by name,
// not number (the runbook is renumbered when a step is added); a step
// named here that the plan lacks fails t rather than silently dropping
// its points.
func ladderPoints(t testing.TB, p *plan.Plan) []killPoint {
	t.Helper()
	var pts []killPoint
	add := func(name, at string, nth int) { pts = append(pts, killPoint{name, at, nth}) }
	inside := map[string]bool{"node_role": false, "nodepools": false, "drain_waves": false, "scale_node_groups": false}
	for _, st := range p.Steps {
		id := st.ID
		add("before "+id, "^StepStarted "+id+" ", 1)
		name := ""
		for n := range inside {
			if rollout.SameStep(id, n) {
				name, inside[n] = n, true
			}
		}
		switch name {
		case "node_role":
			add("inside "+id+": one IAM object created", "^Change "+id+" ", 1)
		case "nodepools":
			add("inside "+id+": one object applied", "^Change "+id+" w0 +apply ", 2)
		case "drain_waves":
			for _, w := range p.Waves {
				movable := slices.IndexFunc(w.Nodes, func(n plan.WaveNode) bool { return !n.Keep }) >= 0
				twoMovable := len(slices.DeleteFunc(slices.Clone(w.Nodes), func(n plan.WaveNode) bool { return n.Keep })) >= 2
				wave := func(phase string) string { return fmt.Sprintf("^WavePhase %s w%d %s ", id, w.Index, phase) }
				in := func(kind, rest string) string { return fmt.Sprintf("^%s %s w%d %s", kind, id, w.Index, rest) }
				name := func(what string) string { return fmt.Sprintf("wave %d %s", w.Index, what) }
				add(name("pre-provision"), wave(rollout.PhasePreProvision), 1)
				if p.Budget.PreProvision && len(w.PreProvision) > 0 {
					add(name("placeholders created, not yet running"), in("Waiting", rollout.PhasePreProvision+" placeholder pods"), 1)
				}
				add(name("cordon"), wave(rollout.PhaseCordon), 1)
				if twoMovable {
					add(name("one node cordoned of two"), in("Change", " +cordon node "), 2)
				}
				add(name("drain"), wave(rollout.PhaseDrain), 1)
				if w.Pods > 0 {
					add(name("first eviction done, others in flight"), in("Eviction", " .*evicted$"), 1)
				}
				add(name("gate"), wave(rollout.PhaseGate), 1)
				add(name("gate evaluated"), in("Gate", ""), 1)
				add(name("cleanup"), wave(rollout.PhaseCleanup), 1)
				add(name("scale-in"), wave(rollout.PhaseScaleIn), 1)
				if twoMovable {
					add(name("one instance terminated of two"), in("Change", " +terminate instance "), 2)
				}
				if movable {
					add(name("done"), wave(rollout.PhaseDone), 1)
				}
			}
		case "scale_node_groups":
			add("inside "+id+": one group scaled", "^Change "+id+" ", 2)
		}
		add("after "+id, "^Step(Finished|Skipped) "+id+" ", 1)
	}
	for n, met := range inside {
		if !met {
			t.Fatalf("the plan has no step %q: the ladder's points inside it would be lost (steps %v)", n, stepIDs(p))
		}
	}
	return pts
}

// stepIDs lists the plan's step IDs.
func stepIDs(p *plan.Plan) []string {
	var ids []string
	for _, st := range p.Steps {
		ids = append(ids, st.ID)
	}
	return ids
}

// stepID is the ID the plan gives the step called name ("drain_waves"),
// whatever its number.
func stepID(t testing.TB, p *plan.Plan, name string) string {
	t.Helper()
	for _, st := range p.Steps {
		if rollout.SameStep(st.ID, name) {
			return st.ID
		}
	}
	t.Fatalf("the plan has no step %q (steps %v)", name, stepIDs(p))
	return ""
}

// chaosOnly skips a rung that only `make chaos` runs (CHAOS_SHARD set):
// with its own migration it would take `make test` past its budget.
func chaosOnly(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the chaos ladder runs a migration against the control plane")
	}
	if os.Getenv("CHAOS_SHARD") == "" {
		t.Skip("a rung of make chaos (CHAOS_SHARD=all); make test runs a daily shard of TestChaosKillResume's kill points")
	}
}

// chaosShard selects the points of this run: all with CHAOS_SHARD=all,
// shard k of m with CHAOS_SHARD=k/m, else the day of the year's shard of
// perDay-point shards. It logs which, so a failure names its shard.
func chaosShard(t *testing.T, pts []killPoint, perDay int) []killPoint {
	t.Helper()
	spec := os.Getenv("CHAOS_SHARD")
	m := (len(pts) + perDay - 1) / perDay
	k := time.Now().UTC().YearDay() % m
	switch {
	case spec == "all":
		t.Logf("chaos: all %d points (CHAOS_SHARD=all)", len(pts))
		return pts
	case spec != "":
		a, b, ok := strings.Cut(spec, "/")
		var err1, err2 error
		k, err1 = strconv.Atoi(a)
		m, err2 = strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || m < 1 || k < 0 || k >= m {
			t.Fatalf("CHAOS_SHARD=%q: want all, or k/m with 0 <= k < m", spec)
		}
	}
	var out []killPoint
	for i, p := range pts {
		if i%m == k {
			out = append(out, p)
		}
	}
	t.Logf("chaos: shard CHAOS_SHARD=%d/%d, %d of %d points; rerun these with CHAOS_SHARD=%d/%d, all with CHAOS_SHARD=all (make chaos)", k, m, len(out), len(pts), k, m)
	return out
}

// chaosRun runs the chaos binary with args until it ends, killing itself
// at p. It returns its stderr and whether it was killed there.
func (w *world) chaosRun(ctx context.Context, p killPoint, args ...string) (string, bool, error) {
	w.t.Helper()
	bin, err := buildChaosBinary()
	if err != nil {
		w.t.Fatal(err)
	}
	cmd := w.command(ctx, args...)
	cmd.Path = bin
	cmd.Env = append(cmd.Env, "KM_CHAOS_KILL_AT="+p.at, "KM_CHAOS_KILL_NTH="+strconv.Itoa(p.nth))
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &errOut, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return errOut.String(), true, nil
		}
	}
	return errOut.String(), false, err
}

// journalEntries flattens what a journal must never lose while a run is
// resumed: every step recorded done or skipped, every value recorded
// before a change (never overwritten), every IAM object journalled and
// every instance recorded as removed.
func journalEntries(t testing.TB, j *rollout.Journal) map[string]string {
	t.Helper()
	out := map[string]string{}
	if j == nil {
		return out
	}
	for _, s := range j.Steps {
		if s.State == rollout.StateDone || s.State == rollout.StateSkipped {
			out["step "+s.ID] = "done"
		}
	}
	for _, w := range j.Waves {
		for _, id := range w.Removed {
			out["removed "+id] = strconv.Itoa(w.Index)
		}
	}
	r := j.Recorded
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = string(b)
	}
	if r.ClusterAutoscaler != nil {
		put("cluster-autoscaler", r.ClusterAutoscaler)
	}
	for _, g := range r.NodeGroups {
		put("group "+g.Name, g)
	}
	if r.AWSAuthBackup != "" {
		out["aws-auth backup"] = r.AWSAuthBackup
	}
	for _, o := range r.Objects {
		put("object "+o.Kind+" "+o.Name, o)
	}
	if len(r.KeptNodes) > 0 {
		put("kept nodes", r.KeptNodes)
	}
	for _, tn := range r.Tainted {
		put("taint "+tn.Node+" "+tn.Taint.ToString(), tn)
	}
	if raw, ok := r.Extra["iam"]; ok {
		var ij iam.Journal
		if err := json.Unmarshal(raw, &ij); err != nil {
			t.Fatalf("recorded.extra.iam: %v", err)
		}
		for _, e := range ij.Entries {
			out["iam "+string(e.Kind)+" "+e.Name] = string(e.Action)
		}
	}
	return out
}

// lostEntries lists the entries of before that after no longer holds as
// they were.
func lostEntries(before, after map[string]string) []string {
	var lost []string
	for k, v := range before {
		if after[k] != v {
			lost = append(lost, fmt.Sprintf("%s: %s -> %q", k, v, after[k]))
		}
	}
	slices.Sort(lost)
	return lost
}

// chaosWorld is the scenario of TestRolloutEndToEnd ready to apply: two
// groups of two nodes, the workloads and their PDBs, the Karpenter
// controller installed, a plan with the IAM steps, and the PDB watcher.
type chaosWorld struct {
	*world
	plan     *plan.Plan
	planArgs []string
	tree     string
	apply    []string
	budgets  []budget
}

const chaosLease = 2 * time.Second

func newChaosWorld(ctx context.Context, t *testing.T, opts ...func(*testenv.Options)) *chaosWorld {
	t.Helper()
	w := newWorld(t, scenarioGroups, 2, opts...)
	seedWorkloads(ctx, t, w)
	tree, cfg := w.prepare(ctx)
	installController(ctx, t, w, tree)
	c := &chaosWorld{world: w, tree: tree,
		planArgs: []string{"plan", "--env", "e2e", "--cluster", clusterName, "--dir", tree, "--config", cfg, "--identity", "pod-identity", "-f", "plan.yaml", "-o", "json"},
		apply:    []string{"apply", "--plan", "plan.yaml", "--dir", tree, "--yes", "--lease-duration", chaosLease.String(), "--poll-interval", "500ms", "--ack-blockers"},
		budgets: []budget{
			{name: "web", selector: labels.SelectorFromSet(labelsOf("web")), min: 3},
			{name: "solo", selector: labels.SelectorFromSet(labelsOf("solo")), min: 1},
			{name: "karpenter", selector: controllerSelector, min: 1},
		}}
	c.replan(ctx)
	return c
}

// replan writes plan.yaml from a live discovery.
func (c *chaosWorld) replan(ctx context.Context) {
	c.t.Helper()
	out := c.mustRun(ctx, c.planArgs...)
	var plan plan.Plan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		c.t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	c.plan = &plan
}

func (c *chaosWorld) journal(ctx context.Context) *rollout.Journal {
	c.t.Helper()
	j, err := rollout.Status(ctx, c.env.Client, "karpenter-migrate", "e2e")
	if err != nil {
		c.t.Fatal(err)
	}
	return j
}

// killAt runs apply until it kills itself at p, then checks that the dead
// run's Lease refuses a second apply (rung 7) and waits it out. It
// returns false when apply ended without reaching p.
func (c *chaosWorld) killAt(ctx context.Context, t *testing.T, p killPoint, args []string) bool {
	t.Helper()
	out, killed, err := c.chaosRun(ctx, p, args...)
	if !killed {
		t.Errorf("%s: %s ended (%v) without reaching %q (match %d):\n%s", p.name, args[0], err, p.at, p.nth, out)
		return false
	}
	_, errOut, code := c.run(ctx, c.apply...)
	if code == 0 || !strings.Contains(errOut, "is held by") {
		t.Errorf("%s: apply while the killed run's lease holds: exit %d, stderr %s; want a refusal naming the holder", p.name, code, errOut)
	}
	time.Sleep(chaosLease + 500*time.Millisecond)
	return true
}

// TestChaosKillResume is rung 1 (and 7): apply is killed with SIGKILL at
// every point of the ladder in turn, each time resumed by a new apply
// that is refused while the dead run's Lease holds and takes over once it
// expires; the last apply completes. The journal never loses an entry, no
// PDB ever drops below its minimum, every pod moves once, and the end
// state is TestRolloutEndToEnd's.
func TestChaosKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos ladder runs a migration against the control plane")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	c := newChaosWorld(ctx, t)
	pts := chaosShard(t, ladderPoints(t, c.plan), 3)
	watch, err := watchPods(ctx, c.env.Client, "", c.budgets)
	if err != nil {
		t.Fatal(err)
	}
	toMove := podsToMove(ctx, t, c.world, appNS)
	prev := map[string]string{}
	kills, lost := 0, 0
	for _, p := range pts {
		if !c.killAt(ctx, t, p, c.apply) {
			break
		}
		kills++
		now := journalEntries(t, c.journal(ctx))
		if l := lostEntries(prev, now); len(l) > 0 {
			lost += len(l)
			t.Errorf("killed %s: the journal lost %v", p.name, l)
		}
		prev = now
		t.Logf("killed %s", p.name)
	}
	c.mustRun(ctx, c.apply...)
	if l := lostEntries(prev, journalEntries(t, c.journal(ctx))); len(l) > 0 {
		lost += len(l)
		t.Errorf("the completing apply lost journal entries %v", l)
	}
	violations := c.stopWatch(t, watch)
	if err := c.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	checkMigrated(ctx, t, c.world)
	moved := watch.deletions(appNS)
	moves := len(moved)
	if !movedOnce(moves, toMove) {
		t.Errorf("%d moves for %d pods to move; want each pod moved once; moved: %s", moves, toMove, strings.Join(moved, ", "))
	}
	t.Logf("CHAOS rung 1 kill -9 then apply: %d points, %d/%d killed and resumed, completed; PDB violations %d; journal entries lost %d; %d moves for %d pods; %s",
		len(pts), kills, len(pts), violations, lost, moves, toMove, time.Since(began).Round(time.Second))
}

// beforeState is what rollback must restore exactly (rung 2).
type beforeState struct {
	groups    map[string]groupRow
	caReplica int32
	awsAuth   map[string]string
	nodePools []string
}

func (c *chaosWorld) state(ctx context.Context, t *testing.T) beforeState {
	t.Helper()
	if err := c.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	s := beforeState{groups: groupRows(ctx, t, c.world)}
	for name, r := range s.groups {
		r.NodeTaints = nil // legacy nodes are new ones after a rollback: compared apart
		s.groups[name] = r
	}
	d, err := c.env.Client.AppsV1().Deployments("kube-system").Get(ctx, "cluster-autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.caReplica = ptr.Deref(d.Spec.Replicas, -1)
	cm, err := c.env.Client.CoreV1().ConfigMaps(awsauth.Namespace).Get(ctx, awsauth.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.awsAuth = cm.Data
	list, err := c.env.Dynamic.Resource(kube.NodePoolGVK.GroupVersion().WithResource("nodepools")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range list.Items {
		s.nodePools = append(s.nodePools, np.GetName())
	}
	slices.Sort(s.nodePools)
	return s
}

// diff lists how s differs from want.
func (s beforeState) diff(want beforeState) []string {
	var d []string
	for name, w := range want.groups {
		g := s.groups[name]
		if g.Min != w.Min || g.Max != w.Max || g.Desired != w.Desired || g.Instances != w.Instances || !slices.Equal(g.Suspended, w.Suspended) ||
			!slices.Equal(g.CATags, w.CATags) || !slices.Equal(g.ConfigTaints, w.ConfigTaints) {
			d = append(d, fmt.Sprintf("group %s: %s, want %s", name, g, w))
		}
	}
	if s.caReplica != want.caReplica {
		d = append(d, fmt.Sprintf("Cluster Autoscaler replicas %d, want %d", s.caReplica, want.caReplica))
	}
	for k, v := range want.awsAuth {
		if s.awsAuth[k] != v {
			d = append(d, fmt.Sprintf("aws-auth %s:\n%s\nwant\n%s", k, s.awsAuth[k], v))
		}
	}
	if len(s.awsAuth) != len(want.awsAuth) {
		d = append(d, fmt.Sprintf("aws-auth keys %d, want %d", len(s.awsAuth), len(want.awsAuth)))
	}
	if !slices.Equal(s.nodePools, want.nodePools) {
		d = append(d, fmt.Sprintf("NodePools %v, want %v", s.nodePools, want.nodePools))
	}
	return d
}

// TestChaosKillRollback is rung 2: apply is killed at a point, then
// rollback (removing what the IAM steps added, so aws-auth is compared
// too) runs instead of a resume; every ASG size and suspended process,
// the Cluster Autoscaler tags and replicas, aws-auth and the NodePools
// are exactly as before, and no legacy node stays cordoned or tainted.
// The next point starts from that state with a fresh apply.
func TestChaosKillRollback(t *testing.T) {
	chaosOnly(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	c := newChaosWorld(ctx, t)
	before := c.state(ctx, t)
	pts := chaosShard(t, ladderPoints(t, c.plan), 2)
	watch, err := watchPods(ctx, c.env.Client, "", c.budgets)
	if err != nil {
		t.Fatal(err)
	}
	rollback := []string{"rollback", "--plan", "plan.yaml", "--dir", c.tree, "--yes", "--remove-iam", "--poll-interval", "500ms"}
	passed, wrong := 0, 0
	for _, p := range pts {
		if !c.killAt(ctx, t, p, c.apply) {
			continue
		}
		c.mustRun(ctx, rollback...)
		after := c.state(ctx, t)
		d := after.diff(before)
		if err := c.legacyNodesClean(ctx); err != nil {
			d = append(d, err.Error())
		}
		if len(d) > 0 {
			wrong += len(d)
			t.Errorf("killed %s, then rollback: %s", p.name, strings.Join(d, "; "))
			continue
		}
		// A rollback after a wave's scale-in brings the group back with
		// new instances: the plan no longer lists its nodes, and apply
		// refuses it rather than remove them undrained; plan again.
		if replaced := c.nodesOutsidePlan(ctx, t); len(replaced) > 0 {
			_, errOut, code := c.run(ctx, c.apply...)
			if code != 5 || !strings.Contains(errOut, "is in no wave of the plan") {
				t.Errorf("killed %s, rolled back: apply of the old plan with nodes %v replaced: exit %d, %s; want 5 naming them", p.name, replaced, code, errOut)
				continue
			}
		}
		c.replan(ctx)
		passed++
		t.Logf("killed %s, rolled back: as before", p.name)
	}
	violations := c.stopWatch(t, watch)
	t.Logf("CHAOS rung 2 kill -9 then rollback: %d points, %d/%d restored exactly; PDB violations %d; values not restored %d; %s",
		len(pts), passed, len(pts), violations, wrong, time.Since(began).Round(time.Second))
}

// nodesOutsidePlan lists the legacy nodes no wave of the plan names.
func (c *chaosWorld) nodesOutsidePlan(ctx context.Context, t *testing.T) []string {
	t.Helper()
	planned := map[string]bool{}
	for _, w := range c.plan.Waves {
		for _, n := range w.Nodes {
			planned[n.Name] = true
		}
	}
	nodes, err := c.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!karpenter.sh/nodepool"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		if !planned[n.Name] {
			out = append(out, n.Name)
		}
	}
	return out
}

// stopWatch ends the PDB watcher and fails t for every budget whose
// healthy pods fell below its minimum; it returns the violations counted.
func (c *chaosWorld) stopWatch(t *testing.T, watch *podWatch) int {
	t.Helper()
	lowest, _, err := watch.stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.budgets {
		if lowest[b.name] < b.min {
			t.Errorf("PDB %s: healthy pods dropped to %d, below its minimum %d: %v", b.name, lowest[b.name], b.min, watch.violationLog())
		}
	}
	return watch.violationCount()
}

// legacyNodesClean checks that no legacy node is cordoned or carries a
// taint the rollout adds.
func (c *chaosWorld) legacyNodesClean(ctx context.Context) error {
	nodes, err := c.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!karpenter.sh/nodepool"})
	if err != nil {
		return err
	}
	var bad []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || len(n.Spec.Taints) > 0 {
			bad = append(bad, fmt.Sprintf("%s (unschedulable %t, taints %v)", n.Name, n.Spec.Unschedulable, n.Spec.Taints))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("legacy nodes not restored: %s", strings.Join(bad, ", "))
	}
	return nil
}
