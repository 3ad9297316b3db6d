package machine

import (
	"runtime"
	"strings"
	"testing"
)

func TestOSVersion(t *testing.T) {
	for _, tc := range []struct {
		f    Facts
		want string
	}{
		{Facts{OS: "darwin", System: "macOS", Version: "15.1", Build: "24B83"}, "macOS 15.1 (24B83)"},
		{Facts{OS: "darwin", System: "macOS", Version: "15.1"}, "macOS 15.1"},
		{Facts{OS: "linux", System: "Debian GNU/Linux 12 (bookworm)", Kernel: "6.1.0-18-amd64"}, "Debian GNU/Linux 12 (bookworm), Linux 6.1.0-18-amd64"},
		{Facts{OS: "linux", Kernel: "6.1.0"}, "Linux 6.1.0"},
		{Facts{OS: "freebsd"}, "freebsd"},
	} {
		if got := tc.f.OSVersion(); got != tc.want {
			t.Errorf("%+v: OSVersion() = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// TestProbeHere reads this machine's facts; the CI runs it on Linux and on
// macOS, where each of them can be read.
func TestProbeHere(t *testing.T) {
	f := Probe()
	t.Logf("%+v: %s", f, f.OSVersion())
	if f.OS != runtime.GOOS || f.CPUs < 1 || f.Memory < 1<<30 || f.Chip == "" {
		t.Fatalf("implausible facts: %+v", f)
	}
	switch runtime.GOOS {
	case "linux":
		if f.Kernel == "" || !strings.Contains(f.OSVersion(), "Linux "+f.Kernel) {
			t.Errorf("no kernel release: %+v", f)
		}
	case "darwin":
		if f.Version == "" || f.Build == "" || !strings.HasPrefix(f.OSVersion(), "macOS ") {
			t.Errorf("no macOS version: %+v", f)
		}
	}
	if a := Available(); a <= 0 || a > f.Memory {
		t.Errorf("available memory %d, installed %d", a, f.Memory)
	}
	// Touching 64 MiB raises the peak resident set to at least that.
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	if rss := PeakRSS(); rss < 64<<20 {
		t.Errorf("peak RSS %d after touching 64 MiB", rss)
	}
	runtime.KeepAlive(b)
	for _, l := range LoadAverage() {
		if l < 0 {
			t.Errorf("load average %v", LoadAverage())
		}
	}
}
