// Package migrations is the runbook `karpenter-migrate apply` runs for one
// environment: ordered, reversible steps, one file each (NN_name.go), each
// with an ID, a purpose, Check, Up and Down, registered in order like
// goose migrations. The journal in the cluster plays the version table.
package migrations

import (
	"fmt"
	"sort"
	"strings"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

var registry []rollout.Step

// register adds a step; file init order does not matter, IDs sort.
func register(s rollout.Step) {
	for _, r := range registry {
		if r.ID == s.ID {
			panic(fmt.Sprintf("migrations: step %s registered twice", s.ID)) // programming error, caught by tests
		}
	}
	registry = append(registry, s)
	sort.Slice(registry, func(i, j int) bool { return registry[i].ID < registry[j].ID })
}

// All returns the steps in order.
func All() []rollout.Step { return append([]rollout.Step(nil), registry...) }

// Planned returns the steps as a plan lists them.
func Planned() []plan.PlannedStep {
	out := make([]plan.PlannedStep, len(registry))
	for i, s := range registry {
		out[i] = plan.PlannedStep{ID: s.ID, Purpose: s.Purpose, Destructive: s.Destructive}
	}
	return out
}

// IDs returns the step IDs, for flag help and errors.
func IDs() string {
	ids := make([]string, len(registry))
	for i, s := range registry {
		ids[i] = s.ID
	}
	return strings.Join(ids, ", ")
}
