package disruption

import (
	"math/rand"
	"reflect"
	"testing"
)

// Folding a node's pods that only take room into one stand-in changes no
// simulation: without each candidate in turn, the pass's Cluster on the
// folded pods answers what one on every pod answers. The clusters spread
// web pods over zones and keep caches apart by hostname, and some worker
// pods carry the web label without a spread of their own: folded away,
// the spread would no longer count them.
func TestFoldedPodsSimulateTheSame(t *testing.T) {
	folded := 0
	for seed := int64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := randomCluster(r, 10+r.Intn(20), 2+r.Intn(6))
		for i := range in.Nodes {
			for j := range in.Nodes[i].Pods {
				if p := &in.Nodes[i].Pods[j]; p.Labels["app"] == "worker" && r.Intn(2) == 0 {
					p.Labels = map[string]string{"app": "web"}
				}
			}
		}
		st, err := newState(&in, nil)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := newState(&in, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range whole.nodes {
			n.simPods = n.in.Pods
			folded += len(n.in.Pods) - len(st.nodes[i].simPods)
		}
		for i := range st.nodes {
			got, gerr := st.cluster(true).Solve(st.nodes[i].reschedPods(), []int{i})
			want, werr := whole.cluster(true).Solve(whole.nodes[i].reschedPods(), []int{i})
			if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d without %s: folded pods give\n%+v (%v)\nevery pod gives\n%+v (%v)", seed, st.nodes[i].ref.Name, got, gerr, want, werr)
			}
		}
	}
	if folded == 0 {
		t.Fatal("no pod was folded: the test compares nothing")
	}
}
