package machine

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// probe reads the distribution from /etc/os-release, the kernel from
// uname(2), the CPU's model name from /proc/cpuinfo and the memory from
// sysinfo(2).
func probe(f *Facts) {
	f.System = field("/etc/os-release", "PRETTY_NAME", "=")
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	f.Chip = field("/proc/cpuinfo", "model name", ":")
	if f.Chip == "" { // arm64 kernels name no model
		f.Chip = field("/proc/cpuinfo", "Hardware", ":")
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		f.Memory = int64(si.Totalram) * int64(si.Unit)
	}
}

// Available is /proc/meminfo's MemAvailable: free memory plus what the
// kernel can reclaim (the page cache) without swapping; 0 when it cannot
// be read.
func Available() int64 { return procKB("/proc/meminfo", "MemAvailable") << 10 }

// LoadAverage reads /proc/loadavg.
func LoadAverage() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// PeakRSS is the process's peak resident set (VmHWM), in bytes. Mapped
// checkpoint pages that were touched count, as they do for the user.
func PeakRSS() int64 { return procKB("/proc/self/status", "VmHWM") << 10 }

// procKB reads a "Key:   123 kB" line of a /proc file; 0 when it has none.
func procKB(path, key string) int64 {
	v := field(path, key, ":")
	n, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil || !strings.HasSuffix(v, " kB") {
		return 0
	}
	return n
}

// field returns the value of the first "key<sep>value" line of path,
// trimmed and unquoted, or "".
func field(path, key, sep string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		v = strings.TrimSpace(v)
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		return v
	}
	return ""
}
