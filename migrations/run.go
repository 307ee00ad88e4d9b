package migrations

import "github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"

// run is a step's view of the run: the runner's Session, whose
// primitives (Emit, Change, Record, Save, Waiting, Poll, DrainOptions,
// DescribeGroup) and collaborators the step bodies here are written
// against.
type run struct{ *rollout.Session }
