package cpu

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// DeltaNet implements model.Blocks, each segment on its own sequence's
// state: the Gated DeltaNet of MODEL.md with a
// sequential scan, which is the same function as transformers' chunked form
// and serves prefill and decode alike.
func (p *pass) DeltaNet(layer int, w *model.DeltaNet, xa model.Activation) model.Activation {
	c := &p.b.cfg
	x := p.tensor(xa)
	out := newTensor(x.rows, c.HiddenSize)
	if p.err != nil {
		return out
	}
	T := x.rows
	Hk, Hv, Dk, Dv, K := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim, c.ConvKernel
	C := deltaNetChannels(c)

	pre := make([]float32, T*C) // the pre-conv rows
	z := make([]float32, T*Hv*Dv)
	b := make([]float32, T*Hv)
	a := make([]float32, T*Hv)
	p.project(x, projection{pre, &w.QKV}, projection{z, &w.Z}, projection{b, &w.B}, projection{a, &w.A})
	if p.err != nil {
		return out
	}

	// Causal depthwise conv and silu, per channel and segment. A segment's
	// conv window is its sequence's K-1 rows of state, then its pre-conv
	// rows.
	windows := make([][]float32, len(p.segs))
	for i, seg := range p.segs {
		rows := len(seg.ids)
		windows[i] = make([]float32, (K-1+rows)*C)
		copy(windows[i], seg.seq.layers[layer].conv)
		copy(windows[i][(K-1)*C:], pre[seg.row0*C:(seg.row0+rows)*C])
	}
	mixed := make([]float32, T*C)
	p.b.pool.parallelFor(C, 64, func(lo, hi int) {
		for i, seg := range p.segs {
			window := windows[i]
			for ch := lo; ch < hi; ch++ {
				taps := w.Conv[ch][:K]
				for t := range len(seg.ids) {
					var s float32
					for j, tap := range taps {
						s += tap * window[(t+j)*C+ch]
					}
					mixed[(seg.row0+t)*C+ch] = silu(s)
				}
			}
		}
	})
	for i, seg := range p.segs {
		copy(seg.seq.layers[layer].conv, windows[i][len(seg.ids)*C:])
	}

	// q and k L2-normalised per head, q also scaled by 1/sqrt(Dk).
	qScale := 1 / math.Sqrt(float64(Dk))
	for t := range T {
		row := mixed[t*C : (t+1)*C]
		for h := range Hk {
			l2Normalize(row[h*Dk:(h+1)*Dk], c.DeltaNetL2Eps, qScale)
			l2Normalize(row[Hk*Dk+h*Dk:Hk*Dk+(h+1)*Dk], c.DeltaNetL2Eps, 1)
		}
	}

	// beta = sigmoid(b); decay = exp(g), g = -exp(A_log)·softplus(a + dt_bias).
	beta := make([]float32, T*Hv)
	decay := make([]float32, T*Hv)
	for t := range T {
		for j := range Hv {
			i := t*Hv + j
			beta[i] = sigmoid(b[i])
			g := -math.Exp(float64(w.ALog[j])) * softplus(float64(a[i]+w.DtBias[j]))
			decay[i] = float32(math.Exp(g))
		}
	}

	// The scan, one task per segment and value head; value head j reads
	// key head j/(Hv/Hk) (repeat_interleave).
	o := make([]float32, T*Hv*Dv)
	ratio := Hv / Hk
	p.b.pool.parallelFor(len(p.segs)*Hv, 1, func(lo, hi int) {
		for task := lo; task < hi; task++ {
			seg, j := &p.segs[task/Hv], task%Hv
			S := seg.seq.layers[layer].recurrent[j*Dk*Dv : (j+1)*Dk*Dv]
			kh := j / ratio
			for t := seg.row0; t < seg.row0+len(seg.ids); t++ {
				row := mixed[t*C : (t+1)*C]
				deltaStep(S,
					row[Hk*Dk+kh*Dk:Hk*Dk+(kh+1)*Dk],   // k
					row[kh*Dk:(kh+1)*Dk],               // q
					row[2*Hk*Dk+j*Dv:2*Hk*Dk+(j+1)*Dv], // v
					o[(t*Hv+j)*Dv:(t*Hv+j+1)*Dv],
					decay[t*Hv+j], beta[t*Hv+j])
			}
		}
	})

	// Gated RMSNorm per value head: plain weight, then silu(z).
	for i := range T * Hv {
		oh := o[i*Dv : (i+1)*Dv]
		rmsNorm(oh, oh, w.Norm, c.DeltaNetNormEps)
		for d, zz := range z[i*Dv : (i+1)*Dv] {
			oh[d] *= silu(zz)
		}
	}
	p.matMul(out.data, &tensor{rows: T, width: Hv * Dv, data: o}, &w.Out)
	return out
}

// deltaStep advances one value head's state by one token and writes its
// output: S = decay·S; S += k ⊗ beta·(v − Sᵀk); o = Sᵀq. The state is kept
// transposed, [Dv, Dk] (row d is column d of S), so that both Sᵀk and Sᵀq
// are dot products along contiguous rows.
func deltaStep(S, k, q, v, o []float32, decay, beta float32) {
	dk, dv := len(k), len(v)
	if simd.deltaStep != nil && dk%8 == 0 {
		simd.deltaStep(&S[0], &k[0], &q[0], &v[0], &o[0], dk, dv, decay, beta)
		return
	}
	for d := range dv {
		row := S[d*dk : (d+1)*dk]
		var kv float32
		for i := range row {
			row[i] *= decay
			kv += row[i] * k[i]
		}
		delta := beta * (v[d] - kv)
		var out float32
		for i := range row {
			row[i] += delta * k[i]
			out += row[i] * q[i]
		}
		o[d] = out
	}
}
