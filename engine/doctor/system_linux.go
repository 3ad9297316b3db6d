//go:build linux

package doctor

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// system reads the distribution from /etc/os-release, the CPU's model name
// from /proc/cpuinfo and the memory from sysinfo(2).
func system() System {
	s := System{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if v := field("/etc/os-release", "PRETTY_NAME", "="); v != "" {
		s.OSVersion = v
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel := "Linux " + unix.ByteSliceToString(u.Release[:])
		if s.OSVersion == "" {
			s.OSVersion = kernel
		} else {
			s.OSVersion += ", " + kernel
		}
	}
	s.Chip = field("/proc/cpuinfo", "model name", ":")
	if s.Chip == "" { // arm64 kernels name no model
		s.Chip = field("/proc/cpuinfo", "Hardware", ":")
	}
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) == nil {
		s.MemoryBytes = uint64(info.Totalram) * uint64(info.Unit)
	}
	return s
}

// field returns the value of the first "key<sep>value" line of path,
// unquoted, or "".
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
