// Package cputime reads the process's own CPU time, the figure stormwatch's benchmarks report
// beside the wall clock: on a machine shared with other work the wall clock says more about the
// neighbours than about the code, while user + system time (garbage collection on other threads
// included) moves far less.
package cputime

import (
	"syscall"
	"time"
)

// Process is the user + system CPU time the process has used so far, or 0 when the system will
// not say (getrusage on RUSAGE_SELF does not fail on the systems we run on).
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
