package cpu

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Attention implements model.Blocks, each segment on its own sequence's
// cache: the gated full attention of MODEL.md.
// q and its gate come interleaved per head from one projection; q and k are
// RMS-normed per head and rotated on their first RotaryDim dims; the KV
// cache stores k after both.
func (p *pass) Attention(layer int, w *model.Attention, xa model.Activation) model.Activation {
	c := &p.b.cfg
	x := p.tensor(xa)
	out := newTensor(x.rows, c.HiddenSize)
	if p.err != nil {
		return out
	}
	T, H, KV, D := x.rows, c.NumHeads, c.NumKVHeads, c.HeadDim
	qg := make([]float32, T*H*2*D)
	k := make([]float32, T*KV*D)
	v := make([]float32, T*KV*D)
	p.project(x, projection{qg, &w.Q}, projection{k, &w.K}, projection{v, &w.V})
	if p.err != nil {
		return out
	}
	rope := newRotary(c, p.rowPos)
	for t := range T {
		for h := range H {
			q := qg[(t*H+h)*2*D : (t*H+h)*2*D+D]
			rmsNorm(q, q, w.QNorm, c.RMSNormEps)
			rope.apply(q, t)
		}
		for h := range KV {
			kh := k[(t*KV+h)*D : (t*KV+h+1)*D]
			rmsNorm(kh, kh, w.KNorm, c.RMSNormEps)
			rope.apply(kh, t)
		}
	}
	kvWidth := KV * D
	longest := 0
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		rows := k[s.row0*kvWidth : (s.row0+len(s.ids))*kvWidth]
		st.k = append(st.k, rows...)
		st.v = append(st.v, v[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
		longest = max(longest, s.pos+len(s.ids))
	}

	o := make([]float32, T*H*D)
	scale := float32(1 / math.Sqrt(float64(D)))
	group := H / KV
	// One task per (row, head): each reads its own sequence's keys of its
	// kv head up to its own position (causal).
	p.b.pool.parallelFor(T*H, 1, func(lo, hi int) {
		scoresp := getScratch(longest)
		defer scratch.Put(scoresp)
		for task := lo; task < hi; task++ {
			t, h := task/H, task%H
			st := &p.segs[p.rowSeg[t]].seq.layers[layer]
			n := p.rowPos[t] + 1
			kvh := h / group
			q := qg[(t*H+h)*2*D : (t*H+h)*2*D+D]
			gate := qg[(t*H+h)*2*D+D : (t*H+h+1)*2*D]
			scores := (*scoresp)[:n]
			maxScore := float32(math.Inf(-1))
			for j := range n {
				s := dot(q, st.k[j*kvWidth+kvh*D:j*kvWidth+kvh*D+D]) * scale
				scores[j] = s
				maxScore = max(maxScore, s)
			}
			var sum float64
			for j, s := range scores {
				e := float32(math.Exp(float64(s - maxScore)))
				scores[j] = e
				sum += float64(e)
			}
			oh := o[(t*H+h)*D : (t*H+h+1)*D]
			for j, e := range scores {
				axpy(oh, st.v[j*kvWidth+kvh*D:j*kvWidth+kvh*D+D], e)
			}
			inv := float32(1 / sum)
			for d := range oh {
				oh[d] *= inv * sigmoid(gate[d])
			}
		}
	})
	p.matMul(out.data, &tensor{rows: T, width: H * D, data: o}, &w.O)
	return out
}

// rotary holds cos and sin for the pass's rows. Frequencies and angles
// are computed in float32 like transformers' rotary embedding, so that long
// positions round the same way.
type rotary struct {
	half     int       // RotaryDim/2: dim i pairs with i+half
	cos, sin []float32 // [rows, half]
}

// newRotary computes the rotation of each row from its position.
func newRotary(c *model.Config, positions []int) rotary {
	half := c.RotaryDim / 2
	T := len(positions)
	r := rotary{half: half, cos: make([]float32, T*half), sin: make([]float32, T*half)}
	for i := range half {
		exponent := float32(2*i) / float32(c.RotaryDim)
		invFreq := float32(1 / math.Pow(c.RopeTheta, float64(exponent)))
		for t, pos := range positions {
			angle := float64(float32(pos) * invFreq)
			r.cos[t*half+i] = float32(math.Cos(angle))
			r.sin[t*half+i] = float32(math.Sin(angle))
		}
	}
	return r
}

// apply rotates x's first RotaryDim dims for the pass's row t
// (rotate_half pairing); the rest of x is left as it is.
func (r rotary) apply(x []float32, t int) {
	cs, sn := r.cos[t*r.half:(t+1)*r.half], r.sin[t*r.half:(t+1)*r.half]
	for i := range r.half {
		a, b := x[i], x[i+r.half]
		x[i] = a*cs[i] - b*sn[i]
		x[i+r.half] = b*cs[i] + a*sn[i]
	}
}
