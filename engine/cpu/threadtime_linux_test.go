package cpu

import (
	"syscall"
	"time"
)

// threadCPUTime is the calling thread's CPU time (lock the goroutine to
// its thread first): on a shared machine it counts only the time this
// thread ran, not the time it waited for a core.
func threadCPUTime() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
