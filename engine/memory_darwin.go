package engine

import "golang.org/x/sys/unix"

// availableMemory is what macOS can hand out without compressing or
// swapping: free, speculative and purgeable pages plus file-backed
// pageable pages (the page cache, where mapped weights live once read),
// the same notion as Linux's MemAvailable; 0 when the counters cannot be
// read.
func availableMemory() int64 {
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
