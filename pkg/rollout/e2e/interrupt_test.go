package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/helm"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// TestApplyInterrupted presses Ctrl-C (a real SIGINT to the binary) as
// apply evicts its first pod: apply says where it stopped and which
// commands resume or roll back, exits 130, and leaves the journal
// interrupted at that wave with the Lease released; the rollback command it
// printed then runs at once and restores the node group.
func TestApplyInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the rollout against the control plane takes a minute")
	}
	w := newWorld(t, []legacyGroup{{name: "ng-self", asg: "ng-self", min: 1, max: 4}}, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	c := w.env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitServiceAccount(ctx, w, appNS); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().Deployments(appNS).Create(ctx, deployment(appNS, "web", 3, "500m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.env.WaitForPodsRunning(ctx, appNS, "app=web", 3); err != nil {
		t.Fatal(err)
	}
	before := w.asgs()
	tree, cfg := w.prepare(ctx)
	// Karpenter installed by someone else, from plain manifests that agree
	// with the plan: step 07 leaves it alone, and so does rollback.
	installController(ctx, t, w, tree)
	w.mustRun(ctx, "plan", "--env", "e2e", "--cluster", clusterName, "--dir", tree, "--config", cfg, "--skip-iam", "--karpenter-chart", testenv.ControlPlaneChart(t), "-f", "plan.yaml")

	run := w.start(ctx, ": evicted ", "apply", "--plan", "plan.yaml", "--dir", tree, "--yes", "--poll-interval", "500ms", "--ack-blockers")
	select {
	case <-run.seen:
		if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	case err := <-run.done:
		t.Fatalf("apply ended (%v) before evicting anything:\n%s", err, run.output())
	}
	err := <-run.done
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("interrupted apply: %v, want exit code 130\n%s", err, run.output())
	}
	out := run.output()
	t.Logf("interrupted apply:\n%s", out)
	for _, want := range []string{
		"Ctrl-C: stopping apply: the evictions in flight finish and the journal is written",
		"apply of e2e interrupted (Ctrl-C) at step 10_drain_waves wave 1 of 1",
		"the journal (ConfigMap karpenter-migrate/karpenter-migrate-e2e) records where it stopped",
		"resume: karpenter-migrate apply --plan plan.yaml --dir " + tree + " --yes",
		"see where it is: karpenter-migrate status --env e2e",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply's output lacks %q", want)
		}
	}

	j, err := rollout.Status(ctx, c, "karpenter-migrate", "e2e")
	if err != nil || j == nil {
		t.Fatalf("journal: %v, %v", j, err)
	}
	if j.State != rollout.StateInterrupted || j.Current.Step != "10_drain_waves" || j.Current.Wave != 1 {
		t.Errorf("journal: state %s at %+v, want interrupted at 10_drain_waves wave 1", j.State, j.Current)
	}
	if st := j.Step("10_drain_waves"); st == nil || st.State != rollout.StateInterrupted {
		t.Errorf("step 10_drain_waves recorded as %+v, want interrupted", st)
	}
	if st := j.Step("07_karpenter"); st == nil || !strings.Contains(st.Message, "someone else") {
		t.Errorf("step 07 recorded as %+v, want the foreign installation left alone", st)
	}
	lease, err := c.CoordinationV1().Leases("karpenter-migrate").Get(ctx, rollout.JournalName("e2e"), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if held(lease) {
		t.Errorf("the Lease is still held by %q after the interrupted run", *lease.Spec.HolderIdentity)
	}

	// The rollback command apply printed runs at once (no Lease to wait
	// out) and restores what was recorded.
	m := regexp.MustCompile(`or roll back: karpenter-migrate (rollback .*)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no rollback command in:\n%s", out)
	}
	args := strings.Fields(m[1])
	w.mustRun(ctx, append(args, "--poll-interval", "500ms")...)
	after := w.asgs()
	for name, b := range before {
		if a := after[name]; a.Desired != b.Desired || a.Min != b.Min || a.Max != b.Max {
			t.Errorf("ASG %s after rollback: %+v, want %+v", name, a, b)
		}
	}
	if j, err = rollout.Status(ctx, c, "karpenter-migrate", "e2e"); err != nil || j.State != rollout.StateRolledBack {
		t.Errorf("journal after rollback: %v, %v", j, err)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, karpenter := n.Labels["karpenter.sh/nodepool"]; !karpenter && n.Spec.Unschedulable {
			t.Errorf("legacy node %s is still cordoned after rollback", n.Name)
		}
	}
	if d, err := c.AppsV1().Deployments(controllerNS).Get(ctx, "karpenter", metav1.GetOptions{}); err != nil || d.DeletionTimestamp != nil {
		t.Errorf("the foreign controller Deployment after rollback: %v; want it left alone", err)
	}
	if rel, err := (&helm.Client{REST: w.env.Config}).Release(ctx, controllerNS, "karpenter"); err != nil || rel != nil {
		t.Errorf("a Helm release after apply and rollback over a foreign Karpenter: %+v %v; want none", rel, err)
	}
}

func held(l *coordinationv1.Lease) bool {
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return false
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return time.Since(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}
