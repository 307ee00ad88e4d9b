package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

var phases = []string{rollout.PhasePreProvision, rollout.PhaseCordon, rollout.PhaseDrain, rollout.PhaseGate, rollout.PhaseCleanup, rollout.PhaseScaleIn, rollout.PhaseDone}

// PlaceholderPriorityClass is the low PriorityClass of placeholder pods:
// any real pod preempts them, and they never preempt anything.
const PlaceholderPriorityClass = "karpenter-migrate-placeholder"

// PlaceholderImage is the pause image placeholders run.
const PlaceholderImage = "registry.k8s.io/pause:3.10"

// RunWaves moves every planned wave's pods to Karpenter capacity and
// removes the wave's instances from their groups, but the nodes kept for
// the Karpenter controller: those are reserved, and only the pods that do
// not tolerate that are moved.
func (s run) RunWaves(ctx context.Context) error {
	if err := s.prepareGroups(ctx); err != nil {
		return err
	}
	if err := s.ensurePriorityClass(ctx); err != nil {
		return err
	}
	kept, err := s.prepareNodes(ctx)
	if err != nil {
		return err
	}
	groups := s.Plan.DrainGroups()
	var early *drainStart
	for k, g := range groups {
		var next []int
		if k+1 < len(groups) {
			next = groups[k+1]
		}
		if early, err = s.runGroup(ctx, g, kept, next, early); err != nil {
			return err
		}
	}
	return nil
}

// WavesDone reports whether every planned wave is done under this plan.
func (s run) WavesDone() (bool, string) {
	if s.Journal.PlanHash != s.Plan.Hash {
		return false, ""
	}
	for _, w := range s.Plan.Waves {
		i := slices.IndexFunc(s.Journal.Waves, func(r rollout.WaveRecord) bool { return r.Index == w.Index })
		if i < 0 || s.Journal.Waves[i].Phase != rollout.PhaseDone {
			return false, ""
		}
	}
	return true, fmt.Sprintf("all %d waves done", len(s.Plan.Waves))
}

// setPhases records each of the waves ws (positions in the plan) entering
// phase, rec giving its journal record.
func (s run) setPhases(ctx context.Context, ws []int, rec func(int) *rollout.WaveRecord, phase string) error {
	for _, i := range ws {
		if err := s.setPhase(ctx, s.Plan.Waves[i], rec(i), phase); err != nil {
			return err
		}
	}
	return nil
}

func (s run) setPhase(ctx context.Context, w plan.Wave, rec *rollout.WaveRecord, phase string) error {
	rec.Phase, rec.DrainGroup = phase, w.DrainGroup
	s.Journal.Current.Wave, s.Journal.Current.Phase, s.Journal.Current.WaitingFor = w.Index, phase, ""
	s.Emit(rollout.Event{Kind: rollout.EventWavePhase, Step: s.Journal.Current.Step, Wave: w.Index, Waves: len(s.Plan.Waves), Phase: phase, Total: len(w.Nodes)})
	return s.Save(ctx)
}

// runGroup runs a drain group's waves (g: their positions in the plan;
// a wave drained alone is a group of one) through the phases together:
// each is pre-provisioned (the group's placeholders all created first, so
// their nodes launch at once) and cordoned, then their nodes drain in one
// drain (the plan's concurrency at a time), behind one gate; cleanup and
// scale-in are per wave. Placeholders are released, evictions counted and
// events reported per wave, by the node a pod is on. A resumed group
// starts again at its waves' earliest phase; a wave past a phase skips
// it, and a wave done is left alone.
//
// next is the group after it (nil: none). When the plan starts next early
// (WaveTiming.EarlySeconds) and its capacity is Ready, next is cordoned and
// its drain started (startDrain: its surge restarts begun, nothing
// evicted) as this group's gate starts, and returned; early is this
// group's own drain so started, which it finishes.
func (s run) runGroup(ctx context.Context, g []int, kept map[string]bool, next []int, early *drainStart) (*drainStart, error) {
	// rec is a wave's journal record, taken again at each use: preparing
	// later waves (prepareAhead) adds their records to the journal, which
	// may move the others.
	dry := map[int]*rollout.WaveRecord{}
	rec := func(i int) *rollout.WaveRecord {
		w := s.Plan.Waves[i]
		if !s.Options.DryRun {
			return s.Journal.Wave(w.Index)
		}
		if dry[i] == nil {
			dry[i] = &rollout.WaveRecord{Index: w.Index}
		}
		return dry[i]
	}
	at := func(i int) (int, error) {
		r := rec(i)
		if r.Phase == "" {
			return 0, nil
		}
		if k := slices.Index(phases, r.Phase); k >= 0 {
			return k, nil
		}
		return 0, fmt.Errorf("wave %d: journal has unknown phase %q", r.Index, r.Phase)
	}
	start := len(phases) - 1
	for _, i := range g {
		k, err := at(i)
		if err != nil {
			return nil, err
		}
		start = min(start, k)
	}
	if start > 0 && phases[start] != rollout.PhaseDone {
		// Resumed past its pre-provisioning: the later waves' capacity
		// is prepared all the same.
		for _, i := range g {
			if err := s.prepareAhead(ctx, i); err != nil {
				return nil, err
			}
		}
	}
	// drained is when this run ended the group's drain (zero when it
	// resumed past it).
	var drained time.Time
	var nextStart *drainStart
	for p, phase := range phases[start:] {
		p += start
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The group's waves at this phase: not past it, nor done.
		var ws []int
		for _, i := range g {
			if k, _ := at(i); k <= p && phases[k] != rollout.PhaseDone {
				ws = append(ws, i)
			}
		}
		if phase == rollout.PhaseDrain && early != nil {
			// Its drain phase began as the group ahead's gate started.
			last := s.Plan.Waves[ws[len(ws)-1]].Index
			s.Journal.Current.Wave, s.Journal.Current.Phase, s.Journal.Current.WaitingFor = last, phase, ""
		} else if err := s.setPhases(ctx, ws, rec, phase); err != nil {
			return nil, err
		}
		var err error
		switch phase {
		case rollout.PhasePreProvision:
			err = s.prepareTogether(ctx, ws)
			for _, i := range ws {
				if err == nil {
					err = s.preProvision(ctx, i)
				}
			}
		case rollout.PhaseCordon:
			for _, i := range ws {
				if err = s.cordon(ctx, s.Plan.Waves[i], kept); err != nil {
					break
				}
			}
		case rollout.PhaseDrain:
			// The placeholders' room goes to the evicted pods as they are
			// evicted (placeholderRelease): they would not preempt
			// placeholders while a steered legacy node fits.
			if early != nil {
				err = s.finishDrain(ctx, early, rec)
			} else {
				err = s.drainWaves(ctx, ws, rec, kept)
			}
			drained = s.Clock.Now()
		case rollout.PhaseGate:
			var notBefore time.Time
			if !drained.IsZero() {
				notBefore = drained.Add(s.Options.PollInterval)
			}
			name := "gate"
			if len(ws) > 1 {
				name = "gate of waves " + s.waveNames(ws)
			}
			if nextStart, err = s.startEarly(ctx, next, kept); err == nil {
				err = s.gate(ctx, s.Plan.Waves[ws[0]].Index, name, "", notBefore)
			}
		case rollout.PhaseCleanup:
			for _, i := range ws {
				if err == nil && !s.Options.DryRun { // said once, at the drain
					err = s.deletePlaceholders(ctx, s.Plan.Waves[i].Index)
				}
				if err == nil && i == len(s.Plan.Waves)-1 {
					err = s.deleteGuards(ctx)
				}
			}
		case rollout.PhaseScaleIn:
			for _, i := range ws {
				if err == nil {
					err = s.scaleIn(ctx, s.Plan.Waves[i], rec(i), kept)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return nextStart, nil
}

// startEarly starts the drain group next (positions in the plan; nil:
// none) while the gate of the group ahead of it waits for that group's
// last replacements, when the plan says it starts early
// (WaveTiming.EarlySeconds: it restarts Deployments, which disrupts
// nothing) and its capacity is Ready: every placeholder of its waves
// running. Its waves are cordoned and its drain started (startDrain), its
// phases recorded as they go; it returns that drain, or nil when next
// starts as usual. The journal's current wave and phase stay the gate's.
func (s run) startEarly(ctx context.Context, next []int, kept map[string]bool) (*drainStart, error) {
	if ok, err := s.startsEarly(ctx, next); !ok || err != nil {
		return nil, err
	}
	cur := s.Journal.Current
	defer func() { s.Journal.Current = cur }()
	rec := func(i int) *rollout.WaveRecord { return s.Journal.Wave(s.Plan.Waves[i].Index) }
	if err := s.setPhases(ctx, next, rec, rollout.PhaseCordon); err != nil {
		return nil, err
	}
	for _, i := range next {
		if err := s.cordon(ctx, s.Plan.Waves[i], kept); err != nil {
			return nil, err
		}
	}
	if err := s.setPhases(ctx, next, rec, rollout.PhaseDrain); err != nil {
		return nil, err
	}
	return s.startDrain(ctx, next, kept)
}

// startsEarly reports whether the drain group next starts early
// (startEarly): not in a dry run, the plan says so, none of its waves has
// begun, no pod but placeholders waits for a node, and each wave's
// placeholders all run on nodes.
func (s run) startsEarly(ctx context.Context, next []int) (bool, error) {
	if s.Options.DryRun || len(next) == 0 || !s.Plan.Budget.RestartBlocked {
		return false, nil
	}
	early := false
	for _, i := range next {
		w := s.Plan.Waves[i]
		if w.Timing != nil && w.Timing.EarlySeconds > 0 {
			early = true
		}
		if phase := s.Journal.Wave(w.Index).Phase; phase != "" && phase != rollout.PhasePreProvision {
			return false, nil
		}
	}
	if !early {
		return false, nil
	}
	// The room of next is released to its restarts' pods: not while a
	// replacement of the group ahead still looks for a node, which would
	// take it.
	if c, ok := s.Clock.(interface{ Settle() }); ok {
		c.Settle() // the sandbox's controllers react to the drain's last evictions
	}
	pending, err := s.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending"})
	if err != nil {
		return false, fmt.Errorf("list pending pods: %w", err)
	}
	for _, p := range pending.Items {
		if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && p.Labels[kube.LabelComponent] != "placeholder" {
			return false, nil
		}
	}
	for _, i := range next {
		w := s.Plan.Waves[i]
		if !s.Plan.Budget.PreProvision || len(w.PreProvision) == 0 {
			continue
		}
		list, err := s.Kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: placeholderSelector(s.Plan.Environment, w.Index)})
		if err != nil {
			return false, fmt.Errorf("list placeholder pods of wave %d: %w", w.Index, err)
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
			}
		}
		if running < len(w.PreProvision) {
			return false, nil
		}
	}
	return true, nil
}

// waveNames names the waves (positions in the plan) as "2, 3, 4".
func (s run) waveNames(ws []int) string {
	names := make([]string, len(ws))
	for k, i := range ws {
		names[k] = strconv.Itoa(s.Plan.Waves[i].Index)
	}
	return strings.Join(names, ", ")
}

// cordon cordons the wave's nodes but the kept ones (reserved instead:
// prepareNodes).
func (s run) cordon(ctx context.Context, w plan.Wave, kept map[string]bool) error {
	for _, n := range w.Nodes {
		if kept[n.Name] {
			continue
		}
		s.Change("cordon node %s", n.Name)
		if s.Options.DryRun {
			continue
		}
		if err := kube.Cordon(ctx, s.Kube, n.Name, true); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
			return err // not found: already removed
		}
	}
	return nil
}

// prepareTogether creates the placeholders of a drain group's waves (ws:
// positions in the plan), those not asked for yet, as the group starts,
// so that the group's capacity launches at once rather than wave after
// wave as each wave's pre-provisioning waits for its own. A dry run
// lists them with each wave's.
func (s run) prepareTogether(ctx context.Context, ws []int) error {
	if !s.Plan.Budget.PreProvision || s.Options.DryRun || len(ws) < 2 {
		return nil
	}
	first := s.Plan.Waves[ws[0]].Index
	for _, i := range ws {
		w := s.Plan.Waves[i]
		if len(w.PreProvision) == 0 || !s.Journal.Wave(w.Index).PreparedAt.IsZero() {
			continue
		}
		note := ""
		if w.Index != first {
			note = fmt.Sprintf(", with wave %d's: they drain together", first)
		}
		if err := s.createPlaceholders(ctx, w, note, false); err != nil {
			return err
		}
	}
	return nil
}

func (s run) ensurePriorityClass(ctx context.Context) error {
	if s.Options.DryRun || !s.Plan.Budget.PreProvision {
		return nil
	}
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: PlaceholderPriorityClass, Labels: map[string]string{kube.LabelManagedBy: kube.FieldManager}},
		Value:            -100,
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
		Description:      "karpenter-migrate placeholder pods: reserve Karpenter capacity before a drain; every other pod preempts them",
	}
	_, err := s.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{FieldManager: kube.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PriorityClass %s: %w", PlaceholderPriorityClass, err)
	}
	return kube.EnsureNamespace(ctx, s.Kube, s.Namespace)
}

// placeholderSelector selects the wave's placeholder pods, or with wave 0
// every placeholder and guard of the environment (guardLabel).
// placeholderLabels are the labels of wave's placeholder pods, which
// placeholderSelector selects.
func (s run) placeholderLabels(wave int) map[string]string {
	return map[string]string{
		kube.LabelManagedBy: kube.FieldManager, kube.LabelComponent: "placeholder",
		kube.LabelEnvironment: s.Plan.Environment, "karpenter-migrate.io/wave": strconv.Itoa(wave),
	}
}

func placeholderSelector(env string, wave int) string {
	sel := kube.LabelComponent + "=placeholder," + kube.LabelEnvironment + "=" + env
	if wave > 0 {
		sel += ",karpenter-migrate.io/wave=" + strconv.Itoa(wave) + ",!" + guardLabel
	}
	return sel
}

// preProvision creates the wave's placeholder pods (those an earlier
// wave did not create ahead) and those of the next waves the budget
// prepares ahead (prepareAhead), whose nodes launch with this wave's and
// while it drains, then waits until its own all run on Ready nodes (a
// timeout pauses the rollout).
func (s run) preProvision(ctx context.Context, i int) error {
	w := s.Plan.Waves[i]
	if !s.Plan.Budget.PreProvision {
		return nil
	}
	if len(w.PreProvision) > 0 {
		if err := s.createPlaceholders(ctx, w, "", s.saidAhead(i, i)); err != nil {
			return err
		}
	}
	if err := s.prepareAhead(ctx, i); err != nil {
		return err
	}
	if s.Options.DryRun || len(w.PreProvision) == 0 {
		return nil
	}
	pods := s.Kube.CoreV1().Pods(s.Namespace)
	name := func(j int) string { return placeholderName(s.Plan.Environment, w.Index, j) }
	want := len(w.PreProvision)
	beyondLimits := map[string]bool{} // placeholders given up: their NodePool is at its limits
	err := s.Poll(ctx, s.Plan.Budget.Gates.NodeReadyTimeout.Duration, func() (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: placeholderSelector(s.Plan.Environment, w.Index)})
		if err != nil {
			return false, fmt.Errorf("list placeholder pods: %w", err)
		}
		running := 0
		have := map[string]bool{}
		var pending []corev1.Pod
		for _, p := range list.Items {
			have[p.Name] = true
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
			} else if p.Spec.NodeName == "" && s.Clock.Since(p.CreationTimestamp.Time) >= limitsGrace {
				pending = append(pending, p)
			}
		}
		if err := s.giveUpBeyondLimits(ctx, pending, beyondLimits); err != nil {
			return false, err
		}
		// A placeholder whose node went (a node it was bound to removed,
		// its pod collected) is made again: nothing else would.
		for j := range w.PreProvision {
			if !have[name(j)] && !beyondLimits[name(j)] {
				if err := s.createPlaceholder(ctx, w, j, "re-create", ""); err != nil {
					return false, err
				}
			}
		}
		s.Waiting(ctx, fmt.Sprintf("placeholder pods running on new Karpenter nodes of %s", strings.Join(w.NodePools, ",")), running, want-len(beyondLimits))
		return running >= want-len(beyondLimits), nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Wave: w.Index, Reason: fmt.Sprintf(
			"Karpenter did not bring up capacity for %d placeholder pods on NodePools %s within %s; check the NodePools' limits and requirements and Karpenter's logs",
			want, strings.Join(w.NodePools, ","), s.Plan.Budget.Gates.NodeReadyTimeout.Duration)}
	}
	return err
}

// prepareAhead creates the placeholder pods of the Budget.PrepareAhead
// waves after the i-th as it starts, so that their nodes launch with its
// own and while it (and the waves between) drain instead of after: each
// such wave then waits only for what is left of its launch. (Created so
// on the demo in dev, an evicted pod waited 65s for a node until released
// placeholders left guards: Karpenter consolidated the room the plan left
// for later waves.)
// A wave whose capacity was already asked for (its journal record's
// PreparedAt) is left alone; one of its placeholders gone meanwhile
// (preempted by a pod an earlier wave evicted, its node removed) is made
// again by the wave's own pre-provisioning.
func (s run) prepareAhead(ctx context.Context, i int) error {
	if !s.Plan.Budget.PreProvision {
		return nil
	}
	for j := i + 1; j < len(s.Plan.Waves) && j <= i+s.Plan.Budget.PrepareAhead; j++ {
		w := s.Plan.Waves[j]
		if len(w.PreProvision) == 0 {
			continue
		}
		said := s.saidAhead(i, j)
		if !s.Options.DryRun {
			said = !s.Journal.Wave(w.Index).PreparedAt.IsZero()
		}
		if said {
			continue
		}
		if err := s.createPlaceholders(ctx, w, fmt.Sprintf(", ahead of its wave %d", w.Index), false); err != nil {
			return err
		}
	}
	return nil
}

// saidAhead reports whether, in a dry run, the wave before the i-th
// already listed the j-th wave's placeholders as created ahead: it
// prepares the PrepareAhead waves after it.
func (s run) saidAhead(i, j int) bool {
	return s.Options.DryRun && i > 0 && j-(i-1) <= s.Plan.Budget.PrepareAhead
}

// createPlaceholders creates the wave's placeholder pods that do not
// exist yet, note ending each change's line (in a dry run it says it
// would, unless said is true). The time its capacity was first asked for
// is recorded in the journal before anything is created
// (WaveRecord.PreparedAt); the waves' Down deletes those placeholders
// with the others, by the environment's label.
func (s run) createPlaceholders(ctx context.Context, w plan.Wave, note string, said bool) error {
	if s.Options.DryRun {
		for i := range w.PreProvision {
			if !said {
				s.placeholderChange(w, i, "create", note)
			}
		}
		return nil
	}
	rec, verb := s.Journal.Wave(w.Index), "create"
	if !rec.PreparedAt.IsZero() {
		verb = "re-create" // created before, gone since
	} else {
		rec.PreparedAt = s.Clock.Now().UTC()
		if err := s.Save(ctx); err != nil {
			return err
		}
	}
	list, err := s.Kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: placeholderSelector(s.Plan.Environment, w.Index)})
	if err != nil {
		return fmt.Errorf("list placeholder pods of wave %d: %w", w.Index, err)
	}
	have := map[string]bool{}
	for _, p := range list.Items {
		have[p.Name] = true
	}
	for i := range w.PreProvision {
		if have[placeholderName(s.Plan.Environment, w.Index, i)] {
			continue
		}
		if err := s.createPlaceholder(ctx, w, i, verb, note); err != nil {
			return err
		}
	}
	return nil
}

// placeholderName is the name of a wave's i-th placeholder pod.
func placeholderName(env string, wave, i int) string {
	return fmt.Sprintf("km-placeholder-%s-w%d-%d", env, wave, i)
}

// placeholderChange reports the creation of the wave's i-th placeholder.
func (s run) placeholderChange(w plan.Wave, i int, verb, note string) {
	ph := w.PreProvision[i]
	s.Change("%s placeholder pod %s/%s (%s CPU, %s memory) on NodePool %s%s", verb, s.Namespace, placeholderName(s.Plan.Environment, w.Index, i), ph.CPU, ph.Memory, ph.NodePool, note)
}

// createPlaceholder creates the wave's i-th placeholder pod (one that
// exists already is left as it is).
func (s run) createPlaceholder(ctx context.Context, w plan.Wave, i int, verb, note string) error {
	ph, name := w.PreProvision[i], placeholderName(s.Plan.Environment, w.Index, i)
	s.placeholderChange(w, i, verb, note)
	_, err := s.Kube.CoreV1().Pods(s.Namespace).Create(ctx, s.placeholderPod(name, w.Index, ph), metav1.CreateOptions{FieldManager: kube.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create placeholder pod %s: %w", name, err)
	}
	return nil
}

// limitsGrace is how long a placeholder stays Pending before Karpenter's
// word that its NodePool's limits leave no room counts: Karpenter charges
// each NodeClaim it is launching at its largest instance type until it
// launches, so a refusal in the first scheduling rounds can pass.
const limitsGrace = 30 * time.Second

// giveUpBeyondLimits deletes the pending placeholders Karpenter refuses
// because their NodePool's limits leave no room (its FailedScheduling
// event says so): no node can come up for them, and waiting would only
// run out the node-ready gate. The wave then drains without that room;
// the pods it evicts use what the NodePool has, under the pending gate.
func (s run) giveUpBeyondLimits(ctx context.Context, pending []corev1.Pod, given map[string]bool) error {
	if len(pending) == 0 {
		return nil
	}
	events, err := s.Kube.CoreV1().Events(s.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		return fmt.Errorf("list the events of placeholder pods: %w", err)
	}
	why := map[string]string{} // placeholder -> Karpenter's latest refusal
	latest := map[string]time.Time{}
	for _, e := range events.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		name := e.InvolvedObject.Name
		// Karpenter's refusals only (pkg/controllers/provisioning/scheduling/events.go);
		// kube-scheduler's "0/n nodes are available" says nothing of limits.
		if e.Reason != "FailedScheduling" || e.InvolvedObject.Kind != "Pod" || !strings.HasPrefix(e.Message, "Failed to schedule pod") || at.Before(latest[name]) {
			continue
		}
		latest[name] = at
		why[name] = ""
		if strings.Contains(e.Message, "exceed limits for nodepool") || strings.Contains(e.Message, "limits have been exhausted for nodepool") {
			why[name] = e.Message
		}
	}
	for _, p := range pending {
		if why[p.Name] == "" || given[p.Name] {
			continue
		}
		given[p.Name] = true
		s.Change("delete placeholder pod %s/%s: Karpenter cannot launch a node for it within its NodePool's limits (%s); the wave drains without that room, and its evicted pods wait for room under the pending gate (raise the NodePool's spec.limits to pre-provision it)", p.Namespace, p.Name, why[p.Name])
		if err := s.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete placeholder pod %s: %w", p.Name, err)
		}
	}
	return nil
}

func (s run) placeholderPod(name string, wave int, ph plan.Placeholder) *corev1.Pod {
	req := corev1.ResourceList{}
	if q, err := resource.ParseQuantity(ph.CPU); err == nil {
		req[corev1.ResourceCPU] = q
	}
	if q, err := resource.ParseQuantity(ph.Memory); err == nil {
		req[corev1.ResourceMemory] = q
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: s.placeholderLabels(wave),
			// Karpenter counts a pod of this low a priority as free to
			// move, so a node holding only placeholders is Empty to it and
			// consolidated away before the drain needs the room.
			Annotations: map[string]string{apisv1.DoNotDisruptAnnotationKey: "true"}},
		Spec: corev1.PodSpec{
			PriorityClassName:             PlaceholderPriorityClass,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: placeholderTerm(ph)}},
			}},
				// Never on a node with another wave's placeholders: waves
				// prepared ahead (Budget.PrepareAhead) get nodes of their
				// own, as when each launches as it starts, instead of
				// taking the room left on an earlier wave's nodes for the
				// pods that wave moves beyond its plan.
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{
						MatchLabels:      map[string]string{kube.LabelComponent: "placeholder", kube.LabelEnvironment: s.Plan.Environment},
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "karpenter-migrate.io/wave", Operator: metav1.LabelSelectorOpNotIn, Values: []string{strconv.Itoa(wave)}}},
					},
				}}}},
			Containers: []corev1.Container{{Name: "pause", Image: PlaceholderImage, Resources: corev1.ResourceRequirements{Requests: req}}},
		},
	}
}

// deletePlaceholders deletes the wave's placeholder pods, if any are left:
// as its drain starts (their room goes to the pods it evicts), and again at
// cleanup for a run resumed after the drain.
func (s run) deletePlaceholders(ctx context.Context, wave int) error {
	sel := metav1.ListOptions{LabelSelector: placeholderSelector(s.Plan.Environment, wave)}
	if !s.Options.DryRun {
		left, err := s.Kube.CoreV1().Pods(s.Namespace).List(ctx, sel)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("list placeholder pods of wave %d: %w", wave, err)
		}
		if err == nil && len(left.Items) == 0 {
			return nil
		}
	}
	s.Change("delete placeholder pods of wave %d", wave)
	if s.Options.DryRun {
		return nil
	}
	err := s.Kube.CoreV1().Pods(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, sel)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete placeholder pods of wave %d: %w", wave, err)
	}
	return nil
}

// owner is a workload whose pods a wave moves.
type owner struct{ kind, namespace, name string }

func (o owner) String() string { return o.kind + " " + o.namespace + "/" + o.name }

// ownerOf returns the top controller of a pod (ReplicaSet -> Deployment).
func (s run) ownerOf(ctx context.Context, p *corev1.Pod, rsCache map[string]string) (owner, bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return owner{}, false
	}
	switch ref.Kind {
	case "ReplicaSet":
		key := p.Namespace + "/" + ref.Name
		dep, ok := rsCache[key]
		if !ok {
			if rs, err := s.Kube.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
				if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
					dep = d.Name
				}
			}
			rsCache[key] = dep
		}
		if dep != "" {
			return owner{"Deployment", p.Namespace, dep}, true
		}
		return owner{"ReplicaSet", p.Namespace, ref.Name}, true
	case "StatefulSet", "ReplicaSet/", "Deployment":
		return owner{ref.Kind, p.Namespace, ref.Name}, true
	}
	return owner{ref.Kind, p.Namespace, ref.Name}, true
}

// drainEvents reports a drain's pod events as the run's events (of wave,
// 0 for none), calling evicted, when set, for each eviction; the drainer
// may call it from several goroutines at once.
func (s run) drainEvents(wave int, evicted func()) func(kube.DrainEvent) {
	return func(e kube.DrainEvent) {
		switch e.Type {
		case kube.DrainBlocked:
			// Refused with 429, or held back because the watched budget
			// allows no more disruptions than are in flight (Watch).
			s.Emit(rollout.Event{Kind: rollout.EventPDBWait, Step: s.Journal.Current.Step, Wave: wave, Node: e.Node, Pod: e.Pod, PDB: e.PDB,
				Message: fmt.Sprintf("PodDisruptionBudget %s allows no more disruptions (attempt %d); waiting", e.PDB, e.Attempt)})
		case kube.DrainEvicted:
			if evicted != nil {
				evicted()
			}
			s.Emit(rollout.Event{Kind: rollout.EventEviction, Step: s.Journal.Current.Step, Wave: wave, Node: e.Node, Pod: e.Pod, Message: "evicted"})
		case kube.DrainEvicting:
			if e.Attempt == 1 {
				s.Emit(rollout.Event{Kind: rollout.EventEviction, Step: s.Journal.Current.Step, Wave: wave, Node: e.Node, Pod: e.Pod, Message: "evicting"})
			}
		case kube.DrainSkipped:
			s.Emit(rollout.Event{Kind: rollout.EventEviction, Step: s.Journal.Current.Step, Wave: wave, Node: e.Node, Pod: e.Pod, Message: "skipped: " + e.Message})
		}
	}
}

// drainWaves evicts the pods of a drain group's waves (ws: positions in
// the plan; one wave alone, or several whose budgets do not overlap) in
// one drain of all their nodes, the plan's concurrency at a time, moving
// PDB-blocked Deployment pods by surge restart when the plan allows it.
// Each wave counts its pods as the drain starts, releases its own
// placeholders as its pods are evicted, and reports its evictions, by the
// node a pod is on. On the kept nodes the controller's pods and those
// tolerating the reservation stay. rec is each wave's journal record
// (runGroup's: a dry run's are its own).
func (s run) drainWaves(ctx context.Context, ws []int, rec func(int) *rollout.WaveRecord, kept map[string]bool) error {
	st, err := s.startDrain(ctx, ws, kept)
	if err != nil || st == nil {
		return err
	}
	return s.finishDrain(ctx, st, rec)
}

// drainStart is a drain group's drain as it started (startDrain): its
// waves' pods counted, their placeholders' release ready, the budgets
// listed and the surge restarts begun, no pod evicted yet.
type drainStart struct {
	ws       []int
	d        *kube.Drainer
	names    []string
	counted  [][]podOn
	rels     []*placeholderRelease
	budgets  []policyv1.PodDisruptionBudget
	restarts []restart
}

// startDrain starts the drain of a drain group's waves (drainWaves): it
// counts each wave's pods and reports them, readies the release of its
// placeholders, and restarts with surge the Deployments whose budget
// allows no eviction — nothing is evicted. A dry run lists what the drain
// would do and returns nil.
func (s run) startDrain(ctx context.Context, ws []int, kept map[string]bool) (*drainStart, error) {
	opts := s.DrainOptions()
	var err error
	if opts.Stay, err = s.stays(ctx, kept); err != nil {
		return nil, err
	}
	st := &drainStart{ws: ws, d: &kube.Drainer{Client: s.Kube, Clock: s.Clock, Options: opts}}
	waves := make([]plan.Wave, len(ws))
	for k, i := range ws {
		waves[k] = s.Plan.Waves[i]
	}
	if len(ws) > 1 {
		s.Change("drain the nodes of waves %s together, %d at a time: their PodDisruptionBudgets do not overlap", s.waveNames(ws), s.Plan.Budget.Concurrency)
	}
	if s.Options.DryRun {
		for _, w := range waves {
			if err := s.drainDryRun(ctx, w, st.d); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	st.counted = make([][]podOn, len(ws))
	st.rels = make([]*placeholderRelease, len(ws))
	for k, w := range waves {
		mine := make([]string, len(w.Nodes))
		for j, n := range w.Nodes {
			mine[j] = n.Name
		}
		mine = existing(ctx, s, mine)
		keptHere := 0
		for _, n := range mine {
			if kept[n] {
				keptHere++
			}
		}
		if st.counted[k], err = s.drainStarted(ctx, w.Index, mine, keptHere, st.d); err != nil {
			return nil, err
		}
		if st.rels[k], err = s.newPlaceholderRelease(ctx, w.Index, st.counted[k]); err != nil {
			return nil, err
		}
		st.names = append(st.names, mine...)
	}
	if st.budgets, err = s.listBudgets(ctx); err != nil {
		return nil, err
	}
	if s.Plan.Budget.RestartBlocked {
		indexes := make([]int, len(waves))
		for k, w := range waves {
			indexes[k] = w.Index
		}
		if st.restarts, err = s.startRestarts(ctx, indexes, st.counted, st.budgets, st.rels); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// finishDrain waits for a started drain's surge restarts, then evicts
// its waves' pods (drainWaves). rec gives each wave's journal record,
// taken as the evictions start: preparing later waves may have moved it
// since the drain started.
func (s run) finishDrain(ctx context.Context, st *drainStart, rec func(int) *rollout.WaveRecord) error {
	waves := make([]plan.Wave, len(st.ws))
	recs := make([]*rollout.WaveRecord, len(st.ws))
	waveOf := map[string]int{} // node -> its wave's position in waves
	for k, i := range st.ws {
		waves[k], recs[k] = s.Plan.Waves[i], rec(i)
		for _, n := range waves[k].Nodes {
			waveOf[n.Name] = k
		}
	}
	var mu sync.Mutex
	events := make([]func(kube.DrainEvent), len(waves))
	for k := range waves {
		events[k] = s.drainEvents(waves[k].Index, func() {
			mu.Lock()
			recs[k].Evicted++
			mu.Unlock()
		})
	}
	d := st.d
	d.OnEvent = func(e kube.DrainEvent) {
		if e.Type == kube.DrainEvicting {
			st.rels[waveOf[e.Node]].moving(ctx, e.Pod)
		}
		events[waveOf[e.Node]](e)
	}
	replaced, err := s.waitRestarts(ctx, st.restarts)
	if err != nil {
		return err
	}
	names := drainOrder(st.names, slices.Concat(st.counted...), replaced, st.budgets, s.Plan.Timing.PodReadySeconds, s.Plan.Budget.Concurrency)
	results, err := d.DrainNodes(ctx, names, s.Plan.Budget.Concurrency)
	for _, rel := range st.rels {
		if err == nil {
			err = rel.rest(ctx)
		}
	}
	for _, rec := range recs {
		rec.Skipped = nil
	}
	var skipped []string
	for _, r := range results {
		rec := recs[waveOf[r.Node]]
		rec.Skipped = append(rec.Skipped, r.Skipped...)
		for _, sk := range r.Skipped {
			skipped = append(skipped, sk.Pod+" ("+sk.Reason+")")
		}
	}
	if serr := s.Save(ctx); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		// With ctx alive, a context error can only be the drain's own
		// timeout, whichever way it surfaced: DeadlineExceeded from the
		// drainer, or context.Canceled from a request it cut short.
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			return &rollout.PausedError{Step: s.Journal.Current.Step, Wave: waves[0].Index, Reason: fmt.Sprintf(
				"evictions still refused after %s (a PodDisruptionBudget allows no disruption; see the PDBWait events): %s", d.Options.Timeout, firstLine(err))}
		}
		return err
	}
	if len(skipped) > 0 {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Wave: waves[0].Index, Reason: "pods left on cordoned nodes, which are therefore not removed: " + strings.Join(skipped, "; ")}
	}
	for k, w := range waves {
		s.drainEnded(w.Index, st.counted[k], results, replaced)
	}
	return nil
}

// drainDryRun lists what the drain of a wave would do.
func (s run) drainDryRun(ctx context.Context, w plan.Wave, d *kube.Drainer) error {
	if s.Plan.Budget.PreProvision && len(w.PreProvision) > 0 {
		s.Change("release the placeholder pods of wave %d as the pods they hold room for are evicted, each leaving a guard pod on its node until the last wave is done", w.Index)
	}
	for _, n := range w.Nodes {
		pods, skipped, err := d.Pods(ctx, n.Name)
		if err != nil {
			return err
		}
		for _, p := range pods {
			s.Change("evict pod %s/%s from node %s", p.Namespace, p.Name, n.Name)
		}
		for _, sk := range skipped {
			s.Change("leave pod %s on node %s: %s", sk.Pod, n.Name, sk.Reason)
		}
	}
	return nil
}

// drainStarted counts the pods a drain of nodes moves off them (evicts, or
// replaces by a surge restart), as it starts, and reports it: the total
// the drain's evicted, replaced and gone pods are counted against
// (drainEnded). It returns the pods counted.
func (s run) drainStarted(ctx context.Context, wave int, nodes []string, kept int, d *kube.Drainer) ([]podOn, error) {
	pods, err := podsOn(ctx, nodes, d)
	if err != nil {
		return nil, err
	}
	total := len(pods)
	msg := fmt.Sprintf("%d pods to move off %d nodes", total, len(nodes))
	if kept > 0 {
		msg += fmt.Sprintf(" (%d of them kept for the Karpenter controller: only the pods that do not tolerate its reservation leave them)", kept)
	}
	ev := rollout.Event{Kind: rollout.EventDrainStarted, Step: s.Journal.Current.Step, Wave: wave, Total: total, Message: msg}
	if wave > 0 {
		ev.Waves = len(s.Plan.Waves)
	}
	s.Emit(ev)
	return pods, nil
}

// drainEnded reports, once a drain has moved every pod off its nodes, each
// pod it counted as it started (drainStarted) that it neither evicted nor
// left in place and that no surge restart replaced: gone, not on its node
// when the drain reached it, moved by someone else meanwhile (Karpenter
// consolidating one of its own nodes during rollback's drain, a Job
// ending). With them the drain's evicted, replaced and gone pods add up to
// the total it started with.
func (s run) drainEnded(wave int, counted []podOn, results []kube.DrainResult, replaced map[string]bool) {
	handled := map[string]bool{}
	for _, r := range results {
		for _, p := range r.Evicted {
			handled[p] = true
		}
		for _, sk := range r.Skipped {
			handled[sk.Pod] = true
		}
	}
	for _, p := range counted {
		name := p.pod.Namespace + "/" + p.pod.Name
		if handled[name] || replaced[name] {
			continue
		}
		s.Emit(rollout.Event{Kind: rollout.EventEviction, Step: s.Journal.Current.Step, Wave: wave, Node: p.node, Pod: name,
			Message: "gone: not on its node when the drain reached it (removed by someone else)"})
	}
}

// firstLine is an error's first line and how many more it has (a wave's
// drain joins one error per pod).
func firstLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%s (and %d more)", lines[0], len(lines)-1)
}

// existing drops nodes already gone (a resumed run after scale-in).
func existing(ctx context.Context, s run, names []string) []string {
	var out []string
	for _, n := range names {
		if _, err := s.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			out = append(out, n)
		}
	}
	return out
}

// podOn is a pod and the node it is on.
type podOn struct {
	pod  corev1.Pod
	node string
}

// podsOn lists the pods the drain would move off nodes (a node already gone
// has none).
func podsOn(ctx context.Context, nodes []string, d *kube.Drainer) ([]podOn, error) {
	var all []podOn
	for _, n := range nodes {
		pods, _, err := d.Pods(ctx, n)
		if apierrors.IsNotFound(errors.Unwrap(err)) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			all = append(all, podOn{p, n})
		}
	}
	return all, nil
}

// drainOrder orders a drain's nodes (names, in the plan's order) as the
// duration model times them (plan.DrainOrder): a node whose budget the
// nodes before it are using goes after those whose pods can be evicted at
// once, instead of holding one of the concurrency slots until a
// replacement is Ready. pods are the pods the drain moves (those replaced
// by a surge restart are gone), budgets the cluster's, each allowing as
// many disruptions as it does with every pod it expects healthy.
func drainOrder(names []string, pods []podOn, replaced map[string]bool, budgets []policyv1.PodDisruptionBudget, ready float64, concurrency int) []string {
	allowed := map[string]int{}
	for i := range budgets {
		b := &budgets[i]
		allowed[b.Namespace+"/"+b.Name] = int(max(b.Status.ExpectedPods-b.Status.DesiredHealthy, b.Status.DisruptionsAllowed))
	}
	nodes := make([]plan.DrainNode, len(names))
	at := map[string]int{}
	for i, n := range names {
		nodes[i].Name, at[n] = n, i
	}
	for _, p := range pods {
		i, ok := at[p.node]
		if !ok || replaced[p.pod.Namespace+"/"+p.pod.Name] {
			continue
		}
		var keys []string
		for j := range budgets {
			if b := &budgets[j]; b.Namespace == p.pod.Namespace && pdbSelects(b, &p.pod) {
				keys = append(keys, b.Namespace+"/"+b.Name)
			}
		}
		nodes[i].Pods = append(nodes[i].Pods, keys)
	}
	order, _ := plan.DrainOrder(nodes, allowed, ready, concurrency)
	return order
}

// listBudgets lists the cluster's PodDisruptionBudgets (restartBlocked's
// and drainOrder's input, once for a drain group's waves).
func (s run) listBudgets(ctx context.Context) ([]policyv1.PodDisruptionBudget, error) {
	budgets, err := s.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	return budgets.Items, nil
}

// restart is a Deployment restarted with surge for a wave's pods (mine:
// those on the nodes being drained).
type restart struct {
	wave int
	o    owner
	dep  *appsv1.Deployment
	mine []podOn
}

// restartBlocked moves pods whose PDB allows no disruption by restarting
// their Deployment with a surge (startRestarts), then waits for the
// restarts (waitRestarts). It returns the pods the restarts replaced
// (namespace/name) that left the nodes.
func (s run) restartBlocked(ctx context.Context, waves []int, all [][]podOn, budgets []policyv1.PodDisruptionBudget, rels []*placeholderRelease) (map[string]bool, error) {
	restarts, err := s.startRestarts(ctx, waves, all, budgets, rels)
	if err != nil {
		return nil, err
	}
	return s.waitRestarts(ctx, restarts)
}

// startRestarts restarts with surge the Deployments of pods whose PDB
// allows no disruption: the replacement is Ready before the old pod
// terminates, so the budget is never broken. The room the wave's
// placeholders hold for the pods it replaces is released first. The
// Deployments of a drain group's waves are restarted together, then waited
// for (waitRestarts): each keeps its own budget, so none waits on
// another's rollout. For each wave (waves[k], 0 outside the waves),
// all[k] are the pods its drain moves, as it counted them (drainStarted),
// and rels[k] its placeholders (nil: none). budgets are the cluster's
// PodDisruptionBudgets, listed once per drain.
func (s run) startRestarts(ctx context.Context, waves []int, all [][]podOn, budgets []policyv1.PodDisruptionBudget, rels []*placeholderRelease) ([]restart, error) {
	rsCache := map[string]string{}
	restarted := map[owner]bool{}
	var restarts []restart
	for k, wave := range waves {
		for i := range all[k] {
			p := &all[k][i].pod
			pdb := blockingBudget(budgets, p)
			if pdb == "" {
				continue
			}
			o, ok := s.ownerOf(ctx, p, rsCache)
			if !ok || o.kind != "Deployment" || restarted[o] {
				continue
			}
			dep, err := s.Kube.AppsV1().Deployments(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
			if err != nil || !surges(dep) {
				continue
			}
			restarted[o] = true
			r := restart{wave: wave, o: o, dep: dep}
			for _, q := range all[k] {
				if x, ok := s.ownerOf(ctx, &q.pod, rsCache); ok && x == o {
					r.mine = append(r.mine, q)
					rels[k].moving(ctx, q.pod.Namespace+"/"+q.pod.Name)
				}
			}
			if err := rels[k].failed(); err != nil {
				return nil, err
			}
			if err := s.surgeRestart(ctx, dep, pdb); err != nil {
				return nil, err
			}
			restarts = append(restarts, r)
		}
	}
	return restarts, nil
}

// waitRestarts waits until each restart has rolled out and the pods it
// replaced on the nodes being drained are gone. It returns those pods
// (namespace/name).
func (s run) waitRestarts(ctx context.Context, restarts []restart) (map[string]bool, error) {
	replaced := map[string]bool{}
	for _, r := range restarts {
		if err := s.rolledOut(ctx, r.wave, r.dep); err != nil {
			return nil, err
		}
		if err := s.waitReplaced(ctx, r.wave, r.o, r.mine, replaced); err != nil {
			return nil, err
		}
	}
	return replaced, nil
}

// waitReplaced waits until the pods a surge restart replaced on the nodes
// being drained are gone (terminated), and reports each as it left them:
// replaced, as an eviction would have moved it. One still terminating when
// the wait ends is left to the drain, which counts it as evicted: no pod
// is counted twice. The pods replaced are added to replaced.
func (s run) waitReplaced(ctx context.Context, wave int, o owner, pods []podOn, replaced map[string]bool) error {
	gone := make([]bool, len(pods))
	n := 0
	err := s.Poll(ctx, s.Plan.Budget.Gates.PDBWaitTimeout.Duration, func() (bool, error) {
		for i, p := range pods {
			if gone[i] {
				continue
			}
			_, err := s.Kube.CoreV1().Pods(p.pod.Namespace).Get(ctx, p.pod.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("get pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err)
			}
			if err == nil {
				continue
			}
			gone[i] = true
			n++
			replaced[p.pod.Namespace+"/"+p.pod.Name] = true
			s.Emit(rollout.Event{Kind: rollout.EventEviction, Step: s.Journal.Current.Step, Wave: wave, Node: p.node,
				Pod: p.pod.Namespace + "/" + p.pod.Name, Message: "replaced: surge restart of " + o.String()})
		}
		if n < len(pods) {
			s.Waiting(ctx, fmt.Sprintf("the pods of %s the restart replaced to terminate", o), n, len(pods))
		}
		return n == len(pods), nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return nil
	}
	return err
}

func surges(d *appsv1.Deployment) bool {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return false
	}
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxSurge == nil {
		return true // default 25%, at least 1
	}
	return ru.MaxSurge.String() != "0" && ru.MaxSurge.String() != "0%"
}

// blockingBudget names a PDB selecting p that allows no disruption now
// and would allow none with every pod it expects healthy (one replica,
// minAvailable 1). A budget at 0 only while one of its pods is being
// replaced (an eviction still in flight when a paused or killed run
// resumes) is not one: the drain waits for it, where a restart would move
// every pod of the Deployment again beside the eviction in flight.
func blockingBudget(budgets []policyv1.PodDisruptionBudget, p *corev1.Pod) string {
	for i := range budgets {
		pdb := &budgets[i]
		if pdb.Namespace == p.Namespace && pdbSelects(pdb, p) && pdb.Status.DisruptionsAllowed == 0 && pdb.Status.ExpectedPods <= pdb.Status.DesiredHealthy {
			return pdb.Namespace + "/" + pdb.Name
		}
	}
	return ""
}

func pdbSelects(pdb *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels))
}

// surgeRestart restarts a Deployment with surge (a new pod template
// annotation); rolledOut waits for it.
func (s run) surgeRestart(ctx context.Context, dep *appsv1.Deployment, pdb string) error {
	s.Change("restart Deployment %s/%s with surge (PodDisruptionBudget %s allows no eviction)", dep.Namespace, dep.Name, pdb)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"karpenter-migrate.io/restartedAt":%q}}}}}`, s.Clock.Now().UTC().Format(time.RFC3339))
	if _, err := s.Kube.AppsV1().Deployments(dep.Namespace).Patch(ctx, dep.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
		return fmt.Errorf("restart Deployment %s/%s: %w", dep.Namespace, dep.Name, err)
	}
	return nil
}

// rolledOut waits until a Deployment restarted with surge has rolled out.
func (s run) rolledOut(ctx context.Context, wave int, dep *appsv1.Deployment) error {
	err := s.Poll(ctx, s.Plan.Budget.Gates.PDBWaitTimeout.Duration, func() (bool, error) {
		d, err := s.Kube.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get Deployment %s/%s: %w", dep.Namespace, dep.Name, err)
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		s.Waiting(ctx, fmt.Sprintf("Deployment %s/%s to roll out (surge restart)", d.Namespace, d.Name), int(d.Status.UpdatedReplicas), int(want))
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.AvailableReplicas >= want && d.Status.Replicas == want, nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Wave: wave, Reason: fmt.Sprintf("Deployment %s/%s did not finish its surge restart within %s", dep.Namespace, dep.Name, s.Plan.Budget.Gates.PDBWaitTimeout.Duration)}
	}
	return err
}

// gate waits until the moved workloads are back to their desired ready
// replicas and no PDB is below its minimum (what a PDB-safe drain waits
// for), up to the PDB wait gate; a pod pending longer than the gate allows
// pauses the rollout at once. wave is 0 outside the waves; name says whose
// gate it is in the event and the pause; prefix starts each event's message.
// It does not pass before notBefore (a wave's: one poll after its drain
// ended): what it reads is the controllers' status (a Deployment's ready
// replicas, a budget's healthy pods), which may not count the drain's last
// evictions yet — in the sandbox, where the controllers react on the next
// tick, a gate evaluated as the drain ended passed before its last pods'
// replacements existed.
func (s run) gate(ctx context.Context, wave int, name, prefix string, notBefore time.Time) error {
	if s.Options.DryRun {
		return nil
	}
	var last rollout.GateResult
	err := s.Poll(ctx, s.Plan.Budget.Gates.PDBWaitTimeout.Duration, func() (bool, error) {
		res, err := s.EvaluateGate(ctx)
		if err != nil {
			return false, err
		}
		last = res
		r := res
		s.Emit(rollout.Event{Kind: rollout.EventGate, Step: s.Journal.Current.Step, Wave: wave, Gate: &r, Message: prefix + res.String()})
		if len(res.PendingTooLong) > 0 {
			return false, &rollout.PausedError{Step: s.Journal.Current.Step, Wave: wave, Reason: name + ": pods pending longer than " + s.Plan.Budget.Gates.MaxPodPending.String() + ": " + strings.Join(res.PendingTooLong, ", ")}
		}
		if !res.Passed {
			s.Waiting(ctx, name+": "+res.String(), 0, 0)
		} else if s.Clock.Now().Before(notBefore) {
			s.Waiting(ctx, name+": checked again once the controllers have seen the drain's last evictions", 0, 0)
			return false, nil
		}
		return res.Passed, nil
	})
	if errors.Is(err, rollout.ErrTimeout) {
		return &rollout.PausedError{Step: s.Journal.Current.Step, Wave: wave, Reason: name + " did not pass within " + s.Plan.Budget.Gates.PDBWaitTimeout.String() + ": " + last.String()}
	}
	return err
}

// EvaluateGate checks the whole cluster: every Deployment and StatefulSet
// at its desired ready replicas, no pod pending too long, every PDB at or
// above its minimum. Placeholder pods are not counted.
func (s run) EvaluateGate(ctx context.Context) (rollout.GateResult, error) {
	var res rollout.GateResult
	deps, err := s.Kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, fmt.Errorf("gate: list Deployments: %w", err)
	}
	for _, d := range deps.Items {
		if want := ptr.Deref(d.Spec.Replicas, 1); d.Status.ReadyReplicas < want {
			res.NotReady = append(res.NotReady, fmt.Sprintf("Deployment %s/%s %d/%d ready", d.Namespace, d.Name, d.Status.ReadyReplicas, want))
		}
	}
	sts, err := s.Kube.AppsV1().StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, fmt.Errorf("gate: list StatefulSets: %w", err)
	}
	for _, d := range sts.Items {
		if want := ptr.Deref(d.Spec.Replicas, 1); d.Status.ReadyReplicas < want {
			res.NotReady = append(res.NotReady, fmt.Sprintf("StatefulSet %s/%s %d/%d ready", d.Namespace, d.Name, d.Status.ReadyReplicas, want))
		}
	}
	pods, err := s.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending"})
	if err != nil {
		return res, fmt.Errorf("gate: list pending pods: %w", err)
	}
	now := s.Clock.Now()
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodPending || p.Labels[kube.LabelComponent] == "placeholder" {
			continue
		}
		age := now.Sub(p.CreationTimestamp.Time).Round(time.Second)
		entry := fmt.Sprintf("%s/%s (%s)", p.Namespace, p.Name, age)
		if age > s.Plan.Budget.Gates.MaxPodPending.Duration {
			res.PendingTooLong = append(res.PendingTooLong, entry)
		} else {
			res.Pending = append(res.Pending, entry)
		}
	}
	pdbs, err := s.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, fmt.Errorf("gate: list PodDisruptionBudgets: %w", err)
	}
	for _, b := range pdbs.Items {
		if b.Status.ObservedGeneration >= b.Generation && b.Status.CurrentHealthy < b.Status.DesiredHealthy {
			res.PDBsBelowMin = append(res.PDBsBelowMin, fmt.Sprintf("%s/%s healthy %d < %d", b.Namespace, b.Name, b.Status.CurrentHealthy, b.Status.DesiredHealthy))
		}
	}
	for _, l := range [][]string{res.NotReady, res.Pending, res.PendingTooLong, res.PDBsBelowMin} {
		sort.Strings(l)
	}
	res.Passed = len(res.NotReady)+len(res.Pending)+len(res.PendingTooLong)+len(res.PDBsBelowMin) == 0
	return res, nil
}

// scaleIn removes the wave's drained instances from their groups (not the
// kept nodes).
func (s run) scaleIn(ctx context.Context, w plan.Wave, rec *rollout.WaveRecord, kept map[string]bool) error {
	for _, n := range w.Nodes {
		if kept[n.Name] {
			continue
		}
		id := n.InstanceID
		if id == "" {
			if node, err := s.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				id = plan.InstanceIDFromProviderID(node.Spec.ProviderID)
			}
		}
		if id == "" {
			return fmt.Errorf("wave %d: node %s: no EC2 instance ID (providerID is not aws:///zone/i-...); remove it from its group by hand", w.Index, n.Name)
		}
		if slices.Contains(rec.Removed, id) {
			continue
		}
		if err := s.terminate(ctx, id); err != nil {
			return err
		}
		if !s.Options.DryRun {
			rec.Removed = append(rec.Removed, id)
			if err := s.Save(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeholderTerm keeps a placeholder on its NodePool and, when its node
// holds pods whose volumes pin them to a zone, in that zone.
func placeholderTerm(ph plan.Placeholder) []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpIn, Values: []string{ph.NodePool}}}
	if ph.Zone != "" {
		out = append(out, corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{ph.Zone}})
	}
	return out
}
