package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// defaultBudget is the CRD default of spec.disruption.budgets.
var defaultBudget = apiv1.Budget{Nodes: "10%"}

// allReasons are the reasons budgets are computed for.
var allReasons = []apiv1.DisruptionReason{apiv1.DisruptionReasonEmpty, apiv1.DisruptionReasonDrifted, apiv1.DisruptionReasonUnderutilized}

// BudgetActive reports whether a budget applies at now: always without a
// schedule, else while now is within duration of the schedule's last hit
// (cron in UTC, as Karpenter parses it).
func BudgetActive(b apiv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("schedule %q needs a duration", *b.Schedule)
	}
	sched, err := cron.ParseStandard("TZ=UTC " + *b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q: %w", *b.Schedule, err)
	}
	next := sched.Next(now.Add(-b.Duration.Duration))
	return !next.After(now), nil
}

// BudgetNodes is the number of nodes a budget's nodes field allows out of
// total: an integer, or a percentage of total rounded up.
func BudgetNodes(nodes string, total int) (int, error) {
	if p, ok := strings.CutSuffix(nodes, "%"); ok {
		pct, err := strconv.Atoi(p)
		if err != nil || pct < 0 || pct > 100 {
			return 0, fmt.Errorf("nodes %q: want an integer or a percentage from 0%% to 100%%", nodes)
		}
		return int(math.Ceil(float64(pct) * float64(total) / 100)), nil
	}
	n, err := strconv.Atoi(nodes)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("nodes %q: want a non-negative integer or a percentage such as 10%%", nodes)
	}
	return n, nil
}

// AllowedDisruptions is min over the pool's active budgets that match the
// reason (a budget without reasons matches all), before subtracting nodes
// already disrupting; MaxInt when no budget is active.
func AllowedDisruptions(budgets []apiv1.Budget, reason apiv1.DisruptionReason, total int, now time.Time) (int, error) {
	if budgets == nil {
		budgets = []apiv1.Budget{defaultBudget}
	}
	allowed := math.MaxInt
	for i, b := range budgets {
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		active, err := BudgetActive(b, now)
		if err != nil {
			return 0, fmt.Errorf("spec.disruption.budgets[%d]: %w", i, err)
		}
		if !active {
			continue
		}
		n, err := BudgetNodes(b.Nodes, total)
		if err != nil {
			return 0, fmt.Errorf("spec.disruption.budgets[%d]: %w", i, err)
		}
		allowed = min(allowed, n)
	}
	return allowed, nil
}

// budgets is the remaining allowance per pool and reason during a pass.
type budgets struct {
	left   map[string]map[apiv1.DisruptionReason]int
	status []BudgetStatus
}

func (b *budgets) allows(pool string, reason apiv1.DisruptionReason) bool {
	return b.left[pool][reason] > 0
}

func (b *budgets) take(pool string, reason apiv1.DisruptionReason) {
	b.left[pool][reason]--
}

// clone copies the allowances (methods take from their own copy).
func (b *budgets) clone() *budgets {
	out := &budgets{left: map[string]map[apiv1.DisruptionReason]int{}, status: b.status}
	for p, m := range b.left {
		out.left[p] = map[apiv1.DisruptionReason]int{}
		for r, n := range m {
			out.left[p][r] = n
		}
	}
	return out
}

// buildBudgets is Karpenter's BuildDisruptionBudgetMapping: per pool, the
// initialized managed nodes count towards percentages, and nodes already
// disrupting (deleting or not ready) are subtracted.
func (st *state) buildBudgets() (*budgets, error) {
	b := &budgets{left: map[string]map[apiv1.DisruptionReason]int{}}
	for _, p := range st.pools {
		total, disrupting := 0, 0
		for _, n := range st.nodes {
			if n.pool != p || n.in.InFlight || !n.initialized {
				continue
			}
			total++
			if n.deleting || !n.in.Node.Ready {
				disrupting++
			}
		}
		b.left[p.name] = map[apiv1.DisruptionReason]int{}
		for _, r := range allReasons {
			allowed, err := AllowedDisruptions(p.np.Spec.Disruption.Budgets, r, total, st.now)
			if err != nil {
				return nil, fmt.Errorf("nodePool %s: %w", p.name, err)
			}
			left := max(0, allowed-disrupting)
			if allowed == math.MaxInt {
				left = total
			}
			b.left[p.name][r] = left
			b.status = append(b.status, BudgetStatus{NodePool: p.name, Reason: r, Allowed: left, Nodes: total, Disrupting: disrupting})
		}
	}
	return b, nil
}
