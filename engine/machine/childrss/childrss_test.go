package childrss

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/machine"
)

const childEnv = "SUZURAN_CHILDRSS_TOUCH"

func TestMain(m *testing.M) {
	if mib := os.Getenv(childEnv); mib != "" {
		touchInChild(mib == "256")
		return
	}
	os.Exit(m.Run())
}

// touchInChild, under a 128 MiB guard, touches 256 MiB (over) or 16 MiB
// (under), then prints its peak RSS.
func touchInChild(over bool) {
	Guard(128 << 20)
	n := 16 << 20
	if over {
		n = 256 << 20
	}
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	if over {
		select {} // Guard ends the process
	}
	json.NewEncoder(os.Stdout).Encode(map[string]int64{"peak_rss": machine.PeakRSS()})
	os.Exit(0)
}

// TestGuardStopsTheChild: a child under its ceiling reports a peak RSS
// above what it touched; one over it is stopped with Guard's message and
// exit status.
func TestGuardStopsTheChild(t *testing.T) {
	if machine.PeakRSS() == 0 {
		t.Skip("the peak RSS is not measured on " + runtime.GOOS)
	}
	var r struct {
		PeakRSS int64 `json:"peak_rss"`
	}
	out := Run(t, os.Args[0], childEnv+"=16")
	if err := json.Unmarshal(out, &r); err != nil || r.PeakRSS < 16<<20 || r.PeakRSS > 128<<20 {
		t.Errorf("a child that touched 16 MiB said %q (%v): want its peak RSS, 16 to 128 MiB", out, err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=256")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != GuardExit || !strings.Contains(string(out), "peak RSS passed") {
		t.Errorf("a child over its ceiling: %v, %q; want exit status %d and Guard's message", err, out, GuardExit)
	}
}
