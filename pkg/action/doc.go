// Package action is the one place the pipeline is assembled: each user verb
// (discover, readiness, generate, iam, plan, apply, rollback, status,
// consolidation) is an action with its options and Run, over a shared
// Configuration of collaborators. The CLI, the wizard and the demo call
// these actions, so the same cluster gets the same answers through each.
package action
