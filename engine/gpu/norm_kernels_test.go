package gpu

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
)

func TestNorms(t *testing.T) {
	rng := testRand(t)
	const rows, width = 5, 333
	const eps = 1e-6
	x := randFloats(rng, rows*width, 3)
	d := randFloats(rng, rows*width, 1)
	z := randFloats(rng, rows*width, 4)
	w := randFloats(rng, width, 2)
	got := twice(t, func(r *kernelRig) [][]byte {
		xa := actAt(r.buf(f32Bytes(x)), rows, width)
		res := actAt(r.buf(f32Bytes(x)), rows, width)
		da := actAt(r.buf(f32Bytes(d)), rows, width)
		wl := r.buf(f32Bytes(w))
		y1 := actAt(r.zeros(4*rows*width), rows, width)
		y2 := actAt(r.zeros(4*rows*width), rows, width)
		y3 := r.zeros(4 * rows * width)
		zl := r.buf(f32Bytes(z))
		r.run(func(e *encoder) {
			e.rmsnorm(xa, wl, eps, y1)
			e.addRMSNorm(res, da, wl, eps, y2)
			e.gatedNorm(gatedNormBufs{o: xa.loc, z: zl, w: wl, y: y3}, rows, width, eps)
		})
		return [][]byte{f32Bytes(r.floatsAt(y1.loc, rows*width)), f32Bytes(r.floatsAt(y2.loc, rows*width)),
			f32Bytes(r.floatsAt(res.loc, rows*width)), f32Bytes(r.floatsAt(y3, rows*width))}
	})
	var want1, want2, wantRes, want3 []float64
	for i := 0; i < rows; i++ {
		xr := reference.Float64(x[i*width : (i+1)*width])
		sum := make([]float64, width) // residual + delta, added in f32 as the kernel stores it
		for j := range sum {
			sum[j] = float64(x[i*width+j] + d[i*width+j])
		}
		want1 = append(want1, reference.RMSNorm(xr, w, eps)...)
		wantRes = append(wantRes, sum...)
		want2 = append(want2, reference.RMSNorm(sum, w, eps)...)
		want3 = append(want3, reference.GatedRMSNorm(xr, reference.Float64(z[i*width:(i+1)*width]), w, eps)...)
	}
	// Elementwise results of an f32 sum of squares, a rsqrt and two or three
	// products: a few ulps, within 1e-5 relative (floor 1e-3 for values near 0).
	checkClose(t, "rmsnorm", floats(got[0]), want1, 1e-5, 1e-3)
	checkClose(t, "add_rmsnorm", floats(got[1]), want2, 1e-5, 1e-3)
	checkClose(t, "add_rmsnorm residual", floats(got[2]), wantRes, 0, 0)
	checkClose(t, "gated_rmsnorm_silu", floats(got[3]), want3, 1e-5, 1e-3)
}
