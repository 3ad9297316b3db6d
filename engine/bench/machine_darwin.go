package bench

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func platformInfo() (cpu string, mem int64, osName string) {
	cpu, _ = unix.Sysctl("machdep.cpu.brand_string")
	if n, err := unix.SysctlUint64("hw.memsize"); err == nil {
		mem = int64(n)
	}
	osName = "macOS"
	if v, err := unix.Sysctl("kern.osproductversion"); err == nil {
		osName += " " + v
	}
	return cpu, mem, osName
}

// PeakRSS is the process's peak resident set, in bytes (getrusage's
// ru_maxrss, which macOS reports in bytes).
func PeakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss
}
