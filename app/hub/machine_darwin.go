package hub

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/engine/gpu/metal"
)

// probeMachine reads the Mac's facts through sysctl (x/sys/unix calls libc
// without cgo) and asks Metal, through purego, for the GPU's working set.
func probeMachine() Machine {
	m := Machine{Arch: runtime.GOARCH}
	m.Chip, _ = unix.Sysctl("machdep.cpu.brand_string")
	// hw.optional.arm64 is 1 on Apple silicon, also for an x86_64 binary
	// running under Rosetta, which would otherwise look like an Intel Mac.
	if v, err := unix.SysctlUint32("hw.optional.arm64"); err == nil && v == 1 {
		m.AppleSilicon, m.Arch = true, "arm64"
	}
	m.OSVersion, _ = unix.Sysctl("kern.osproductversion")
	if n, err := unix.SysctlUint64("hw.memsize"); err == nil {
		m.Memory = int64(n)
	}
	if m.AppleSilicon {
		if d, err := metal.NewDefault(); err == nil {
			m.GPUWorkingSet = d.RecommendedMaxWorkingSetSize()
			d.Close()
		}
	}
	return m
}
