package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/model"
)

// testMatrix is a random matrix in one storage format with its exact
// dequantized values in float64, built independently of the kernels.
type testMatrix struct {
	m   model.Matrix
	ref [][]float64 // [Out][In]
}

func putU16(b []byte, i int, v uint16) { b[2*i], b[2*i+1] = byte(v), byte(v>>8) }

func toBF16(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) } // truncation: exact for the values used

// newTestMatrix builds a random [out, in] matrix. BF16 values are truncated
// floats (so bf16 is exact), F16 values are multiples of 2⁻¹⁰ in (-2, 2)
// (exact in half precision), affine codes are random with random BF16
// scales and biases.
func newTestMatrix(rng *rand.Rand, dtype model.DType, out, in, bits, groupSize int) testMatrix {
	t := testMatrix{m: model.Matrix{Name: fmt.Sprintf("test.%v", dtype), Out: out, In: in, DType: dtype}}
	t.ref = make([][]float64, out)
	for o := range t.ref {
		t.ref[o] = make([]float64, in)
	}
	switch dtype {
	case model.F32:
		t.m.Data = make([]byte, 4*out*in)
		vals := unsafe.Slice((*float32)(unsafe.Pointer(&t.m.Data[0])), out*in)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64())
			t.ref[i/in][i%in] = float64(vals[i])
		}
	case model.BF16:
		t.m.Data = make([]byte, 2*out*in)
		for i := range out * in {
			u := toBF16(float32(rng.NormFloat64()))
			putU16(t.m.Data, i, u)
			t.ref[i/in][i%in] = float64(math.Float32frombits(uint32(u) << 16))
		}
	case model.F16:
		t.m.Data = make([]byte, 2*out*in)
		for i := range out * in {
			n := rng.IntN(4095) - 2047 // value n/1024
			v := float64(n) / 1024
			putU16(t.m.Data, i, halfBits(v))
			t.ref[i/in][i%in] = v
		}
	case model.Affine:
		t.m.Bits, t.m.GroupSize = bits, groupSize
		per := 32 / bits
		groups := in / groupSize
		t.m.Data = make([]byte, 4*out*in/per)
		t.m.Scales = make([]byte, 2*out*groups)
		t.m.Biases = make([]byte, 2*out*groups)
		words := unsafe.Slice((*uint32)(unsafe.Pointer(&t.m.Data[0])), out*in/per)
		for o := range out {
			for g := range groups {
				s := toBF16(float32(rng.NormFloat64() * 0.05))
				b := toBF16(float32(rng.NormFloat64() * 0.2))
				putU16(t.m.Scales, o*groups+g, s)
				putU16(t.m.Biases, o*groups+g, b)
				sf := float64(math.Float32frombits(uint32(s) << 16))
				bf := float64(math.Float32frombits(uint32(b) << 16))
				for j := g * groupSize; j < (g+1)*groupSize; j++ {
					q := uint32(rng.IntN(1 << bits))
					words[(o*in+j)/per] |= q << (bits * (j % per))
					t.ref[o][j] = sf*float64(q) + bf
				}
			}
		}
	}
	return t
}

// halfBits encodes v, a multiple of 2⁻¹⁰ with |v| < 2, as an IEEE half.
func halfBits(v float64) uint16 {
	var sign uint16
	if v < 0 {
		sign, v = 0x8000, -v
	}
	if v == 0 {
		return sign
	}
	frac, exp := math.Frexp(v) // v = frac·2^exp, frac in [0.5, 1)
	e := exp - 1 + 15          // biased exponent of 1.xxx·2^(exp-1)
	if e <= 0 {
		return sign | uint16(math.Round(v*(1<<24)))
	}
	mant := uint16(math.Round((frac*2 - 1) * 1024))
	return sign | uint16(e)<<10 | mant
}

func randomVector(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// TestMatMul checks both product loops in every storage format against a
// float64 product of the exact dequantized values, on sizes that are not
// multiples of the weight tile, the thread split or the unrolling; on each
// instruction set this machine runs (the exact path: the f32 assembly for
// vnni and avx2, the Go loops for generic).
func TestMatMul(t *testing.T) {
	for _, isa := range ISAs() {
		k, err := kernelsFor(isa)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(string(isa), func(t *testing.T) { testMatMul(t, &Backend{pool: pool{threads: 3}, kern: k}) })
	}
}

func testMatMul(t *testing.T, b *Backend) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		dtype       model.DType
		bits, group int
		out, in     int
	}{
		{model.F32, 0, 0, 37, 131},
		{model.BF16, 0, 0, 37, 131},
		{model.F16, 0, 0, 29, 70},
		{model.Affine, 4, 64, 37, 192},
		{model.Affine, 4, 32, 13, 96},
		{model.Affine, 8, 64, 37, 192},
		{model.Affine, 8, 32, 6, 160},
		{model.Affine, 4, 64, 130, 2048},
		{model.Affine, 4, 32, 200, 96},
		{model.F32, 0, 0, 9, 2053},
	}
	for _, c := range cases {
		tm := newTestMatrix(rng, c.dtype, c.out, c.in, c.bits, c.group)
		if err := checkMatrix(&tm.m); err != nil {
			t.Fatal(err)
		}
		for _, rows := range []int{1, 2, 3, 4, 5, 9, 12, 17, 33} {
			name := fmt.Sprintf("%v%d-g%d-%dx%d-rows%d", c.dtype, c.bits, c.group, c.out, c.in, rows)
			x := randomVector(rng, rows*c.in)
			y := make([]float32, rows*c.out)
			b.matMul(y, x, rows, &tm.m)
			worst := 0.0
			for r := range rows {
				for o := range c.out {
					var want, mag float64
					for i, w := range tm.ref[o] {
						want += w * float64(x[r*c.in+i])
						mag += math.Abs(w * float64(x[r*c.in+i]))
					}
					// f32 accumulation: each partial sum rounds with relative
					// error 2⁻²⁴, so the error is bounded by about
					// In·2⁻²⁴·Σ|w·x|; 1e-5·Σ|w·x| covers In up to ~160 with
					// room and is far below any real indexing mistake, which
					// is of the order of Σ|w·x| itself.
					err := math.Abs(float64(y[r*c.out+o])-want) / mag
					worst = max(worst, err)
				}
			}
			tol := 1e-5
			if c.in > 1000 {
				tol = 5e-5
			}
			if worst > tol {
				t.Errorf("%s: worst error %.3g of Σ|w·x|, tolerance %g", name, worst, tol)
			}
		}
	}
}

// TestDequantRow checks the row dequantization every block uses for
// embeddings and prefill tiles exactly: it is pure arithmetic on exact
// values.
func TestDequantRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		dtype       model.DType
		bits, group int
	}{{model.F32, 0, 0}, {model.BF16, 0, 0}, {model.F16, 0, 0}, {model.Affine, 4, 64}, {model.Affine, 8, 32}} {
		tm := newTestMatrix(rng, c.dtype, 5, 128, c.bits, c.group)
		row := make([]float32, 128)
		for o := range 5 {
			dequantRow(&tm.m, o, row)
			for i, v := range row {
				// The affine reference rounds s·q+b once in float64; the
				// kernel rounds the product and the sum in float32.
				if d := math.Abs(float64(v) - tm.ref[o][i]); d > 1e-6*(1+math.Abs(tm.ref[o][i])) {
					t.Fatalf("%v%d row %d col %d: got %v, want %v", c.dtype, c.bits, o, i, v, tm.ref[o][i])
				}
			}
		}
	}
}

// TestF16 checks the half-precision conversion on every normal, subnormal
// and special value class.
func TestF16(t *testing.T) {
	for h := range 1 << 16 {
		got := f16(uint16(h))
		exp := (h >> 10) & 0x1f
		mant := float64(h & 0x3ff)
		var want float64
		switch exp {
		case 0:
			want = math.Ldexp(mant, -24)
		case 0x1f:
			if mant != 0 {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("%#04x: got %v, want NaN", h, got)
				}
				continue
			}
			want = math.Inf(1)
		default:
			want = math.Ldexp(1+mant/1024, exp-15)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(got) != want {
			t.Fatalf("%#04x: got %v, want %v", h, got, want)
		}
	}
}

func TestCheckMatrixRejects(t *testing.T) {
	bad := []model.Matrix{
		{Name: "short", Out: 2, In: 4, DType: model.BF16, Data: make([]byte, 15)},
		{Name: "bits", Out: 1, In: 64, DType: model.Affine, Bits: 3, GroupSize: 64, Data: make([]byte, 24)},
		{Name: "group", Out: 1, In: 96, DType: model.Affine, Bits: 4, GroupSize: 64, Data: make([]byte, 48), Scales: make([]byte, 2), Biases: make([]byte, 2)},
		{Name: "scales", Out: 1, In: 64, DType: model.Affine, Bits: 4, GroupSize: 64, Data: make([]byte, 32), Scales: make([]byte, 4), Biases: make([]byte, 2)},
	}
	for _, m := range bad {
		if err := checkMatrix(&m); err == nil {
			t.Errorf("%s: accepted a malformed matrix", m.Name)
		}
	}
}

// BenchmarkMatMul measures the two product loops on a full-size DeltaNet
// input projection (4-bit, [8192, 2048]) for one token and for a 512-token
// prefill chunk, on one thread, in multiply-adds per second.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	tm := newTestMatrix(rng, model.Affine, 8192, 2048, 4, 64)
	k, _ := kernelsFor(ISAAuto)
	be := &Backend{pool: pool{threads: 1}, kern: k}
	for _, rows := range []int{1, 64, 128, 256, 512} {
		b.Run(fmt.Sprintf("rows%d", rows), func(b *testing.B) {
			x := randomVector(rng, rows*2048)
			y := make([]float32, rows*8192)
			for range b.N {
				be.matMul(y, x, rows, &tm.m)
			}
			b.ReportMetric(float64(b.N)*float64(rows)*8192*2048/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
