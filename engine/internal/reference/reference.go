// Package reference is the model's math in float64, written from
// engine/model/MODEL.md, for tests to hold the backends and their kernels
// to. It has two layers:
//
//   - the steps (this file): a norm, the rotation, the delta rule, one head
//     of gated attention, each the plain statement of one line of MODEL.md;
//   - the model composed of them (model.go), one small function per block
//     as mlx-lm's qwen3_next.py lays it out: Conv, GatedDeltaNet, Attention,
//     Route, Expert, SparseMoE, DecoderLayer, Head and Forward over
//     model.Weights, and a model.Backend over those blocks (backend.go), so
//     that a fixture test runs it as it runs the CPU and GPU backends.
//
// No fusion, no layout tricks, no f32 rounding of activations, so that it
// can be checked by reading it against MODEL.md, and every test compares
// with the same statement instead of its own copy.
//
// Vectors are []float64, a block of rows [][]float64; weights come as the
// f32 values a checkpoint holds. Only tests import this package.
package reference

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Float64 widens an f32 vector.
func Float64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Linear is y = x·Wᵀ for one row x: y[r] = Σ_j W[r,j]·x[j].
func Linear(w *model.Matrix, x []float64) []float64 {
	return LinearRows(w, [][]float64{x})[0]
}

// LinearRows is Linear of each row of x, reading each row of W once.
func LinearRows(w *model.Matrix, x [][]float64) [][]float64 {
	y := make([][]float64, len(x))
	for t := range y {
		y[t] = make([]float64, w.Out)
	}
	row := make([]float32, w.In)
	for r := range w.Out {
		w.Row(r, row)
		for t, xt := range x {
			var sum float64
			for j, v := range row {
				sum += float64(v) * xt[j]
			}
			y[t][r] = sum
		}
	}
	return y
}

// Dot is row r of W times x, Σ_j W[r,j]·x[j], with Σ_j |W[r,j]·x[j]|: the
// magnitude that bounds an f32 sum's rounding.
func Dot(w *model.Matrix, r int, x []float64) (sum, magnitude float64) {
	for j := range w.In {
		p := float64(w.At(r, j)) * x[j]
		sum += p
		magnitude += math.Abs(p)
	}
	return sum, magnitude
}

// RMSScale is rsqrt(mean(x²)+eps).
func RMSScale(x []float64, eps float64) float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	return 1 / math.Sqrt(ss/float64(len(x))+eps)
}

// RMSNorm is x·rsqrt(mean(x²)+eps)·w, with w the effective multiplier
// (1+w for the hub's zero-centred norms, plain w for the DeltaNet output
// norm).
func RMSNorm(x []float64, w []float32, eps float64) []float64 {
	r := RMSScale(x, eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * r * float64(w[i])
	}
	return out
}

// L2Normalize is x·rsqrt(Σx²+eps)·scale (DeltaNet's q and k: eps 1e-6,
// scale 1/sqrt(Dk) for q, 1 for k).
func L2Normalize(x []float64, eps, scale float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	r := scale / math.Sqrt(ss+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * r
	}
	return out
}

// RopeAngles are the rotation angles of position pos for a rotary width of
// rot dims: pos·theta^(−2i/rot) for i < rot/2.
func RopeAngles(pos, rot int, theta float64) []float64 {
	angles := make([]float64, rot/2)
	for i := range angles {
		angles[i] = float64(pos) * math.Pow(theta, -float64(2*i)/float64(rot))
	}
	return angles
}

// Rotate applies RoPE with NeoX (rotate_half) pairing: dim i turns with
// dim i+len(angles) by angles[i]; dims past 2·len(angles) stay as they are.
func Rotate(x []float64, angles []float64) []float64 {
	out := append([]float64(nil), x...)
	half := len(angles)
	for i, a := range angles {
		c, s := math.Cos(a), math.Sin(a)
		out[i] = x[i]*c - x[i+half]*s
		out[i+half] = x[i+half]*c + x[i]*s
	}
	return out
}

// Sigmoid is 1/(1+e^−x).
func Sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// SiLU is x·sigmoid(x).
func SiLU(x float64) float64 { return x * Sigmoid(x) }

// Softplus is log(1+e^x).
func Softplus(x float64) float64 { return math.Log1p(math.Exp(x)) }

// Softmax is e^x / Σe^x, computed from the maximum.
func Softmax(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	out := make([]float64, len(x))
	var sum float64
	for i, v := range x {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// DeltaNetGates are a DeltaNet value head's decay and write strength for
// one token: decay = exp(g), g = −exp(A_log)·softplus(a + dt_bias), and
// beta = sigmoid(b).
func DeltaNetGates(a, b, aLog, dtBias float64) (decay, beta float64) {
	return math.Exp(-math.Exp(aLog) * Softplus(a+dtBias)), Sigmoid(b)
}

// DeltaRule advances one value head's state S by one token and returns
// its output, as MODEL.md states it: S = decay·S; S += k ⊗ beta·(v − Sᵀk);
// o = Sᵀq. S is [Dk][Dv] (S[i][d] at S[i*Dv+d]), q and k already
// normalised.
func DeltaRule(S, k, q, v []float64, decay, beta float64) []float64 {
	dv := len(v)
	for i := range S {
		S[i] *= decay
	}
	stk := make([]float64, dv) // Sᵀk
	for i, ki := range k {
		for d := range dv {
			stk[d] += S[i*dv+d] * ki
		}
	}
	o := make([]float64, dv)
	for i, ki := range k {
		for d := range dv {
			S[i*dv+d] += ki * beta * (v[d] - stk[d])
			o[d] += S[i*dv+d] * q[i]
		}
	}
	return o
}

// GatedAttention is one query head's output over the keys and values of
// its kv head at every position it may see (causal: the caller passes
// those): softmax(q·kᵀ/sqrt(D))·v, times sigmoid(gate) elementwise. q and
// the keys are already normed and rotated.
func GatedAttention(q []float64, keys, values [][]float64, gate []float64) []float64 {
	scores := make([]float64, len(keys))
	scale := 1 / math.Sqrt(float64(len(q)))
	for j, k := range keys {
		for d := range q {
			scores[j] += q[d] * k[d]
		}
		scores[j] *= scale
	}
	p := Softmax(scores)
	out := make([]float64, len(gate))
	for d := range out {
		for j, v := range values {
			out[d] += p[j] * v[d]
		}
		out[d] *= Sigmoid(gate[d])
	}
	return out
}
