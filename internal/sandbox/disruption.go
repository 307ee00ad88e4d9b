package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// Karpenter's disruption timing, in simulated time.
const (
	// DisruptionPollPeriod is how often the stand-in's disruption
	// controller runs a pass (Karpenter's pollingPeriod).
	DisruptionPollPeriod = 10 * time.Second
	// ConsolidationTTL is how long a command waits before it is validated
	// again against the cluster of that moment and executed (Karpenter's
	// consolidationTTL).
	ConsolidationTTL = 15 * time.Second
	// ReplacementTimeout is how long a Replace waits for its replacement to
	// be Ready before it gives up and untaints its nodes.
	ReplacementTimeout = 10 * time.Minute
)

// Statuses of a ConsolidationCommand.
const (
	// CommandValidating: decided, waiting out ConsolidationTTL.
	CommandValidating = "validating"
	// CommandLaunching: the replacement of a Replace is launching.
	CommandLaunching = "launching"
	// CommandDraining: the nodes are tainted and their pods evicted.
	CommandDraining = "draining"
	// CommandExecuted: every node of the command is gone.
	CommandExecuted = "executed"
	// CommandInvalid: disruption.Validate rejected the command, when it was
	// decided or after ConsolidationTTL; it was not executed.
	CommandInvalid = "invalid"
	// CommandAborted: the replacement did not become Ready in
	// ReplacementTimeout (or its NodeClaim vanished); the nodes were
	// untainted and kept.
	CommandAborted = "aborted"
)

// ConsolidationCommand is one command of the Karpenter stand-in's
// disruption controller and what became of it.
type ConsolidationCommand struct {
	DecidedAt  time.Time         `json:"decidedAt"`
	FinishedAt time.Time         `json:"finishedAt,omitzero"`
	Method     disruption.Method `json:"method"`
	Action     disruption.Action `json:"action"`
	// Nodes are the nodes the command removes.
	Nodes []disruption.NodeRef `json:"nodes"`
	// Replacement is the node a Replace launches (its name once it has
	// registered).
	Replacement *disruption.NodeRef `json:"replacement,omitempty"`
	// Price is the removed nodes' $/h, Savings what the command saves.
	Price   float64 `json:"price"`
	Savings float64 `json:"savings"`
	Status  string  `json:"status"`
	Why     string  `json:"why"`
	// Problems are disruption.Validate's findings for an invalid command,
	// or why it was aborted.
	Problems []string `json:"problems,omitempty"`
	// Evictions counts the evictions the drain made (429s retried aside).
	Evictions int `json:"evictions"`
}

// disruptor is the state of the stand-in's disruption controller.
type disruptor struct {
	lastPass time.Time
	// podSig and lastPodEvent follow each Karpenter node's pods: a change of
	// its set of (non-DaemonSet, active) pods is a pod event, which is what
	// NodeClaim status.lastPodEventTime records. podsOn is the pod cache's
	// list of each node's pods podSig was read from: the cache replaces a
	// node's list on every write of one of its pods, so the same list has
	// the same signature.
	podSig       map[string]string
	lastPodEvent map[string]time.Time
	podsOn       map[string][]*corev1.Pod
	// pending are commands waiting out ConsolidationTTL; running are being
	// executed; history is every command, in the order decided.
	pending []*command
	running []*command
	history []*command
	// wait is the managed node that reaches consolidateAfter last, as of
	// the last pass; idle is set when that pass decided nothing.
	wait consolidateWait
	idle bool
	// quiet is the cluster a pass last decided nothing on; decided and
	// unchanged count the passes that ran disruption.Decide and those
	// that found the cluster as quiet says (Decide not run again).
	quiet              quietCluster
	decided, unchanged int
	// catalogTypes are the catalogue's instance types (default kubelet);
	// types caches each NodePool's narrowing of them, by NodePool, until
	// its requirements change.
	catalogTypes []engine.InstanceType
	types        map[string]poolTypes
}

// consolidateWait is when node reaches its NodePool's consolidateAfter:
// until, counted from since (its last pod event, or its creation).
type consolidateWait struct {
	node         string
	since, until time.Time
}

// quietCluster is what disruption.Decide read in a pass that decided
// nothing, as far as it can change: the cluster's writes (changes.count),
// and the time, through each node's consolidateAfter (until: the first
// node reaching it after that pass; zero when none will) and the
// NodePools' scheduled budgets (budgets: which were active). Decide being
// pure, a pass on the same writes before until with the same budgets
// active decides nothing again. Karpenter's disruption controller skips
// such a pass too (its cluster state's "consolidated" mark, cleared by
// any change of a node or pod).
type quietCluster struct {
	valid   bool
	changes uint64
	until   time.Time
	budgets string
}

type poolTypes struct {
	key   string
	types []engine.InstanceType
}

type command struct {
	rec ConsolidationCommand
	cmd disruption.Command
	// claim is the replacement's NodeClaim; startedAt when execution
	// began; removed counts the nodes the drain removed.
	claim     string
	startedAt time.Time
	removed   int
}

func newDisruptor() disruptor {
	return disruptor{podSig: map[string]string{}, lastPodEvent: map[string]time.Time{}, podsOn: map[string][]*corev1.Pod{}, types: map[string]poolTypes{}}
}

// Consolidations returns every command the stand-in's disruption
// controller decided so far, in order, with its status.
func (s *Sandbox) Consolidations() []ConsolidationCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConsolidationCommand, 0, len(s.dis.history))
	for _, c := range s.dis.history {
		r := c.rec
		r.Nodes = append([]disruption.NodeRef(nil), r.Nodes...)
		r.Problems = append([]string(nil), r.Problems...)
		if r.Replacement != nil {
			rep := *r.Replacement
			r.Replacement = &rep
		}
		out = append(out, r)
	}
	return out
}

// SettleConsolidation steps until the cluster is settled (as Settle) and
// the Karpenter stand-in has nothing left to do: no command validating or
// executing, every Karpenter node past its NodePool's consolidateAfter,
// and a disruption pass after that decided nothing. It returns
// ErrNotSettled if that takes more than max of simulated time, saying what
// it waited for and what Karpenter did meanwhile: consolidations that
// leave pods pending, for which Karpenter launches nodes that are
// consolidated in turn, never settle.
func (s *Sandbox) SettleConsolidation(ctx context.Context, max time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	start, before := s.Now(), s.stats
	decided, unchanged := s.dis.decided, s.dis.unchanged
	deadline := start.Add(max)
	for {
		busy, why, err := s.busy(ctx)
		if err != nil {
			return err
		}
		if !busy {
			switch {
			case len(s.dis.pending) > 0 || len(s.dis.running) > 0:
				busy, why = true, "a disruption command is in progress"
			case !s.dis.idle:
				busy, why = true, fmt.Sprintf("Karpenter's disruption pass at %s decided commands", s.dis.lastPass.Format(time.RFC3339))
			case s.dis.lastPass.Before(s.dis.wait.until):
				w := s.dis.wait
				busy, why = true, fmt.Sprintf("Karpenter nodes are waiting out consolidateAfter: node %s reaches it at %s (counted from %s, its last pod change or its creation)",
					w.node, w.until.Format(time.RFC3339), w.since.Format(time.RFC3339))
			default:
				return nil
			}
		}
		if !s.Now().Before(deadline) {
			return fmt.Errorf("%w after %s of simulated time: %s; since %s Karpenter executed %d consolidation commands (%d skipped) and launched %d nodes, deciding in %d disruption passes (%d more found the cluster unchanged since one that decided nothing)",
				ErrNotSettled, max, why, start.Format(time.RFC3339), s.stats.Consolidations-before.Consolidations,
				s.stats.ConsolidationsInvalid+s.stats.ConsolidationsAborted-before.ConsolidationsInvalid-before.ConsolidationsAborted,
				s.stats.NodesLaunched-before.NodesLaunched, s.dis.decided-decided, s.dis.unchanged-unchanged)
		}
		if err := s.step(ctx, s.opts.Tick); err != nil {
			return err
		}
	}
}

// consolidate is Karpenter's disruption controller and the termination
// controller for the nodes it disrupts. Every tick it records pod events,
// moves running commands on, and validates the commands that have waited
// out ConsolidationTTL against the cluster as it is now (starting the
// valid ones). Every DisruptionPollPeriod, when no command waits, it runs
// a pass: disruption.Decide on the cluster at the simulated time, each
// command checked by disruption.Validate on the same input before it
// waits (an invalid one is logged, recorded and skipped).
func (s *Sandbox) consolidate(ctx context.Context) error {
	nodes := s.nodesByName()
	s.trackPodEvents(nodes)
	if err := s.progressCommands(ctx, nodes); err != nil {
		return err
	}
	if s.validationDue() {
		in, err := s.disruptionInput(ctx)
		if err != nil {
			return err
		}
		return s.startValidated(ctx, in)
	}
	// While a command waits out its validation delay the controller does
	// not decide again, as Karpenter's blocks in its validation.
	if len(s.dis.pending) > 0 || (!s.dis.lastPass.IsZero() && s.Now().Sub(s.dis.lastPass) < DisruptionPollPeriod) {
		return nil
	}
	s.dis.lastPass = s.Now()
	pools, err := s.listNodePools(ctx)
	if err != nil {
		return err
	}
	var due bool
	due, s.dis.wait = s.consolidationDue(pools, nodes)
	if !due {
		// No method can act before a node passes consolidateAfter.
		s.dis.idle = true
		return nil
	}
	budgets, err := activeBudgets(pools, s.Now())
	if err != nil {
		return err
	}
	if q := s.dis.quiet; q.valid && q.changes == s.changes.count && (q.until.IsZero() || s.Now().Before(q.until)) && q.budgets == budgets {
		s.dis.idle = true
		s.dis.unchanged++
		return nil
	}
	in, err := s.disruptionInput(ctx)
	if err != nil {
		return err
	}
	d, err := disruption.Decide(in)
	if err != nil {
		return fmt.Errorf("disruption pass: %w", err)
	}
	s.dis.decided++
	s.dis.idle = len(d.Commands) == 0
	s.dis.quiet = quietCluster{}
	if s.dis.idle {
		s.dis.quiet = quietCluster{valid: true, changes: s.changes.count, until: nextConsolidatable(in), budgets: budgets}
	}
	for _, c := range d.Commands {
		cmd := &command{cmd: c, rec: ConsolidationCommand{DecidedAt: s.Now(), Method: c.Method, Action: c.Action,
			Nodes: c.Nodes, Price: c.Price, Savings: c.Savings, Status: CommandValidating, Why: c.Why}}
		if r := c.Replacement; r != nil {
			cmd.rec.Replacement = &disruption.NodeRef{NodePool: r.NodePool, InstanceType: r.InstanceType, Zone: r.Zone, CapacityType: r.CapacityType, Price: r.Price}
		}
		s.dis.history = append(s.dis.history, cmd)
		if errs := disruption.Validate(in, []disruption.Command{c}); len(errs) > 0 {
			s.invalid(cmd, errs)
			continue
		}
		s.dis.pending = append(s.dis.pending, cmd)
	}
	return nil
}

// validationDue reports whether a pending command has waited out
// ConsolidationTTL.
func (s *Sandbox) validationDue() bool {
	for _, c := range s.dis.pending {
		if s.Now().Sub(c.rec.DecidedAt) >= ConsolidationTTL {
			return true
		}
	}
	return false
}

// startValidated validates the commands that have waited out
// ConsolidationTTL against the cluster of now and starts the valid ones.
func (s *Sandbox) startValidated(ctx context.Context, in disruption.Input) error {
	var keep []*command
	var ready []disruption.Command
	var cmds []*command
	for _, c := range s.dis.pending {
		if s.Now().Sub(c.rec.DecidedAt) < ConsolidationTTL {
			keep = append(keep, c)
			continue
		}
		ready = append(ready, c.cmd)
		cmds = append(cmds, c)
	}
	s.dis.pending = keep
	if len(cmds) == 0 {
		return nil
	}
	// Validated together: their nodes count against the budgets together.
	if errs := disruption.Validate(in, ready); len(errs) > 0 {
		for _, c := range cmds {
			s.invalid(c, errs)
		}
		return nil
	}
	for _, c := range cmds {
		if err := s.start(ctx, c); err != nil {
			return err
		}
	}
	s.dis.idle = false
	return nil
}

func (s *Sandbox) invalid(c *command, errs []error) {
	c.rec.Status, c.rec.FinishedAt = CommandInvalid, s.Now()
	for _, e := range errs {
		c.rec.Problems = append(c.rec.Problems, e.Error())
	}
	s.stats.ConsolidationsInvalid++
	s.logf("karpenter: skip invalid %s %s of %s: %s", c.rec.Method, c.rec.Action, nodeNames(c.rec.Nodes), strings.Join(c.rec.Problems, "; "))
}

func (s *Sandbox) logf(format string, a ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf("%s "+format, append([]any{s.Now().Format(time.RFC3339)}, a...)...)
	}
}

func nodeNames(refs []disruption.NodeRef) string {
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}

// start begins executing a command as Karpenter's orchestration does: the
// nodes are tainted karpenter.sh/disrupted:NoSchedule, a Replace launches
// its replacement NodeClaim, and the drain starts once it is Ready.
func (s *Sandbox) start(ctx context.Context, c *command) error {
	for _, n := range c.rec.Nodes {
		if err := s.setDisruptedTaint(ctx, n.Name, true); err != nil {
			return err
		}
	}
	c.startedAt = s.Now()
	c.rec.Status = CommandDraining
	if r := c.cmd.Replacement; r != nil {
		pool, err := s.getNodePool(ctx, r.NodePool)
		if err != nil {
			return err
		}
		if _, ok := s.cat.Get(r.InstanceType); !ok || pool == nil {
			return s.abort(ctx, c, fmt.Sprintf("replacement %s of NodePool %s cannot be launched in the sandbox", r.InstanceType, r.NodePool))
		}
		u, err := s.dyn.Resource(NodeClaimGVR).Create(ctx, NewNodeClaim(pool, Offering{InstanceType: r.InstanceType, Zone: r.Zone, CapacityType: r.CapacityType, Price: r.Price}, nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("launch replacement for %s: create NodeClaim of NodePool %s: %w", nodeNames(c.rec.Nodes), r.NodePool, err)
		}
		c.claim = u.GetName()
		c.rec.Status = CommandLaunching
	}
	s.dis.running = append(s.dis.running, c)
	s.logf("karpenter: %s %s of %s (saves $%.4f/h): %s", c.rec.Method, c.rec.Action, nodeNames(c.rec.Nodes), c.rec.Savings, c.rec.Why)
	return nil
}

// abort gives a command up: its nodes are untainted and kept, its
// replacement (if launched) deleted.
func (s *Sandbox) abort(ctx context.Context, c *command, why string) error {
	for _, n := range c.rec.Nodes {
		if err := s.setDisruptedTaint(ctx, n.Name, false); err != nil {
			return err
		}
	}
	if c.claim != "" {
		if err := s.dyn.Resource(NodeClaimGVR).Delete(ctx, c.claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("abort %s of %s: delete replacement NodeClaim %s: %w", c.rec.Action, nodeNames(c.rec.Nodes), c.claim, err)
		}
	}
	c.rec.Status, c.rec.FinishedAt = CommandAborted, s.Now()
	c.rec.Problems = append(c.rec.Problems, why)
	s.stats.ConsolidationsAborted++
	s.logf("karpenter: abort %s %s of %s: %s", c.rec.Method, c.rec.Action, nodeNames(c.rec.Nodes), why)
	return nil
}

// setDisruptedTaint adds or removes karpenter.sh/disrupted:NoSchedule.
func (s *Sandbox) setDisruptedTaint(ctx context.Context, name string, on bool) error {
	n, err := s.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	var taints []corev1.Taint
	has := false
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.DisruptedTaintKey {
			has = true
			continue
		}
		taints = append(taints, t)
	}
	if has == on {
		return nil
	}
	if on {
		taints = append(taints, corev1.Taint{Key: apisv1.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule})
	}
	n.Spec.Taints = taints
	if _, err := s.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("taint node %s %s: %w", name, apisv1.DisruptedTaintKey, err)
	}
	return nil
}

// progressCommands moves running commands on: a Replace waits for its
// replacement to be Ready, then every node is drained through the
// Eviction API (a 429 is retried next tick) and, once no pod that must
// move is left, its NodeClaim deleted and its instance terminated.
func (s *Sandbox) progressCommands(ctx context.Context, nodes map[string]*corev1.Node) error {
	var still []*command
	for _, c := range s.dis.running {
		if c.rec.Status == CommandLaunching {
			ready, gone := s.replacementReady(ctx, c, nodes)
			switch {
			case gone:
				if err := s.abort(ctx, c, fmt.Sprintf("replacement NodeClaim %s was deleted", c.claim)); err != nil {
					return err
				}
				continue
			case !ready && s.Now().Sub(c.startedAt) >= ReplacementTimeout:
				if err := s.abort(ctx, c, fmt.Sprintf("replacement NodeClaim %s not Ready after %s", c.claim, ReplacementTimeout)); err != nil {
					return err
				}
				continue
			case !ready:
				still = append(still, c)
				continue
			}
			c.rec.Status = CommandDraining
		}
		done, err := s.drain(ctx, c, nodes)
		if err != nil {
			return err
		}
		if !done {
			still = append(still, c)
			continue
		}
		if c.removed == 0 {
			// Every node went another way (its NodePool deleted, a rollback).
			c.rec.Status, c.rec.FinishedAt = CommandAborted, s.Now()
			c.rec.Problems = append(c.rec.Problems, "its nodes were removed by something else")
			s.stats.ConsolidationsAborted++
			continue
		}
		c.rec.Status, c.rec.FinishedAt = CommandExecuted, s.Now()
		s.stats.Consolidations++
		s.stats.ConsolidationSavings = round6(s.stats.ConsolidationSavings + c.rec.Savings)
		s.dis.idle = false
	}
	s.dis.running = still
	return nil
}

func round6(f float64) float64 { return float64(int64(f*1e6+0.5)) / 1e6 }

// replacementReady reports whether the replacement's node has registered
// and is Ready (and records its name), or whether its NodeClaim is gone.
func (s *Sandbox) replacementReady(ctx context.Context, c *command, nodes map[string]*corev1.Node) (ready, gone bool) {
	if _, err := s.dyn.Resource(NodeClaimGVR).Get(ctx, c.claim, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return false, true
	}
	for _, id := range s.cloud.instanceIDs() {
		in := s.cloud.instances[id]
		if in.NodeClaim != c.claim || in.NodeName == "" {
			continue
		}
		n := nodes[in.NodeName]
		if n == nil || !nodeReady(n) || n.Labels[apisv1.NodeInitializedLabelKey] != "true" {
			return false, false
		}
		c.rec.Replacement.Name = in.NodeName
		return true, false
	}
	return false, false
}

// drain evicts the pods of a command's nodes that must move, through
// pkg/kube's drain one pass a tick (a 429 is asked again next tick), and
// removes each node a pass finds drained. It reports whether every node
// is gone.
func (s *Sandbox) drain(ctx context.Context, c *command, nodes map[string]*corev1.Node) (bool, error) {
	d := s.terminator()
	done := true
	for _, ref := range c.rec.Nodes {
		if nodes[ref.Name] == nil {
			continue
		}
		pass, err := d.EvictNow(ctx, ref.Name)
		if err != nil {
			return false, fmt.Errorf("drain node %s for %s: %w", ref.Name, c.rec.Method, err)
		}
		if !pass.Drained() {
			done = false
			c.rec.Evictions += len(pass.Evicted)
			s.stats.ConsolidationEvictions += len(pass.Evicted)
			continue
		}
		if err := s.removeNode(ctx, ref.Name); err != nil {
			return false, err
		}
		c.removed++
	}
	return done, nil
}

// terminator is the drain of Karpenter's termination controller: every
// pod but DaemonSet (and mirror) pods is evicted, including those asking
// not to be and those without a controller, and no grace period is
// overridden.
func (s *Sandbox) terminator() *kube.Drainer {
	o := kube.DefaultDrainOptions()
	o.ForceEvict, o.DeleteEmptyDirData, o.EvictUnreplicated = true, true, true
	return &kube.Drainer{Client: s.kube, Clock: s.clock, Options: o}
}

// mustMove reports whether a pod counts for its node's pod events: active
// and not a DaemonSet's (DaemonSet pods go with the node).
func mustMove(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && !kube.IsDaemonSetPod(p)
}

// removeNode deletes a drained node's NodeClaim and terminates its instance.
func (s *Sandbox) removeNode(ctx context.Context, name string) error {
	in := s.instanceOfNode(name)
	if in == nil {
		if err := s.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete drained node %s: %w", name, err)
		}
		return nil
	}
	if in.NodeClaim != "" {
		if err := s.dyn.Resource(NodeClaimGVR).Delete(ctx, in.NodeClaim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete NodeClaim %s of drained node %s: %w", in.NodeClaim, name, err)
		}
	}
	return s.terminate(ctx, in.ID)
}

// trackPodEvents records, for every Karpenter node, when its set of pods
// that must move last changed; a node that never had one keeps a zero
// time (its creation counts, as for a NodeClaim without lastPodEventTime).
// It reads each node's pods from the pod cache, and only the nodes whose
// list the cache replaced since the last tick (a write of one of their
// pods): the others' sets are the same.
func (s *Sandbox) trackPodEvents(nodes map[string]*corev1.Node) {
	for name := range s.dis.podSig {
		if nodes[name] == nil {
			delete(s.dis.podSig, name)
			delete(s.dis.lastPodEvent, name)
			delete(s.dis.podsOn, name)
		}
	}
	for name, n := range nodes {
		if n.Labels[apisv1.NodePoolLabelKey] == "" {
			continue
		}
		on := s.pods.on(name)
		if last, ok := s.dis.podsOn[name]; ok && sameList(last, on) {
			continue
		}
		s.dis.podsOn[name] = on
		var keys []string
		for _, p := range on {
			if mustMove(p) {
				keys = append(keys, podKey(p)+"/"+string(p.UID))
			}
		}
		sort.Strings(keys)
		sig := strings.Join(keys, ",")
		prev, seen := s.dis.podSig[name]
		if (seen && prev != sig) || (!seen && sig != "") {
			s.dis.lastPodEvent[name] = s.Now()
		}
		s.dis.podSig[name] = sig
	}
}

// sameList reports whether a and b are the same list (not only equal).
func sameList(a, b []*corev1.Pod) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// consolidationDue reports whether some initialized Karpenter node that
// is not being disrupted has passed its NodePool's consolidateAfter (without
// one no method can act and the pass is skipped), and the latest time a
// Karpenter node reaches consolidateAfter, with that node.
func (s *Sandbox) consolidationDue(pools []apisv1.NodePool, nodes map[string]*corev1.Node) (bool, consolidateWait) {
	after := map[string]time.Duration{}
	for _, p := range pools {
		if d := p.Spec.Disruption.ConsolidateAfter.Duration; d != nil {
			after[p.Name] = *d
		}
	}
	var due bool
	var last consolidateWait
	for _, n := range nodes {
		d, ok := after[n.Labels[apisv1.NodePoolLabelKey]]
		if !ok {
			continue
		}
		since := s.dis.lastPodEvent[n.Name]
		if since.IsZero() {
			since = n.CreationTimestamp.Time
		}
		at := since.Add(d)
		if at.After(last.until) || (at.Equal(last.until) && n.Name < last.node) {
			last = consolidateWait{node: n.Name, since: since, until: at}
		}
		if !s.Now().Before(at) && n.Labels[apisv1.NodeInitializedLabelKey] == "true" && !hasDisruptedTaint(n) {
			due = true
		}
	}
	return due, last
}

// nextConsolidatable is the first time after in.Now at which a node of
// the input (in-flight NodeClaims included) reaches its NodePool's
// consolidateAfter, counted as Decide counts it; zero when none will.
func nextConsolidatable(in disruption.Input) time.Time {
	after := map[string]time.Duration{}
	for _, p := range in.NodePools {
		if d := p.Spec.Disruption.ConsolidateAfter; !d.IsNever() {
			after[p.Name] = *d.Duration
		}
	}
	var next time.Time
	for _, n := range in.Nodes {
		d, ok := after[n.Node.NodePool]
		if !ok {
			continue
		}
		since := n.LastPodEventTime
		if since.IsZero() {
			since = n.Node.CreatedAt.Time
		}
		if at := since.Add(d); at.After(in.Now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// activeBudgets says which of the NodePools' scheduled disruption budgets
// are active at now (a budget without a schedule always is).
func activeBudgets(pools []apisv1.NodePool, now time.Time) (string, error) {
	var b strings.Builder
	for _, p := range pools {
		for i, bg := range p.Spec.Disruption.Budgets {
			if bg.Schedule == nil {
				continue
			}
			on, err := disruption.BudgetActive(bg, now)
			if err != nil {
				return "", fmt.Errorf("NodePool %s spec.disruption.budgets[%d]: %w", p.Name, i, err)
			}
			fmt.Fprintf(&b, "%s/%d=%t ", p.Name, i, on)
		}
	}
	return b.String(), nil
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// disruptionInput is the cluster as Karpenter's disruption controller sees
// it: every node (and in-flight NodeClaim) with its pods, pending pods,
// the NodePools with their instance types, DaemonSets, and PDBs with the
// disruptions they allow now.
func (s *Sandbox) disruptionInput(ctx context.Context) (disruption.Input, error) {
	in := disruption.Input{Catalog: catalog.Default(), Now: s.Now(), Options: disruption.Options{KarpenterOnly: true}}
	pools, err := s.listNodePools(ctx)
	if err != nil {
		return in, err
	}
	for i := range pools {
		np := engine.NodePoolFromV1(&pools[i], nil)
		if np.InstanceTypes, err = s.poolTypes(&pools[i]); err != nil {
			return in, err
		}
		in.NodePools = append(in.NodePools, np)
	}
	nodes := s.nodesByName()
	pods := s.listPods()
	dss, err := s.kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list DaemonSets: %w", err)
	}
	sort.Slice(dss.Items, func(i, j int) bool {
		return dss.Items[i].Namespace+"/"+dss.Items[i].Name < dss.Items[j].Namespace+"/"+dss.Items[j].Name
	})
	in.DaemonSets = daemonSetRecords(dss.Items)
	pdbs, err := s.kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list PDBs: %w", err)
	}
	sort.Slice(pdbs.Items, func(i, j int) bool {
		return pdbs.Items[i].Namespace+"/"+pdbs.Items[i].Name < pdbs.Items[j].Namespace+"/"+pdbs.Items[j].Name
	})
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		st, err := s.pdbStatus(pdb)
		if err != nil {
			return in, err
		}
		in.PDBs = append(in.PDBs, inventory.PDB{Namespace: pdb.Namespace, Name: pdb.Name, Selector: pdb.Spec.Selector,
			MinAvailable: pdb.Spec.MinAvailable, MaxUnavailable: pdb.Spec.MaxUnavailable, UnhealthyPodEvictionPolicy: pdb.Spec.UnhealthyPodEvictionPolicy,
			DisruptionsAllowed: st.DisruptionsAllowed, CurrentHealthy: st.CurrentHealthy, DesiredHealthy: st.DesiredHealthy, ExpectedPods: st.ExpectedPods})
	}
	// Claims the provisioner launched for pods still pending.
	nominated := map[string]bool{}
	byNode := map[string][]inventory.Pod{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		rec := s.podInventory(ctx, p)
		if p.Spec.NodeName == "" {
			in.Pending = append(in.Pending, rec)
			if c, ok := s.nominated[podKey(p)]; ok {
				nominated[c] = true
			}
			continue
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], rec)
	}
	claims, err := s.claimAnnotations(ctx)
	if err != nil {
		return in, err
	}
	instByNode := map[string]*Instance{}
	for _, id := range s.cloud.instanceIDs() {
		inst := s.cloud.instances[id]
		if inst.NodeName != "" {
			instByNode[inst.NodeName] = inst
			continue
		}
		if inst.NodeClaim != "" {
			n, ok := s.inFlightNode(ctx, inst)
			if !ok {
				continue
			}
			n.Nominated = nominated[inst.NodeClaim]
			in.Nodes = append(in.Nodes, n)
		}
	}
	deleting := map[string]bool{}
	for _, c := range s.dis.running {
		for _, r := range c.rec.Nodes {
			deleting[r.Name] = true
		}
	}
	for _, n := range sortedNodes(nodes) {
		rec := nodeInventory(n)
		dn := disruption.Node{ExistingNode: engine.ExistingNode{Node: rec, Pods: byNode[n.Name]}, Deleting: deleting[n.Name],
			LastPodEventTime: s.dis.lastPodEvent[n.Name]}
		if inst := instByNode[n.Name]; inst != nil {
			dn.Price = s.price(inst.InstanceType, inst.Zone, inst.CapacityType)
			if inst.NodeClaim != "" {
				dn.Nominated = nominated[inst.NodeClaim]
				if v, ok := claims[inst.NodeClaim][apisv1.DoNotDisruptAnnotationKey]; ok {
					if dn.Node.Annotations == nil {
						dn.Node.Annotations = map[string]string{}
					}
					dn.Node.Annotations[apisv1.DoNotDisruptAnnotationKey] = v
				}
			}
		}
		in.Nodes = append(in.Nodes, dn)
	}
	return in, nil
}

// claimAnnotations are the NodeClaims' annotations by name (Karpenter
// reads do-not-disrupt from the NodeClaim as well as the node).
func (s *Sandbox) claimAnnotations(ctx context.Context) (map[string]map[string]string, error) {
	list, err := s.dyn.Resource(NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	out := map[string]map[string]string{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = list.Items[i].GetAnnotations()
	}
	return out, nil
}

// inFlightNode is a launched NodeClaim that is not a node yet, as the node
// it will be.
func (s *Sandbox) inFlightNode(ctx context.Context, inst *Instance) (disruption.Node, bool) {
	it, ok := s.cat.Get(inst.InstanceType)
	if !ok {
		return disruption.Node{}, false
	}
	pool, err := s.getNodePool(ctx, inst.NodePool)
	if err != nil || pool == nil {
		return disruption.Node{}, false
	}
	lbl := map[string]string{}
	for k, v := range pool.Spec.Template.ObjectMeta.Labels {
		lbl[k] = v
	}
	for k, v := range offeringLabels(it, inst.Zone, inst.CapacityType) {
		lbl[k] = v
	}
	lbl[apisv1.NodePoolLabelKey] = inst.NodePool
	lbl[corev1.LabelTopologyRegion] = s.cloud.Cluster.Region
	lbl[corev1.LabelHostname] = inst.NodeClaim
	return disruption.Node{ExistingNode: engine.ExistingNode{InFlight: true, Node: inventory.Node{
		Name: inst.NodeClaim, ProviderID: inst.ProviderID(), InstanceID: inst.ID, InstanceType: inst.InstanceType, Zone: inst.Zone,
		CapacityType: inst.CapacityType, NodePool: inst.NodePool, Labels: lbl, Taints: append([]corev1.Taint(nil), pool.Spec.Template.Spec.Taints...),
		Capacity: it.Capacity(catalog.Kubelet{}), Allocatable: allocatable(it), CreatedAt: metav1.NewTime(inst.LaunchedAt),
	}}, Price: s.price(inst.InstanceType, inst.Zone, inst.CapacityType)}, true
}

// nodeInventory is a node as the inventory records it.
func nodeInventory(n *corev1.Node) inventory.Node {
	return inventory.Node{
		Name: n.Name, ProviderID: n.Spec.ProviderID, InstanceType: n.Labels[corev1.LabelInstanceTypeStable], Zone: n.Labels[corev1.LabelTopologyZone],
		CapacityType: n.Labels[apisv1.CapacityTypeLabelKey], NodePool: n.Labels[apisv1.NodePoolLabelKey],
		Labels: copyMap(n.Labels), Annotations: copyMap(n.Annotations), Taints: append([]corev1.Taint(nil), n.Spec.Taints...),
		Capacity: n.Status.Capacity.DeepCopy(), Allocatable: n.Status.Allocatable.DeepCopy(), Ready: nodeReady(n),
		Unschedulable: n.Spec.Unschedulable, CreatedAt: n.CreationTimestamp,
	}
}

// podInventory is a pod as the inventory records it, with the node
// affinity of its volumes.
func (s *Sandbox) podInventory(ctx context.Context, p *corev1.Pod) inventory.Pod {
	rec := podRecord(p, s.claimSelectors(ctx, p))
	rec.Annotations = copyMap(p.Annotations)
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		rec.OwnerKind, rec.OwnerName = ref.Kind, ref.Name
	}
	rec.TerminationGracePeriodSeconds = p.Spec.TerminationGracePeriodSeconds
	return rec
}

// poolTypes are the catalogue's instance types a NodePool's requirements
// allow, with offerings in the sandbox's zones (its subnets), cached until
// the NodePool changes.
func (s *Sandbox) poolTypes(np *apisv1.NodePool) ([]engine.InstanceType, error) {
	key := fmt.Sprintf("%v %v", np.Spec.Template.Spec.Requirements, s.zones())
	if c, ok := s.dis.types[np.Name]; ok && c.key == key {
		return c.types, nil
	}
	if s.dis.catalogTypes == nil {
		all, err := engine.InstanceTypesFromCatalog(catalog.Default(), catalog.Kubelet{})
		if err != nil {
			return nil, fmt.Errorf("NodePool %s: instance types: %w", np.Name, err)
		}
		s.dis.catalogTypes = all
	}
	var reqs []engine.Requirement
	for i, r := range np.Spec.Template.Spec.Requirements {
		req, err := engine.NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return nil, fmt.Errorf("NodePool %s: spec.template.spec.requirements[%d]: %w", np.Name, i, err)
		}
		reqs = append(reqs, req)
	}
	zones := map[string]bool{}
	for _, z := range s.zones() {
		zones[z] = true
	}
	out := []engine.InstanceType{}
	for _, t := range s.dis.catalogTypes {
		if _, ok := s.cat.Get(t.Name); !ok || !typeAllowed(reqs, t) {
			continue
		}
		var offs []catalog.Offering
		for _, o := range t.Offerings {
			if zones[o.Zone] && offeringAllowed(reqs, o) {
				offs = append(offs, o)
			}
		}
		if len(offs) == 0 {
			continue
		}
		t.Offerings = offs
		out = append(out, t)
	}
	s.dis.types[np.Name] = poolTypes{key: key, types: out}
	return out, nil
}

// typeAllowed reports whether no requirement rules the type out by one of
// its labels.
func typeAllowed(reqs []engine.Requirement, t engine.InstanceType) bool {
	for _, r := range reqs {
		if v, ok := t.Labels[r.Key]; ok && !r.Has(v) {
			return false
		}
	}
	return true
}

func offeringAllowed(reqs []engine.Requirement, o catalog.Offering) bool {
	for _, r := range reqs {
		switch r.Key {
		case catalog.LabelZone:
			if !r.Has(o.Zone) {
				return false
			}
		case catalog.LabelCapacityType:
			if !r.Has(o.CapacityType) {
				return false
			}
		}
	}
	return true
}
