//go:build darwin

package doctor

import (
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// system reads the macOS version, the chip and the memory from sysctl.
func system() System {
	s := System{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if v, err := unix.Sysctl("kern.osproductversion"); err == nil {
		s.OSVersion = "macOS " + v
		if b, err := unix.Sysctl("kern.osversion"); err == nil {
			s.OSVersion += " (" + b + ")"
		}
	}
	if c, err := unix.Sysctl("machdep.cpu.brand_string"); err == nil {
		s.Chip = strings.TrimSpace(c)
	}
	if m, err := unix.SysctlUint64("hw.memsize"); err == nil {
		s.MemoryBytes = m
	}
	return s
}
