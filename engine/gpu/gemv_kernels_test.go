package gpu

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
)

func TestGEMV(t *testing.T) {
	rng := testRand(t)
	cases := []struct {
		format          string
		out, in, groups int
		rows            int
		xOff            int // bytes before x: 4 makes its rows unaligned for vector loads
	}{
		{"f32", 37, 203, 0, 3, 0},
		{"f16", 29, 96, 0, 2, 0},
		{"bf16", 45, 204, 0, 3, 0}, // multiple of 4: the vector path
		{"bf16", 45, 204, 0, 2, 4}, // x unaligned: the scalar path
		{"bf16", 13, 201, 0, 1, 0}, // odd width: the scalar path
		{"q4", 37, 320, 64, 3, 0},
		{"q4", 37, 320, 64, 2, 4},
		{"q4", 9, 96, 32, 1, 0},
		{"q8", 21, 192, 64, 2, 0},
		{"q8", 6, 64, 64, 3, 4},
		// Past one threadgroup's GEMV_TOKENS token rows: the weights are
		// read once per 8 rows, the last group partly filled.
		{"q4", 37, 320, 64, 11, 0},
		{"q8", 21, 192, 64, 8, 4},
		{"bf16", 45, 204, 0, 9, 0},
		{"f16", 29, 96, 0, 10, 0},
		{"f32", 37, 203, 0, 5, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%dx%d_rows%d_xoff%d", c.format, c.out, c.in, c.rows, c.xOff), func(t *testing.T) {
			m := randMatrix(rng, c.format, c.out, c.in, c.groups)
			x := randFloats(rng, c.rows*c.in, 1)
			got := twice(t, func(r *kernelRig) [][]byte {
				dm := r.devMatrixOf(m)
				xb := r.buf(append(make([]byte, c.xOff), f32Bytes(x)...))
				xb.off += c.xOff
				xa := actAt(xb, c.rows, c.in)
				y := actAt(r.zeros(4*c.rows*c.out), c.rows, c.out)
				r.run(func(e *encoder) { e.gemv(dm, xa, y) })
				// The last token row alone, as a sequence decoding by
				// itself: its bits must not depend on the rows beside it.
				last := c.rows - 1
				y1 := actAt(r.zeros(4*c.out), 1, c.out)
				r.run(func(e *encoder) { e.gemv(dm, xa.row(last), y1) })
				return [][]byte{f32Bytes(r.floatsAt(y.loc, c.rows*c.out)), f32Bytes(r.floatsAt(y1.loc, c.out))}
			})
			y := floats(got[0])
			if !bytes.Equal(got[0][4*(c.rows-1)*c.out:], got[1]) {
				t.Errorf("token row %d differs between the %d-row dispatch and a dispatch of its own", c.rows-1, c.rows)
			}
			worst := 0.0
			for t0 := 0; t0 < c.rows; t0++ {
				for row := 0; row < c.out; row++ {
					want, mag := reference.Dot(m, row, reference.Float64(x[t0*c.in:(t0+1)*c.in]))
					err := math.Abs(float64(y[t0*c.out+row]) - want)
					if !(err <= f32Tol*mag) {
						t.Fatalf("row %d token %d: got %v, want %v (tolerance %g)", row, t0, y[t0*c.out+row], want, f32Tol*mag)
					}
					worst = max(worst, err/mag)
				}
			}
			t.Logf("max error relative to Σ|w·x|: %.3g", worst)
		})
	}
}
