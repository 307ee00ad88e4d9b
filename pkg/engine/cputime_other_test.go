//go:build !unix

package engine

import "time"

// cpuTime is unavailable here; benchmarks then report 0 CPU time.
func cpuTime() time.Duration { return 0 }
