package gpu

import (
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
)

// TestVisionRowKernels: LayerNorm with bias (aliased output too) and the
// bias add with each activation, against the float64 reference, on rows
// of an awkward width.
func TestVisionRowKernels(t *testing.T) {
	rng := testRand(t)
	const rows, width = 5, 333
	const eps = 1e-6
	x := randFloats(rng, rows*width, 3)
	w := randFloats(rng, width, 2)
	b := randFloats(rng, width, 1)
	got := twice(t, func(r *kernelRig) [][]byte {
		xa := actAt(r.buf(f32Bytes(x)), rows, width)
		wl, bl := r.buf(f32Bytes(w)), r.buf(f32Bytes(b))
		ln := actAt(r.zeros(4*rows*width), rows, width)
		alias := actAt(r.buf(f32Bytes(x)), rows, width)
		acts := []*act{actAt(r.buf(f32Bytes(x)), rows, width), actAt(r.buf(f32Bytes(x)), rows, width), actAt(r.buf(f32Bytes(x)), rows, width)}
		r.run(func(e *encoder) {
			e.layerNormBias(xa, wl, bl, eps, ln)
			e.layerNormBias(alias, wl, bl, eps, alias)
			e.biasAct(actNone, acts[0], bl)
			e.biasAct(actGELUTanh, acts[1], bl)
			e.biasAct(actGELUErf, acts[2], bl)
		})
		out := [][]byte{f32Bytes(r.floatsAt(ln.loc, rows*width)), f32Bytes(r.floatsAt(alias.loc, rows*width))}
		for _, a := range acts {
			out = append(out, f32Bytes(r.floatsAt(a.loc, rows*width)))
		}
		return out
	})
	var wantLN, wantAdd, wantTanh, wantErf []float64
	for i := range rows {
		wantLN = append(wantLN, reference.LayerNorm(reference.Float64(x[i*width:(i+1)*width]), w, b, eps)...)
		for j := range width {
			v := float64(x[i*width+j] + b[j]) // the sum in f32, as the kernel forms it
			wantAdd = append(wantAdd, v)
			wantTanh = append(wantTanh, reference.GELUTanh(v))
			wantErf = append(wantErf, reference.GELU(v))
		}
	}
	// A mean, a variance and a rsqrt in f32 over 333 values, times w up to
	// 2: the outputs are of order 1 and their error an f32 rounding of that
	// order whatever the value (the mean's subtraction), so within 1e-5 of
	// |value| + 1. The activations: f32 tanh and exp, and erf's
	// approximation (1.5e-7 absolute), of inputs up to 4: where GELU is
	// near 0 (x ≈ −3, 1 + tanh cancels) the error is absolute, so the same
	// 1e-5 of |value| + 1.
	checkClose(t, "layernorm_bias", floats(got[0]), wantLN, 1e-5, 1)
	checkClose(t, "layernorm_bias in place", floats(got[1]), wantLN, 1e-5, 1)
	checkClose(t, "add_bias", floats(got[2]), wantAdd, 0, 0)
	checkClose(t, "bias_gelu_tanh", floats(got[3]), wantTanh, 1e-5, 1)
	checkClose(t, "bias_gelu_erf", floats(got[4]), wantErf, 1e-5, 1)
}

// TestVisionRopeAndAttention: the table rope on the q and k heads of qkv
// rows, then bidirectional attention within segments of rows, against the
// reference's Rotate and Attend, for a head width over 32 and not a
// multiple of it and two segments.
func TestVisionRopeAndAttention(t *testing.T) {
	rng := testRand(t)
	const heads, D, segment, rows = 3, 72, 100, 200
	const W = heads * D
	qkv := randFloats(rng, rows*3*W, 1)
	angles := make([][]float64, rows)
	var cosT, sinT []float32
	for i := range rows {
		for range D / 2 {
			a := float64(float32(rng.Float64() * 20))
			angles[i] = append(angles[i], a)
			cosT = append(cosT, float32(math.Cos(a)))
			sinT = append(sinT, float32(math.Sin(a)))
		}
	}
	got := twice(t, func(r *kernelRig) [][]byte {
		ql := r.buf(f32Bytes(qkv))
		cl, sl := r.buf(f32Bytes(cosT)), r.buf(f32Bytes(sinT))
		out := r.zeros(4 * rows * W)
		r.run(func(e *encoder) {
			e.ropeTable(ql, ropeShape{rows: rows, heads: 2 * heads, headDim: D, stride: 3 * W}, cl, sl) // q and k: the first 2·heads heads
			e.visionAttention(ql, rows, heads, D, segment, out)
		})
		return [][]byte{f32Bytes(r.floatsAt(ql, rows*3*W)), f32Bytes(r.floatsAt(out, rows*W))}
	})
	var wantQKV, wantOut []float64
	rot := make([][]float64, rows)
	for i := range rows {
		row := reference.Float64(qkv[i*3*W : (i+1)*3*W])
		for h := range 2 * heads {
			copy(row[h*D:(h+1)*D], reference.Rotate(row[h*D:(h+1)*D], angles[i]))
		}
		rot[i] = row
		wantQKV = append(wantQKV, row...)
	}
	for i := range rows {
		f0 := i / segment * segment
		for h := range heads {
			var keys, values [][]float64
			for j := f0; j < f0+segment; j++ {
				keys = append(keys, rot[j][W+h*D:W+(h+1)*D])
				values = append(values, rot[j][2*W+h*D:2*W+(h+1)*D])
			}
			wantOut = append(wantOut, reference.Attend(rot[i][h*D:(h+1)*D], keys, values)...)
		}
	}
	// The rotation: two f32 products and a sum of values below 1, with
	// f32 cos and sin: 1e-6 absolute (floor 1). Attention: f32 dot
	// products of 72 and an f32 softmax over 7: 1e-5 relative, floor 0.1.
	checkClose(t, "rope_table", floats(got[0]), wantQKV, 1e-6, 1)
	checkClose(t, "vision_attention", floats(got[1]), wantOut, 1e-5, 0.1)
}
