//go:build darwin

package metal

import (
	"encoding/binary"
	"math"
	"strings"
	"syscall"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// testSources exercise what the backend needs from the device: constant
// data through setBytes, device buffers at offsets, threadgroup memory sized
// by the dispatch, SIMD-group reductions, a barrier between dispatches, and a
// project header included from a .metal file.
var testSources = map[string]string{
	"test_params.h": `#pragma once
struct TestParams {
    uint n;
    float scale;
};
`,
	"test.metal": `#include <metal_stdlib>
using namespace metal;
#include "test_params.h"

kernel void scale_add_f32(constant TestParams& p [[buffer(0)]],
                          const device float* x [[buffer(1)]],
                          const device float* y [[buffer(2)]],
                          device float* out [[buffer(3)]],
                          uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        out[i] = x[i] * p.scale + y[i];
    }
}

kernel void block_sum_f32(constant TestParams& p [[buffer(0)]],
                          const device float* in [[buffer(1)]],
                          device float* sums [[buffer(2)]],
                          threadgroup float* partial [[threadgroup(0)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint tg [[threadgroup_position_in_grid]],
                          uint ntg [[threads_per_threadgroup]],
                          uint sg [[simdgroup_index_in_threadgroup]],
                          uint lane [[thread_index_in_simdgroup]],
                          uint nsg [[simdgroups_per_threadgroup]]) {
    uint i = tg * ntg + tid;
    float s = simd_sum(i < p.n ? in[i] : 0.0f);
    if (lane == 0) {
        partial[sg] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float t = 0.0f;
        for (uint k = 0; k < nsg; k++) {
            t += partial[k];
        }
        sums[tg] = t;
    }
}
`,
}

func newTestDevice(t *testing.T, sources map[string]string) *Device {
	t.Helper()
	d, err := New(sources)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	requireSupportedGPU(t, d)
	return d
}

func params(n uint32, scale float32) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b[0:], n)
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(scale))
	return b
}

func putFloats(dst []byte, v []float32) {
	for i, f := range v {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
	}
}

func getFloat(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func mustPipeline(t *testing.T, d *Device, name string) device.Pipeline {
	t.Helper()
	p, err := d.Pipeline(name)
	if err != nil {
		t.Fatalf("Pipeline(%q): %v", name, err)
	}
	return p
}

func mustBuffer(t *testing.T, d *Device, n int) device.Buffer {
	t.Helper()
	b, err := d.NewBuffer(n)
	if err != nil {
		t.Fatalf("NewBuffer(%d): %v", n, err)
	}
	t.Cleanup(b.Release)
	return b
}

func TestDeviceBasics(t *testing.T) {
	d := newTestDevice(t, testSources)
	if !strings.HasPrefix(d.Name(), "metal: ") || len(d.Name()) <= len("metal: ") {
		t.Errorf("Name() = %q, want \"metal: <GPU name>\"", d.Name())
	}
	if d.MaxBufferLength() < 256<<20 {
		t.Errorf("MaxBufferLength() = %d, below any Metal GPU's 256 MiB", d.MaxBufferLength())
	}
	p := mustPipeline(t, d, "scale_add_f32")
	if p.MaxThreadsPerThreadgroup() < 256 || p.MaxThreadsPerThreadgroup() > 1024 {
		t.Errorf("MaxThreadsPerThreadgroup() = %d, want 256..1024", p.MaxThreadsPerThreadgroup())
	}
	if strings.Contains(d.Name(), "Apple") && p.ThreadExecutionWidth() != 32 {
		t.Errorf("ThreadExecutionWidth() = %d on %s, want 32", p.ThreadExecutionWidth(), d.Name())
	}
	again := mustPipeline(t, d, "scale_add_f32")
	if again != p {
		t.Error("a second Pipeline call for the same kernel did not return the cached pipeline")
	}
	b := mustBuffer(t, d, 4096)
	if len(b.Bytes()) != 4096 || b.Len() != 4096 {
		t.Fatalf("buffer of 4096 bytes has Len %d and %d host bytes", b.Len(), len(b.Bytes()))
	}
	for i, v := range b.Bytes() {
		if v != 0 {
			t.Fatalf("new buffer byte %d = %d, want zero-filled", i, v)
		}
	}
	names, err := d.Kernels()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "block_sum_f32,scale_add_f32" {
		t.Errorf("Kernels() = %v, want [block_sum_f32 scale_add_f32]", names)
	}
}

// TestDispatchBarrierAndPipelinedSubmit runs two dependent dispatches in one
// command buffer with a barrier between them, then a second command buffer
// submitted before the first is waited on, as the decode loop does. All the
// values are small integers, so float arithmetic is exact and the results
// are compared for equality.
func TestDispatchBarrierAndPipelinedSubmit(t *testing.T) {
	d := newTestDevice(t, testSources)
	scaleAdd := mustPipeline(t, d, "scale_add_f32")
	blockSum := mustPipeline(t, d, "block_sum_f32")

	const n = 1000 // not a multiple of the 256-thread threadgroup
	const tgSize = 256
	groups := (n + tgSize - 1) / tgSize
	x := mustBuffer(t, d, 4*n)
	y := mustBuffer(t, d, 4*n)
	out := mustBuffer(t, d, 4*n)
	// sums lives at an offset inside a larger buffer to exercise Offset.
	sums := mustBuffer(t, d, 64+4*groups)
	out2 := mustBuffer(t, d, 4*n)
	xs := make([]float32, n)
	ys := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i)
		ys[i] = 1
	}
	putFloats(x.Bytes(), xs)
	putFloats(y.Bytes(), ys)

	cb1, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	cb1.Dispatch(device.Dispatch{
		Pipeline:     scaleAdd,
		Threadgroups: device.Size3{X: groups, Y: 1, Z: 1},
		Threads:      device.Size3{X: tgSize, Y: 1, Z: 1},
		Args: []device.Arg{
			{Index: 0, Bytes: params(n, 2)},
			{Index: 1, Buffer: x},
			{Index: 2, Buffer: y},
			{Index: 3, Buffer: out},
		},
	})
	cb1.Barrier()
	cb1.Dispatch(device.Dispatch{
		Pipeline:     blockSum,
		Threadgroups: device.Size3{X: groups, Y: 1, Z: 1},
		Threads:      device.Size3{X: tgSize, Y: 1, Z: 1},
		Args: []device.Arg{
			{Index: 0, Bytes: params(n, 0)},
			{Index: 1, Buffer: out},
			{Index: 2, Buffer: sums, Offset: 64},
			{Index: 0, Threadgroup: 4 * tgSize / 32},
		},
	})
	cb1.Commit()

	// Submitted before cb1 is waited on; it reads cb1's output.
	cb2, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	cb2.Dispatch(device.Dispatch{
		Pipeline:     scaleAdd,
		Threadgroups: device.Size3{X: groups, Y: 1, Z: 1},
		Threads:      device.Size3{X: tgSize, Y: 1, Z: 1},
		Args: []device.Arg{
			{Index: 0, Bytes: params(n, 3)},
			{Index: 1, Buffer: out},
			{Index: 2, Buffer: x},
			{Index: 3, Buffer: out2},
		},
	})
	cb2.Commit()
	if err := cb1.Wait(); err != nil {
		t.Fatalf("first command buffer: %v", err)
	}
	if err := cb2.Wait(); err != nil {
		t.Fatalf("second command buffer: %v", err)
	}

	for i := 0; i < n; i++ {
		want := float32(2*i + 1)
		if got := getFloat(out.Bytes(), i); got != want {
			t.Fatalf("out[%d] = %v, want %v", i, got, want)
		}
		want2 := 3*want + float32(i)
		if got := getFloat(out2.Bytes(), i); got != want2 {
			t.Fatalf("out2[%d] = %v, want %v", i, got, want2)
		}
	}
	for g := 0; g < groups; g++ {
		var want float32
		for i := g * tgSize; i < min(n, (g+1)*tgSize); i++ {
			want += float32(2*i + 1)
		}
		if got := getFloat(sums.Bytes()[64:], g); got != want {
			t.Errorf("block sum %d = %v, want %v", g, got, want)
		}
	}
}

func TestWrapBytes(t *testing.T) {
	d := newTestDevice(t, testSources)
	page := d.PageSize()
	mem, err := syscall.Mmap(-1, 0, 3*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })

	if _, err := d.WrapBytes(mem[16 : 16+page]); err == nil || !strings.Contains(err.Error(), "not aligned") {
		t.Errorf("WrapBytes of a region starting 16 bytes into a page: error %v, want one saying it is not aligned", err)
	}
	if _, err := d.WrapBytes(mem[:page+4]); err == nil || !strings.Contains(err.Error(), "not a multiple") {
		t.Errorf("WrapBytes of page+4 bytes: error %v, want one saying the length is not a multiple of the page", err)
	}
	if _, err := d.WrapBytes(nil); err == nil {
		t.Error("WrapBytes(nil) succeeded")
	}

	region := mem[page : 3*page]
	w, err := d.WrapBytes(region)
	if err != nil {
		t.Fatalf("WrapBytes of two aligned pages: %v", err)
	}
	defer w.Release()
	if &w.Bytes()[0] != &region[0] || w.Len() != len(region) {
		t.Fatal("the wrapped buffer's host view is not the wrapped memory")
	}

	// The GPU reads and writes the wrapped memory in place: x in the first
	// page, out in the second.
	const n = 300
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i)
	}
	putFloats(region, xs)
	y := mustBuffer(t, d, 4*n)
	putFloats(y.Bytes(), make([]float32, n))
	cb, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	cb.Dispatch(device.Dispatch{
		Pipeline:     mustPipeline(t, d, "scale_add_f32"),
		Threadgroups: device.Size3{X: 2, Y: 1, Z: 1},
		Threads:      device.Size3{X: 256, Y: 1, Z: 1},
		Args: []device.Arg{
			{Index: 0, Bytes: params(n, 5)},
			{Index: 1, Buffer: w},
			{Index: 2, Buffer: y},
			{Index: 3, Buffer: w, Offset: page},
		},
	})
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if got, want := getFloat(mem[2*page:], i), float32(5*i); got != want {
			t.Fatalf("wrapped out[%d] = %v, want %v", i, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	d := newTestDevice(t, testSources)
	if _, err := d.Pipeline("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("Pipeline of a missing kernel: error %v, want one naming it", err)
	}
	if _, err := d.NewBuffer(d.MaxBufferLength() + 1); err == nil {
		t.Error("NewBuffer over MaxBufferLength succeeded")
	}

	// An invalid dispatch is not submitted; Wait reports it.
	p := mustPipeline(t, d, "scale_add_f32")
	cb, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewCommandBuffer(); err == nil {
		t.Error("a second NewCommandBuffer during recording succeeded")
	}
	cb.Dispatch(device.Dispatch{
		Pipeline:     p,
		Threadgroups: device.Size3{X: 1, Y: 1, Z: 1},
		Threads:      device.Size3{X: p.MaxThreadsPerThreadgroup() + 1, Y: 1, Z: 1},
	})
	cb.Commit()
	if err := cb.Wait(); err == nil || !strings.Contains(err.Error(), "threads per threadgroup") {
		t.Errorf("Wait after a dispatch over the thread limit: %v, want an error about threads per threadgroup", err)
	}
	// Arguments past Metal's limits are refused before anything is bound.
	for _, c := range []struct {
		arg  device.Arg
		want string
	}{
		{device.Arg{Index: 31, Buffer: mustBuffer(t, d, 64)}, "[[buffer(31)]]: the index must be 0 to 30"},
		{device.Arg{Index: 0, Threadgroup: 32<<10 + 1}, "over the GPU's 32768"},
	} {
		cb, err := d.NewCommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		cb.Dispatch(device.Dispatch{Pipeline: p, Threadgroups: device.Size3{X: 1, Y: 1, Z: 1}, Threads: device.Size3{X: 32, Y: 1, Z: 1},
			Args: []device.Arg{c.arg}})
		cb.Commit()
		if err := cb.Wait(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Wait after a dispatch with %+v: %v, want an error saying %q", c.arg, err, c.want)
		}
	}

	bad := newTestDevice(t, map[string]string{"broken.metal": "#include <metal_stdlib>\nkernel void broken(device float* x [[buffer(0)]]) {\n  x[0] = undeclared_name;\n}\n"})
	_, err = bad.Pipeline("broken")
	if err == nil || !strings.Contains(err.Error(), "broken.metal") || !strings.Contains(err.Error(), "undeclared_name") {
		t.Errorf("compiling a broken kernel: error %v, want the compiler's message naming broken.metal and the undeclared name", err)
	}
}

// TestProjectKernelsCompile builds a pipeline for every kernel embedded in
// the binary with Apple's compiler: the check the emulator cannot make.
func TestProjectKernelsCompile(t *testing.T) {
	d, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	requireSupportedGPU(t, d)
	names, err := d.Kernels()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("the embedded .metal files hold no kernels")
	}
	for _, name := range names {
		p, err := d.Pipeline(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s: max %d threads per threadgroup, SIMD width %d", name, p.MaxThreadsPerThreadgroup(), p.ThreadExecutionWidth())
	}
}
