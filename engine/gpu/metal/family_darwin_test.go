//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// allowNoMetal names the environment variable that turns the device tests'
// failure on an unsupported GPU into a skip. Without it a Mac whose GPU the
// kernels cannot use (a virtual machine's paravirtual device, GitHub's
// hosted macOS runners) fails every device test, so a run that checked
// nothing never reads as a pass.
const allowNoMetal = "SUZURAN_ALLOW_NO_METAL"

// allowed reports whether SUZURAN_ALLOW_NO_METAL=1 turns failures for want
// of a usable GPU into skips.
func allowed() bool { return os.Getenv(allowNoMetal) == "1" }

// requireSupportedGPU fails the test on a GPU below Apple7, or skips it
// with the same message when SUZURAN_ALLOW_NO_METAL=1.
func requireSupportedGPU(t *testing.T, d *Device) {
	t.Helper()
	if d.SupportsKernels() {
		return
	}
	msg := fmt.Sprintf("%s is below the Apple7 GPU family (M1): the kernels cannot run on it, so this test checks nothing here; run the Metal tests on an Apple silicon Mac, not a virtual machine", d.Name())
	if allowed() {
		t.Skipf("%s (skipped: %s=1)", msg, allowNoMetal)
	}
	t.Fatalf("%s (set %s=1 to skip instead)", msg, allowNoMetal)
}

// TestGPUFamilyCheck checks the device's refusal of unsupported GPUs
// against the GPU's own answer: below Apple7 the first pipeline must fail
// with the error that names the family and what to do; from Apple7 on it
// must build. It runs on every Mac, the hosted runners' paravirtual GPU
// included, with or without SUZURAN_ALLOW_NO_METAL; a machine with no Metal
// device at all has nothing to refuse, and the test says so and skips.
func TestGPUFamilyCheck(t *testing.T) {
	d, err := NewDefault()
	if errors.Is(err, ErrNoDevice) {
		t.Skipf("no Metal device on this machine, so no GPU to refuse: %v", err)
	}
	if err != nil {
		t.Fatalf("NewDefault: %v", err)
	}
	defer d.Close()
	const kernel = "gemm_half_q4_f32"
	_, err = d.Pipeline(kernel)
	if d.SupportsKernels() {
		if err != nil {
			t.Fatalf("%s supports Apple7, yet %s did not build: %v", d.Name(), kernel, err)
		}
		t.Logf("%s supports Apple7: %s built", d.Name(), kernel)
		return
	}
	if err == nil {
		t.Fatalf("%s is below Apple7, yet %s built: the device must refuse the GPU", d.Name(), kernel)
	}
	for _, want := range []string{"Apple7 GPU family", "--backend cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("unsupported GPU: error %q does not say %q", err, want)
		}
	}
	// The refusal is remembered: every later pipeline gets it too.
	if _, err2 := d.Pipeline("copy_f32"); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second pipeline on an unsupported GPU: %v, want %v", err2, err)
	}
	t.Logf("unsupported GPU refused: %v", err)
}
