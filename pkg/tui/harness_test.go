package tui

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/migrations"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// updating reports -update: rewrite the golden views in testdata/. The
// flag is the one teatest's golden package defines.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func TestMain(m *testing.M) {
	// Golden views are plain text: no colour, whatever the terminal.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// driver feeds a Model the messages its commands produce, as tea.Program
// would, on the test goroutine. Commands run on goroutines; timers
// (spinner ticks, cursor blinks) are dropped when they fire, and a command
// still blocked (a listen on a running rollout) delivers when it returns.
type driver struct {
	t    *testing.T
	m    *Model
	msgs chan tea.Msg
	quit bool
}

func newDriver(t *testing.T, opts Options) *driver {
	t.Helper()
	if opts.Width == 0 {
		opts.Width, opts.Height = 80, 24
	}
	if opts.OutDir == "" {
		opts.OutDir = "/out"
	}
	d := &driver{t: t, m: New(context.Background(), opts), msgs: make(chan tea.Msg, 256)}
	d.exec(d.m.Init())
	d.settle()
	return d
}

func (d *driver) exec(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() { d.msgs <- cmd() }()
}

// settle processes messages until none arrives for a short while.
func (d *driver) settle() {
	for {
		select {
		case msg := <-d.msgs:
			d.handle(msg)
		case <-time.After(15 * time.Millisecond):
			return
		}
	}
}

func (d *driver) handle(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil, spinner.TickMsg:
		return
	case tea.BatchMsg:
		for _, c := range msg {
			d.exec(c)
		}
		return
	case tea.QuitMsg:
		d.quit = true
		return
	}
	if strings.Contains(fmt.Sprintf("%T", msg), "cursor.") {
		return // blink
	}
	_, cmd := d.m.Update(msg)
	d.exec(cmd)
}

// waitFor processes messages until cond holds (or fails the test).
func (d *driver) waitFor(what string, cond func() bool) {
	d.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case msg := <-d.msgs:
			d.handle(msg)
		case <-deadline:
			d.t.Fatalf("timed out waiting for %s; view:\n%s", what, d.m.View())
		}
	}
	d.settle()
}

func (d *driver) viewHas(s string) func() bool {
	return func() bool { return strings.Contains(d.m.View(), s) }
}

var keyNames = map[string]tea.KeyType{
	"enter": tea.KeyEnter, "up": tea.KeyUp, "down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight,
	"tab": tea.KeyTab, "shift+tab": tea.KeyShiftTab, "esc": tea.KeyEsc, "space": tea.KeySpace, "ctrl+c": tea.KeyCtrlC,
	"pgdown": tea.KeyPgDown, "backspace": tea.KeyBackspace,
}

func keyMsg(k string) tea.KeyMsg {
	if t, ok := keyNames[k]; ok {
		return tea.KeyMsg{Type: t}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// press sends keys (names as in keyNames, or text) and settles after each.
func (d *driver) press(keys ...string) {
	for _, k := range keys {
		d.handle(keyMsg(k))
		d.settle()
	}
}

func (d *driver) screen() string { return d.m.cur.title() }

// golden compares the view with testdata/<name>.golden (-update rewrites
// it) and checks it fits the terminal.
func (d *driver) golden(name string) {
	d.t.Helper()
	got := d.m.View()
	checkFits(d.t, got, d.m.width, d.m.height)
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			d.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			d.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		d.t.Fatalf("%v (run go test ./pkg/tui -update to create it)", err)
	}
	if got != string(want) {
		d.t.Errorf("view %s differs from %s (run with -update if intended)\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

// checkFits fails when a view is wider or taller than the terminal.
func checkFits(t *testing.T, view string, width, height int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) != height {
		t.Errorf("view is %d lines, terminal %d", len(lines), height)
	}
	for i, l := range lines {
		if w := lipgloss.Width(l); w > width {
			t.Errorf("line %d is %d columns wide, terminal %d: %q", i+1, w, width, l)
		}
	}
}

// fakeBackend answers with fixed data and records what it was asked.
type fakeBackend struct {
	mu         sync.Mutex
	connectErr error
	connected  []Connection
	generated  []GenerateChoice
	written    bool
	iamChoices []IAMChoice
	iamApplied int
	planned    []PlanChoice
	// karpenterState is what the Karpenter check finds (nil: nothing
	// installed); karpenterChecks are the choices it was asked with.
	karpenterState  *migrations.KarpenterState
	karpenterChecks []PlanChoice
	runs            []string
	runChoice       []RunChoice
	// applyEvents are sent by Apply, which then returns applyErr, or
	// blocks until cancelled when block is set.
	applyEvents []Update
	applyErr    error
	block       bool
	applyCtx    context.Context
}

// calls counts the calls recorded so far, under the lock.
func (f *fakeBackend) calls() (iamPlans, plans int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.iamChoices), len(f.planned)
}

func (f *fakeBackend) Connect(_ context.Context, c Connection) (ConnectInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected = append(f.connected, c)
	if f.connectErr != nil {
		return ConnectInfo{}, f.connectErr
	}
	return ConnectInfo{Server: "Kubernetes v1.35.0", Cluster: "EKS demo 1.35, us-east-1"}, nil
}

func (f *fakeBackend) Discover(_ context.Context, progress func(string)) (*inventory.Inventory, error) {
	for _, s := range []string{"EKS cluster", "Auto Scaling groups", "Kubernetes nodes and pods"} {
		progress(s)
	}
	inv := sandbox.DemoInventory()
	// A blocker for the readiness screen: a pod pinned to the self-managed
	// group demo-apps by eks.amazonaws.com/nodegroup, a label its pool
	// will not carry.
	inv.Pods[0].NodeSelector = map[string]string{"eks.amazonaws.com/nodegroup": "demo-apps"}
	withNodes(&inv)
	return &inv, nil
}

// withNodes gives each group its desired number of nodes, as the sandbox
// would launch them, and spreads the pods over them.
func withNodes(inv *inventory.Inventory) {
	for _, g := range inv.NodeGroups {
		for i := range int(g.DesiredSize) {
			ct := g.CapacityType
			if ct != inventory.CapacitySpot {
				ct = inventory.CapacityOnDemand
			}
			inv.Nodes = append(inv.Nodes, inventory.Node{Name: fmt.Sprintf("%s-%d", g.Name, i), NodeGroup: g.Name,
				InstanceType: g.InstanceTypes[i%len(g.InstanceTypes)], Zone: g.Zones[i%len(g.Zones)], CapacityType: ct})
		}
	}
	for i := range inv.Pods {
		inv.Pods[i].NodeName = inv.Nodes[i%len(inv.Nodes)].Name
	}
}

func (f *fakeBackend) Readiness(inv *inventory.Inventory) readiness.Report {
	return (&action.Readiness{}).Run(inv).Report
}

func (f *fakeBackend) Generate(_ context.Context, _ *inventory.Inventory, c GenerateChoice, write bool) (*GenerateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.generated = append(f.generated, c)
	one := int32(10)
	res := &GenerateResult{Dir: "/out/karpenter", Pools: []generate.PoolSummary{
		{Name: "apps", NodeClass: "apps", NodeGroups: []string{"demo-apps"}, CapacityTypes: []string{"on-demand", "spot"}, InstanceTypes: 3},
		{Name: "system", NodeClass: "system", NodeGroups: []string{"system"}, CapacityTypes: []string{"on-demand"}, InstanceTypes: 1, Weight: &one},
	}}
	if write {
		f.written = true
		res.Files = []FilePreview{{Path: "base/nodepools/apps.yaml", Action: generate.FileCreated}, {Path: "base/kustomization.yaml", Action: generate.FileUnchanged}}
		res.Written = &generate.TreeReport{Dir: res.Dir, Built: map[string]int{"dev": 4, "prod": 4}}
		return res, nil
	}
	res.Files = []FilePreview{
		{Path: "base/kustomization.yaml", Action: generate.FileUnchanged},
		{Path: "base/nodepools/apps.yaml", Action: generate.FileUpdated, Diff: "--- a/base/nodepools/apps.yaml\n+++ b/base/nodepools/apps.yaml\n@@ -1,3 +1,3 @@\n kind: NodePool\n-  weight: 5\n+  weight: 10\n metadata:\n"},
		{Path: "overlays/prod/kustomization.yaml", Action: generate.FileCreated, Diff: "--- a/overlays/prod/kustomization.yaml\n+++ b/overlays/prod/kustomization.yaml\n@@ -0,0 +1,2 @@\n+resources:\n+- ../../base\n"},
	}
	return res, nil
}

func (f *fakeBackend) IAMPlan(_ context.Context, _ *inventory.Inventory, c IAMChoice) (*iam.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.iamChoices = append(f.iamChoices, c)
	oidc := iam.Item{Ref: iam.Ref{Kind: iam.KindOIDCProvider, Name: "oidc.eks.us-east-1.amazonaws.com/id/0123"}, Action: iam.ActionMissing, Reason: "IRSA needs it: pass --create-oidc-provider"}
	if c.CreateOIDCProvider {
		oidc.Action, oidc.Reason = iam.ActionCreate, ""
	}
	return &iam.Plan{Cluster: "demo", KarpenterVersion: "1.14.1", Identity: desired.IdentityIRSA, NodeAccess: "aws-auth", Items: []iam.Item{
		{Ref: iam.Ref{Kind: iam.KindNodeRole, Name: "KarpenterNodeRole-demo"}, Action: iam.ActionCreate, Document: map[string]any{"Version": "2012-10-17"}},
		oidc,
		{Ref: iam.Ref{Kind: iam.KindQueue, Name: "demo"}, Action: iam.ActionNoop},
	}}, nil
}

func (f *fakeBackend) IAMApply(_ context.Context, p *iam.Plan, onStep func(iam.Item)) error {
	f.mu.Lock()
	f.iamApplied++
	f.mu.Unlock()
	for _, it := range p.Items {
		if it.Action == iam.ActionCreate {
			onStep(it)
		}
	}
	return nil
}

func (f *fakeBackend) Karpenter(_ context.Context, _ *inventory.Inventory, c PlanChoice) (*KarpenterResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.karpenterChecks = append(f.karpenterChecks, c)
	st := f.karpenterState
	if st == nil {
		st = &migrations.KarpenterState{}
	}
	return &KarpenterResult{State: st, Release: &plan.PlanKarpenter{Release: "karpenter", Namespace: "kube-system", Chart: plan.KarpenterChartOCI, Version: "1.14.1",
		ValuesFrom: "karpenter/helm/karpenter-values.yaml", Values: map[string]any{"settings": map[string]any{"clusterName": "demo", "interruptionQueue": "demo"}, "replicas": 2}}}, nil
}

func (f *fakeBackend) Plan(_ context.Context, _ *inventory.Inventory, c PlanChoice) (*PlanResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.planned = append(f.planned, c)
	p := testPlan()
	if !c.AllowEmptyDir {
		// One check, two pods: the plan lists pod-level blockers per pod.
		for _, pod := range []string{"w-1", "w-2"} {
			p.Findings = append(p.Findings, plan.Finding{Severity: "blocker", Object: "Pod workers/" + pod,
				Message: "uses emptyDir scratch: its data is lost on eviction; set rollout.allowEmptyDir in the environment config to accept that"})
		}
	}
	return &PlanResult{
		Plan: p, PlanFile: "/out/plan.yaml", ConfigFile: "/out/prod.yaml",
		Before:              []FleetLine{{InstanceType: "m5.xlarge", CapacityType: "on-demand", Count: 3}, {InstanceType: "m5.large", CapacityType: "on-demand", Count: 2}},
		AfterMigration:      []FleetLine{{InstanceType: "m5a.xlarge", CapacityType: "spot", Count: 3}},
		AfterConsolidation:  []FleetLine{{InstanceType: "m5a.2xlarge", CapacityType: "spot", Count: 1}, {InstanceType: "m5a.large", CapacityType: "spot", Count: 1}},
		MigratedCostPerHour: 0.4, ConsolidatedCostPerHour: 0.25, Repacked: true,
	}, nil
}

func testPlan() *plan.Plan {
	return &plan.Plan{
		Hash: "sha256:0123456789abcdef0123", Environment: "prod", Cluster: "demo",
		Budget: plan.Budget{WaveSize: 3, Concurrency: 1, PreProvision: true},
		Waves: []plan.Wave{
			{Index: 1, Nodes: []plan.WaveNode{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}, NodePools: []string{"apps"}, Pods: 12,
				PredictedNodes: []plan.PredictedNode{{NodePool: "apps"}, {NodePool: "apps"}}, PreProvision: []plan.Placeholder{{}}, PredictedSeconds: 80},
			// n5 and n6 are kept for the Karpenter controller: reserved, not drained.
			{Index: 2, Nodes: []plan.WaveNode{{Name: "n4"}, {Name: "n5", NodeGroup: "system", Keep: true}, {Name: "n6", NodeGroup: "system", Keep: true}}, NodePools: []string{"system"}, Pods: 7,
				PredictedNodes: []plan.PredictedNode{{NodePool: "system"}}, PredictedSeconds: 65},
		},
		Timing: plan.Timing{PredictedSeconds: 145, BoundSeconds: 80, NodeLaunchSeconds: 60, PodReadySeconds: 5},
		Cost:   plan.Cost{BeforePerHour: 0.9, AfterPerHour: 0.4, Complete: true},
		Controller: &plan.ControllerHome{Source: plan.ControllerFromValues, NodeGroup: "system", Kept: true, Size: 2,
			Reserve: &corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		// Step 07 evicts one pod from n5 to make room for the controller.
		Karpenter: &plan.PlanKarpenter{Release: "karpenter", Namespace: "kube-system", Chart: plan.KarpenterChartOCI, Version: "1.14.1",
			Room: []plan.RoomEviction{{Pod: "app/web-1", From: "n5", To: "n1"}}},
	}
}

func (f *fakeBackend) Apply(ctx context.Context, _ *plan.Plan, c RunChoice, sink func(Update)) error {
	f.mu.Lock()
	f.runs = append(f.runs, "apply")
	f.runChoice = append(f.runChoice, c)
	f.applyCtx = ctx
	events, block, err := f.applyEvents, f.block, f.applyErr
	f.mu.Unlock()
	for _, u := range events {
		sink(u)
	}
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (f *fakeBackend) Rollback(_ context.Context, _ *plan.Plan, sink func(Update)) error {
	f.mu.Lock()
	f.runs = append(f.runs, "rollback")
	f.mu.Unlock()
	at := simStart.Add(time.Hour)
	sink(Update{Event: &rollout.Event{Time: at, Kind: rollout.EventRunStarted, Message: "rollback of prod"}})
	// Last first, without step counts, as the runner's Rollback reports.
	for _, step := range []string{"10_drain_waves", "01_preflight"} {
		sink(Update{Event: &rollout.Event{Time: at, Kind: rollout.EventStepStarted, Step: step, Message: "down: undo"}})
		sink(Update{Event: &rollout.Event{Time: at, Kind: rollout.EventStepFinished, Step: step, Message: "rolled back"}})
	}
	sink(Update{View: &ClusterView{Time: at, LegacyNodes: 6, CostPerHour: 0.6}})
	return nil
}

var simStart = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func testDefaults() Defaults {
	return Defaults{Connection: Connection{Context: "sandbox", Cluster: "demo", Profile: "sandbox", Region: "us-east-1", Environment: "prod"}, Contexts: []string{"sandbox"}}
}
