package cuda

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// testSources exercise the shim's pieces one by one: threadgroup memory and
// barriers, SIMD-group reductions over a partial SIMD group, simdgroup
// matrices, atomics and setBytes constants.
var testSources = map[string]string{"t.metal": `
#include <metal_stdlib>
using namespace metal;

struct P { uint n; float add; };

kernel void add_const(device float* x [[buffer(0)]], constant P& p [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    if (i < p.n) x[i] += p.add;
}

// Reverse each block of 64 through threadgroup memory.
kernel void reverse64(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      uint tid [[thread_index_in_threadgroup]], uint2 tg [[threadgroup_position_in_grid]]) {
    threadgroup float t[64];
    t[tid] = x[tg.x * 64 + tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tg.x * 64 + tid] = t[63 - tid];
}

// Sum and max of each SIMD group (the last one partial: 40 threads).
kernel void simd_red(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                     uint tid [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                     uint lane [[thread_index_in_simdgroup]]) {
    float v = x[tid];
    float s = simd_sum(v);
    float m = simd_max(v);
    if (lane == 0) { y[2 * sg] = s; y[2 * sg + 1] = m; }
}

// C = A·B for 8×8 tiles through simdgroup matrices, A in half.
kernel void mm8(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]], device float* c [[buffer(2)]],
                uint tid [[thread_index_in_threadgroup]]) {
    threadgroup half as[64];
    threadgroup float bs[64];
    threadgroup float cs[64];
    as[tid] = half(a[tid]);
    as[tid + 32] = half(a[tid + 32]);
    bs[tid] = b[tid];
    bs[tid + 32] = b[tid + 32];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_half8x8 ma;
    simdgroup_float8x8 mb;
    simdgroup_float8x8 mc = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_load(ma, as, 8);
    simdgroup_load(mb, bs, 8, ulong2(0, 0), true);
    simdgroup_multiply_accumulate(mc, ma, mb, mc);
    simdgroup_store(mc, cs, 8);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    c[tid] = cs[tid];
    c[tid + 32] = cs[tid + 32];
}

kernel void count(device atomic_uint* n [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    atomic_fetch_add_explicit(n, 1u, memory_order_relaxed);
}
`}

func openTest(t *testing.T) *Device {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no CUDA device can be opened here, so the cuda device is not exercised: %v", err)
	}
	d, err := New(Options{Sources: testSources, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func putF32s(b []byte, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

func run(t *testing.T, d *Device, ds ...device.Dispatch) {
	t.Helper()
	cb, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ds {
		cb.Dispatch(x)
		cb.Barrier()
	}
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
}

func pipe(t *testing.T, d *Device, name string) device.Pipeline {
	t.Helper()
	p, err := d.Pipeline(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShimOnGPU runs each test kernel once against a Go reference. Exact
// results are expected: every value is a small integer or half-exact, and
// sums of them are exact in f32.
func TestShimOnGPU(t *testing.T) {
	d := openTest(t)
	t.Log(d.Name())
	x, _ := d.NewBuffer(4 * 128)
	y, _ := d.NewBuffer(4 * 128)
	in := make([]float32, 128)
	for i := range in {
		in[i] = float32((i*7)%23) - 11
	}
	putF32s(x.Bytes(), in)

	p := make([]byte, 8)
	binary.LittleEndian.PutUint32(p, 100)
	binary.LittleEndian.PutUint32(p[4:], math.Float32bits(2))
	run(t, d, device.Dispatch{Pipeline: pipe(t, d, "add_const"), Threadgroups: device.Size3{X: 2, Y: 1, Z: 1}, Threads: device.Size3{X: 64, Y: 1, Z: 1},
		Args: []device.Arg{{Index: 0, Buffer: x}, {Index: 1, Bytes: p}}})
	got := f32s(x.Bytes())
	for i := range in {
		want := in[i]
		if i < 100 {
			want += 2
		}
		if got[i] != want {
			t.Fatalf("add_const: x[%d] = %v, want %v", i, got[i], want)
		}
		in[i] = want
	}

	run(t, d, device.Dispatch{Pipeline: pipe(t, d, "reverse64"), Threadgroups: device.Size3{X: 2}, Threads: device.Size3{X: 64},
		Args: []device.Arg{{Index: 0, Buffer: x}, {Index: 1, Buffer: y}}})
	got = f32s(y.Bytes())
	for i := range got {
		if want := in[i/64*64+63-i%64]; got[i] != want {
			t.Fatalf("reverse64: y[%d] = %v, want %v", i, got[i], want)
		}
	}

	run(t, d, device.Dispatch{Pipeline: pipe(t, d, "simd_red"), Threadgroups: device.Size3{X: 1}, Threads: device.Size3{X: 72},
		Args: []device.Arg{{Index: 0, Buffer: x}, {Index: 1, Buffer: y}}})
	got = f32s(y.Bytes())
	for sg := 0; sg < 3; sg++ {
		var s float32
		m := float32(-1e30)
		for l := sg * 32; l < min(72, sg*32+32); l++ {
			s += in[l]
			m = max(m, in[l])
		}
		if got[2*sg] != s || got[2*sg+1] != m {
			t.Errorf("simd_red: SIMD group %d: sum %v max %v, want %v %v", sg, got[2*sg], got[2*sg+1], s, m)
		}
	}

	a, _ := d.NewBuffer(4 * 64)
	b, _ := d.NewBuffer(4 * 64)
	c, _ := d.NewBuffer(4 * 64)
	av, bv := make([]float32, 64), make([]float32, 64)
	for i := range av {
		av[i] = float32(i%5) - 2
		bv[i] = float32(i%7) - 3
	}
	putF32s(a.Bytes(), av)
	putF32s(b.Bytes(), bv)
	run(t, d, device.Dispatch{Pipeline: pipe(t, d, "mm8"), Threadgroups: device.Size3{X: 1}, Threads: device.Size3{X: 32},
		Args: []device.Arg{{Index: 0, Buffer: a}, {Index: 1, Buffer: b}, {Index: 2, Buffer: c}}})
	got = f32s(c.Bytes())
	for i := 0; i < 8; i++ {
		for j := 0; j < 8; j++ {
			want := float32(1)
			for k := 0; k < 8; k++ {
				want += av[i*8+k] * bv[j*8+k] // b loaded transposed
			}
			if got[i*8+j] != want {
				t.Fatalf("mm8: c[%d][%d] = %v, want %v", i, j, got[i*8+j], want)
			}
		}
	}

	n, _ := d.NewBuffer(4)
	run(t, d, device.Dispatch{Pipeline: pipe(t, d, "count"), Threadgroups: device.Size3{X: 1000}, Threads: device.Size3{X: 256},
		Args: []device.Arg{{Index: 0, Buffer: n}}})
	if got := binary.LittleEndian.Uint32(n.Bytes()); got != 256000 {
		t.Errorf("count: %d, want 256000", got)
	}
}

// TestDeviceRules checks the device interface's rules on the GPU: one
// recording at a time, refused dispatches come back from Wait.
func TestDeviceRules(t *testing.T) {
	d := openTest(t)
	cb, err := d.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewCommandBuffer(); err == nil {
		t.Error("a second NewCommandBuffer while recording succeeded")
	}
	cb.Dispatch(device.Dispatch{Pipeline: pipe(t, d, "add_const"), Threadgroups: device.Size3{X: 1}, Threads: device.Size3{X: 2048}})
	cb.Commit()
	if err := cb.Wait(); err == nil || !strings.Contains(err.Error(), "threads per threadgroup") {
		t.Errorf("2048 threads: Wait = %v, want the thread limit", err)
	}
	bw, err := d.CopyBandwidth(256<<20, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device copy: %.0f GB/s (read + write)", bw/1e9)
	if bw <= 0 {
		t.Errorf("copy bandwidth %v", bw)
	}
}
