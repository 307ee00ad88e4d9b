package cli

// Exit codes scripts and CI act on (documented in README.md and
// docs/ARCHITECTURE.md). Any other failure exits 1.
const (
	// ExitUsage: the command line could not be used (an unknown command,
	// subcommand or flag, a flag's value of the wrong kind, an -o the
	// command does not write); nothing ran. It shares 2 with
	// ExitIAMBlocked: both refuse before changing anything, and both are
	// fixed by changing the command line; the message says which.
	ExitUsage = 2
	// ExitIAMBlocked: `iam apply` found an object that exists, is not ours
	// and does not match; nothing was changed (see --adopt).
	ExitIAMBlocked = 2
	// ExitReadiness: `readiness --fail-on` found findings at or above the threshold.
	ExitReadiness = 3
	// ExitPaused: a gate failed or a wait timed out; fix, then apply again.
	ExitPaused = 4
	// ExitDrifted: the cluster changed since the plan; review a new plan.
	ExitDrifted = 5
	// ExitInterrupted: Ctrl-C or SIGTERM stopped apply, rollback or demo;
	// the message says what stopped and the command that resumes or rolls
	// back (128 + SIGINT, as shells report it).
	ExitInterrupted = 130
)
