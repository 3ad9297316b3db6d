//go:build linux || darwin

package bench

import (
	"syscall"
	"time"
)

// processCPUTime is the user plus system time the process has used, all
// threads together.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
