package gpu

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// Each kernel test builds fresh random inputs (the seed is logged so a
// failure can be replayed with SUZURAN_KERNEL_SEED), runs the kernel under
// the emulator twice with different fiber orders, demands identical bits,
// and compares with a plain float64 Go reference within a stated tolerance.

// kernelRig runs recorded dispatches on a test device with one fiber order.
type kernelRig struct {
	t   *testing.T
	dev device.Device
	b   *Backend
}

func newRig(t *testing.T, seed uint64) *kernelRig {
	dev := openTestDevice(t, seed)
	return &kernelRig{t: t, dev: dev, b: &Backend{dev: dev, pipes: map[string]device.Pipeline{}}}
}

// run records with fn into one command buffer, commits and waits.
func (r *kernelRig) run(fn func(e *encoder)) {
	r.t.Helper()
	cb, err := r.dev.NewCommandBuffer()
	if err != nil {
		r.t.Fatal(err)
	}
	var c Counters
	e := &encoder{b: r.b, cb: cb, stats: &c}
	fn(e)
	if e.err != nil {
		r.t.Fatal(e.err)
	}
	cb.Commit()
	if err := cb.Wait(); err != nil {
		r.t.Fatal(err)
	}
}

// buf uploads b into a new device buffer.
func (r *kernelRig) buf(b []byte) loc {
	r.t.Helper()
	buf, err := upload(r.dev, b)
	if err != nil {
		r.t.Fatal(err)
	}
	return loc{buf: buf}
}

func (r *kernelRig) zeros(n int) loc { return r.buf(make([]byte, n)) }

func (r *kernelRig) floatsAt(l loc, n int) []float32 {
	return floats(l.buf.Bytes()[l.off : l.off+4*n])
}

// twice runs body under two fiber orders and checks that the byte slices it
// returns are identical; it returns the first run's.
func twice(t *testing.T, body func(r *kernelRig) [][]byte) [][]byte {
	t.Helper()
	a := body(newRig(t, 1))
	b := body(newRig(t, 0x9e3779b97f4a7c15))
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("output %d differs between two fiber orders: a race or a read of uninitialised memory", i)
		}
	}
	return a
}

func testRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := envSeed(); s != 0 {
		seed = s
	}
	t.Logf("random inputs from seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
}

func randFloats(rng *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return out
}

func bf16s(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], safetensors.Float32ToBF16(x))
	}
	return b
}

// randMatrix makes a random [out, in] matrix in the given kernel format.
func randMatrix(rng *rand.Rand, format string, out, in, group int) *model.Matrix {
	m := &model.Matrix{Name: "test." + format, Out: out, In: in}
	vals := randFloats(rng, out*in, 0.5)
	switch format {
	case "f32":
		m.DType, m.Data = model.F32, f32Bytes(vals)
	case "f16":
		m.DType = model.F16
		m.Data = make([]byte, 2*len(vals))
		for i, x := range vals {
			binary.LittleEndian.PutUint16(m.Data[2*i:], safetensors.Float32ToF16(x))
		}
	case "bf16":
		m.DType, m.Data = model.BF16, bf16s(vals)
	case "q4", "q8":
		bits := 4
		if format == "q8" {
			bits = 8
		}
		m.DType, m.Bits, m.GroupSize = model.Affine, bits, group
		m.Data = make([]byte, out*in*bits/8)
		for i := 0; i < len(m.Data); i += 4 {
			binary.LittleEndian.PutUint32(m.Data[i:], rng.Uint32())
		}
		groups := out * in / group
		// Scales keep dequantized weights O(1) whatever the bit width.
		m.Scales = bf16s(randFloats(rng, groups, 1/float64(int(1)<<bits)))
		m.Biases = bf16s(randFloats(rng, groups, 0.3))
	default:
		panic(format)
	}
	return m
}

// devMatrixOf uploads m for a kernel test.
func (r *kernelRig) devMatrixOf(m *model.Matrix) *devMatrix {
	r.t.Helper()
	format, err := matrixFormat(m)
	if err != nil {
		r.t.Fatal(err)
	}
	// Test buffers start aligned: rows are 8-byte aligned when their length is.
	d := &devMatrix{m: m, format: format, data: r.buf(m.Data), bytes: int64(len(m.Data)), aligned: m.RowBytes()%8 == 0}
	d.scales, d.biases = d.data, d.data
	if m.DType == model.Affine {
		d.scales, d.biases = r.buf(m.Scales), r.buf(m.Biases)
	}
	return d
}

func actAt(l loc, rows, width int) *act {
	return &act{loc: l, rows: rows, width: width, stride: width}
}

// f32Tol is the error bound of an f32 sum of n terms of total magnitude mag:
// about n·ε·mag in the worst case; the kernels sum in a tree (lanes, then
// simd_sum), so log-depth rounding keeps them far inside 1e-5·mag for the
// sizes here. 1e-5 relative to the magnitude is the tolerance of every
// f32 accumulation below.
const f32Tol = 1e-5

// sameTogetherAlone demands that the first half of got (the outputs of
// several sequences' steps recorded in one dispatch) be the bits of the
// second half (the same steps recorded one sequence at a time); what says
// which output is which.
func sameTogetherAlone(t *testing.T, got [][]byte, what string) {
	t.Helper()
	half := len(got) / 2
	for i := range half {
		if !bytes.Equal(got[i], got[half+i]) {
			t.Fatalf("output %d%s differs between the steps in one dispatch and each alone", i, what)
		}
	}
}

// checkClose compares got with want elementwise: |got−want| ≤ tol·(|want|+floor).
func checkClose(t *testing.T, what string, got []float32, want []float64, tol, floor float64) float64 {
	t.Helper()
	worst := 0.0
	for i := range want {
		err := math.Abs(float64(got[i]) - want[i])
		lim := tol * (math.Abs(want[i]) + floor)
		if !(err <= lim) {
			t.Fatalf("%s[%d]: got %v, want %v (tolerance %g)", what, i, got[i], want[i], lim)
		}
		worst = max(worst, err/(math.Abs(want[i])+floor))
	}
	t.Logf("%s: max error %.3g (relative, floor %g)", what, worst, floor)
	return worst
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}

// toHalf rounds v to the nearest half, ties to even.
func toHalf(v float32) float32 {
	return safetensors.F16ToFloat32(safetensors.Float32ToF16(v))
}

// halfWeight is what the half GEMMs stage for a dequantized weight: the
// nearest half (clamped to ±65504).
func halfWeight(v float32) float64 {
	return float64(toHalf(min(max(v, -65504), 65504)))
}

// halfActivation is what the half GEMMs multiply for an activation: the sum
// of hi = half(v) and lo = half(v − hi) (gemm_split), v clamped to ±65504.
func halfActivation(v float32) float64 {
	v = min(max(v, -65504), 65504)
	hi := toHalf(v)
	return float64(hi) + float64(toHalf(v-hi))
}

// refGEMVHalf is reference.Dot with the operands the half tiles stage: a
// statement of the kernels' rounding, not of the model.
func refGEMVHalf(m *model.Matrix, x []float32, row int) (float64, float64) {
	var s, mag float64
	for j := 0; j < m.In; j++ {
		p := halfWeight(m.At(row, j)) * halfActivation(x[j])
		s += p
		mag += math.Abs(p)
	}
	return s, mag
}

// halfTol bounds the half GEMMs against the unrounded float64 reference:
// each weight is rounded to half (≤ 2⁻¹¹ ≈ 4.9e-4 of itself; bf16 and f16
// weights are exact), each activation keeps 22 bits as hi + lo, so the sum
// is off by at most 4.9e-4·Σ|w·x| plus the f32 summation: 6e-4. Against a
// reference that stages the same operands, the products are exact in f32
// and only f32Tol remains.
const halfTol = 6e-4

var operandTypes = []Operands{HalfOperands, FloatOperands}

func TestParseOperands(t *testing.T) {
	for _, o := range operandTypes {
		got, err := ParseOperands(o.String())
		if err != nil || got != o {
			t.Fatalf("ParseOperands(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseOperands("bf16"); err == nil {
		t.Fatal("ParseOperands accepted bf16")
	}
}
