package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Step and run states in the journal.
const (
	StateRunning     = "running"
	StateDone        = "done"
	StateSkipped     = "skipped"
	StateFailed      = "failed"
	StatePaused      = "paused"
	StateInterrupted = "interrupted"
	StateCompleted   = "completed"
	StateRolledBack  = "rolled-back"
)

// Journal is the rollout's state for one environment, stored in a
// ConfigMap so that every machine sees it: the steps applied and when,
// every value recorded before it was changed, and where the run is.
type Journal struct {
	Environment string    `json:"environment"`
	Cluster     string    `json:"cluster,omitempty"`
	PlanHash    string    `json:"planHash,omitempty"`
	Operator    string    `json:"operator,omitempty"`
	ToolVersion string    `json:"toolVersion,omitempty"`
	State       string    `json:"state,omitempty"`
	StartedAt   time.Time `json:"startedAt,omitzero"`
	UpdatedAt   time.Time `json:"updatedAt,omitzero"`
	// Current says what the run is doing or was doing when it stopped.
	Current  Progress     `json:"current,omitzero"`
	Steps    []StepRecord `json:"steps,omitempty"`
	Waves    []WaveRecord `json:"waves,omitempty"`
	Recorded Recorded     `json:"recorded,omitzero"`
	// PredictedSeconds and BoundSeconds are the plan's duration of the
	// waves and its lower bound (plan.Timing), for status to compare
	// with the waves' elapsed time.
	PredictedSeconds float64 `json:"predictedSeconds,omitempty"`
	BoundSeconds     float64 `json:"boundSeconds,omitempty"`
	// Message is the last pause or failure reason.
	Message string `json:"message,omitempty"`
}

// Progress is the position of a run.
type Progress struct {
	Step       string `json:"step,omitempty"`
	Wave       int    `json:"wave,omitempty"`
	Phase      string `json:"phase,omitempty"`
	WaitingFor string `json:"waitingFor,omitempty"`
}

// StepRecord is one step's outcome.
type StepRecord struct {
	ID         string    `json:"id"`
	State      string    `json:"state"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Message    string    `json:"message,omitempty"`
}

// WaveRecord is one wave's progress, so a resumed run continues it.
type WaveRecord struct {
	Index int    `json:"index"`
	Phase string `json:"phase"`
	// Evicted counts pods evicted (or moved by restart) in this wave.
	Evicted int `json:"evicted,omitempty"`
	// Removed are instances already terminated out of their groups.
	Removed []string          `json:"removed,omitempty"`
	Skipped []kube.SkippedPod `json:"skipped,omitempty"`
	// StartedAt is when the wave entered its first phase, FinishedAt when
	// it was done (a paused wave's elapsed time includes the pause);
	// PredictedSeconds is the plan's figure for it.
	StartedAt        time.Time `json:"startedAt,omitzero"`
	FinishedAt       time.Time `json:"finishedAt,omitzero"`
	PredictedSeconds float64   `json:"predictedSeconds,omitempty"`
	// PreparedAt is when the wave's placeholder pods were first created
	// (by its own pre-provisioning, or ahead of it by an earlier wave:
	// Budget.PrepareAhead), recorded before they were.
	PreparedAt time.Time `json:"preparedAt,omitzero"`
	// DrainGroup is the plan's Wave.DrainGroup: the first of the waves
	// this one drains with (their nodes in one drain, behind one gate), 0
	// when it drains alone; a resumed group starts again at its waves'
	// earliest phase.
	DrainGroup int `json:"drainGroup,omitempty"`
}

// Elapsed is the wave's time from its start to its end, or to now while
// it runs (zero before it starts).
func (w WaveRecord) Elapsed(now time.Time) time.Duration {
	switch {
	case w.StartedAt.IsZero():
		return 0
	case w.FinishedAt.IsZero():
		return now.Sub(w.StartedAt)
	}
	return w.FinishedAt.Sub(w.StartedAt)
}

// WavesElapsed is the waves' makespan: from the first wave's start to the
// last one's end (or to now, while one runs); done says every recorded
// wave finished.
func (j *Journal) WavesElapsed(now time.Time) (elapsed time.Duration, done bool) {
	var first, last time.Time
	done = len(j.Waves) > 0
	for _, w := range j.Waves {
		if w.StartedAt.IsZero() {
			done = false
			continue
		}
		if first.IsZero() || w.StartedAt.Before(first) {
			first = w.StartedAt
		}
		end := w.FinishedAt
		if end.IsZero() {
			done, end = false, now
		}
		if end.After(last) {
			last = end
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return last.Sub(first), done
}

// WavesTiming says in a line how long the waves took (or have taken so
// far) against the plan's prediction and bound; "" before a wave started.
func (j *Journal) WavesTiming(now time.Time) string {
	elapsed, done := j.WavesElapsed(now)
	if elapsed == 0 && !done {
		return ""
	}
	verb := "so far"
	if done {
		verb = "in all"
	}
	s := fmt.Sprintf("waves %s: %s elapsed", verb, elapsed.Round(time.Second))
	if j.PredictedSeconds > 0 {
		s += fmt.Sprintf(", predicted %s (%.2f×), lower bound %s", plan.Seconds(j.PredictedSeconds), elapsed.Seconds()/j.PredictedSeconds, plan.Seconds(j.BoundSeconds))
	}
	return s
}

// Recorded holds every value the rollout changed, as it was before the
// first change; rollback restores exactly these. A value is recorded once
// and never overwritten, so a resumed run keeps the original.
type Recorded struct {
	ClusterAutoscaler *plan.CARef   `json:"clusterAutoscaler,omitempty"`
	NodeGroups        []GroupRecord `json:"nodeGroups,omitempty"`
	// AWSAuthBackup names the backup of aws-auth taken before editing it.
	AWSAuthBackup string `json:"awsAuthBackup,omitempty"`
	// NodePools and NodeClasses are the objects the NodePools step applied.
	Objects []ObjectRef `json:"objects,omitempty"`
	// Extra holds values steps record under their own keys (IAM journal).
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
	// KeptNodes are the nodes of the controller's kept group chosen to
	// stay (those running the controller first), chosen once.
	KeptNodes []string `json:"keptNodes,omitempty"`
	// Tainted are the taints the rollout added to nodes, each recorded
	// before the node was changed; rollback removes them.
	Tainted []NodeTaint `json:"tainted,omitempty"`
	// Labelled are the labels the rollout added to nodes (the kept nodes'
	// generate.KeptLabel), each recorded before the node was changed;
	// rollback removes them.
	Labelled []NodeLabel `json:"labelled,omitempty"`
}

// NodeLabel is a label the rollout put on a node.
type NodeLabel struct {
	Node  string `json:"node"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// NodeTaint is a taint the rollout put on a node.
type NodeTaint struct {
	Node  string       `json:"node"`
	Taint corev1.Taint `json:"taint"`
}

// GroupRecord is a node group's settings before the rollout touched it.
type GroupRecord struct {
	plan.GroupState
	SuspendedProcesses []string `json:"suspendedProcesses,omitempty"`
	// WeSuspended are the processes the rollout suspended (and resumes).
	WeSuspended []string `json:"weSuspended,omitempty"`
	// Tags are the kept group's Cluster Autoscaler tags as found (the
	// rollout removes them, rollback puts them back); Taints its managed
	// node group's config taints and labels as found.
	Tags   []GroupTag        `json:"tags,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// GroupTag is an ASG tag.
type GroupTag struct {
	Key               string `json:"key"`
	Value             string `json:"value"`
	PropagateAtLaunch bool   `json:"propagateAtLaunch,omitempty"`
}

// ObjectRef names an applied Kubernetes object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// Group returns the record of a node group, or nil.
func (r *Recorded) Group(name string) *GroupRecord {
	for i := range r.NodeGroups {
		if r.NodeGroups[i].Name == name {
			return &r.NodeGroups[i]
		}
	}
	return nil
}

// Step returns the record of a step, or nil. Steps are matched by name,
// not number (SameStep), so a journal written before the runbook was
// renumbered resumes and rolls back the same steps.
func (j *Journal) Step(id string) *StepRecord {
	for i := range j.Steps {
		if SameStep(j.Steps[i].ID, id) {
			return &j.Steps[i]
		}
	}
	return nil
}

// SameStep reports whether two step IDs name the same step: equal once
// their NN_ order prefixes are set aside ("07_nodepools" is "08_nodepools").
func SameStep(a, b string) bool { return stepName(a) == stepName(b) }

func stepName(id string) string {
	if n, name, ok := strings.Cut(id, "_"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		return name
	}
	return id
}

// Wave returns the record of wave index, creating it.
func (j *Journal) Wave(index int) *WaveRecord {
	for i := range j.Waves {
		if j.Waves[i].Index == index {
			return &j.Waves[i]
		}
	}
	j.Waves = append(j.Waves, WaveRecord{Index: index})
	return &j.Waves[len(j.Waves)-1]
}

// JournalName is the ConfigMap (and Lease) name for an environment.
func JournalName(env string) string { return "karpenter-migrate-" + env }

const journalKey = "journal.json"

// Store reads and writes journals.
type Store struct{ s *kube.StateStore }

// NewStore returns the journal store of env in namespace.
func NewStore(client kubeClient, namespace, env string) *Store {
	return &Store{s: &kube.StateStore{Client: client, Namespace: namespace, Name: JournalName(env), Key: journalKey, Environment: env}}
}

// Load returns the journal, or nil when the environment was never applied.
func (s *Store) Load(ctx context.Context) (*Journal, error) {
	b, err := s.s.Load(ctx)
	if err != nil || b == nil {
		return nil, err
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("journal in ConfigMap %s/%s key %s is not valid JSON (%v); inspect it with kubectl", s.s.Namespace, s.s.Name, journalKey, err)
	}
	return &j, nil
}

// Save writes the journal.
func (s *Store) Save(ctx context.Context, j *Journal) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	return s.s.Save(ctx, b)
}
