package rollout_test

import (
	"context"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// demoPlanHashes are the hashes of the demo's plan (seed 1), and of the
// demo replicated 3 times, as `plan --env prod` makes them from the
// snapshot, the generated tree and prod.yaml, recorded before the planner
// was made to scale (#23). A change that only makes planning faster keeps
// them; one that changes plans on purpose updates them and says why.
var demoPlanHashes = map[int]string{
	1: "sha256:4f18a7ed5af8b084ff2a750caf9e56ae87729e28d56a885914073084ffa17f17",
	3: "sha256:75597a77f0eb99b1953cd53599f8da21a0359bca282eccd0d8bf5c79b93e1c54",
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
		p, err := rollout.MakePlan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if p.Hash != want {
			t.Errorf("the demo replicated %d times: plan hashes to %s, want %s", n, p.Hash, want)
		}
	}
}
