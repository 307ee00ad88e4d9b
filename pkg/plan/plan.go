// Package plan makes the rollout plan of one environment, purely: the
// waves of legacy nodes, the Karpenter nodes pkg/engine predicts for each,
// the fleet consolidation settles into, where the Karpenter controller
// lives, the IAM and Helm release the runbook creates, the findings and the
// hash; and the plan file (plan.yaml) with its validation. It holds no
// client: MakePlan is given the inventory, and pkg/rollout runs the plan.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// PlanAPIVersion and PlanKind identify a plan document.
const (
	PlanAPIVersion = "karpenter-migrate.io/v1alpha1"
	PlanKind       = "RolloutPlan"
)

// Plan is what apply will do to one environment, as the user reviews it in
// plan.yaml. Hash covers every field but itself and CreatedAt, so two plans
// of the same cluster state hash the same.
type Plan struct {
	APIVersion  string    `json:"apiVersion"`
	Kind        string    `json:"kind"`
	Hash        string    `json:"hash"`
	CreatedAt   time.Time `json:"createdAt"`
	Environment string    `json:"environment"`
	Cluster     string    `json:"cluster"`
	Region      string    `json:"region,omitempty"`

	Steps             []PlannedStep `json:"steps"`
	Budget            Budget        `json:"budget"`
	NodeGroups        []GroupState  `json:"nodeGroups"`
	ClusterAutoscaler *CARef        `json:"clusterAutoscaler,omitempty"`
	Waves             []Wave        `json:"waves"`
	// Timing is the waves' predicted duration and its lower bound, with
	// the model's inputs (docs/ARCHITECTURE.md, "How long a migration takes").
	Timing    Timing    `json:"timing"`
	Findings  []Finding `json:"findings,omitempty"`
	Cost      Cost      `json:"cost"`
	NodePools []string  `json:"nodePools,omitempty"`
	// PoolForGroup is the preferred NodePool replacing each group; a
	// wave's NodePools lists all of them (weighted strategies have several).
	PoolForGroup map[string]string `json:"poolForGroup,omitempty"`
	// IAM is what the IAM steps create (nil: they are not run).
	IAM *PlanIAM `json:"iam,omitempty"`
	// SteadyState is what Karpenter's consolidation is expected to make of
	// the predicted fleet after the last wave (nil: nothing was predicted).
	SteadyState *SteadyState `json:"steadyState,omitempty"`
	// Controller is where the Karpenter controller lives once the legacy
	// groups are gone (decided once, here; every surface reads it).
	Controller *ControllerHome `json:"controller,omitempty"`
	// Karpenter is the Helm release the Karpenter step installs (nil: the
	// step is not run).
	Karpenter *PlanKarpenter `json:"karpenter,omitempty"`
}

// PlannedStep is one runbook step as planned.
type PlannedStep struct {
	ID          string `json:"id"`
	Purpose     string `json:"purpose"`
	Destructive bool   `json:"destructive,omitempty"`
}

// Budget is how fast the rollout may go, from the environment's config.
type Budget struct {
	WaveSize     int  `json:"waveSize"`
	Concurrency  int  `json:"concurrency"`
	PreProvision bool `json:"preProvision"`
	// PrepareAhead is how many waves beyond the running one have their
	// placeholders created ahead, as it starts (with PreProvision): their
	// nodes launch while it drains (rollout.prepareAhead).
	PrepareAhead int `json:"prepareAhead,omitempty"`
	// DrainTogether drains consecutive waves whose PodDisruptionBudgets
	// do not overlap together (Wave.DrainGroup; rollout.drainTogether).
	DrainTogether bool `json:"drainTogether,omitempty"`
	AllowEmptyDir bool `json:"allowEmptyDir,omitempty"`
	ForceEvict    bool `json:"forceEvict,omitempty"`
	// RestartBlocked lets the drain move a pod whose PDB allows no
	// disruption (a single replica with minAvailable: 1) by a surge
	// rollout restart of its Deployment: the new pod is Ready before the
	// old one goes, so the budget is never broken.
	RestartBlocked bool  `json:"restartBlocked"`
	Gates          Gates `json:"gates"`
}

// Gates bound each wave's waits; exceeding one pauses the rollout.
type Gates struct {
	NodeReadyTimeout Duration `json:"nodeReadyTimeout"`
	MaxPodPending    Duration `json:"maxPodPending"`
	PDBWaitTimeout   Duration `json:"pdbWaitTimeout"`
}

// Duration is a time.Duration written as "10m0s".
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"10m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a Go duration like 90s or 10m", s)
	}
	d.Duration = v
	return nil
}

// GroupState is a legacy node group as planned (sizes at plan time).
type GroupState struct {
	Name    string                  `json:"name"`
	Kind    inventory.NodeGroupKind `json:"kind"`
	ASGName string                  `json:"asgName"`
	Min     int32                   `json:"min"`
	Max     int32                   `json:"max"`
	Desired int32                   `json:"desired"`
}

// CARef names the Cluster Autoscaler deployment.
type CARef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Replicas  int32  `json:"replicas"`
}

// Stops reports whether the runbook itself stops the workload (kind
// namespace/name) before the waves: Cluster Autoscaler's Deployment, which
// step 09 scales to zero. Its pods are neither moved nor pre-provisioned
// for nor forecast, and the waves' drain leaves them to go.
func (p *Plan) Stops(namespace, kind, name string) bool {
	return p.StopsIn(namespace) && kind == inventory.OwnerDeployment && name == p.ClusterAutoscaler.Name
}

// StopsIn reports whether the runbook stops any workload in namespace, so
// a caller can skip finding a pod's owner where it stops none.
func (p *Plan) StopsIn(namespace string) bool {
	ca := p.ClusterAutoscaler
	return ca != nil && namespace == ca.Namespace
}

// Wave is a set of legacy nodes moved together.
type Wave struct {
	Index     int        `json:"index"`
	Nodes     []WaveNode `json:"nodes"`
	NodePools []string   `json:"nodePools"`
	// Pods counts the pods the wave moves (not DaemonSet or do-not-disrupt ones).
	Pods           int             `json:"pods"`
	PredictedNodes []PredictedNode `json:"predictedNodes,omitempty"`
	PreProvision   []Placeholder   `json:"preProvision,omitempty"`
	// PredictedSeconds is how long the wave is predicted to take (the
	// plan's duration model, Timing): Timing's launch, restarts and drain.
	PredictedSeconds float64     `json:"predictedSeconds"`
	Timing           *WaveTiming `json:"timing,omitempty"`
	// DrainGroup, when set, is the index of the first of the consecutive
	// waves drained with this one (Budget.DrainTogether): each is
	// pre-provisioned and cordoned, then their nodes drain in one drain,
	// behind one gate; placeholders, cleanup and scale-in stay per wave.
	// PredictedSeconds and Timing are then the group's, and the plan's
	// total counts them once. 0: the wave drains alone.
	DrainGroup int `json:"drainGroup,omitempty"`
}

// DrainGroups returns the plan's waves as their drain groups: runs of
// consecutive waves with one DrainGroup, each other wave alone, by their
// position in Waves.
func (p *Plan) DrainGroups() [][]int {
	var out [][]int
	for i, w := range p.Waves {
		if n := len(out); n > 0 && w.DrainGroup != 0 && w.DrainGroup == p.Waves[i-1].DrainGroup {
			out[n-1] = append(out[n-1], i)
			continue
		}
		out = append(out, []int{i})
	}
	return out
}

// WaveNode is a legacy node and the instance behind it.
type WaveNode struct {
	Name       string `json:"name"`
	NodeGroup  string `json:"nodeGroup"`
	InstanceID string `json:"instanceID,omitempty"`
	Zone       string `json:"zone,omitempty"`
	// Keep marks a node of the controller's kept group that stays: it is
	// reserved (Controller.Reserve) instead of cordoned, only the pods that
	// do not tolerate that are evicted, and it is not removed. Apply
	// chooses again at the time: nodes running the controller stay first.
	Keep bool `json:"keep,omitempty"`
}

// PredictedNode is a node Karpenter is expected to launch for a wave
// (pkg/engine's cheapest offering). CPU and Memory are its pods' requests,
// without DaemonSet overhead: what a placeholder must reserve.
type PredictedNode struct {
	// Name is the node's name in the plan (w<wave>-<claim>), which
	// SteadyState's commands refer to.
	Name         string  `json:"name,omitempty"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	Pods         int     `json:"pods"`
	CPU          string  `json:"cpu"`
	Memory       string  `json:"memory"`
	PricePerHour float64 `json:"pricePerHour,omitempty"`
	// zonal: a pod on the node has a volume that pins it to a zone, so
	// its placeholder must reserve room in that zone.
	zonal bool
}

// poolsFor returns the NodePools replacing a group, preferred first.
func poolsFor(group string, o PlanOptions) []string {
	if p := o.PoolForGroup[group]; p != "" {
		return []string{p}
	}
	if o.Pools != nil && len(o.Pools.ForGroup[group]) > 0 {
		return slices.Clone(o.Pools.ForGroup[group])
	}
	return []string{group}
}

// Placeholder is one pause pod that reserves capacity before a drain.
type Placeholder struct {
	NodePool string `json:"nodePool"`
	CPU      string `json:"cpu"`
	Memory   string `json:"memory"`
	// Zone, when set, is the zone the placeholder must run in: its node
	// holds pods whose volumes are there.
	Zone string `json:"zone,omitempty"`
	// Headroom marks room beyond the predicted nodes' pods: what
	// kube-scheduler, spreading the evicted pods over the wave's nodes,
	// needs to place them all (headroom in spread.go). It comes first in
	// the wave's placeholders.
	Headroom bool `json:"headroom,omitempty"`
}

// Finding is a readiness note the user should see before applying.
type Finding struct {
	Severity string `json:"severity"` // blocker, warning, info
	Object   string `json:"object,omitempty"`
	Message  string `json:"message"`
}

// Cost compares the fleet before and after, in USD per hour.
type Cost struct {
	BeforePerHour float64 `json:"beforePerHour"`
	AfterPerHour  float64 `json:"afterPerHour"`
	// Estimated is false when prices were missing for some instances.
	Complete bool `json:"complete"`
	// Prices are the prices the figures use: their region, whether they
	// were read live or are the embedded list, and when they were read.
	Prices *inventory.PriceSource `json:"prices,omitempty"`
}

// PriceFunc returns the hourly on-demand or spot price of a type in a zone.
type PriceFunc func(instanceType, capacityType, zone string) (float64, bool)

// PlanOptions are the inputs of BuildPlan besides the inventory.
type PlanOptions struct {
	Environment string
	Config      config.Config
	Steps       []PlannedStep
	// Pools are the environment's NodePools (PoolsFromObjects on the built
	// overlay, or PoolsFromGenerate): they say which pools replace each
	// group, and pkg/engine predicts each wave's Karpenter nodes on them.
	// Without them nothing is predicted and nothing pre-provisioned.
	Pools *Pools
	// PoolForGroup overrides Pools' choice for a group (GROUP=POOL); a
	// group in neither maps to a pool of its own name.
	PoolForGroup map[string]string
	// Catalog prices and sizes predicted nodes; nil means catalog.Default().
	Catalog *catalog.Catalog
	// Prices prices the legacy nodes; nil uses Catalog.
	Prices PriceFunc
	// PriceSource says which prices Catalog holds, for the plan's cost.
	PriceSource *inventory.PriceSource
	// IAM, when set, plans the IAM steps (02..06) for the inventory's
	// cluster with these options; nil leaves them out of the run.
	IAM *IAMOptions
	// Controller are the inputs of the decision of where the Karpenter
	// controller lives, besides the inventory and Config.Controller.
	Controller ControllerOptions
	// Karpenter is the release the Karpenter step installs, without its
	// namespace (the controller's, decided here) and values (Controller's);
	// nil leaves the step out of the run.
	Karpenter *PlanKarpenter
	// Findings from pkg/readiness, added to the plan's own.
	Findings []Finding
	Now      time.Time
	// Progress, if set, is told before each wave's prediction and each
	// pass of the consolidation forecast; an error it returns (a
	// cancelled context's, in MakePlan) stops the plan with that error.
	Progress func(PlanProgress) error
}

// PlanProgress is where a plan is: the wave being predicted, or the pass
// of the consolidation forecast (Settle) and the nodes it starts from.
type PlanProgress struct {
	Wave, Waves int // the wave (from 1) of all waves; 0 in the forecast
	Nodes, Pods int // the wave's legacy nodes and pods, or the pass's nodes
	SettlePass  int // the forecast's pass (from 1); 0 while waves are predicted
}

func (pp PlanProgress) String() string {
	if pp.SettlePass > 0 {
		return fmt.Sprintf("forecasting consolidation: pass %d on %d nodes", pp.SettlePass, pp.Nodes)
	}
	return fmt.Sprintf("predicting wave %d of %d (%d nodes, %d pods)", pp.Wave, pp.Waves, pp.Nodes, pp.Pods)
}

// BuildPlan plans the rollout of inv's legacy node groups. It is pure.
func BuildPlan(inv *inventory.Inventory, o PlanOptions) (*Plan, error) {
	if inv == nil {
		return nil, errors.New("plan: no inventory")
	}
	if o.Environment == "" {
		return nil, errors.New("plan: environment is required (--env)")
	}
	p := newPlan(inv, o)
	inScope, poolsOf := p.addGroups(inv, o)
	cp, err := decideController(inv, o.Config, o.Controller)
	if err != nil {
		return nil, fmt.Errorf("plan where the Karpenter controller lives: %w", err)
	}
	p.Controller = cp.home
	if k := o.Karpenter; k != nil {
		if p.Karpenter, err = k.at(cp.home, o.Controller); err != nil {
			return nil, err
		}
	}
	podsByNode, nodesByGroup, total := index(inv, inScope, p.Stops)
	p.Budget.WaveSize = o.Config.Rollout.WaveNodes(total)
	if o.Config.Rollout.WaveSize == "" {
		p.Budget.WaveSize = max(1, (total+4)/5)
	}
	// Of the pods as they are: the planner moves those the controller's
	// room evicts (controllerRoom).
	found := planFindings(inv, podsByNode, inScope, p.Budget)
	pl := newPlanner(p, inv, o, cp, podsByNode, nodesByGroup, poolsOf)
	if err := pl.planWaves(); err != nil {
		return nil, err
	}
	p.Timing.BoundSeconds, p.Timing.BoundBy = pl.timer.bound()
	// To the 1/100 cent the prices are given in, as the steady state's
	// figures are: the plan, the wizard and the demo show one figure.
	pl.cost.BeforePerHour, pl.cost.AfterPerHour = round4(pl.cost.BeforePerHour), round4(pl.cost.AfterPerHour)
	p.Cost = pl.cost
	if err := pl.settle(); err != nil {
		return nil, err
	}
	p.Findings = append(append(append(found, cp.findings(inv)...), pl.findings...), o.Findings...)
	if o.IAM != nil {
		p.IAM = planIAM(inv, *o.IAM)
		if p.IAM.Error != "" {
			p.Findings = append(p.Findings, Finding{Severity: "warning", Object: "IAM", Message: "the IAM steps will not run: " + p.IAM.Error})
		}
	}
	if err := p.seal(); err != nil {
		return nil, err
	}
	return p, nil
}

// newPlan is the plan's header and budget, from the environment's config.
func newPlan(inv *inventory.Inventory, o PlanOptions) *Plan {
	cfg := o.Config
	p := &Plan{
		APIVersion: PlanAPIVersion, Kind: PlanKind, CreatedAt: o.Now.UTC(),
		Environment: o.Environment, Cluster: inv.Cluster.Name, Region: inv.Cluster.Region,
		Steps: o.Steps, PoolForGroup: map[string]string{},
		Budget: Budget{
			Concurrency: max(1, cfg.Rollout.Concurrency), PreProvision: cfg.Rollout.PreProvision, PrepareAhead: max(0, cfg.Rollout.PrepareAhead), DrainTogether: cfg.Rollout.DrainTogether,
			AllowEmptyDir: cfg.Rollout.AllowEmptyDir, ForceEvict: cfg.Rollout.ForceEvict, RestartBlocked: true,
			Gates: Gates{
				NodeReadyTimeout: Duration{orDefault(cfg.Gates.NodeReadyTimeout.Duration, 10*time.Minute)},
				MaxPodPending:    Duration{orDefault(cfg.Gates.PodPendingTimeout.Duration, 5*time.Minute)},
				PDBWaitTimeout:   Duration{orDefault(cfg.Gates.PDBWaitTimeout.Duration, 15*time.Minute)},
			},
		},
		Timing: Timing{
			NodeLaunchSeconds: orDefault(cfg.Rollout.NodeLaunchTime.Duration, time.Minute).Seconds(),
			PodReadySeconds:   orDefault(cfg.Rollout.PodReadyTime.Duration, 5*time.Second).Seconds(),
		},
	}
	if !p.Budget.PreProvision {
		p.Budget.PrepareAhead = 0 // nothing to create ahead
	}
	if ca := inv.ClusterAutoscaler; ca != nil {
		p.ClusterAutoscaler = &CARef{Namespace: ca.Namespace, Name: ca.Name, Replicas: ca.Replicas}
	}
	return p
}

// addGroups adds the node groups in scope, by name, and the NodePools
// replacing each; it returns which groups are in scope and their pools.
func (p *Plan) addGroups(inv *inventory.Inventory, o PlanOptions) (inScope map[string]bool, poolsOf map[string][]string) {
	groups := slices.Clone(inv.NodeGroups)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	inScope, poolsOf = map[string]bool{}, map[string][]string{}
	for _, g := range groups {
		if !groupInScope(g.Name, o.Config.NodeGroups) {
			continue
		}
		inScope[g.Name] = true
		p.NodeGroups = append(p.NodeGroups, GroupState{Name: g.Name, Kind: g.Kind, ASGName: g.ASGName, Min: g.MinSize, Max: g.MaxSize, Desired: g.DesiredSize})
		pools := poolsFor(g.Name, o)
		p.PoolForGroup[g.Name] = pools[0]
		poolsOf[g.Name] = pools
		for _, pool := range pools {
			if !slices.Contains(p.NodePools, pool) {
				p.NodePools = append(p.NodePools, pool)
			}
		}
	}
	sort.Strings(p.NodePools)
	return inScope, poolsOf
}

// index groups the pods that move by node (not DaemonSets', not finished
// ones, not those of a workload the runbook stops) and the in-scope nodes
// by group, and counts those nodes.
func index(inv *inventory.Inventory, inScope map[string]bool, stops func(namespace, kind, name string) bool) (podsByNode map[string][]inventory.Pod, nodesByGroup map[string][]inventory.Node, total int) {
	podsByNode = map[string][]inventory.Pod{}
	for _, pod := range inv.Pods {
		if pod.OwnerKind == inventory.OwnerDaemonSet || pod.Phase == corev1.PodSucceeded || pod.Phase == corev1.PodFailed || stops(pod.Namespace, pod.OwnerKind, pod.OwnerName) {
			continue
		}
		podsByNode[pod.NodeName] = append(podsByNode[pod.NodeName], pod)
	}
	nodesByGroup = map[string][]inventory.Node{}
	for _, n := range inv.Nodes {
		if inScope[n.NodeGroup] {
			nodesByGroup[n.NodeGroup] = append(nodesByGroup[n.NodeGroup], n)
			total++
		}
	}
	return podsByNode, nodesByGroup, total
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func capacityOr(ct string) string {
	if ct == "" {
		return inventory.CapacityOnDemand
	}
	return ct
}

func groupInScope(name string, sel config.NodeGroups) bool {
	if slices.Contains(sel.Exclude, name) {
		return false
	}
	return len(sel.Include) == 0 || slices.Contains(sel.Include, name)
}

// instanceID returns the EC2 instance of a node from the inventory or its
// providerID (aws:///us-east-1a/i-0123...).
func instanceID(n inventory.Node) string {
	if n.InstanceID != "" {
		return n.InstanceID
	}
	return InstanceIDFromProviderID(n.ProviderID)
}

// InstanceIDFromProviderID returns the i-... part of an AWS providerID.
func InstanceIDFromProviderID(pid string) string {
	if !strings.HasPrefix(pid, "aws://") {
		return ""
	}
	id := pid[strings.LastIndex(pid, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// ZoneBalanced orders nodes so consecutive ones alternate zones: each wave
// then takes capacity from every zone evenly, never a whole zone at once.
func ZoneBalanced(nodes []inventory.Node) []inventory.Node {
	byZone := map[string][]inventory.Node{}
	var zones []string
	for _, n := range nodes {
		if _, ok := byZone[n.Zone]; !ok {
			zones = append(zones, n.Zone)
		}
		byZone[n.Zone] = append(byZone[n.Zone], n)
	}
	sort.Strings(zones)
	for _, z := range zones {
		sort.Slice(byZone[z], func(i, j int) bool { return byZone[z][i].Name < byZone[z][j].Name })
	}
	out := make([]inventory.Node, 0, len(nodes))
	for len(out) < len(nodes) {
		for _, z := range zones {
			if len(byZone[z]) > 0 {
				out = append(out, byZone[z][0])
				byZone[z] = byZone[z][1:]
			}
		}
	}
	return out
}

func chunk[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > 0 {
		k := min(n, len(s))
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func planFindings(inv *inventory.Inventory, podsByNode map[string][]inventory.Pod, inScope map[string]bool, b Budget) []Finding {
	var out []Finding
	legacy := map[string]bool{}
	for _, n := range inv.Nodes {
		if inScope[n.NodeGroup] {
			legacy[n.Name] = true
		}
	}
	for _, pdb := range inv.PDBs {
		if pdb.DisruptionsAllowed == 0 && pdb.ExpectedPods > 0 {
			msg := fmt.Sprintf("allows no disruption (healthy %d, needs %d): eviction is refused for its pods", pdb.CurrentHealthy, pdb.DesiredHealthy)
			sev := "warning"
			switch {
			case pdb.ExpectedPods > pdb.DesiredHealthy:
				// It is short now, not forever: the drain waits for it (#19).
				msg += "; the drain waits until it allows one"
			case b.RestartBlocked && !readiness.ZeroBudgetStuck(pdb, inv.Pods):
				msg += "; a Deployment's pod is moved by a surge rollout restart instead (new pod Ready first)"
			default:
				// Nothing moves them: the drain would wait out the PDB gate
				// mid-rollout; say so before it starts.
				sev = "blocker"
				msg += "; no surge restart replaces its pods (not a Deployment's), so the drain would wait on it until the PDB gate pauses the rollout: scale the workload up or relax minAvailable/maxUnavailable"
			}
			out = append(out, Finding{Severity: sev, Object: "PodDisruptionBudget " + pdb.Namespace + "/" + pdb.Name, Message: msg})
		}
	}
	names := make([]string, 0, len(podsByNode))
	for n := range podsByNode {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, node := range names {
		if !legacy[node] {
			continue
		}
		for _, pod := range podsByNode[node] {
			obj := "Pod " + pod.Namespace + "/" + pod.Name
			if why := inventory.DisruptionBlocked(pod.Annotations); why != "" && !b.ForceEvict {
				out = append(out, Finding{Severity: "blocker", Object: obj, Message: why + ": it will not be evicted and its node not removed; remove the annotation or pass --force-evict"})
			}
			if pod.OwnerKind == inventory.OwnerNone {
				out = append(out, Finding{Severity: "blocker", Object: obj, Message: "has no controller: evicting it deletes it for good; delete or re-create it under a Deployment first"})
			}
			for _, v := range pod.Volumes {
				if v.Kind == inventory.VolumeEmptyDir && !b.AllowEmptyDir {
					out = append(out, Finding{Severity: "blocker", Object: obj, Message: "uses emptyDir " + v.Name + ": its data is lost on eviction; set rollout.allowEmptyDir in the environment config to accept that"})
					break
				}
			}
		}
	}
	return out
}

// Blockers returns the findings of severity blocker.
func (p *Plan) Blockers() []Finding {
	var out []Finding
	for _, f := range p.Findings {
		if f.Severity == "blocker" {
			out = append(out, f)
		}
	}
	return out
}

// contentHash hashes the plan without Hash and CreatedAt.
func (p *Plan) contentHash() (string, error) {
	c := *p
	c.Hash, c.CreatedAt = "", time.Time{}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("hash plan: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func (p *Plan) seal() error {
	h, err := p.contentHash()
	p.Hash = h
	return err
}

// Marshal renders the plan as YAML.
func (p *Plan) Marshal() ([]byte, error) {
	b, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("render plan: %w", err)
	}
	return b, nil
}

// WriteFile writes the plan atomically.
func (p *Plan) WriteFile(path string) error {
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

// ReadPlanFile loads a plan and verifies its hash, so a hand-edited plan
// is refused rather than applied unseen.
func ReadPlanFile(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	p, err := ParsePlan(b)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

// goFieldType is encoding/json's wording for a value of the wrong type.
var goFieldType = regexp.MustCompile(`json: cannot unmarshal (\w+) into Go struct field \w+\.(\S+) of type (\S+)`)

// yamlSyntaxLine is the line of a YAML syntax error ("yaml: line N: ...").
var yamlSyntaxLine = regexp.MustCompile(`^yaml: line (\d+): `)

// planDecodeError drops the YAML-to-JSON layers from a decoding error,
// names a mistyped field by its path in the file, and says what to do: a
// plan is written by `plan`, not by hand.
func planDecodeError(b []byte, err error) error {
	msg := err.Error()
	for _, layer := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "error converting YAML to JSON: "} {
		msg = strings.TrimPrefix(msg, layer)
	}
	if m := yamlSyntaxLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		if tab := config.TabIndent(b, n); tab > 0 {
			msg = fmt.Sprintf("line %d: %s", tab, config.TabIndentAdvice)
		}
	}
	msg = goFieldType.ReplaceAllString(msg, "$2: got a $1, want $3")
	return fmt.Errorf("%s (a plan file is written by `karpenter-migrate plan`, not by hand: plan again)", msg)
}

// ParsePlan decodes and verifies plan bytes. Errors name the line (YAML
// syntax) or the field (unknown or mistyped).
func ParsePlan(b []byte) (*Plan, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("empty file; write one with `karpenter-migrate plan --env ENV -f plan.yaml`")
	}
	var p Plan
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, planDecodeError(b, err)
	}
	if p.APIVersion != PlanAPIVersion || p.Kind != PlanKind {
		return nil, fmt.Errorf("apiVersion %q kind %q: want %s %s", p.APIVersion, p.Kind, PlanAPIVersion, PlanKind)
	}
	if p.Environment == "" {
		return nil, errors.New("environment: missing")
	}
	for i, w := range p.Waves {
		if w.Index != i+1 {
			return nil, fmt.Errorf("waves[%d].index: %d, want %d", i, w.Index, i+1)
		}
		if g := w.DrainGroup; g != 0 && g != w.Index && (i == 0 || p.Waves[i-1].DrainGroup != g) {
			return nil, fmt.Errorf("waves[%d].drainGroup: %d, want %d (this wave's index: it starts a group) or the drainGroup of the wave before it", i, g, w.Index)
		}
		for j, pl := range w.PreProvision {
			for field, v := range map[string]string{"cpu": pl.CPU, "memory": pl.Memory} {
				if _, err := resource.ParseQuantity(v); err != nil {
					return nil, fmt.Errorf("waves[%d].preProvision[%d].%s: %q is not a quantity", i, j, field, v)
				}
			}
		}
	}
	want, err := p.contentHash()
	if err != nil {
		return nil, err
	}
	if p.Hash != want {
		return nil, fmt.Errorf("hash: the file says %s but its content hashes to %s: it was edited after planning; run `karpenter-migrate plan` again", p.Hash, want)
	}
	return &p, nil
}
