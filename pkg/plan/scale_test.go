package plan_test

import (
	"context"
	"errors"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// demoPlanHashes are the hashes of the demo's plan (seed 1), and of the
// demo replicated 3 times, as `plan --env prod` makes them from the
// snapshot, the generated tree and prod.yaml, recorded before the planner
// was made to scale (#23). A change that only makes planning faster keeps
// them; one that changes plans on purpose updates them and says why: #22
// records the prices the cost used (cost.prices, and a warning when they
// are the embedded ones) — waves, fleet and forecast unchanged; #25 keeps
// the Karpenter controller's group (the plan's controller home, the kept
// nodes in the cost after, the steps' purposes); #21 adds the Karpenter
// step (07_karpenter, later steps renumbered) and the release it installs
// (karpenter: chart, version, values); #16 counts the kept nodes in both
// fleets of the steady state too (steadyState.kept), so the figure after
// consolidation is the cluster's, as the cost after is; step 07's purpose
// says it makes the controller's room first (checked: the old purpose
// gives the old hashes); #31 pins the placeholder of a predicted node that
// holds redis pods, whose volumes are zonal, to that node's zone
// (preProvision[].zone) — with the engine reading volume topology the
// hashes were the old ones, so waves, fleet and forecast are unchanged —,
// moves no Cluster Autoscaler pod (step 09 stops it: one pod fewer in the
// wave of each replica's system node), and readiness warns that StatefulSet
// cache/redis keeps its 3 volumes in one zone (statefulset-volumes-one-zone);
// #32 keeps the cost's 1/100 cent (afterPerHour 2.3672 where it was rounded
// to 2.37), as the steady state's figures are; #33 adds the duration
// model (timing: predictedSeconds, boundSeconds and the model's inputs;
// each wave's predictedSeconds and timing) — fields added, no other
// changed; #31 keeps the controller on the kept nodes: the release's
// values require their label karpenter-migrate.io/karpenter-controller,
// the controller's finding and steps 07, 10 and 11's purposes say so
// (checked: the plan's YAML differs from the old one only there — waves,
// fleet and forecast unchanged); #33 prepares capacity ahead: the
// budget's prepareAhead (the demo's 6) is added, and the waves prepared
// ahead are predicted to wait only for what is left of their launch
// (waves' launchSeconds and predictedSeconds, timing.predictedSeconds);
// #33 prepares them as the first wave starts, not once its placeholders
// run: those same three figures only (the demo's 145s, was 205s);
// and #33 holds room for kube-scheduler's spread: a wave whose pods, placed
// as kube-scheduler would, leave some over gets headroom placeholders
// first in its preProvision (headroom: true, in the zone of the node it
// is modelled on when that node's placeholder is; the demo's wave 3 one of
// 400m, 1Gi) — predicted nodes, fleet and forecast unchanged;
// and #33 drains waves whose budgets do not overlap together: budget.drainTogether
// and waves[].drainGroup are added, and a group's waves carry its timing
// (timing, predictedSeconds; timing.predictedSeconds 145s → 130s) —
// checked: with drainTogether off the hashes are the old ones; and #33
// restarts a group's blocked Deployments together and times its drain in
// the order the runner drains it (plan.DrainOrder): the 3 copies' timing
// only (their restarts 15s → 5s; the demo's own plan is unchanged);
// and #33 sees the room the Karpenter step makes for the controller:
// karpenter.room is added and its pods move in the waves of the nodes they
// are expected on, not the kept group's (the demo's wave 1 moves 22 pods,
// wave 7 25: what apply's drains find), with those waves' placeholders,
// predicted nodes and timing; and #33's headroom simulation places a
// wave's pods in the drain's order (plan.DrainOrder): the 3 copies'
// headroom placeholders only (the demo's own plan is unchanged); and #33
// starts a group with surge restarts during the gate ahead of it:
// waves[].timing.earlySeconds is added on the demo's wave 4 (5s) and
// timing.predictedSeconds is 5s less (130s → 125s), nothing else.
var demoPlanHashes = map[int]string{
	1: "sha256:054dea3552e24f05bfc9bb9beb38825d46ec01f5768debd9eb55592c11986062",
	3: "sha256:d519ae0dc5d77d2d8a50511e4e5b9e9795a1376940e4f8a6fd8bbbf9daa29384",
}

func TestPlanOfTheDemoKeepsItsHash(t *testing.T) {
	for n, want := range demoPlanHashes {
		ctx := context.Background()
		f, err := bigcluster.WriteDemo(ctx, t.TempDir(), n, bigcluster.Options{})
		if err != nil {
			t.Fatal(err)
		}
		req, err := cliPlanRequest(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.MakePlan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if p.Hash != want {
			t.Errorf("the demo replicated %d times: plan hashes to %s, want %s", n, p.Hash, want)
		}
	}
}

// MakePlan tells Progress each wave and each forecast pass, and a context
// cancelled on the way stops the plan with its error — during the
// forecast too, which otherwise turns its errors into a finding.
func TestMakePlanProgressAndCancel(t *testing.T) {
	f, err := bigcluster.WriteDemo(context.Background(), t.TempDir(), 1, bigcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := cliPlanRequest(f)
	if err != nil {
		t.Fatal(err)
	}
	var seen []plan.PlanProgress
	req.Progress = func(pp plan.PlanProgress) { seen = append(seen, pp) }
	p, err := plan.MakePlan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waves := 0
	for _, pp := range seen {
		if pp.SettlePass == 0 {
			waves++
			if pp.Wave != waves || pp.Waves != len(p.Waves) || pp.Nodes != len(p.Waves[waves-1].Nodes) || pp.Pods != p.Waves[waves-1].Pods {
				t.Errorf("progress %+v, want wave %d of %d as planned", pp, waves, len(p.Waves))
			}
		}
	}
	predicted := p.SteadyState.AfterMigration.Nodes // the kept nodes are not the forecast's
	if k := p.SteadyState.Kept; k != nil {
		predicted -= k.Nodes
	}
	if waves != len(p.Waves) || len(seen) == waves || seen[waves].SettlePass != 1 || seen[waves].Nodes != predicted {
		t.Fatalf("progress %+v: want every wave, then the forecast's passes from the %d predicted nodes", seen, predicted)
	}

	for _, stopAt := range []plan.PlanProgress{{Wave: 2}, {SettlePass: 1}} {
		ctx, cancel := context.WithCancel(context.Background())
		req.Progress = func(pp plan.PlanProgress) {
			if pp.Wave == stopAt.Wave && pp.SettlePass == stopAt.SettlePass {
				cancel()
			}
		}
		p, err := plan.MakePlan(ctx, req)
		cancel()
		if !errors.Is(err, context.Canceled) || p != nil {
			t.Errorf("cancelled at %+v: plan %v, error %v; want no plan and context.Canceled", stopAt, p != nil, err)
		}
	}
}
