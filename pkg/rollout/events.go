package rollout

import (
	"strings"
	"sync"
	"time"
)

// EventKind says what an Event reports. Consumers switch on it; the other
// fields of Event are filled as documented per kind.
type EventKind string

// Event kinds.
const (
	// EventRunStarted/EventRunFinished bracket one apply or rollback;
	// Message carries the outcome on finish.
	EventRunStarted  EventKind = "RunStarted"
	EventRunFinished EventKind = "RunFinished"
	// EventStepStarted, EventStepSkipped (Check found it done, or it has
	// nothing to do; Message says why), EventStepFinished, EventStepFailed
	// (Message is the error): Step is set; Done/Total count steps.
	EventStepStarted  EventKind = "StepStarted"
	EventStepSkipped  EventKind = "StepSkipped"
	EventStepFinished EventKind = "StepFinished"
	EventStepFailed   EventKind = "StepFailed"
	// EventWavePhase: Wave (1-based) of Waves entered Phase.
	EventWavePhase EventKind = "WavePhase"
	// EventWaiting: the run waits; Message says for what, Done/Total the
	// progress (e.g. 3 of 5 placeholder pods running).
	EventWaiting EventKind = "Waiting"
	// EventEviction: Pod on Node was evicted (Message "evicted"), is being
	// evicted ("evicting"), was replaced by its Deployment's surge restart
	// ("replaced: <why>"), was left in place ("skipped: <why>") or, counted
	// as the drain started, was gone from its node when the drain reached
	// it, moved by someone else ("gone: <why>", once the drain is done).
	EventEviction EventKind = "Eviction"
	// EventDrainStarted: Wave's drain starts (or, with Wave 0, rollback's
	// drain of the Karpenter nodes): Total is the pods it moves off its
	// nodes, counted as it starts — the pods that came since the plan
	// included, those that stay on a kept node not — so that the pods it
	// reports evicted, replaced or gone never exceed it, and add up to it
	// once it is done.
	EventDrainStarted EventKind = "DrainStarted"
	// EventPDBWait: an eviction of Pod was refused (429); PDB names the
	// budget(s) it waits on.
	EventPDBWait EventKind = "PDBWait"
	// EventGate: the wave's gate was evaluated; Gate holds the result.
	EventGate EventKind = "Gate"
	// EventChange: one change made (or, with DryRun, that would be made):
	// Message describes it ("scale deployment kube-system/cluster-autoscaler 2 -> 0").
	EventChange EventKind = "Change"
)

// Event is one progress report of a run. It is a plain value, safe to copy,
// send over a channel or encode as JSON (one per line for --log-format json).
type Event struct {
	Time   time.Time `json:"time"`
	Kind   EventKind `json:"kind"`
	Step   string    `json:"step,omitempty"`
	Wave   int       `json:"wave,omitempty"`
	Waves  int       `json:"waves,omitempty"`
	Phase  string    `json:"phase,omitempty"`
	Node   string    `json:"node,omitempty"`
	Pod    string    `json:"pod,omitempty"`
	PDB    string    `json:"pdb,omitempty"`
	Done   int       `json:"done,omitempty"`
	Total  int       `json:"total,omitempty"`
	DryRun bool      `json:"dryRun,omitempty"`
	// Message is a one-line human description of the event.
	Message string      `json:"message,omitempty"`
	Gate    *GateResult `json:"gate,omitempty"`
}

// Observer receives events. The runner calls it from one goroutine at a
// time, in order; it must return quickly (hand off to a channel or a
// tea.Program.Send, do not do I/O that can stall).
type Observer func(Event)

// ChannelObserver returns an Observer that sends every event to the
// returned channel, buffered with size buf; when the buffer is full the
// run waits for the consumer. Call close after the run to close it.
func ChannelObserver(buf int) (obs Observer, events <-chan Event, closeFn func()) {
	ch := make(chan Event, buf)
	var once sync.Once
	return func(e Event) { ch <- e }, ch, func() { once.Do(func() { close(ch) }) }
}

type emitter struct {
	mu     sync.Mutex
	obs    Observer
	now    func() time.Time
	dryRun bool
}

func (e *emitter) emit(ev Event) {
	if e.obs == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ev.Time = e.now()
	ev.DryRun = e.dryRun
	e.obs(ev)
}

// Wave phases, in order; the journal records the phase a wave reached so a
// resumed run continues there.
const (
	PhasePreProvision = "pre-provision"
	PhaseCordon       = "cordon"
	PhaseDrain        = "drain"
	PhaseGate         = "gate"
	PhaseCleanup      = "cleanup"
	PhaseScaleIn      = "scale-in"
	PhaseDone         = "done"
)

// GateResult is one evaluation of a wave's gate.
type GateResult struct {
	Passed bool `json:"passed"`
	// NotReady are workloads below their desired ready replicas.
	NotReady []string `json:"notReady,omitempty"`
	// Pending are pods pending, with how long.
	Pending []string `json:"pending,omitempty"`
	// PendingTooLong are pods pending longer than the gate allows.
	PendingTooLong []string `json:"pendingTooLong,omitempty"`
	// PDBsBelowMin are budgets with fewer healthy pods than they require.
	PDBsBelowMin []string `json:"pdbsBelowMin,omitempty"`
}

func (g GateResult) String() string {
	if g.Passed {
		return "passed"
	}
	var parts []string
	add := func(label string, v []string) {
		if len(v) > 0 {
			parts = append(parts, label+": "+strings.Join(v, ", "))
		}
	}
	add("not ready", g.NotReady)
	add("pending too long", g.PendingTooLong)
	add("pending", g.Pending)
	add("PDB below minimum", g.PDBsBelowMin)
	return strings.Join(parts, "; ")
}
