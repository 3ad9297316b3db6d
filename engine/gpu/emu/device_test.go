package emu

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// A few kernels of the device's own, so that these tests do not depend on
// the model's kernels.
const testMSL = `#include <metal_stdlib>
using namespace metal;

struct Affine { float mul; float add; uint n; };

// y = x·mul + add over n elements.
kernel void affine_f32(constant Affine& p [[buffer(0)]],
                       const device float* x [[buffer(1)]],
                       device float* y [[buffer(2)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        y[i] = x[i] * p.mul + p.add;
    }
}

// out[g] = Σ of block g of x, 64 threads per block, through threadgroup memory.
kernel void block_sum_f32(const device float* x [[buffer(0)]],
                          device float* out [[buffer(1)]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint g [[threadgroup_position_in_grid]]) {
    threadgroup float part[2];
    float s = simd_sum(x[g * 64 + tid]);
    if (tid % 32 == 0) {
        part[tid / 32] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        out[g] = part[0] + part[1];
    }
}

kernel void stuck(device float* y [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    if (tid == 0) {
        return;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = 1.0f;
}
`

var (
	devOnce sync.Once
	devVal  *Device
	devErr  error
)

func testDevice(t *testing.T) *Device {
	t.Helper()
	devOnce.Do(func() {
		devVal, devErr = New(Options{Sources: map[string]string{"device_test.metal": testMSL}, Seed: 7})
	})
	if devErr != nil {
		t.Fatal(devErr)
	}
	return devVal
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func putFloats(b []byte, v []float32) {
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
}

func affineParams(mul, add float32, n uint32) []byte {
	b := make([]byte, 12)
	binary.LittleEndian.PutUint32(b, math.Float32bits(mul))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(add))
	binary.LittleEndian.PutUint32(b[8:], n)
	return b
}

func pipe(t *testing.T, d *Device, name string) device.Pipeline {
	t.Helper()
	p, err := d.Pipeline(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newBuf(t *testing.T, d *Device, n int) device.Buffer {
	t.Helper()
	b, err := d.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// Two dependent dispatches in one command buffer, a barrier between them,
// the second reading the first's output at an offset; constant bytes are
// copied at Dispatch, so reusing the slice afterwards changes nothing.
// Every value is an exact float32 computation, checked exactly.
func TestCommandBufferRunsInOrder(t *testing.T) {
	d := testDevice(t)
	const n = 300
	x, y, z := newBuf(t, d, 4*n), newBuf(t, d, 4*(n+8)), newBuf(t, d, 4*n)
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i)
	}
	putFloats(x.Bytes(), in)
	cb, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	p := affineParams(2, 1, n)
	groups := device.Size3{X: (n + 63) / 64, Y: 1, Z: 1}
	threads := device.Size3{X: 64, Y: 1, Z: 1}
	cb.Dispatch(device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Threadgroups: groups, Threads: threads,
		Args: []device.Arg{{Index: 0, Bytes: p}, {Index: 1, Buffer: x}, {Index: 2, Buffer: y, Offset: 32}}})
	cb.Barrier()
	copy(p, affineParams(0.5, -3, n))
	cb.Dispatch(device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Threadgroups: groups, Threads: threads,
		Args: []device.Arg{{Index: 0, Bytes: p}, {Index: 1, Buffer: y, Offset: 32}, {Index: 2, Buffer: z}}})
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	got := floats(z.Bytes())
	for i := range n {
		// (i·2+1)·0.5 − 3, exact in float32.
		if want := float32(i) + 0.5 - 3; got[i] != want {
			t.Fatalf("z[%d] = %v, want %v", i, got[i], want)
		}
	}
	if head := floats(y.Bytes()[:32]); head[0] != 0 || head[7] != 0 {
		t.Errorf("the offset was not honoured: y starts %v", head)
	}
}

// Command buffers run in commit order: the second, committed before the
// first is waited on, sees the first's writes.
func TestCommitOrder(t *testing.T) {
	d := testDevice(t)
	const n = 64
	a, b := newBuf(t, d, 4*n), newBuf(t, d, 4*n)
	var cbs []device.CommandBuffer
	for step := range 20 {
		cb, err := d.NewCommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		src, dst := a, b
		if step%2 == 1 {
			src, dst = b, a
		}
		cb.Dispatch(device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Threadgroups: device.Size3{X: 1, Y: 1, Z: 1},
			Threads: device.Size3{X: n, Y: 1, Z: 1},
			Args:    []device.Arg{{Index: 0, Bytes: affineParams(1, 1, n)}, {Index: 1, Buffer: src}, {Index: 2, Buffer: dst}}})
		cb.Commit()
		cbs = append(cbs, cb)
	}
	if err := cbs[len(cbs)-1].Wait(); err != nil {
		t.Fatal(err)
	}
	for i, v := range floats(a.Bytes()) {
		if v != 20 {
			t.Fatalf("a[%d] = %v after 20 chained +1 steps, want 20", i, v)
		}
	}
}

// Threadgroup memory, a barrier and simd_sum through the device, over a
// mapped file wrapped without copying. Inputs are small integers, so the
// sums are exact.
func TestWrapMappedFile(t *testing.T) {
	d := testDevice(t)
	const groups = 9
	path := filepath.Join(t.TempDir(), "weights.bin")
	data := make([]byte, 4*64*groups)
	vals := make([]float32, 64*groups)
	for i := range vals {
		vals[i] = float32(i%13) - 6
	}
	putFloats(data, vals)
	// Two wrapping pages of file: the mapping starts on the host's page,
	// which may be smaller, so the data is written at the first 16 KiB
	// boundary inside it, through the file (the mapping is shared).
	if err := os.WriteFile(path, make([]byte, 2*WrapPageSize), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 2*WrapPageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	skip := int((WrapPageSize - uintptr(unsafe.Pointer(&m[0]))%WrapPageSize) % WrapPageSize)
	if _, err := f.WriteAt(data, int64(skip)); err != nil {
		t.Fatal(err)
	}
	// Metal refuses a region off the page or of part of a page; so does emu.
	for _, bad := range [][]byte{m[skip+16 : skip+16+WrapPageSize], m[skip : skip+len(data)]} {
		if _, err := d.WrapBytes(bad); err == nil || !strings.Contains(err.Error(), "page") {
			t.Errorf("WrapBytes of %d bytes at page offset %d: error %v, want a refusal naming the page", len(bad), uintptr(unsafe.Pointer(&bad[0]))%WrapPageSize, err)
		}
	}
	x, err := d.WrapBytes(m[skip : skip+WrapPageSize])
	if err != nil {
		t.Fatal(err)
	}
	out := newBuf(t, d, 4*groups)
	cb, _ := d.NewCommandBuffer()
	cb.Dispatch(device.Dispatch{Pipeline: pipe(t, d, "block_sum_f32"), Threadgroups: device.Size3{X: groups, Y: 1, Z: 1},
		Threads: device.Size3{X: 64, Y: 1, Z: 1}, Args: []device.Arg{{Index: 0, Buffer: x}, {Index: 1, Buffer: out}}})
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	for g, v := range floats(out.Bytes()) {
		var want float32
		for _, e := range vals[g*64 : (g+1)*64] {
			want += e
		}
		if v != want {
			t.Errorf("block %d: %v, want %v", g, v, want)
		}
	}
}

func TestFaultsComeBackFromWait(t *testing.T) {
	d := testDevice(t)
	y := newBuf(t, d, 4*32)
	run := func(ds ...device.Dispatch) error {
		cb, err := d.NewCommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ds {
			cb.Dispatch(x)
		}
		cb.Commit()
		return cb.Wait()
	}
	one := device.Size3{X: 1, Y: 1, Z: 1}
	ok := device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Threadgroups: one, Threads: one,
		Args: []device.Arg{{Index: 0, Bytes: affineParams(1, 0, 1)}, {Index: 1, Buffer: y}, {Index: 2, Buffer: y}}}
	stuck := device.Dispatch{Pipeline: pipe(t, d, "stuck"), Threadgroups: one, Threads: device.Size3{X: 32, Y: 1, Z: 1},
		Args: []device.Arg{{Index: 0, Buffer: y}}}
	if err := run(ok, stuck); err == nil || !strings.Contains(err.Error(), "dispatch 2 of 2 (stuck)") || !strings.Contains(err.Error(), "deadlock") {
		t.Errorf("deadlocked kernel: %v", err)
	}
	bad := ok
	bad.Args = []device.Arg{{Index: 0, Bytes: affineParams(1, 0, 1)}, {Index: 1, Buffer: y, Offset: 4 * 33}, {Index: 2, Buffer: y}}
	if err := run(bad); err == nil || !strings.Contains(err.Error(), "offset 132 outside the 128-byte buffer") {
		t.Errorf("offset past the end: %v", err)
	}
	short := ok
	short.Args = []device.Arg{{Index: 0, Bytes: affineParams(1, 0, 1)[:8]}, {Index: 1, Buffer: y}, {Index: 2, Buffer: y}}
	if err := run(short); err == nil || !strings.Contains(err.Error(), "needs at least 12") {
		t.Errorf("short constant struct: %v", err)
	}
	cb, _ := d.NewCommandBuffer()
	if err := cb.Wait(); err == nil || !strings.Contains(err.Error(), "before Commit") {
		t.Errorf("Wait before Commit: %v", err)
	}
	cb.Discard()
	if _, err := d.Pipeline("no_such_kernel"); err == nil {
		t.Error("unknown pipeline: no error")
	}
}

func TestBuffersAndLimits(t *testing.T) {
	d, err := New(Options{Sources: map[string]string{"device_test.metal": testMSL}, MaxBufferLength: 1 << 20, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Name() != "emu: 1 threads" || d.MaxBufferLength() != 1<<20 {
		t.Errorf("Name %q, MaxBufferLength %d", d.Name(), d.MaxBufferLength())
	}
	b, err := d.NewBuffer(1000)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 1000 {
		t.Errorf("Len %d", b.Len())
	}
	for i, v := range b.Bytes() {
		if v != 0 {
			t.Fatalf("new buffer byte %d = %d, want zero", i, v)
		}
	}
	b.Release()
	if _, err := d.NewBuffer(1<<20 + 1); err == nil {
		t.Error("buffer over MaxBufferLength: no error")
	}
	if _, err := d.WrapBytes(make([]byte, 1<<20+1)); err == nil {
		t.Error("wrap over MaxBufferLength: no error")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewCommandBuffer(); err == nil {
		t.Error("NewCommandBuffer on a closed device: no error")
	}
}

// The embedded model kernels build and every one of them resolves to a
// pipeline (the default Options path).
func TestEmbeddedKernels(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names := d.lib.Names()
	if len(names) == 0 {
		t.Fatal("no kernels in metalkernels")
	}
	for _, n := range names {
		p, err := d.Pipeline(n)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != n || p.ThreadExecutionWidth() != 32 {
			t.Errorf("pipeline %s: name %q, width %d", n, p.Name(), p.ThreadExecutionWidth())
		}
	}
}

// TestOneRecordingAtATime checks the rule the Metal device imposes (one
// command buffer recorded at a time, its autorelease pool on a locked
// thread): a second NewCommandBuffer and Close fail while one records, and
// Commit or Discard — also after a recording error, and when the recording
// panics — lets the next one start.
func TestOneRecordingAtATime(t *testing.T) {
	d, err := New(Options{Sources: map[string]string{"device_test.metal": testMSL}, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	y := newBuf(t, d, 4*32)
	one := device.Size3{X: 1, Y: 1, Z: 1}
	ok := device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Threadgroups: one, Threads: one,
		Args: []device.Arg{{Index: 0, Bytes: affineParams(2, 1, 1)}, {Index: 1, Buffer: y}, {Index: 2, Buffer: y}}}
	tooBig := ok
	tooBig.Args = []device.Arg{{Index: 0, Bytes: make([]byte, device.MaxSetBytes+1)}, {Index: 1, Buffer: y}, {Index: 2, Buffer: y}}

	cases := []struct {
		name    string
		end     func(cb device.CommandBuffer)
		record  []device.Dispatch
		wantErr string // from Wait; "" for none
	}{
		{"commit", func(cb device.CommandBuffer) { cb.Commit() }, []device.Dispatch{ok}, ""},
		{"discard", func(cb device.CommandBuffer) { cb.Discard() }, []device.Dispatch{ok}, "discarded"},
		{"commit after a refused dispatch", func(cb device.CommandBuffer) { cb.Commit() }, []device.Dispatch{tooBig, ok}, "setBytes takes 1 to 4096"},
		{"discard after a refused dispatch", func(cb device.CommandBuffer) { cb.Discard() }, []device.Dispatch{tooBig}, "setBytes takes 1 to 4096"},
		{"panic while recording", func(cb device.CommandBuffer) {
			defer func() { recover() }()
			defer cb.Discard() // what a recorder's deferred cleanup does
			panic("a bug in the recorder")
		}, []device.Dispatch{ok}, "discarded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			putFloats(y.Bytes(), []float32{5})
			cb, err := d.NewCommandBuffer()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.NewCommandBuffer(); err == nil || !strings.Contains(err.Error(), "another command buffer is being recorded") {
				t.Errorf("second NewCommandBuffer while recording: %v, want a refusal", err)
			}
			if err := d.Close(); err == nil || !strings.Contains(err.Error(), "Close while a command buffer is being recorded") {
				t.Errorf("Close while recording: %v, want a refusal", err)
			}
			for _, ds := range c.record {
				cb.Dispatch(ds)
			}
			c.end(cb)
			err = cb.Wait()
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("Wait: %v, want %q", err, c.wantErr)
			}
			// Nothing ran unless the command buffer was committed whole.
			want := float32(5)
			if c.wantErr == "" {
				want = 11
			}
			if got := floats(y.Bytes())[0]; got != want {
				t.Errorf("y[0] = %v after the command buffer, want %v", got, want)
			}
			next, err := d.NewCommandBuffer()
			if err != nil {
				t.Fatalf("NewCommandBuffer after the recording ended: %v", err)
			}
			next.Discard()
			next.Discard() // idempotent
		})
	}
}

// TestDispatchLimits checks that dispatches Metal would refuse are refused
// on the emulator too, with errors that name the kernel, the argument and
// the limit.
func TestDispatchLimits(t *testing.T) {
	d := testDevice(t)
	y := newBuf(t, d, 4*32)
	one := device.Size3{X: 1, Y: 1, Z: 1}
	base := []device.Arg{{Index: 0, Bytes: affineParams(1, 0, 1)}, {Index: 1, Buffer: y}}
	cases := []struct {
		name string
		arg  device.Arg
		want string
	}{
		{"buffer index 31", device.Arg{Index: 31, Buffer: y}, "[[buffer(31)]]: the index must be 0 to 30"},
		{"constant data index 40", device.Arg{Index: 40, Bytes: []byte{1, 2, 3, 4}}, "[[buffer(40)]]: the index must be 0 to 30"},
		{"threadgroup index 31", device.Arg{Index: 31, Threadgroup: 64}, "[[threadgroup(31)]]: the index must be 0 to 30"},
		{"negative index", device.Arg{Index: -1, Buffer: y}, "the index must be 0 to 30"},
		{"threadgroup memory over 32 KiB", device.Arg{Index: 0, Threadgroup: 32<<10 + 1}, "32784 bytes of threadgroup memory (0 declared in the kernel, 32784 bound), over the GPU's 32768"},
		{"constant data over 4 KiB", device.Arg{Index: 2, Bytes: make([]byte, 4097)}, "4097 bytes of constant data; setBytes takes 1 to 4096"},
		{"empty constant data", device.Arg{Index: 2, Bytes: []byte{}}, "0 bytes of constant data"},
		{"offset at the end", device.Arg{Index: 2, Buffer: y, Offset: 128}, "offset 128 outside the 128-byte buffer"},
		{"two kinds at once", device.Arg{Index: 2, Buffer: y, Bytes: []byte{1}}, "argument 2 must set exactly one of Buffer, Bytes and Threadgroup"},
		{"no kind", device.Arg{Index: 2}, "argument 2 must set exactly one of Buffer, Bytes and Threadgroup (it sets 0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cb, err := d.NewCommandBuffer()
			if err != nil {
				t.Fatal(err)
			}
			cb.Dispatch(device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Threadgroups: one, Threads: one,
				Args: append(append([]device.Arg(nil), base...), c.arg)})
			cb.Commit()
			err = cb.Wait()
			if err == nil || !strings.Contains(err.Error(), "kernel affine_f32: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Wait: %v, want an error naming affine_f32 and saying %q", err, c.want)
			}
		})
	}
	// The last length given for an index counts, and lengths round up to
	// 16 bytes: two 16 KiB arguments fit exactly; 1 byte more does not.
	fits := device.Dispatch{Pipeline: pipe(t, d, "affine_f32"), Args: []device.Arg{
		{Index: 0, Threadgroup: 1 << 10}, {Index: 0, Threadgroup: 16 << 10}, {Index: 1, Threadgroup: 16 << 10}}}
	if err := fits.Validate(0, 0); err != nil {
		t.Errorf("32 KiB of threadgroup memory in two arguments: %v", err)
	}
	if err := fits.Validate(16, 0); err == nil || !strings.Contains(err.Error(), "(16 declared in the kernel, 32768 bound)") {
		t.Errorf("32 KiB bound plus 16 declared: %v, want a refusal counting both", err)
	}
	fits.Args[2].Threadgroup = 16<<10 - 15
	if err := fits.Validate(0, 0); err != nil {
		t.Errorf("a length rounded up to 16 KiB: %v", err)
	}
	fits.Args[2].Threadgroup = 16<<10 + 1
	if err := fits.Validate(0, 0); err == nil {
		t.Error("16 KiB + 1 byte (rounded to 16 KiB + 16) beside 16 KiB: accepted")
	}
}
