package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
)

// TestChaosThrottlingStorm is rung 5 of the chaos ladder: as apply starts,
// every Auto Scaling and IAM call is throttled for 30s, then every other
// one for a minute (real time: the binary's retryer is what is tested).
// Apply completes; every IAM object exists once and the journal lists each
// object created exactly once; the end state is the migrated one.
func TestChaosThrottlingStorm(t *testing.T) {
	chaosOnly(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	c := newChaosWorld(ctx, t)
	watch, err := watchPods(ctx, c.env.Client, "", c.budgets)
	if err != nil {
		t.Fatal(err)
	}
	storm := func(ratio float64) {
		for _, svc := range []string{"autoscaling", "iam"} {
			c.aws.SetFault(svc, "*", awsfake.Fault{ThrottleRatio: ratio})
		}
	}
	c.aws.ResetCalls()
	storm(1)
	phases := time.AfterFunc(30*time.Second, func() {
		storm(0.5)
		time.AfterFunc(time.Minute, c.aws.ClearFaults)
	})
	defer phases.Stop()
	run := c.start(ctx, "", c.apply...)
	err = <-run.done
	stormCalls := c.aws.CallCounts()
	if err != nil {
		t.Fatalf("apply through the throttling storm: %v\n%s", err, run.output())
	}
	violations := c.stopWatch(t, watch)
	if err := c.settleNodes(ctx); err != nil {
		t.Fatal(err)
	}
	checkMigrated(ctx, t, c.world)

	// No duplicate creates, the journal exact: each object the IAM steps
	// created exists once and is journalled once.
	have := map[string]int{}
	c.aws.Account(func(a *awsfake.Account) {
		for _, r := range a.IAM.Roles {
			have["role "+ptr.Deref(r.Role.RoleName, "")]++
		}
		for _, p := range a.IAM.Policies {
			have["policy "+ptr.Deref(p.Policy.PolicyName, "")]++
		}
		for _, q := range a.SQS.Queues {
			have["queue "+q.Name]++
		}
		for _, r := range a.EventBridge.Rules {
			have["rule "+ptr.Deref(r.Rule.Name, "")]++
		}
	})
	j := c.journal(ctx)
	var ij iam.Journal
	if err := json.Unmarshal(j.Recorded.Extra["iam"], &ij); err != nil {
		t.Fatal(err)
	}
	journalled := map[string]int{}
	for _, e := range ij.Entries {
		journalled[string(e.Kind)+" "+e.Name]++
	}
	lost := 0
	for k, n := range journalled {
		if n != 1 {
			lost++
			t.Errorf("journal lists %s %d times", k, n)
		}
	}
	for k, n := range have {
		if n != 1 {
			t.Errorf("%s exists %d times", k, n)
		}
	}
	roles, policies := 0, 0
	for k := range have {
		switch {
		case strings.HasPrefix(k, "role "):
			roles++
		case strings.HasPrefix(k, "policy "):
			policies++
		}
	}
	if want := roles + policies + countPrefix(have, "queue ") + countPrefix(have, "rule "); countKinds(journalled, iam.KindNodeRole, iam.KindControllerRole, iam.KindPolicy, iam.KindQueue, iam.KindRule) != want {
		t.Errorf("journal %v does not list exactly the %d roles, policies, queues and rules that exist %v", journalled, want, have)
	}
	asg, iamCalls := 0, 0
	for k, n := range stormCalls {
		switch {
		case strings.HasPrefix(k, "autoscaling:"):
			asg += n
		case strings.HasPrefix(k, "iam:"):
			iamCalls += n
		}
	}
	t.Logf("CHAOS rung 5 throttling storm (30s all, 60s half): apply completed; %d Auto Scaling and %d IAM requests; duplicates 0; journal entries wrong %d; PDB violations %d; %s",
		asg, iamCalls, lost, violations, time.Since(began).Round(time.Second))
}

func countPrefix(m map[string]int, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func countKinds(m map[string]int, kinds ...iam.Kind) int {
	n := 0
	for k := range m {
		for _, kind := range kinds {
			if strings.HasPrefix(k, string(kind)+" ") {
				n++
			}
		}
	}
	return n
}
