package cpu

import (
	"math"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Attention implements model.Blocks: the gated attention of engine/model/MODEL.md, each
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
	var buf blockBuffers
	defer buf.release()
	qg := buf.floats(T * H * 2 * D)
	k := buf.floats(T * KV * D)
	v := buf.floats(T * KV * D)
	p.project(x, projection{qg, &w.Q}, projection{k, &w.K}, projection{v, &w.V})
	if p.err != nil {
		return out
	}
	rope := newRotary(c, p.ropePos)
	p.b.pool.parallelFor(T, 4, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			if (t-lo)%stopTokens == 0 && p.stopping() {
				return
			}
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
	if p.stopped() {
		return out
	}
	kvWidth := KV * D
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		st.k = append(st.k, k[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
		st.v = append(st.v, v[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
	}

	o := buf.floats(T * H * D)
	blocks := p.attentionBlocks(layer, qg, o)
	// A stop check before each block: a block's work is bounded whatever
	// the context (attentionBlocks). The blocks are handed out one at a
	// time, those with the most scores first (a prefill's later tokens
	// see more keys), so that the threads finish together.
	order := make([]int, len(blocks))
	cost := make([]int, len(blocks))
	for i := range blocks {
		order[i] = i
		for _, l := range blocks[i].limits {
			cost[i] += l
		}
		cost[i] *= blocks[i].perToken
	}
	slices.SortStableFunc(order, func(a, b int) int { return cost[b] - cost[a] })
	p.b.pool.parallelEach(len(blocks), func(lo, hi int) {
		for _, i := range order[lo:hi] {
			if p.stopping() {
				return
			}
			blocks[i].attend()
		}
	})
	if p.stopped() {
		return out
	}
	p.matMul(out.data, &tensor{rows: T, width: H * D, data: o}, &w.O)
	return out
}

// attentionBlocks splits the pass's attention into blocks that run in
// parallel: per segment, kv head, a set of the heads that read it, and a
// run of tokens short enough that the block's scores stay in L1/L2.
// Every block reads its kv head's cache once for all its rows, so the
// fewer sets of heads, the less of the cache is read again: a set is every
// head of the kv head unless that leaves fewer blocks than threads, then
// the group splits in fewer sets of four (a decode step of the full model
// on 2 threads: 2 kv heads × 8 heads = 2 blocks; on 4 or more: 2 × 2 sets
// of 4 = 4 blocks). At 512 positions a kv head's K and V are 1 MiB, most
// of it from memory in a decode step, and reading it once a step instead
// of twice is most of that block's cost.
func (p *pass) attentionBlocks(layer int, qg, o []float32) []attentionBlock {
	c := &p.b.cfg
	H, KV, D := c.NumHeads, c.NumKVHeads, c.HeadDim
	group := H / KV
	scale := float32(1 / math.Sqrt(float64(D)))
	perSet := p.attentionHeadSet(group)
	act := p.b.acts()
	var blocks []attentionBlock
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		n := len(s.ids)
		tokens := min(max(attentionScores/(((perSet+3)/4)*4*(s.pos+n)), 1), 16)
		for kvh := range KV {
			for h0 := kvh * group; h0 < (kvh+1)*group; h0 += perSet {
				h1 := min(h0+perSet, (kvh+1)*group)
				for t0 := 0; t0 < n; t0 += tokens {
					b := attentionBlock{keys: st.k, values: st.v, stride: KV * D, offset: kvh * D, dim: D, scale: scale,
						kern: &p.b.kern.f32, act: act}
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

// attentionHeadSet is how many of a kv head's group of heads one block
// takes: the whole group when the pass has at least as many blocks as
// threads that way, else a multiple of four small enough to give every
// thread a block (four at the least). A row's arithmetic is the same
// whatever its block (attend), so this choice changes no bits.
func (p *pass) attentionHeadSet(group int) int {
	c := &p.b.cfg
	blocks := 0 // blocks with whole groups
	for _, s := range p.segs {
		tokens := min(max(attentionScores/(((group+3)/4)*4*(s.pos+len(s.ids))), 1), 16)
		blocks += c.NumKVHeads * ((len(s.ids) + tokens - 1) / tokens)
	}
	threads := max(p.b.pool.threads, 1)
	if blocks >= threads || group <= 4 {
		return group
	}
	sets := min((threads+blocks-1)/blocks, (group+3)/4)
	return ((group+sets-1)/sets + 3) / 4 * 4
}

// attentionScores bounds the scores one block holds at once (floats): 16K
// floats, 64 KiB, stay in L2 while the block passes over them twice.
const attentionScores = 16 << 10

// attentionTile is how many cached positions a block's rows take at a time
// (32 positions of a 256-wide head: 32 KiB of keys, then of values), so
// that a tile stays in L1 while every row of the block passes over it.
const attentionTile = 32

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
	kern                *simdKernels // the backend's f32 kernels
	act                 *activations // the backend's exponentials
}

// attend computes each row's o = softmax(q·kᵀ·scale)·v ⊙ sigmoid(gate).
//
// The rows of a token go four at a time (a quad: each cached row loaded
// once serves four heads), padded with copies of the last row. A row gets
// the same arithmetic whatever block it is in, so a token's output does
// not depend on the pass around it: each score is scale times a lane of
// dot4, the softmax runs over the row alone, and its sum over positions
// adds them in position order.
func (b *attentionBlock) attend() {
	quads := (b.perToken + 3) / 4
	positions := 0
	for _, n := range b.limits {
		positions = max(positions, n)
	}
	// Scores of quad q of token i: rows (i·quads+q)·4 … +3, positions wide.
	scoresp := scratch.get(len(b.limits) * quads * 4 * positions)
	defer scratch.put(scoresp)
	scores := *scoresp
	quadRows := func(i, q int) (rows [4]int) {
		for l := range rows {
			rows[l] = i*b.perToken + min(q*4+l, b.perToken-1)
		}
		return rows
	}

	// q·k, a tile of cached positions at a time for every token and quad.
	for j0 := 0; j0 < positions; j0 += attentionTile {
		for i, n := range b.limits {
			for q := range quads {
				if j0 >= n {
					continue
				}
				r := quadRows(i, q)
				out := scores[(i*quads+q)*4*positions+j0:]
				attentionScores4(b.kern, b.queries[r[0]], b.queries[r[1]], b.queries[r[2]], b.queries[r[3]],
					b.keys[j0*b.stride+b.offset:], b.stride, min(attentionTile, n-j0), b.dim, b.scale, out, positions)
			}
		}
	}

	// Softmax of each real row, in place: exponentials in f32 (of
	// float64's math.Exp on the exact path, expf on the fast ones), sum in
	// f64.
	sumsp := sumsScratch.get(len(b.queries))
	defer sumsScratch.put(sumsp)
	sums := *sumsp
	for i, n := range b.limits {
		for h := range b.perToken {
			row := scores[((i*quads+h/4)*4+h%4)*positions:][:n]
			maxScore := float32(math.Inf(-1))
			for _, s := range row {
				maxScore = max(maxScore, s)
			}
			b.act.expShift(row, row, maxScore)
			var sum float64
			for _, e := range row {
				sum += float64(e)
			}
			sums[i*b.perToken+h] = sum
		}
	}

	// o = Σ_j e_j·v_j, tile by tile in position order; padded lanes write
	// into a row of their own.
	sparep := scratch.get(b.dim)
	defer scratch.put(sparep)
	spare := *sparep
	ptrs := new([4]*float32)
	for j0 := 0; j0 < positions; j0 += attentionTile {
		for i, n := range b.limits {
			for q := range quads {
				if j0 >= n {
					continue
				}
				var outs [4][]float32
				for l := range outs {
					outs[l] = spare
					if q*4+l < b.perToken {
						outs[l] = b.outs[i*b.perToken+q*4+l]
					}
				}
				attentionValues4With(b.kern, &outs, ptrs, scores[(i*quads+q)*4*positions+j0:], positions,
					b.values[j0*b.stride+b.offset:], b.stride, min(attentionTile, n-j0), b.dim)
			}
		}
	}
	for r, o := range b.outs {
		b.act.gate(o, b.gates[r], float32(1/sums[r]))
	}
}

// attentionScores4 writes out[l·outStride+j] = scale·(q_l · key j) for four
// query rows and n key rows of keys (one every stride floats, dim wide),
// with the kernels k: its scores4 where it has one, else its dot4 per key
// row, which gives the same bits.
func attentionScores4(k *simdKernels, q0, q1, q2, q3, keys []float32, stride, n, dim int, scale float32, out []float32, outStride int) {
	_ = keys[(n-1)*stride+dim-1]
	_ = out[3*outStride+n-1]
	if k.scores4 != nil && dim%16 == 0 {
		k.scores4(&q0[0], &q1[0], &q2[0], &q3[0], &keys[0], stride, n, dim, scale, &out[0], outStride)
		return
	}
	for j := range n {
		s0, s1, s2, s3 := dot4With(k, q0[:dim], q1[:dim], q2[:dim], q3[:dim], keys[j*stride:j*stride+dim])
		out[j], out[outStride+j], out[2*outStride+j], out[3*outStride+j] = s0*scale, s1*scale, s2*scale, s3*scale
	}
}

// attentionValues4 adds Σ_j e[l·eStride+j]·(value row j) to outs[l] for
// four rows, j in order over n value rows of values (one every stride
// floats, dim wide), with the kernels k: its values4 where it has one,
// else its axpy per value row, which gives the same bits.
func attentionValues4(k *simdKernels, outs *[4][]float32, e []float32, eStride int, values []float32, stride, n, dim int) {
	attentionValues4With(k, outs, new([4]*float32), e, eStride, values, stride, n, dim)
}

// attentionValues4With is attentionValues4 with ptrs, room for the rows'
// addresses that values4 takes: a caller that passes its own does not
// allocate it on every call (it escapes through the kernel table).
func attentionValues4With(k *simdKernels, outs *[4][]float32, ptrs *[4]*float32, e []float32, eStride int, values []float32, stride, n, dim int) {
	_ = values[(n-1)*stride+dim-1]
	_ = e[3*eStride+n-1]
	for _, o := range outs {
		_ = o[dim-1]
	}
	if k.values4 != nil && dim%16 == 0 {
		*ptrs = [4]*float32{&outs[0][0], &outs[1][0], &outs[2][0], &outs[3][0]}
		k.values4(ptrs, &e[0], eStride, &values[0], stride, n, dim)
		return
	}
	for j := range n {
		v := values[j*stride : j*stride+dim]
		for l, o := range outs {
			axpyWith(k, o[:dim], v, e[l*eStride+j])
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

// newRotary computes the rotation of each row from its M-RoPE position:
// frequency i turns by the position on axis c.RopeAxis(i) (for text rows
// the three are equal).
func newRotary(c *model.Config, positions [][3]int) rotary {
	half := c.RotaryDim / 2
	T := len(positions)
	r := rotary{half: half, cos: make([]float32, T*half), sin: make([]float32, T*half)}
	for i := range half {
		exponent := float32(2*i) / float32(c.RotaryDim)
		invFreq := float32(1 / math.Pow(c.RopeTheta, float64(exponent)))
		axis := c.RopeAxis(i)
		for t, pos := range positions {
			angle := float64(float32(pos[axis]) * invFreq)
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
