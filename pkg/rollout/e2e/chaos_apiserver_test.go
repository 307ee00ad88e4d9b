package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// apiFault is done to the control plane when apply prints a line
// containing trigger.
type apiFault struct {
	name    string
	trigger string
	do      func(ctx context.Context) error
	// triggered is when the trigger was printed; late how long the
	// fault then waited for the one before it; took how long it lasted,
	// until ended (the API server answering again).
	triggered, ended time.Time
	late, took       time.Duration
}

// TestChaosAPIServer is rungs 3 and 4 of the chaos ladder: while apply runs
// with its default 60s Lease, kube-apiserver is restarted (stopped, then
// started on the same etcd) as wave 1 evicts its first pod, frozen
// (SIGSTOP) for 15s as wave 1 cleans up (or as soon as the restart is
// over, if it is not yet), and frozen for 60s as wave 2 evicts its first
// pod. The contract: the run rides out the restart and the short outage
// (requests that could not connect are sent again; the Lease is renewed
// again once the API server answers) and pauses on the long one (exit 4,
// naming the API server and the Lease: it was unreachable for two thirds
// of the Lease, after which another run could soon take over), then apply
// resumes and completes: no PDB below its minimum, each pod moved once.
// kube-controller-manager's node monitor grace period is raised to 2m so
// that kwok's nodes are not marked NotReady by the outage itself.
func TestChaosAPIServer(t *testing.T) {
	chaosOnly(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	c := newChaosWorld(ctx, t, func(o *testenv.Options) {
		o.ControllerManagerArgs = append(o.ControllerManagerArgs, "--node-monitor-grace-period=2m")
	})
	watch, err := watchPods(ctx, c.env.Client, "", c.budgets)
	if err != nil {
		t.Fatal(err)
	}
	toMove := podsToMove(ctx, t, c.world, appNS)
	pause := func(d time.Duration) func(context.Context) error {
		return func(context.Context) error {
			if err := c.env.PauseAPIServer(); err != nil {
				return err
			}
			time.Sleep(d)
			return c.env.ResumeAPIServer()
		}
	}
	drain := stepID(t, c.plan, "drain_waves")
	faults := []*apiFault{
		{name: "rung 3: kube-apiserver restarted mid-drain", trigger: drain + " wave 1: evicted ", do: c.env.RestartAPIServer},
		{name: "rung 4a: kube-apiserver unreachable 15s", trigger: drain + " wave 1/2: cleanup", do: pause(15 * time.Second)},
		{name: "rung 4b: kube-apiserver unreachable 60s", trigger: drain + " wave 2: evicted ", do: pause(60 * time.Second)},
	}
	apply := slices.DeleteFunc(slices.Clone(c.apply), func(a string) bool { return a == "--lease-duration" || a == chaosLease.String() })
	out, code := c.runWithFaults(ctx, t, apply, faults)
	t.Logf("apply under API server faults (exit %d):\n%s", code, out)
	for _, f := range faults {
		if f.took == 0 {
			t.Errorf("%s: apply never printed %q", f.name, f.trigger)
		}
	}
	if code != 4 || !strings.Contains(out, "the API server could not be reached for longer than the lease allows") || !strings.Contains(out, "paused at "+drain+" wave 2") {
		t.Errorf("apply through a 60s outage of the API server: exit %d; want 4, paused at %s wave 2 naming the API server and the lease", code, drain)
	}
	// Paused in wave 2: the restart and the short outage in wave 1 were
	// ridden out. The lost Lease was released once the API server
	// answered, so apply resumes at once.
	resumed, errOut, rc := c.run(ctx, apply...)
	t.Logf("apply resumed (exit %d):\n%s%s", rc, resumed, errOut)
	if rc != 0 {
		t.Fatalf("resumed apply: exit %d, want 0", rc)
	}
	violations := c.stopWatch(t, watch)
	if err := c.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	checkMigrated(ctx, t, c.world)
	moved := watch.deletions(appNS)
	moves := len(moved)
	if !movedOnce(moves, toMove) {
		t.Errorf("%d moves for %d pods to move; want each pod moved once (no second eviction storm); moved: %s", moves, toMove, strings.Join(moved, ", "))
	}
	for _, f := range faults {
		t.Logf("CHAOS %s: started %s after its trigger, took %s, over at %s", f.name, f.late.Round(100*time.Millisecond), f.took.Round(100*time.Millisecond), f.ended.Format("15:04:05.000"))
	}
	t.Logf("CHAOS rungs 3-4 API server restarted, unreachable 15s, unreachable 60s: first apply exit %d, resumed by one apply and completed; PDB violations %d; %d moves for %d pods; the PDB watcher listed again at %v; %s",
		code, violations, moves, toMove, watch.relistLog(), time.Since(began).Round(time.Second))
}

// runWithFaults runs the binary to its end and does the faults one after
// the other, in the background (the output still read): each starts when
// its trigger is printed, or, when that line came while the previous
// fault was still being done, as soon as that one is over (late says by
// how much). It returns the output and the exit code.
func (c *chaosWorld) runWithFaults(ctx context.Context, t *testing.T, args []string, faults []*apiFault) (string, int) {
	t.Helper()
	cmd := c.command(ctx, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	due := make(chan *apiFault, len(faults))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for f := range due {
			start := time.Now()
			f.late = start.Sub(f.triggered)
			if err := f.do(ctx); err != nil {
				t.Errorf("%s: %v", f.name, err)
			}
			f.ended = time.Now()
			f.took = f.ended.Sub(start)
		}
	}()
	go func() {
		defer wg.Done()
		defer close(due)
		sc := bufio.NewScanner(pr)
		next := 0
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if next < len(faults) && strings.Contains(line, faults[next].trigger) {
				faults[next].triggered = time.Now()
				due <- faults[next]
				next++
			}
		}
	}()
	err := cmd.Wait()
	pw.Close()
	wg.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), 0
}
