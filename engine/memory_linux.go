package engine

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// availableMemory is /proc/meminfo's MemAvailable: free memory plus what
// the kernel can reclaim (the page cache) without swapping; 0 when it
// cannot be read.
func availableMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == "MemAvailable:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
