//go:build unix

package engine

import (
	"syscall"
	"time"
)

// cpuTime is the process's user + system CPU time so far; benchmarks
// report it per operation because wall time on a shared machine measures
// the other tenants as much as the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
