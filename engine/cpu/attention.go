package cpu

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Attention implements model.Blocks: the gated attention of MODEL.md, each
// segment on its own sequence's KV cache.
//
//	qg = x·Wqᵀ (per head: query ‖ gate);  k = x·Wkᵀ;  v = x·Wvᵀ
//	q = RoPE(RMSNorm(q));  k = RoPE(RMSNorm(k));  cache k and v
//	o = softmax(q·kᵀ/√D, causal)·v ⊙ sigmoid(gate);  out = o·Woᵀ
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
	p.b.pool.parallelFor(T, 4, func(lo, hi int) {
		for t := lo; t < hi; t++ {
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
	})
	kvWidth := KV * D
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		st.k = append(st.k, k[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
		st.v = append(st.v, v[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
	}

	o := make([]float32, T*H*D)
	blocks := p.attentionBlocks(layer, qg, o)
	p.b.pool.parallelFor(len(blocks), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			blocks[i].attend()
		}
	})
	p.matMul(out.data, &tensor{rows: T, width: H * D, data: o}, &w.O)
	return out
}

// attentionBlocks splits the pass's attention into blocks that run in
// parallel: per segment, kv head, four of the heads that read it, and a
// run of tokens short enough that the block's scores stay in L1/L2 (a
// decode step of the full model: 2 kv heads × 2 sets of 4 heads = 4 blocks).
// Every block reads its kv head's cache once for all its rows.
func (p *pass) attentionBlocks(layer int, qg, o []float32) []attentionBlock {
	c := &p.b.cfg
	H, KV, D := c.NumHeads, c.NumKVHeads, c.HeadDim
	group := H / KV
	scale := float32(1 / math.Sqrt(float64(D)))
	var blocks []attentionBlock
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		n := len(s.ids)
		tokens := min(max(attentionScores/(4*(s.pos+n)), 1), 16)
		for kvh := range KV {
			for h0 := kvh * group; h0 < (kvh+1)*group; h0 += 4 {
				h1 := min(h0+4, (kvh+1)*group)
				for t0 := 0; t0 < n; t0 += tokens {
					b := attentionBlock{keys: st.k, values: st.v, stride: KV * D, offset: kvh * D, dim: D, scale: scale}
					for t := s.row0 + t0; t < s.row0+min(t0+tokens, n); t++ {
						for h := h0; h < h1; h++ {
							row := (t*H + h) * 2 * D
							b.queries = append(b.queries, qg[row:row+D])
							b.gates = append(b.gates, qg[row+D:row+2*D])
							b.outs = append(b.outs, o[(t*H+h)*D:(t*H+h+1)*D])
						}
						b.limits = append(b.limits, p.rowPos[t]+1)
					}
					b.perToken = h1 - h0
					blocks = append(blocks, b)
				}
			}
		}
	}
	return blocks
}

// attentionScores bounds the scores one block holds at once (floats): 16K
// floats, 64 KiB, stay in L2 while the block passes over them twice.
const attentionScores = 16 << 10

// attentionBlock is the gated attention of some query rows that read one
// kv head of one sequence's cache: rows come perToken at a time (heads of
// one token, which see the same positions), and the rows of token i see the
// first limits[i] cached positions.
type attentionBlock struct {
	queries, gates, outs [][]float32 // per row, dim each
	limits               []int       // per token
	perToken             int
	// keys and values are the cache, [positions, stride], this kv head at
	// offset.
	keys, values        []float32
	stride, offset, dim int
	scale               float32
}

// attend computes each row's o = softmax(q·kᵀ·scale)·v ⊙ sigmoid(gate).
//
// Each row gets the same arithmetic whichever block it is in, so a token's
// output does not depend on the pass around it: its scores are lanes of
// dot4 (a row without three partners in its token is padded with copies of
// itself), its softmax and its sum over positions run in position order.
func (b *attentionBlock) attend() {
	rows, D := len(b.queries), b.dim
	positions := 0
	for _, n := range b.limits {
		positions = max(positions, n)
	}
	scoresp := getScratch(rows * positions)
	defer scratch.Put(scoresp)
	scores := *scoresp

	// q·k for every row and position: each key row is loaded once and
	// serves four query rows per dot4.
	for j := range positions {
		key := b.keys[j*b.stride+b.offset : j*b.stride+b.offset+D]
		for i, n := range b.limits {
			if j >= n {
				continue
			}
			for r0 := i * b.perToken; r0 < (i+1)*b.perToken; r0 += 4 {
				var q [4][]float32
				for l := range q {
					q[l] = b.queries[min(r0+l, (i+1)*b.perToken-1)]
				}
				s0, s1, s2, s3 := dot4(q[0], q[1], q[2], q[3], key)
				for l, s := range [4]float32{s0, s1, s2, s3} {
					if r := r0 + l; r < (i+1)*b.perToken {
						scores[r*positions+j] = s * b.scale
					}
				}
			}
		}
	}

	// Softmax per row, in place: exponentials in f32, their sum in f64.
	sums := make([]float64, rows)
	for r := range rows {
		row := scores[r*positions : r*positions+b.limits[r/b.perToken]]
		maxScore := float32(math.Inf(-1))
		for _, s := range row {
			maxScore = max(maxScore, s)
		}
		var sum float64
		for j, s := range row {
			e := float32(math.Exp(float64(s - maxScore)))
			row[j] = e
			sum += float64(e)
		}
		sums[r] = sum
	}

	// o = Σ_j e_j·v_j, position by position so that each value row is
	// loaded once for all rows; then the normalisation and the gate.
	for j := range positions {
		value := b.values[j*b.stride+b.offset : j*b.stride+b.offset+D]
		for r := range rows {
			if j < b.limits[r/b.perToken] {
				axpy(b.outs[r], value, scores[r*positions+j])
			}
		}
	}
	for r, o := range b.outs {
		inv := float32(1 / sums[r])
		for d, g := range b.gates[r] {
			o[d] *= inv * sigmoid(g)
		}
	}
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
