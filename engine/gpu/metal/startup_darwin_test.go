//go:build darwin

package metal

import (
	"errors"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/metalkernels"
)

// openAny opens the default device for the tests that need no kernels to
// run, so they run on any Mac with Metal, the hosted runners' paravirtual
// GPU included; with no Metal device at all they fail unless
// SUZURAN_ALLOW_NO_METAL=1.
func openAny(t *testing.T) *Device {
	t.Helper()
	d, err := NewDefault()
	if errors.Is(err, ErrNoDevice) && allowed() {
		t.Skipf("%v (skipped: %s=1)", err, allowNoMetal)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// TestDeviceStarts is the first proof that the cgo-free path starts at all:
// built with CGO_ENABLED=0, the test binary runs on purego's fakecgo, loads
// the Objective-C runtime and Metal, opens the system default device and
// asks it its name, GPU family and memory budget.
func TestDeviceStarts(t *testing.T) {
	d := openAny(t)
	if !strings.HasPrefix(d.Name(), "metal: ") || len(d.Name()) <= len("metal: ") {
		t.Errorf("device name %q, want \"metal: \" and the GPU's name", d.Name())
	}
	if d.MaxBufferLength() <= 0 || d.PageSize() <= 0 {
		t.Errorf("maxBufferLength %d, page size %d: want both positive", d.MaxBufferLength(), d.PageSize())
	}
	t.Logf("%s: family %s, kernels supported %v, recommendedMaxWorkingSetSize %d MiB, maxBufferLength %d MiB, maxThreadgroupMemoryLength %d",
		d.Name(), d.Family(), d.SupportsKernels(), d.RecommendedMaxWorkingSetSize()>>20, d.MaxBufferLength()>>20, d.maxThreadgroup)
}

// TestNewLibraryCompilesEveryUnit compiles every embedded kernel
// file through newLibraryWithSource itself — the exact text and options the
// device uses — without the GPU family check and without building
// pipelines, so that it runs on the hosted runners' paravirtual GPU.
// Warnings fail it too: a warning today is often next year's error.
func TestNewLibraryCompilesEveryUnit(t *testing.T) {
	d := openAny(t)
	results, err := d.CompileUnits()
	if err != nil {
		t.Fatal(err)
	}
	units, err := TranslationUnits(metalkernels.Sources(), "metalkernels/")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(units) || len(results) == 0 {
		t.Fatalf("%d results for %d translation units", len(results), len(units))
	}
	for _, r := range results {
		switch {
		case r.Err != nil:
			t.Errorf("%s: %v", r.Unit, r.Err)
		case r.Warnings != "":
			t.Errorf("%s compiles with warnings, which count as errors:\n%s", r.Unit, r.Warnings)
		default:
			t.Logf("%s: compiled", r.Unit)
		}
	}
	// A broken unit is reported with the compiler's text, naming the file.
	bad, err := New(map[string]string{"broken.metal": "#include <metal_stdlib>\nkernel void broken(device float* x [[buffer(0)]]) {\n  x[0] = undeclared_name;\n}\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	res, err := bad.CompileUnits()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "broken.metal:3") || !strings.Contains(res[0].Err.Error(), "undeclared_name") {
		t.Errorf("compiling a broken unit: %+v, want the compiler's error at broken.metal:3 naming undeclared_name", res)
	}
}

// TestRecordingAlwaysEnds checks every way out of a recording on the real
// device: after Commit, Discard, and a panic unwound through a deferred
// Discard, the device records again and closes; while one records, a
// second NewCommandBuffer and Close are refused. No kernel runs, so it
// needs no Apple7 GPU.
func TestRecordingAlwaysEnds(t *testing.T) {
	d := openAny(t)
	ends := []struct {
		name    string
		end     func(cb device.CommandBuffer)
		wantErr string
	}{
		{"commit", func(cb device.CommandBuffer) { cb.Commit() }, ""},
		{"discard", func(cb device.CommandBuffer) { cb.Discard() }, "discarded"},
		{"panic", func(cb device.CommandBuffer) {
			defer func() { recover() }()
			defer cb.Discard()
			panic("a bug while recording")
		}, "discarded"},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			cb, err := d.NewCommandBuffer()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.NewCommandBuffer(); err == nil {
				t.Error("a second NewCommandBuffer while recording succeeded")
			}
			if err := d.Close(); err == nil {
				t.Error("Close while recording succeeded")
			}
			e.end(cb)
			err = cb.Wait()
			if e.wantErr == "" && err != nil || e.wantErr != "" && (err == nil || !strings.Contains(err.Error(), e.wantErr)) {
				t.Errorf("Wait: %v, want %q", err, e.wantErr)
			}
			next, err := d.NewCommandBuffer()
			if err != nil {
				t.Fatalf("NewCommandBuffer after %s: %v", e.name, err)
			}
			next.Discard()
		})
	}
}
