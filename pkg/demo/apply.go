package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// Namespace is the tool's namespace in the sandbox: the runner's journal,
// lock and placeholder pods live there.
const Namespace = "karpenter-migrate"

// JournalFile is the copy of the runner's journal the demo writes after
// apply and rollback (what `status -o json` shows).
const JournalFile = "journal.json"

// newRunner builds the rollout runner as `apply --plan plan.yaml --dir
// karpenter --yes` does (action.Configuration.Runner), on the sandbox's
// clients: evictions go one node and one pod at a time (the plan's
// concurrency is 1, the sandbox configuration's PodConcurrency 1), so
// every wait of the runner steps the simulation from one goroutine and a
// seed gives one run.
//
// The runner's Kubernetes requests are counted in req when it is set (the
// demo's own reads, through r.cfg, are not).
func (r *runner) newRunner(obs rollout.Observer, req *kube.Requests) (*rollout.Runner, error) {
	c := *r.cfg
	c.Observer = obs
	if req != nil {
		var err error
		if c.Kube, err = r.env.CountedKube(req); err != nil {
			return nil, err
		}
	}
	return c.Runner(r.plan, action.Run{Dir: filepath.Join(r.opts.OutDir, "karpenter")})
}

// stepApply is `apply --yes`: rollout.Runner.Apply with the journal and
// the lock in the sandbox cluster, its events as the demo's progress.
func (r *runner) stepApply(ctx context.Context) (string, error) {
	// Every pod on a node of a node group as apply starts, not a
	// DaemonSet's nor finished: all move but those left on the nodes kept
	// for the Karpenter controller.
	legacy, err := r.podsOnLegacyNodes(ctx)
	if err != nil {
		return "", err
	}
	obs := &observer{r: r, prefix: "apply", waves: map[int]*waveProgress{}}
	req := &kube.Requests{}
	rr, err := r.newRunner(obs.observe, req)
	if err != nil {
		return "", err
	}
	err = cmp.Or(rr.Apply(ctx), obs.err)
	r.sum.APIRequests = req.Counts()
	// Moves are the runner's evictions the API allowed plus the pods of
	// the Deployments the runner restarted; a pod evicted onto a node of a
	// later wave moves again. Measured as they happened: an interrupted
	// apply reports those it made.
	evicted := obs.evicted
	r.sum.Evictions = evicted
	r.sum.Moves = evicted + obs.restarted
	r.sum.ControllerRoomEvictions = obs.roomEvicted
	if werr := r.writeJournal(ctx); werr != nil && err == nil {
		err = werr
	}
	// Each wave's time and the waves' makespan, as the journal has them.
	var timed map[int]rollout.WaveRecord
	if j := r.journal; j != nil {
		timed = map[int]rollout.WaveRecord{}
		for _, w := range j.Waves {
			timed[w.Index] = w
		}
		elapsed, _ := j.WavesElapsed(j.UpdatedAt)
		r.sum.MakespanSeconds = elapsed.Seconds()
	}
	if r.waits != nil {
		wait, pod := r.waits.result(r.env.Now())
		r.sum.ApplyLongestWaitSeconds, r.sum.ApplyLongestWaitPod = wait.Seconds(), pod
	}
	for i := 1; i <= len(r.plan.Waves); i++ {
		if w := obs.waves[i]; w != nil {
			w.PredictedSeconds, w.DrainGroup = r.plan.Waves[i-1].PredictedSeconds, r.plan.Waves[i-1].DrainGroup
			if rec, ok := timed[i]; ok && r.journal != nil {
				w.Seconds = rec.Elapsed(r.journal.UpdatedAt).Seconds()
			}
			r.sum.Waves = append(r.sum.Waves, w.WaveSummary)
		}
	}
	if err != nil {
		return "", r.runError(ctx, err)
	}
	after, err := r.podsOnLegacyNodes(ctx)
	if err != nil {
		return "", err
	}
	// The pods that had to move: those no longer where they were (a
	// replaced pod has a new name; a StatefulSet's keeps it), but those
	// of Cluster Autoscaler, which step 09 stops (scales to zero).
	stopped := map[string]bool{}
	if ca := r.inv.ClusterAutoscaler; ca != nil {
		for _, p := range r.inv.Pods {
			if p.Namespace == ca.Namespace && p.OwnerName == ca.Name {
				stopped[p.Namespace+"/"+p.Name] = true
			}
		}
	}
	for pod, node := range legacy {
		switch {
		case after[pod] == node:
		case stopped[pod]:
			r.sum.PodsStopped++
		default:
			r.sum.PodsToMove++
		}
	}
	if r.sum.PodsToMove > 0 {
		r.sum.MovesPerPod = math.Round(float64(r.sum.Moves)/float64(r.sum.PodsToMove)*1000) / 1000
		r.sum.RequestsPerPod = math.Round(float64(r.sum.APIRequests.Total())/float64(r.sum.PodsToMove)*1000) / 1000
	}
	return fmt.Sprintf("%d pods to move (and %d stopped: Cluster Autoscaler), %d moves (%.3f per pod: %d evictions, %d of them to make room for the Karpenter controller, %d by surge restart) in %d waves; %d API requests (%.3f per pod); %d pods on the Karpenter controller's kept nodes; Cluster Autoscaler at 0, node groups scaled",
		r.sum.PodsToMove, r.sum.PodsStopped, r.sum.Moves, r.sum.MovesPerPod, evicted, obs.roomEvicted, obs.restarted, len(r.plan.Waves),
		r.sum.APIRequests.Total(), r.sum.RequestsPerPod, len(after)), nil
}

// runError names the simulation's failure when that is what stopped the
// runner.
func (r *runner) runError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("%w (%v)", err, cause)
		}
	}
	return err
}

// writeJournal copies the runner's journal from the sandbox cluster into
// the output directory.
func (r *runner) writeJournal(ctx context.Context) error {
	j, err := r.cfg.Status(ctx, r.opts.Environment)
	if err != nil {
		return fmt.Errorf("read the runner's journal: %w", err)
	}
	r.journal = j
	return writeJSON(filepath.Join(r.opts.OutDir, JournalFile), j)
}

// podsOnKarpenterNodes are the active pods, not DaemonSets', on nodes a
// NodePool launched (namespace/name).
func (r *runner) podsOnKarpenterNodes(ctx context.Context) (map[string]bool, error) {
	legacy, err := r.podsOnLegacyNodes(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := p.Namespace + "/" + p.Name
		if _, ok := legacy[name]; ok || p.Spec.NodeName == "" || kube.IsDaemonSetPod(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[name] = true
	}
	return out, nil
}

// karpenterNodes are the nodes a NodePool launched, by name.
func (r *runner) karpenterNodes(ctx context.Context) (map[string]bool, error) {
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := map[string]bool{}
	for _, nd := range nodes.Items {
		if nd.Labels[apisv1.NodePoolLabelKey] != "" {
			out[nd.Name] = true
		}
	}
	return out, nil
}

// nodeClaims counts the NodeClaims.
func (r *runner) nodeClaims(ctx context.Context) (int, error) {
	l, err := r.cfg.Dynamic.Resource(sandbox.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list NodeClaims: %w", err)
	}
	return len(l.Items), nil
}

// rollbackTally follows the Karpenter nodes and their pods through a
// rollback, measured at its moments: as it starts, as its drain starts
// (the nodes it cordoned, the pods it counted) and as it deletes the
// NodePools.
type rollbackTally struct {
	nodesAtStart, podsAtStart map[string]bool
	// drained are the nodes the drain cordoned.
	drained map[string]bool
	// podsLeft and podsArrived compare the pods on Karpenter nodes as the
	// drain started with podsAtStart.
	podsLeft, podsArrived int
	// atDeletion are the Karpenter nodes, and nodeClaims the NodeClaims,
	// as the first NodePool is deleted (nil: none was).
	atDeletion map[string]bool
	nodeClaims int
}

// drainStarted measures the pods on Karpenter nodes as the drain starts.
func (t *rollbackTally) drainStarted(ctx context.Context, r *runner) error {
	now, err := r.podsOnKarpenterNodes(ctx)
	if err != nil {
		return err
	}
	for p := range t.podsAtStart {
		if !now[p] {
			t.podsLeft++
		}
	}
	for p := range now {
		if !t.podsAtStart[p] {
			t.podsArrived++
		}
	}
	return nil
}

// deleting measures the Karpenter nodes and NodeClaims as the NodePools
// are deleted.
func (t *rollbackTally) deleting(ctx context.Context, r *runner) error {
	var err error
	if t.atDeletion, err = r.karpenterNodes(ctx); err != nil {
		return err
	}
	t.nodeClaims, err = r.nodeClaims(ctx)
	return err
}

// fill sets the rollback's node and pod figures: every Karpenter node seen
// is removed either with the NodePools, or by Karpenter before them —
// during the drain (one it had cordoned) or before it.
func (t *rollbackTally) fill(rb *RollbackSummary) {
	seen := maps.Clone(t.nodesAtStart)
	maps.Copy(seen, t.drained)
	maps.Copy(seen, t.atDeletion)
	rb.KarpenterNodesAtStart, rb.KarpenterNodesLaunched = len(t.nodesAtStart), len(seen)-len(t.nodesAtStart)
	rb.NodesDrained, rb.NodesRemovedWithNodePools, rb.NodeClaimsRemoved = len(t.drained), len(t.atDeletion), t.nodeClaims
	for n := range seen {
		switch {
		case t.atDeletion[n]:
		case t.drained[n]:
			rb.NodesRemovedDuringDrain++
		default:
			rb.NodesRemovedBeforeDrain++
		}
	}
	rb.PodsMoved, rb.PodsLeftBeforeDrain, rb.PodsArrivedBeforeDrain = len(t.podsAtStart), t.podsLeft, t.podsArrived
}

// nodesRemoved says how the Karpenter nodes went.
func (rb *RollbackSummary) nodesRemoved() string {
	s := fmt.Sprintf("%d Karpenter nodes", rb.KarpenterNodesAtStart)
	if rb.KarpenterNodesLaunched > 0 {
		s += fmt.Sprintf(" (and %d launched during the rollback)", rb.KarpenterNodesLaunched)
	}
	s += fmt.Sprintf(": %d drained by the rollback, %d removed with their NodePools (%d NodeClaims)", rb.NodesDrained, rb.NodesRemovedWithNodePools, rb.NodeClaimsRemoved)
	if n := rb.NodesRemovedBeforeDrain + rb.NodesRemovedDuringDrain; n > 0 {
		s += fmt.Sprintf(", %d removed by Karpenter itself (%d before the drain, %d during it)", n, rb.NodesRemovedBeforeDrain, rb.NodesRemovedDuringDrain)
	}
	return s
}

// podsOnLegacyNodes maps the pods on a node no NodePool launched, neither a
// DaemonSet's nor finished, to their node.
func (r *runner) podsOnLegacyNodes(ctx context.Context) (map[string]string, error) {
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	legacy := map[string]bool{}
	for _, n := range nodes.Items {
		if n.Labels[apisv1.NodePoolLabelKey] == "" {
			legacy[n.Name] = true
		}
	}
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !legacy[p.Spec.NodeName] || kube.IsDaemonSetPod(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[p.Namespace+"/"+p.Name] = p.Spec.NodeName
	}
	return out, nil
}

// waveProgress is one wave's progress in the demo's terms.
type waveProgress struct {
	WaveSummary
	// drainStarted is set once the drain counted its pods (PodsToMove).
	drainStarted bool
}

// moved are the pods that left the wave's nodes so far.
func (w *waveProgress) moved() int { return w.Evicted + w.Replaced + w.Gone }

func (w *waveProgress) progress() float64 {
	return float64(w.moved()) / float64(max(w.PodsToMove, 1))
}

// observer turns the runner's typed events into the demo's progress and
// step results.
type observer struct {
	r      *runner
	prefix string
	waves  map[int]*waveProgress
	wave   *waveProgress
	// restarted counts the pods of the Deployments the runner moved by a
	// surge restart, evicted the evictions it made.
	restarted, evicted int
	// roomEvicted counts the evictions that made room for the Karpenter
	// controller on the kept nodes (step 07, before any wave).
	roomEvicted int
	// toMove, replaced and gone are a drain's outside the waves
	// (rollback's drain of the Karpenter nodes): the pods it set out to
	// move, those surge restarts replaced and those gone before it
	// reached them.
	toMove, replaced, gone int
	// rb follows the Karpenter nodes through a rollback (nil in apply).
	rb *rollbackTally
	// err is a failure to read what a step did (the controller's placement).
	err error
}

func (o *observer) observe(e rollout.Event) {
	r := o.r
	switch e.Kind {
	case rollout.EventStepStarted:
		r.emit(o.prefix, StatusRunning, e.Step+": "+e.Message, -1)
	case rollout.EventStepFinished:
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: o.prefix + "/" + e.Step, Status: StatusDone, Detail: e.Message})
		if o.prefix == "apply" && rollout.SameStep(e.Step, karpenterStep) {
			o.err = r.controllerInstalled(r.runCtx)
		}
	case rollout.EventStepSkipped:
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: o.prefix + "/" + e.Step, Status: StatusSkipped, Detail: e.Message})
		r.emit(o.prefix, StatusRunning, e.Step+" skipped: "+e.Message, -1)
	case rollout.EventStepFailed:
		r.sum.Steps = append(r.sum.Steps, StepResult{ID: o.prefix + "/" + e.Step, Status: StatusFailed, Detail: e.Message})
	case rollout.EventWavePhase:
		o.wavePhase(e)
	case rollout.EventDrainStarted:
		if w := o.inWave(e); w != nil {
			w.PodsToMove, w.drainStarted = e.Total, true
			r.emit(w.ID, StatusRunning, "drain: "+e.Message, 0)
			return
		}
		o.toMove += e.Total
		if o.rb != nil && o.err == nil {
			o.err = o.rb.drainStarted(r.runCtx, r)
		}
		r.emit(o.prefix, StatusRunning, "drain: "+e.Message, 0)
	case rollout.EventEviction:
		evicted := e.Message == "evicted"
		replaced := strings.HasPrefix(e.Message, "replaced:")
		gone := strings.HasPrefix(e.Message, "gone:")
		if !evicted && !replaced && !gone {
			return
		}
		w := o.inWave(e)
		switch {
		case evicted:
			o.evicted++
			if w == nil && rollout.SameStep(e.Step, karpenterStep) {
				o.roomEvicted++
			}
			if w != nil {
				w.Evicted++
				w.Moves++
			}
		case replaced && w != nil:
			w.Replaced++
		case replaced:
			o.replaced++
		case w != nil:
			w.Gone++
		default:
			o.gone++
		}
		if w != nil {
			r.emit(w.ID, StatusRunning, fmt.Sprintf("%d/%d pods moved off the wave's nodes", w.moved(), w.PodsToMove), w.progress())
		} else if o.rb != nil {
			moved := o.evicted + o.replaced + o.gone
			r.emit(o.prefix, StatusRunning, fmt.Sprintf("%d/%d pods moved off the Karpenter nodes", moved, o.toMove), float64(moved)/float64(max(o.toMove, 1)))
		}
	case rollout.EventChange:
		if o.rb != nil {
			if node, ok := strings.CutPrefix(e.Message, "cordon and drain Karpenter node "); ok {
				if o.rb.drained == nil {
					o.rb.drained = map[string]bool{}
				}
				o.rb.drained[node] = true
			}
			if strings.HasPrefix(e.Message, "delete NodePool ") && o.rb.atDeletion == nil && o.err == nil {
				o.err = o.rb.deleting(r.runCtx, r)
			}
		}
		if dep, ok := strings.CutPrefix(e.Message, "restart Deployment "); ok {
			n := o.replicas(dep)
			o.restarted += n
			if w := o.inWave(e); w != nil {
				w.Moves += n
			}
		}
		id := o.prefix
		if o.wave != nil && !o.wave.Done {
			id = o.wave.ID
		}
		r.emit(id, StatusRunning, e.Message, -1)
	case rollout.EventWaiting:
		if e.Total > 0 {
			id := o.prefix
			if o.wave != nil && !o.wave.Done {
				id = o.wave.ID
			}
			r.emit(id, StatusRunning, fmt.Sprintf("waiting for %s (%d/%d)", e.Message, e.Done, e.Total), -1)
		}
	}
}

// inWave is the wave an event of the runner belongs to (nil: none, as
// for step 07's room or rollback's drain).
func (o *observer) inWave(e rollout.Event) *waveProgress {
	if e.Wave == 0 {
		return nil
	}
	return o.waves[e.Wave]
}

func (o *observer) wavePhase(e rollout.Event) {
	r := o.r
	w, ok := o.waves[e.Wave]
	if !ok {
		if e.Wave < 1 || e.Wave > len(r.plan.Waves) {
			return
		}
		pw := r.plan.Waves[e.Wave-1]
		w = &waveProgress{WaveSummary: WaveSummary{ID: waveName(pw), PlannedNodes: len(pw.Nodes), PlannedPods: pw.Pods}}
		o.waves[e.Wave] = w
		r.emit(w.ID, StatusRunning, fmt.Sprintf("%d nodes, %d pods when planned, NodePools %s", len(pw.Nodes), pw.Pods, strings.Join(pw.NodePools, ",")), 0)
	}
	o.wave = w
	if e.Phase != rollout.PhaseDone {
		progress := -1.0
		if w.drainStarted {
			progress = w.progress()
		}
		r.emit(w.ID, StatusRunning, "phase "+e.Phase, progress)
		return
	}
	w.Done = true
	detail := fmt.Sprintf("%d/%d pods moved off the wave's nodes (%d evicted, %d replaced by surge restart%s); %d moves", w.moved(), w.PodsToMove, w.Evicted, w.Replaced, goneText(w.Gone), w.Moves)
	r.emit(w.ID, StatusDone, detail, 1)
	r.sum.Steps = append(r.sum.Steps, StepResult{ID: w.ID, Status: StatusDone, Detail: detail})
}

// goneText names the pods a drain found gone, if any.
func goneText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d gone before the drain reached their node", n)
}

// replicas is the replica count of "namespace/name (...)" as the runner
// names a Deployment it restarts.
func (o *observer) replicas(dep string) int {
	ref, _, _ := strings.Cut(dep, " ")
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return 0
	}
	d, err := o.r.cfg.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	return int(replicas(d.Spec.Replicas))
}

// stepRollback is `rollback --yes`: rollout.Runner.Rollback runs each
// applied step's Down — node groups back to the sizes the journal
// recorded, Karpenter's nodes drained back onto them, Cluster Autoscaler
// restored, NodePools and node classes deleted — then `iam down` removes
// what `iam apply` created, and the demo checks every recorded size came
// back.
func (r *runner) stepRollback(ctx context.Context) (string, error) {
	// The migration's counters end here: the rollback's are its own.
	r.migrated = &migrationCounters{stats: r.env.Stats(), violations: r.pdbs.count, details: slices.Clone(r.pdbs.violations)}
	r.migrated.longestWait, r.migrated.waitPod = r.waits.result(r.env.Now())
	obs := &observer{r: r, prefix: "rollback", waves: map[int]*waveProgress{}, rb: &rollbackTally{}}
	rr, err := r.newRunner(obs.observe, nil)
	if err != nil {
		return "", err
	}
	if obs.rb.podsAtStart, err = r.podsOnKarpenterNodes(ctx); err != nil {
		return "", err
	}
	if obs.rb.nodesAtStart, err = r.karpenterNodes(ctx); err != nil {
		return "", err
	}
	consolidated := len(r.env.Consolidations())
	stats := r.env.Stats()
	err = cmp.Or(rr.Rollback(ctx, ""), obs.err)
	if werr := r.writeJournal(ctx); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return "", r.runError(ctx, err)
	}
	if err := r.env.Settle(ctx); err != nil {
		return "", fmt.Errorf("after rollback: %w", err)
	}
	deleted, err := r.iamDown(ctx)
	if err != nil {
		return "", err
	}
	rb, err := r.verifyRollback(ctx)
	if err != nil {
		return "", err
	}
	obs.rb.fill(rb)
	rb.PodsToMove, rb.Evictions, rb.Replaced, rb.Gone = obs.toMove, obs.evicted, obs.replaced, obs.gone
	if r.env.Engine() == EngineSandbox {
		rc := &RollbackConsolidation{Evictions: r.env.Stats().ConsolidationEvictions - stats.ConsolidationEvictions}
		for _, c := range r.env.Consolidations()[consolidated:] {
			if c.Status == sandbox.CommandExecuted {
				rc.Commands++
				rc.Nodes += len(c.Nodes)
			}
		}
		rb.Consolidation = rc
	}
	rb.PDBRejections = r.env.Stats().Rejected - r.migrated.stats.Rejected
	rb.PDBViolations = r.pdbs.count - r.migrated.violations
	r.sum.Rollback = rb
	if !rb.Restored {
		return "", fmt.Errorf("rollback incomplete: %s", strings.Join(rb.Problems, "; "))
	}
	types := ""
	if len(rb.TypesChanged) > 0 {
		types = " (instance types not as before: " + strings.Join(rb.TypesChanged, ", ") + ")"
	}
	return fmt.Sprintf("%d pods back on node-group nodes; %s; %d groups at recorded sizes; %d IAM objects deleted; $%.4f/h, $%.4f/h before the migration%s",
		rb.PodsMoved, rb.nodesRemoved(), len(rb.Groups), deleted, rb.CostPerHour, rb.CostPerHourBefore, types), nil
}

// verifyRollback compares the sandbox with what the runner's journal
// recorded before apply changed it.
func (r *runner) verifyRollback(ctx context.Context) (*RollbackSummary, error) {
	rb := &RollbackSummary{Restored: true}
	fail := func(format string, a ...any) {
		rb.Restored = false
		rb.Problems = append(rb.Problems, fmt.Sprintf(format, a...))
	}
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	readyBy := map[string]bool{}
	karpenter := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		readyBy[n.Name] = nodeReady(n)
		if n.Labels[apisv1.NodePoolLabelKey] != "" {
			karpenter[n.Name] = true
			rb.KarpenterNodes++
		}
		for _, t := range n.Spec.Taints {
			if t.MatchTaint(&migrations.SteerTaint) || (t.Key == "CriticalAddonsOnly" && r.plan.Controller != nil && r.plan.Controller.Kept) {
				fail("node %s keeps the taint %s the rollout added", n.Name, t.ToString())
			}
		}
		// On the control plane the demo labelled the controller's nodes
		// itself and its release stays: the label with it.
		if _, ok := n.Labels[generate.KeptLabel]; ok && !r.opts.ControlPlane {
			fail("node %s keeps the label %s the rollout added", n.Name, generate.KeptLabel)
		}
	}
	readyIn := map[string]int{}
	instances, err := r.env.Instances(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := r.env.Groups(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range instances {
		if in.Group != "" && readyBy[in.NodeName] {
			readyIn[in.Group]++
		}
	}
	rec := r.journal.Recorded
	if len(rec.NodeGroups) == 0 {
		fail("the journal recorded no node group")
	}
	for _, want := range rec.NodeGroups {
		i := slices.IndexFunc(groups, func(g inventory.NodeGroup) bool { return g.Name == want.Name })
		if i < 0 {
			fail("node group %s is gone", want.Name)
			continue
		}
		g := groups[i]
		gs := GroupSize{Name: g.Name, Recorded: want.Desired, RecordedMin: want.Min, RecordedMax: want.Max,
			Desired: g.DesiredSize, InstanceCount: len(g.Instances), ReadyNodes: readyIn[g.Name]}
		rb.Groups = append(rb.Groups, gs)
		if g.DesiredSize != want.Desired || g.MinSize != want.Min || g.MaxSize != want.Max {
			fail("node group %s is %d/%d/%d (min/desired/max), recorded %d/%d/%d", g.Name, g.MinSize, g.DesiredSize, g.MaxSize, want.Min, want.Desired, want.Max)
		}
		if int32(readyIn[g.Name]) != want.Desired {
			fail("node group %s has %d Ready nodes, want %d", g.Name, readyIn[g.Name], want.Desired)
		}
		if len(want.Tags) > 0 {
			out, err := autoscaling.NewFromConfig(r.cfg.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{want.ASGName}})
			if err != nil || len(out.AutoScalingGroups) != 1 {
				return nil, fmt.Errorf("describe ASG %s: %v", want.ASGName, err)
			}
			for _, tag := range want.Tags {
				if !slices.ContainsFunc(out.AutoScalingGroups[0].Tags, func(x astypes.TagDescription) bool {
					return awssdk.ToString(x.Key) == tag.Key && awssdk.ToString(x.Value) == tag.Value
				}) {
					fail("node group %s lacks its Cluster Autoscaler tag %s=%s", g.Name, tag.Key, tag.Value)
				}
			}
		}
	}
	if rb.KarpenterNodes > 0 {
		fail("%d Karpenter nodes remain", rb.KarpenterNodes)
	}
	if ca := rec.ClusterAutoscaler; ca != nil {
		got, err := r.caReplicas(ctx)
		if err != nil {
			return nil, err
		}
		if got != ca.Replicas {
			fail("Cluster Autoscaler has %d replicas, recorded %d", got, ca.Replicas)
		}
	}
	pods, err := r.cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if karpenter[p.Spec.NodeName] || p.Spec.NodeName == "" {
			fail("pod %s/%s is not on a node-group node", p.Namespace, p.Name)
		}
	}
	pl, err := r.cfg.Dynamic.Resource(sandbox.NodePoolGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list NodePools: %w", err)
	}
	if len(pl.Items) > 0 {
		fail("%d NodePools remain", len(pl.Items))
	}
	if rb.NodesAfter, rb.NodesAfterByType, rb.CostPerHour, err = r.fleet(ctx); err != nil {
		return nil, err
	}
	rb.CostPerHourBefore = r.sum.CostPerHourBefore
	types := map[string]bool{}
	for t := range r.sum.NodesBeforeByType {
		types[t] = true
	}
	for t := range rb.NodesAfterByType {
		types[t] = true
	}
	for _, t := range sortedKeys(types) {
		if b, a := r.sum.NodesBeforeByType[t], rb.NodesAfterByType[t]; a != b {
			rb.TypesChanged = append(rb.TypesChanged, fmt.Sprintf("%s %d → %d", t, b, a))
		}
	}
	return rb, nil
}

// caReplicas is the Cluster Autoscaler deployment's replicas (0 when the
// cluster has none).
func (r *runner) caReplicas(ctx context.Context) (int32, error) {
	ca := r.inv.ClusterAutoscaler
	if ca == nil {
		return 0, nil
	}
	d, err := r.cfg.Kube.AppsV1().Deployments(ca.Namespace).Get(ctx, ca.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read Cluster Autoscaler deployment %s/%s: %w", ca.Namespace, ca.Name, err)
	}
	return replicas(d.Spec.Replicas), nil
}
