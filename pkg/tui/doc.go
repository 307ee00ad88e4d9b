// Package tui is the interactive migration wizard (`karpenter-migrate
// wizard`): one small bubbletea model per stage — connect, discover,
// readiness, generate, IAM, plan, rollout, done — over a Backend that calls
// the same package functions as the plain commands, so it writes the same
// files and records the same journal, and a user can stop it and continue
// with `apply`, or the other way round.
package tui
