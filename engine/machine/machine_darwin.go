package machine

import (
	"encoding/binary"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// probe reads sysctl (x/sys/unix calls libc without cgo).
func probe(f *Facts) {
	f.System = "macOS"
	f.Version, _ = unix.Sysctl("kern.osproductversion")
	f.Build, _ = unix.Sysctl("kern.osversion")
	if c, err := unix.Sysctl("machdep.cpu.brand_string"); err == nil {
		f.Chip = strings.TrimSpace(c)
	}
	// hw.optional.arm64 is 1 on Apple silicon, also for an x86_64 binary
	// running under Rosetta, which would otherwise look like an Intel Mac.
	if v, err := unix.SysctlUint32("hw.optional.arm64"); err == nil && v == 1 {
		f.AppleSilicon, f.Arch = true, "arm64"
	}
	if n, err := unix.SysctlUint64("hw.memsize"); err == nil {
		f.Memory = int64(n)
	}
}

// Available is what macOS can hand out without compressing or swapping:
// free, speculative and purgeable pages plus file-backed pageable pages
// (the page cache, where mapped weights live once read), the same notion
// as Linux's MemAvailable; 0 when the counters cannot be read.
func Available() int64 {
	page, err := unix.SysctlUint32("vm.pagesize")
	if err != nil {
		return 0
	}
	var pages int64
	for _, name := range []string{"vm.page_free_count", "vm.page_speculative_count", "vm.page_purgeable_count", "vm.page_pageable_external_count"} {
		n, err := unix.SysctlUint32(name)
		if err != nil {
			return 0
		}
		pages += int64(n)
	}
	return pages * int64(page)
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
