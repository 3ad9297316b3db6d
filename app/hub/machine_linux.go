package hub

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// probeMachine reads the installed memory; the CPU backend needs nothing
// else of the hardware.
func probeMachine() Machine {
	m := Machine{Arch: runtime.GOARCH}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.Memory = int64(si.Totalram) * int64(si.Unit)
	}
	return m
}
