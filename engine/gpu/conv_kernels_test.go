package gpu

import (
	"fmt"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
)

func TestConv(t *testing.T) {
	rng := testRand(t)
	const channels, taps = 301, 4
	for _, rows := range []int{1, 2, 7} {
		t.Run(fmt.Sprint("rows", rows), func(t *testing.T) {
			x := randFloats(rng, rows*channels, 2)
			w := randFloats(rng, channels*taps, 1)
			st := randFloats(rng, (taps-1)*channels, 2)
			got := twice(t, func(r *kernelRig) [][]byte {
				xa := actAt(r.buf(f32Bytes(x)), rows, channels)
				stl := r.buf(f32Bytes(st))
				out := actAt(r.zeros(4*rows*channels), rows, channels)
				r.run(func(e *encoder) { e.conv(xa, r.buf(f32Bytes(w)), stl, taps, out) })
				return [][]byte{f32Bytes(r.floatsAt(out.loc, rows*channels)), f32Bytes(r.floatsAt(stl, (taps-1)*channels))}
			})
			want, wantState := convWant(w, taps, st, x, channels)
			// Four f32 products of O(1) terms and a SiLU; the sum may cancel
			// to near zero, so the bound is 1e-5 relative with a floor of 1.
			checkClose(t, "conv", floats(got[0]), want, 1e-5, 1)
			checkClose(t, "conv state", floats(got[1]), wantState, 0, 0)
		})
	}
}

// convWant is reference.Conv over the kernels' layouts: weights [C, taps],
// the conv state and the input as rows of width C. It returns the output
// and the state after, flattened.
func convWant(w []float32, taps int, state, x []float32, width int) ([]float64, []float64) {
	conv := make([][]float32, width)
	for ch := range conv {
		conv[ch] = w[ch*taps : (ch+1)*taps]
	}
	rows := func(v []float32) [][]float64 {
		var out [][]float64
		for i := 0; i < len(v); i += width {
			out = append(out, reference.Float64(v[i:i+width]))
		}
		return out
	}
	st := rows(state)
	out := reference.Conv(conv, &st, rows(x))
	return slices.Concat(out...), slices.Concat(st...)
}
