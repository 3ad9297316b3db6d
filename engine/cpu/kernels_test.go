package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

// withKernels runs f once per instruction set this machine runs, the best
// first and the Go loops last, with that level's kernels.
func withKernels(t *testing.T, f func(t *testing.T, k kernelSet)) {
	for _, k := range machineKernels() {
		t.Run(string(k.isa), func(t *testing.T) { f(t, k) })
	}
}

// TestDeltaStep runs several tokens of the scan for one head against a
// float64 scan written with S untransposed, exactly as engine/model/MODEL.md states it.
// Sizes: the full model's 128×128, the alternative checkpoint's 24×40,
// and one with dk not a multiple of 8 (Go path only). Tolerance: the f32
// scan rounds each of ~dk products per output; 1e-5 of the output scale
// is well above that and far below any indexing mistake.
func TestDeltaStep(t *testing.T) {
	withKernels(t, func(t *testing.T, ks kernelSet) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, size := range []struct{ dk, dv int }{{128, 128}, {24, 40}, {20, 12}} {
			dk, dv := size.dk, size.dv
			S := make([]float32, dk*dv) // [dv, dk]
			ref := make([]float64, dk*dv)
			for step := range 6 {
				k := randomVector(rng, dk)
				q := randomVector(rng, dk)
				v := randomVector(rng, dv)
				l2Normalize(k, 1e-6, 1)
				l2Normalize(q, 1e-6, 1/math.Sqrt(float64(dk)))
				decay := float32(0.5 + 0.5*rng.Float64())
				beta := float32(rng.Float64())
				o := make([]float32, dv)
				deltaStepWith(&ks.f32, &deltaStep{S: S, k: k, q: q, v: v, o: o, decay: decay, beta: beta})

				// float64 reference, S[i][d] at ref[i*dv+d].
				want := reference.DeltaRule(ref, reference.Float64(k), reference.Float64(q), reference.Float64(v), float64(decay), float64(beta))
				var scale float64
				for _, w := range want {
					scale = max(scale, math.Abs(w))
				}
				for d := range dv {
					if e := math.Abs(float64(o[d])-want[d]) / scale; e > 1e-5 {
						t.Fatalf("%dx%d step %d: o[%d] = %v, want %v", dk, dv, step, d, o[d], want[d])
					}
					for i := range dk {
						if e := math.Abs(float64(S[d*dk+i]) - ref[i*dv+d]); e > 1e-5 {
							t.Fatalf("%dx%d step %d: S[%d][%d] = %v, want %v", dk, dv, step, i, d, S[d*dk+i], ref[i*dv+d])
						}
					}
				}
			}
		}
	})
}

// TestAxpyDot checks the vector helpers on lengths around the SIMD widths
// against float64 sums (tolerance: n·2⁻²⁴ of Σ|a·b|, rounded up to 1e-5).
func TestAxpyDot(t *testing.T) {
	withKernels(t, func(t *testing.T, k kernelSet) {
		rng := rand.New(rand.NewPCG(9, 10))
		for _, n := range []int{1, 7, 8, 15, 16, 17, 33, 256, 259} {
			a, b := randomVector(rng, n), randomVector(rng, n)
			var want, mag float64
			for i := range a {
				want += float64(a[i]) * float64(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
			}
			if e := math.Abs(float64(dotWith(&k.f32, a, b))-want) / mag; e > 1e-5 {
				t.Errorf("dot n=%d: error %.3g of Σ|a·b|", n, e)
			}
			// axpy rounds one product and one sum per element (two f32
			// roundings, 1.2e-7 relative); 1e-6 of 1+|w| bounds that.
			y := append([]float32(nil), b...)
			axpyWith(&k.f32, y, a, 0.75)
			for i := range y {
				if w := float64(b[i]) + 0.75*float64(a[i]); math.Abs(float64(y[i])-w) > 1e-6*(1+math.Abs(w)) {
					t.Fatalf("axpy n=%d: y[%d] = %v, want %v", n, i, y[i], w)
				}
			}
		}
	})
}

// TestRotary checks partial NeoX RoPE against the rotation written out:
// pairs (i, i+rot/2) for i < rot/2 turn by pos·θ^(-2i/rot), the dims past
// rot stay as they are, and the rotation keeps the pair's length.
func TestRotary(t *testing.T) {
	cfg := &model.Config{RotaryDim: 16, RopeTheta: 1e7}
	rng := rand.New(rand.NewPCG(11, 12))
	const pos0, T, D = 1000, 3, 24
	r := newRotary(cfg, [][3]int{model.TextPosition(pos0), model.TextPosition(pos0 + 1), model.TextPosition(pos0 + 2)})
	for tok := range T {
		x := randomVector(rng, D)
		orig := append([]float32(nil), x...)
		r.apply(x, tok)
		want := reference.Rotate(reference.Float64(orig), reference.RopeAngles(pos0+tok, 16, 1e7))
		for i := range 8 {
			// 2e-4 absolute: the angle is rounded to f32 as transformers
			// does (1000 rad · 2⁻²⁴ ≈ 6e-5 rad, twice: frequency and product).
			if math.Abs(float64(x[i])-want[i]) > 2e-4 || math.Abs(float64(x[i+8])-want[i+8]) > 2e-4 {
				t.Fatalf("token %d pair %d: got (%v, %v), want (%v, %v)", tok, i, x[i], x[i+8], want[i], want[i+8])
			}
		}
		for i := 16; i < D; i++ {
			if x[i] != orig[i] {
				t.Fatalf("dim %d past the rotary dims changed", i)
			}
		}
	}
}

func TestTopKSoftmax(t *testing.T) {
	x := []float32{0.1, 3, -1, 3, 2, 7, 0.5, 2}
	idx := make([]int, 4)
	topKIndices(idx, x)
	if want := []int{5, 1, 3, 4}; idx[0] != want[0] || idx[1] != want[1] || idx[2] != want[2] || idx[3] != want[3] {
		t.Fatalf("top-4 of %v: %v, want %v (ties: lower index first)", x, idx, want)
	}
	// Softmax of eight values: f32 exp and one division per entry, each
	// within a few ulp (< 1e-7 for probabilities ≤ 1); their sum rounds
	// eight more times, hence 1e-6 for it.
	p := make([]float32, len(x))
	softmax(p, x)
	var sum float64
	want := reference.Softmax(reference.Float64(x))
	for i, v := range p {
		sum += float64(v)
		if math.Abs(float64(v)-want[i]) > 1e-7 {
			t.Fatalf("softmax[%d] = %v, want %v", i, v, want[i])
		}
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Fatalf("softmax sums to %v", sum)
	}
}

// TestRMSNorm checks x·rsqrt(mean(x²)+eps)·w against float64. Tolerance
// 1e-6 of 1+|y|: the f32 path rounds a 37-term sum of squares, a square
// root and two products, a few 1e-7 at most, while a wrong eps, a missing
// weight or a mean over the wrong length is off by far more.
func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	x, w := randomVector(rng, 37), randomVector(rng, 37)
	y := make([]float32, 37)
	rmsNorm(y, x, w, 1e-6)
	for i, want := range reference.RMSNorm(reference.Float64(x), w, 1e-6) {
		if math.Abs(float64(y[i])-want) > 1e-6*(1+math.Abs(want)) {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}
