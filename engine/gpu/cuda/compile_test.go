package cuda

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/metalkernels"
)

// TestNVRTCCompilesKernels compiles every embedded kernel through the
// source pass and the shim with NVRTC, which needs no GPU: where NVRTC is
// installed (or SUZURAN_NVRTC names it), a kernel the shim cannot carry
// fails here rather than on the device.
func TestNVRTCCompilesKernels(t *testing.T) {
	a, err := loadNVRTCOnly()
	if err != nil {
		t.Skipf("no NVRTC on this machine, so the CUDA translation of the kernels is not compiled: %v", err)
	}
	n := 0
	for _, set := range []struct {
		src    map[string]string
		prefix string
	}{{metalkernels.Sources(), "metalkernels/"}, {testSources, ""}} {
		units, headers, err := translate(set.src, set.prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range units {
			ptx, err := a.compileUnit(u, headers, "compute_90")
			if err != nil {
				t.Error(err)
				continue
			}
			for _, k := range u.kernels {
				if !strings.Contains(string(ptx), ".entry cu_k_"+k.Host+"(") {
					t.Errorf("%s: no entry cu_k_%s in the PTX", u.name, k.Host)
				}
				n++
			}
		}
	}
	t.Logf("%d kernels compiled with %s", n, a.nvrtcPath)
}
