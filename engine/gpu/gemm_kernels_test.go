package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
)

// TestGEMM runs the dense prefill GEMM with each operand type on sizes that
// are not tile multiples (and one that is). Half operands are checked twice:
// against a reference that stages the same operands (f32Tol: only the f32
// sums differ) and against the unrounded float64 reference (halfTol).
func TestGEMM(t *testing.T) {
	rng := testRand(t)
	cases := []struct {
		format          string
		out, in, groups int
		rows            int
	}{
		{"f32", 37, 203, 0, 45},
		{"f16", 5, 40, 0, 70},
		{"bf16", 70, 96, 0, 33},
		{"q4", 33, 320, 64, 40},
		{"q8", 21, 192, 64, 9},
		{"q4", 64, 128, 64, 64}, // whole f32 tiles, whole half tile rows
		{"q8", 65, 160, 32, 131},
		{"f16", 19, 72, 0, 12}, // with activations past half's range
	}
	for _, ops := range operandTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s_%s_%dx%d_rows%d", ops, c.format, c.out, c.in, c.rows), func(t *testing.T) {
				m := randMatrix(rng, c.format, c.out, c.in, c.groups)
				x := randFloats(rng, c.rows*c.in, 1)
				if c.rows == 12 {
					// Staged as ±65504 (the clamp), so the half outputs
					// match the staged-operand reference only.
					x[3], x[c.in+5] = 1e5, -7e4
				}
				got := twice(t, func(r *kernelRig) [][]byte {
					dm := r.devMatrixOf(m)
					xa := actAt(r.buf(f32Bytes(x)), c.rows, c.in)
					y := actAt(r.zeros(4*c.rows*c.out), c.rows, c.out)
					r.run(func(e *encoder) { e.gemm(dm, xa, y, ops) })
					return [][]byte{f32Bytes(r.floatsAt(y.loc, c.rows*c.out))}
				})
				y := floats(got[0])
				worst, worstRounded := 0.0, 0.0
				for t0 := 0; t0 < c.rows; t0++ {
					xr := x[t0*c.in : (t0+1)*c.in]
					for row := 0; row < c.out; row++ {
						g := float64(y[t0*c.out+row])
						want, mag := reference.Dot(m, row, reference.Float64(xr))
						tol := f32Tol
						if ops == HalfOperands {
							tol = halfTol
							wr, magr := refGEMVHalf(m, xr, row)
							err := math.Abs(g - wr)
							if !(err <= f32Tol*magr) {
								t.Fatalf("row %d token %d: got %v, want %v from the staged operands (tolerance %g)", row, t0, g, wr, f32Tol*magr)
							}
							worstRounded = max(worstRounded, err/magr)
						}
						if math.IsInf(g, 0) || math.IsNaN(g) {
							t.Fatalf("row %d token %d: %v", row, t0, g)
						}
						err := math.Abs(g - want)
						if c.rows == 12 && ops == HalfOperands && (t0 == 0 || t0 == 1) {
							continue // clamped rows: checked against the staged operands above
						}
						if !(err <= tol*mag) {
							t.Fatalf("row %d token %d: got %v, want %v (tolerance %g)", row, t0, g, want, tol*mag)
						}
						worst = max(worst, err/mag)
					}
				}
				t.Logf("max error relative to Σ|w·x|: %.3g against float64; %.3g against the staged operands", worst, worstRounded)
			})
		}
	}
}
