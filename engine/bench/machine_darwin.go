package bench

import (
	"encoding/binary"
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

// LoadAverage reads vm.loadavg: struct loadavg { fixpt_t ldavg[3]; long
// fscale; }, three uint32 fixed-point values scaled by fscale.
func LoadAverage() [3]float64 {
	var l [3]float64
	b, err := unix.SysctlRaw("vm.loadavg")
	if err != nil || len(b) < 24 {
		return l
	}
	scale := float64(binary.LittleEndian.Uint64(b[16:24]))
	if scale == 0 {
		return l
	}
	for i := range l {
		l[i] = float64(binary.LittleEndian.Uint32(b[4*i:])) / scale
	}
	return l
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
