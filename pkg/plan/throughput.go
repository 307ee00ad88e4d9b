package plan

import "fmt"

// throughput bounds a wave's drain by the replacements the cluster brings
// to Ready a second (Timing.PodsPerSecond): its n pods take n / rate
// whatever their budgets allow, the first replacement's P included.
func (tm *timer) throughput(wt *WaveTiming, n int) {
	tm.pods += n
	if tm.rate <= 0 {
		return
	}
	if d := float64(n) / tm.rate; d > wt.DrainSeconds {
		wt.DrainSeconds = d
		wt.BoundBy = fmt.Sprintf("%d pods at %.3g replacements a second", n, tm.rate)
	}
}

// throughputBound is the bound (best, by) or, when longer, the first
// capacity's launch and every pod the waves move at the cluster's rate.
func (tm *timer) throughputBound(best float64, by string) (float64, string) {
	if tm.rate <= 0 || tm.pods == 0 {
		return best, by
	}
	if d := tm.minLaunch + float64(tm.pods)/tm.rate; d > best {
		return d, fmt.Sprintf("%d pods at %.3g replacements a second", tm.pods, tm.rate)
	}
	return best, by
}
