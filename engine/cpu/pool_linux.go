package cpu

import "syscall"

// osYield gives the thread's core to any other thread the kernel has
// waiting for it, and returns at once when there is none: a pool thread
// polling for work on a machine with more runnable threads than cores
// would otherwise hold its core from them (and from the other pool
// thread) for its whole time slice.
func osYield() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
