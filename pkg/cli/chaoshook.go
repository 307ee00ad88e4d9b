package cli

import "github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"

// chaosHook wraps apply's and rollback's progress observer. It is the
// identity in every build but the chaos ladder's (`-tags chaos`,
// chaos.go), where it kills the process at a named event.
var chaosHook = func(o rollout.Observer) rollout.Observer { return o }
