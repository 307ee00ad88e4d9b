package rollout

import (
	"fmt"
	"strings"
)

// DriftError means the cluster changed materially since the plan was made.
// The CLI exits with code 5; `apply --replan` plans again instead.
type DriftError struct {
	Plan    string
	Changes []string
}

func (e *DriftError) Error() string {
	return fmt.Sprintf("the cluster changed since plan %s was made: %s; review a new plan (`karpenter-migrate plan`) or pass --replan",
		shortHash(e.Plan), strings.Join(e.Changes, "; "))
}

// PausedError means a wave's gate or wait did not pass in time; the run
// stopped with the journal written and can be resumed with apply. The CLI
// exits with code 4.
type PausedError struct {
	Step   string
	Wave   int
	Reason string
}

func (e *PausedError) Error() string {
	where := e.Step
	if e.Wave > 0 {
		where = fmt.Sprintf("%s wave %d", e.Step, e.Wave)
	}
	return fmt.Sprintf("paused at %s: %s; fix it and run apply again to resume (or rollback)", where, e.Reason)
}

func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
