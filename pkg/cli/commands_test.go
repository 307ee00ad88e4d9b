package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/action"
	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// injected is a command run with the actions' configuration injected
// (cli/cli's habit): its flags, options and printing are tested with
// in-memory collaborators and no cluster or AWS endpoint of its own.
type injected struct {
	out, errOut string
	code        int
	// asked is what the command asked its configuration for; nil when it
	// asked for none.
	asked *action.Live
}

// runInjected runs args with configure standing in for action.ForLive.
func runInjected(t *testing.T, configure func(action.Live) (*action.Configuration, error), args ...string) injected {
	t.Helper()
	streams, _, out, errOut := iostreams.Test()
	cmd, g := newRoot(streams)
	var res injected
	g.Configure = func(_ context.Context, l action.Live) (*action.Configuration, error) {
		res.asked = &l
		return configure(l)
	}
	// A kubeconfig that names a cluster nobody serves: only the injected
	// configuration is used.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.SetArgs(append([]string{"--kubeconfig", kc}, args...))
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	res.code = g.exit(cmd.Execute())
	res.out, res.errOut = out.String(), errOut.String()
	return res
}

// TestCommandsAskForTheirCollaborators: each verb asks the actions'
// configuration for what its flags say — a Kubernetes client unless it
// works on AWS only, the account in the region of --region, else the
// snapshot's or the plan's, --profile and --endpoint-url, and for apply
// and rollback throttling ridden out and an API server outage ridden out
// for two thirds of the Lease — and stops on the configuration's error.
func TestCommandsAskForTheirCollaborators(t *testing.T) {
	plan := planFile(t) // cluster shop in eu-west-1
	snap := filepath.Join(t.TempDir(), "snapshot.json")
	inv := inventory.Inventory{Cluster: inventory.Cluster{Name: "shop", Region: "us-west-2", ARN: "arn:aws:eks:us-west-2:111122223333:cluster/shop"}}
	if err := inventory.NewSnapshot(inv, time.Unix(0, 0)).WriteFile(snap); err != nil {
		t.Fatal(err)
	}
	account := []string{"--profile", "ops", "--endpoint-url", "http://aws.invalid", "--aws-connect-timeout", "45s"}
	aws := func(region string) *kmaws.Options {
		return &kmaws.Options{Region: region, Profile: "ops", EndpointURL: "http://aws.invalid", ConnectTimeout: 45 * time.Second}
	}
	ridden := func(region string) *kmaws.Options {
		o := aws(region)
		o.RideOutThrottling = true
		return o
	}
	for _, tc := range []struct {
		args   []string
		kube   bool
		aws    *kmaws.Options
		outage time.Duration
	}{
		{[]string{"discover", "--cluster", "shop", "--region", "eu-west-1"}, true, aws("eu-west-1"), 0},
		{[]string{"discover", "--cluster", "shop", "--region", "eu-west-1", "--skip-kubernetes"}, false, aws("eu-west-1"), 0},
		{[]string{"generate", "--cluster", "shop", "--region", "eu-west-1", "--out", t.TempDir()}, true, aws("eu-west-1"), 0},
		{[]string{"iam", "plan", "--snapshot", snap}, false, aws("us-west-2"), 0},
		{[]string{"iam", "apply", "--snapshot", snap, "--region", "eu-central-1", "--dry-run"}, false, aws("eu-central-1"), 0},
		{[]string{"iam", "delete", "--snapshot", snap, "--yes"}, false, aws("us-west-2"), 0},
		{[]string{"plan", "--env", "prod", "--cluster", "shop", "--region", "eu-west-1", "-f", filepath.Join(t.TempDir(), "p.yaml")}, true, aws("eu-west-1"), 0},
		{[]string{"apply", "--plan", plan, "--dry-run"}, true, ridden("eu-west-1"), 40 * time.Second},
		{[]string{"rollback", "--plan", plan, "--dry-run", "--lease-duration", "3m"}, true, ridden("eu-west-1"), 2 * time.Minute},
		{[]string{"status", "--env", "prod"}, true, nil, 0},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			errInjected := errors.New("injected configuration refused")
			args := append(append([]string{}, tc.args...), account...)
			res := runInjected(t, func(action.Live) (*action.Configuration, error) { return nil, errInjected }, args...)
			if res.code != 1 || !strings.Contains(res.errOut, errInjected.Error()) {
				t.Fatalf("%v: exit %d, %q; want the configuration's error", tc.args, res.code, res.errOut)
			}
			l := res.asked
			if l == nil {
				t.Fatal("asked for no configuration")
			}
			if (l.REST != nil) != tc.kube {
				t.Errorf("asked for a Kubernetes client: %t, want %t", l.REST != nil, tc.kube)
			}
			switch {
			case tc.aws == nil && l.AWS != nil:
				t.Errorf("asked for AWS %+v, want none", *l.AWS)
			case tc.aws != nil && l.AWS == nil:
				t.Errorf("asked for no AWS, want %+v", *tc.aws)
			case tc.aws != nil:
				got := *l.AWS
				if got.Logger == nil {
					t.Error("AWS calls would retry without saying so: no logger")
				}
				got.Logger = nil
				if got != *tc.aws {
					t.Errorf("asked for AWS %+v, want %+v", got, *tc.aws)
				}
			}
			if l.Outage != tc.outage {
				t.Errorf("rides out an outage of %s, want %s", l.Outage, tc.outage)
			}
		})
	}
}

// TestCommandsOnTheSandbox runs the verbs through cobra on the sandbox's
// collaborators (action.ForSandbox, the demo account), in the order of a
// migration: discover writes the snapshot and judges it, generate and plan
// discover live through the same configuration, iam plans, applies with
// --yes and deletes, apply and rollback --dry-run change nothing (status
// still finds no journal).
func TestCommandsOnTheSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline on the sandbox; skipped with -short")
	}
	ctx := context.Background()
	sb, err := sandbox.New(sandbox.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	if err := sb.Load(ctx, sandbox.DemoInventory()); err != nil {
		t.Fatal(err)
	}
	cl, _, cancel := sb.Clients(ctx)
	t.Cleanup(cancel)
	cluster := sb.Cloud().Cluster.Name
	dir := t.TempDir()
	c := action.ForSandbox(cl, "karpenter-migrate", dir, "test")
	configure := func(action.Live) (*action.Configuration, error) { return c, nil }
	run := func(args ...string) injected {
		t.Helper()
		res := runInjected(t, configure, args...)
		if res.code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, res.code, res.out, res.errOut)
		}
		return res
	}
	path := func(name string) string { return filepath.Join(dir, name) }

	res := run("discover", "--cluster", cluster, "--snapshot", path("snapshot.json"), "--offline", "-o", "json")
	var found struct {
		Inventory inventory.Inventory `json:"inventory"`
		Readiness readinessResult     `json:"readiness"`
	}
	if err := json.Unmarshal([]byte(res.out), &found); err != nil {
		t.Fatalf("discover -o json: %v\n%s", err, res.out)
	}
	snap, err := inventory.ReadSnapshotFile(path("snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(found.Inventory.NodeGroups); n != len(sandbox.DemoInventory().NodeGroups) || len(snap.Inventory.Nodes) != len(found.Inventory.Nodes) {
		t.Errorf("discover found %d node groups, %d nodes; the snapshot has %d nodes", n, len(found.Inventory.Nodes), len(snap.Inventory.Nodes))
	}
	if found.Readiness.Blockers+found.Readiness.Warnings == 0 {
		t.Errorf("discover judged no readiness findings on the demo account: %+v", found.Readiness)
	}
	// readiness on the snapshot is the same answer, with no collaborator.
	res = run("readiness", "--snapshot", path("snapshot.json"), "-o", "json")
	var judged readinessResult
	if err := json.Unmarshal([]byte(res.out), &judged); err != nil {
		t.Fatal(err)
	}
	if judged.Blockers != found.Readiness.Blockers || judged.Warnings != found.Readiness.Warnings {
		t.Errorf("readiness --snapshot says %d blockers, %d warnings; discover said %d, %d", judged.Blockers, judged.Warnings, found.Readiness.Blockers, found.Readiness.Warnings)
	}

	tree := path("karpenter")
	res = run("generate", "--cluster", cluster, "--out", tree, "--envs", "prod")
	if _, err := os.Stat(filepath.Join(tree, "overlays", "prod", "kustomization.yaml")); err != nil || !strings.Contains(res.out, "Built overlays: prod") {
		t.Errorf("generate --cluster wrote no prod overlay (%v):\n%s", err, res.out)
	}

	journal := path("iam-journal.json")
	iamArgs := []string{"--snapshot", path("snapshot.json"), "--journal", journal, "--identity", "pod-identity"}
	res = run(append([]string{"iam", "plan", "-o", "json"}, iamArgs...)...)
	var ip iam.Plan
	if err := json.Unmarshal([]byte(res.out), &ip); err != nil {
		t.Fatal(err)
	}
	if ip.Changes() == 0 {
		t.Fatalf("iam plan on a fresh account changes nothing: %s", res.out)
	}
	run(append([]string{"iam", "apply", "--dry-run"}, iamArgs...)...)
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Errorf("iam apply --dry-run wrote the journal (%v)", err)
	}
	res = run(append([]string{"iam", "apply", "--yes"}, iamArgs...)...)
	if !strings.Contains(res.errOut, "created NodeRole") {
		t.Errorf("iam apply --yes:\n%s", res.errOut)
	}
	res = run(append([]string{"iam", "plan", "-o", "json"}, iamArgs...)...)
	if err := json.Unmarshal([]byte(res.out), &ip); err != nil || ip.Changes() != 0 {
		t.Errorf("iam plan after apply: %d changes (%v)", ip.Changes(), err)
	}

	planFile := path("plan.yaml")
	res = run("plan", "--env", "prod", "--cluster", cluster, "--offline", "--dir", tree, "-f", planFile, "--create-oidc-provider")
	p, err := plan.ReadPlanFile(planFile)
	if err != nil {
		t.Fatalf("plan --cluster wrote no plan: %v\n%s", err, res.out)
	}
	if p.Cluster != cluster || len(p.Waves) == 0 || !strings.Contains(res.out, "Plan "+p.Hash) {
		t.Errorf("plan of %s with %d waves:\n%s", p.Cluster, len(p.Waves), res.out)
	}

	res = run("apply", "--plan", planFile, "--dir", tree, "--dry-run", "--ack-blockers")
	if !strings.Contains(res.out+res.errOut, "dry run") {
		t.Errorf("apply --dry-run does not say it is one:\n%s\n%s", res.out, res.errOut)
	}
	res = runInjected(t, configure, "status", "--env", "prod", "--namespace", "karpenter-migrate")
	if res.code != 1 || !strings.Contains(res.errOut, "no rollout journal for environment prod") {
		t.Errorf("status after apply --dry-run: exit %d, %q; want no journal", res.code, res.errOut)
	}
	res = runInjected(t, configure, "rollback", "--plan", planFile, "--dir", tree, "--dry-run")
	if res.code != 1 || !strings.Contains(res.errOut, "nothing to roll back: no journal for environment prod") {
		t.Errorf("rollback --dry-run before any apply: exit %d, %q", res.code, res.errOut)
	}
	// A journal that records the NodePools applied: rollback --dry-run says
	// what it would undo and leaves the journal as it was.
	store := rollout.NewStore(cl.Kube, "karpenter-migrate", "prod")
	at := sb.Now()
	j := &rollout.Journal{Environment: "prod", Cluster: cluster, PlanHash: p.Hash, State: rollout.StatePaused, Operator: "test", StartedAt: at, UpdatedAt: at,
		Steps: []rollout.StepRecord{{ID: "01_preflight", State: rollout.StateDone, FinishedAt: at}, {ID: "08_nodepools", State: rollout.StateDone, FinishedAt: at}}}
	if err := store.Save(ctx, j); err != nil {
		t.Fatal(err)
	}
	res = runInjected(t, configure, "rollback", "--plan", planFile, "--dir", tree, "--dry-run")
	down08, down01 := strings.Index(res.errOut, "[dry-run] StepStarted 08_nodepools: down"), strings.Index(res.errOut, "[dry-run] StepStarted 01_preflight: down")
	if res.code != 0 || down08 < 0 || down01 < down08 {
		t.Errorf("rollback --dry-run: exit %d; want 08_nodepools then 01_preflight undone, last first:\n%s\n%s", res.code, res.out, res.errOut)
	}
	after, err := rollout.Status(ctx, cl.Kube, "karpenter-migrate", "prod")
	if err != nil || after == nil || after.State != rollout.StatePaused || len(after.Steps) != 2 || after.Steps[1].State != rollout.StateDone {
		t.Errorf("rollback --dry-run changed the journal: %+v (%v)", after, err)
	}

	res = run(append([]string{"iam", "delete", "--yes"}, iamArgs...)...)
	res = run(append([]string{"iam", "plan", "-o", "json"}, iamArgs...)...)
	if err := json.Unmarshal([]byte(res.out), &ip); err != nil || ip.Changes() == 0 {
		t.Errorf("iam plan after delete: %d changes (%v), want the account as it was", ip.Changes(), err)
	}
}
