package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// FuzzBudget: any nodes value and schedule either errors or gives an
// allowance within [0, max(total, integer value)], and never panics.
func FuzzBudget(f *testing.F) {
	for _, s := range []struct{ nodes, sched string }{{"10%", ""}, {"3", "0 9 * * mon-fri"}, {"100%", "@daily"}, {"", "* * *"}, {"-5%", "TZ=Europe/Paris 0 9 * * *"}} {
		f.Add(s.nodes, s.sched, 17)
	}
	f.Fuzz(func(t *testing.T, nodes, sched string, total int) {
		if total < 0 || total > 100000 {
			return
		}
		b := apiv1.Budget{Nodes: nodes}
		if sched != "" {
			b.Schedule, b.Duration = &sched, &metav1.Duration{Duration: time.Hour}
		}
		n, err := AllowedDisruptions([]apiv1.Budget{b}, apiv1.DisruptionReasonEmpty, total, t0)
		if err != nil {
			return
		}
		if v, perr := BudgetNodes(nodes, total); perr == nil && n != v && n != int(^uint(0)>>1) {
			t.Fatalf("allowance %d for %q of %d, BudgetNodes says %d", n, nodes, total, v)
		}
		if n < 0 {
			t.Fatalf("negative allowance %d", n)
		}
	})
}
