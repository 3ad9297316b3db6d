// Package machine reads the facts of the computer Suzuran runs on, once for
// every part that needs them: the download's machine check (app/hub), the
// doctor's report, the benchmarks' record and the engine's memory budget.
// A fact this system does not let it read stays zero.
package machine

import "runtime"

// Facts are the computer's.
type Facts struct {
	OS string // runtime.GOOS
	// Arch is the hardware's: arm64 on Apple silicon also for an x86_64
	// binary under Rosetta.
	Arch string
	// Chip names the processor: "Apple M3 Pro", the CPU's model name
	// elsewhere.
	Chip         string
	AppleSilicon bool
	// System names the operating system: "macOS", or the distribution
	// ("Debian GNU/Linux 12 (bookworm)").
	System string
	// Version is the macOS version ("14.5") and Build its build ("23F79");
	// Kernel is the Linux kernel's release ("6.1.0-18-amd64").
	Version, Build, Kernel string
	CPUs                   int
	// Memory is the installed memory in bytes (unified memory on a Mac).
	Memory int64
}

// Probe reads this computer's facts.
func Probe() Facts {
	f := Facts{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	probe(&f)
	return f
}

// OSVersion writes the operating system for a report:
// "macOS 15.1 (24B83)", "Debian GNU/Linux 12 (bookworm), Linux 6.1.0".
func (f Facts) OSVersion() string {
	s := f.System
	if f.Version != "" {
		s += " " + f.Version
	}
	if f.Build != "" {
		s += " (" + f.Build + ")"
	}
	if f.Kernel != "" {
		if s != "" {
			s += ", "
		}
		s += "Linux " + f.Kernel
	}
	if s == "" {
		return f.OS
	}
	return s
}
