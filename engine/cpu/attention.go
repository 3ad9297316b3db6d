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
	if !p.parallel(T, 4, stopTokens, func(lo, hi int) {
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
	}) {
		return out
	}
	kvWidth := KV * D
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		st.k = append(st.k, k[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
		st.v = append(st.v, v[s.row0*kvWidth:(s.row0+len(s.ids))*kvWidth]...)
	}

	o := buf.floats(T * H * D)
	if !p.attendCache(layer, qg, o) {
		return out
	}
	p.matMul(out.data, &tensor{rows: T, width: H * D, data: o}, &w.O)
	return out
}

// attendCache computes o, [rows, H·D], from the pass's normed, rotated
// queries qg ([rows, H, query ‖ gate]) against each segment's cache of
// layer, which already holds the pass's own keys and values; false when
// the pass stopped or failed.
func (p *pass) attendCache(layer int, qg, o []float32) bool {
	blocks := p.attentionBlocks(layer, qg, o)
	// A stop check before each block (the region's) and every stopTiles
	// tiles inside one (attend: a block's tiles run in order, and their
	// number grows with the context): the work between checks is bounded
	// whatever the context. The blocks are handed out one at a
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
	return p.parallel(len(blocks), 1, 1, func(lo, hi int) {
		for _, i := range order[lo:hi] {
			blocks[i].attend()
		}
	})
}

// attentionBlocks splits the pass's attention into blocks that run in
// parallel: per segment, kv head, a set of the heads that read it, and a
// run of attentionRows/set tokens, so that every tile of the kv head's
// cache a block loads serves about attentionRows query rows (flash
// attention's reuse: the cache is read once per run of tokens, not once
// per token). The fewer sets of heads, the less of the cache is read
// again: a set is every head of the kv head unless that leaves fewer
// blocks than threads, then the group splits in fewer sets of four (a
// decode step of the full model on 2 threads: 2 kv heads × 8 heads = 2
// blocks; on 4 or more: 2 × 2 sets of 4 = 4 blocks).
func (p *pass) attentionBlocks(layer int, qg, o []float32) []attentionBlock {
	c := &p.b.cfg
	H, KV, D := c.NumHeads, c.NumKVHeads, c.HeadDim
	group := H / KV
	scale := float32(1 / math.Sqrt(float64(D)))
	perSet := p.attentionHeadSet(group)
	tokens := attentionTokens(perSet)
	act := p.b.acts()
	var blocks []attentionBlock
	for _, s := range p.segs {
		st := &s.seq.layers[layer]
		n := len(s.ids)
		for kvh := range KV {
			for h0 := kvh * group; h0 < (kvh+1)*group; h0 += perSet {
				h1 := min(h0+perSet, (kvh+1)*group)
				for t0 := 0; t0 < n; t0 += tokens {
					b := attentionBlock{keys: st.k, values: st.v, stride: KV * D, offset: kvh * D, dim: D, scale: scale,
						tile: attentionTile(D), kern: &p.b.kern.f32, act: act, stop: p.stopping}
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
	tokens := attentionTokens(group)
	for _, s := range p.segs {
		blocks += c.NumKVHeads * ((len(s.ids) + tokens - 1) / tokens)
	}
	threads := max(p.b.pool.threads, 1)
	if blocks >= threads || group <= 4 {
		return group
	}
	sets := min((threads+blocks-1)/blocks, (group+3)/4)
	return ((group+sets-1)/sets + 3) / 4 * 4
}

// attentionRows is about how many query rows share each tile of the cache
// a block loads: 64 rows of a 256-wide head are 64 KiB of queries and 64
// KiB of outputs, which stay in L2 beside the tile while the block runs.
const attentionRows = 64

// attentionTokens is the tokens of a block whose sets have perSet heads.
func attentionTokens(perSet int) int {
	return max(attentionRows/max(perSet, 1), 1)
}

// attentionTile is how many cached positions a block's rows take at a time
// for a head of dim floats: 32 KiB of keys, then of values (32 positions
// of a 256-wide head, 128 of a 64-wide one), so that the tile stays in L1
// while every row of the block passes over it, and the softmax's work per
// tile (a max, the exponentials, a rescale of the output) is small beside
// the tile's products. Tiles start at multiples of the tile in the
// cache, whatever the pass, so a row's arithmetic depends on the row alone.
func attentionTile(dim int) int {
	return min(max(8192/max(dim, 1), 16), 256)
}

// stopTiles is how many tiles a block runs between stop checks: the
// block's work between checks is bounded (attentionRows rows against
// stopTiles tiles, some 2 MFLOP) whatever the context, and the checks
// grow with the work, as those of the other blocks do with the rows.
const stopTiles = 1

// attentionBlock is the gated attention of some query rows that read one
// kv head of one sequence's cache: rows come perToken at a time (heads of
// one token, which see the same positions), and the rows of token i see the
// first limits[i] cached positions.
type attentionBlock struct {
	queries, gates, outs [][]float32 // per row, dim each; outs start zeroed
	limits               []int       // per token
	perToken             int
	// keys and values are the cache, [positions, stride], this kv head at
	// offset.
	keys, values        []float32
	stride, offset, dim int
	scale               float32
	tile                int          // attentionTile(dim)
	kern                *simdKernels // the backend's f32 kernels
	act                 *activations // the backend's exponentials
	// stop, when not nil, is asked every stopTiles tiles; a yes leaves
	// the outputs unfinished (the pass is abandoned).
	stop func() bool
}

// attend computes each row's o = softmax(q·kᵀ·scale)·v ⊙ sigmoid(gate),
// flash-style: tile by tile of cached positions, every row of the block
// takes the tile's scores (q·k), updates its running maximum m and sum l
// (online softmax: when m rises, the output so far and l are scaled by
// e^(m_old−m_new)), and adds e^(s−m)·v to its output; the division by l
// and the gate come at the end. Only a tile's scores are held, so the
// block's memory does not grow with the context.
//
// The rows of a token go four at a time (a quad: each cached row loaded
// once serves four heads), padded with copies of the last row. A row gets
// the same arithmetic whatever block it is in, so a token's output does
// not depend on the pass around it: each score is scale times a lane of
// dot4, tiles start at multiples of the tile, and the output and sum add
// in position order.
func (b *attentionBlock) attend() {
	quads := (b.perToken + 3) / 4
	tile := b.tile
	positions := 0
	for _, n := range b.limits {
		positions = max(positions, n)
	}
	// The scores of one quad for one tile: 4 rows of tile.
	scoresp := scratch.get(4 * tile)
	defer scratch.put(scoresp)
	scores := *scoresp
	rows := len(b.queries)
	statep := sumsScratch.get(2 * rows)
	defer sumsScratch.put(statep)
	sums, maxes := (*statep)[:rows], (*statep)[rows:]
	for r := range rows {
		sums[r], maxes[r] = 0, math.Inf(-1)
	}
	quadRows := func(i, q int) (rows [4]int) {
		for l := range rows {
			rows[l] = i*b.perToken + min(q*4+l, b.perToken-1)
		}
		return rows
	}
	sparep := scratch.get(b.dim)
	defer scratch.put(sparep)
	spare := *sparep
	ptrs := new([4]*float32)

	for j0, tiles := 0, 0; j0 < positions; j0, tiles = j0+tile, tiles+1 {
		if tiles%stopTiles == stopTiles-1 && tiles > 0 && b.stop != nil && b.stop() {
			return
		}
		for i, n := range b.limits {
			if j0 >= n {
				continue
			}
			cols := min(tile, n-j0)
			for q := range quads {
				r := quadRows(i, q)
				s := scores
				qs := [4][]float32{b.queries[r[0]], b.queries[r[1]], b.queries[r[2]], b.queries[r[3]]}
				attentionScores4(b.kern, &qs, cacheRows{b.keys[j0*b.stride+b.offset:], b.stride, cols, b.dim}, b.scale, s, tile)
				var outs [4][]float32
				for l := range outs {
					outs[l] = spare
					h := q*4 + l
					if h >= b.perToken {
						// A padded lane: its weights are zero, into spare.
						clear(s[l*tile : l*tile+cols])
						continue
					}
					row := i*b.perToken + h
					outs[l] = b.outs[row]
					e := s[l*tile : l*tile+cols]
					m := maxes[row]
					tileMax := float32(math.Inf(-1))
					for _, v := range e {
						tileMax = max(tileMax, v)
					}
					if newMax := float64(tileMax); newMax > m {
						if j0 > 0 {
							c := float32(math.Exp(m - newMax))
							scaleFloats(outs[l], c)
							sums[row] *= float64(c)
						}
						m, maxes[row] = newMax, newMax
					}
					b.act.expShift(e, e, float32(m))
					sums[row] += sumFloats(e)
				}
				attentionValues4With(b.kern, &outs, ptrs, s, tile, cacheRows{b.values[j0*b.stride+b.offset:], b.stride, cols, b.dim})
			}
		}
	}
	for r, o := range b.outs {
		b.act.gate(o, b.gates[r], float32(1/sums[r]))
	}
}

// scaleFloats multiplies x by c in place.
func scaleFloats(x []float32, c float32) {
	for i := range x {
		x[i] *= c
	}
}

// sumFloats adds x in float64, four running sums (lanes i mod 4) added
// at the end.
func sumFloats(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// cacheRows is n rows of a kv head's cache, dim wide: row j at
// data[j·stride:].
type cacheRows struct {
	data           []float32
	stride, n, dim int
}

// attentionScores4 writes out[l·outStride+j] = scale·(q[l] · key j) for
// four query rows and the n key rows of keys, with the kernels k: its
// scores4 where it has one, else its dot4 per key row, which gives the
// same bits.
func attentionScores4(k *simdKernels, q *[4][]float32, keys cacheRows, scale float32, out []float32, outStride int) {
	n, dim, stride := keys.n, keys.dim, keys.stride
	_ = keys.data[(n-1)*stride+dim-1]
	_ = out[3*outStride+n-1]
	q0, q1, q2, q3 := q[0], q[1], q[2], q[3]
	if k.scores4 != nil && dim%16 == 0 {
		k.scores4(&q0[0], &q1[0], &q2[0], &q3[0], &keys.data[0], stride, n, dim, scale, &out[0], outStride)
		return
	}
	for j := range n {
		s0, s1, s2, s3 := dot4With(k, q0[:dim], q1[:dim], q2[:dim], q3[:dim], keys.data[j*stride:j*stride+dim])
		out[j], out[outStride+j], out[2*outStride+j], out[3*outStride+j] = s0*scale, s1*scale, s2*scale, s3*scale
	}
}

// attentionValues4 adds Σ_j e[l·eStride+j]·(value row j) to outs[l] for
// four rows, j in order over the n rows of values, with the kernels k:
// its values4 where it has one, else its axpy per value row, which gives
// the same bits.
func attentionValues4(k *simdKernels, outs *[4][]float32, e []float32, eStride int, values cacheRows) {
	attentionValues4With(k, outs, new([4]*float32), e, eStride, values)
}

// attentionValues4With is attentionValues4 with ptrs, room for the rows'
// addresses that values4 takes: a caller that passes its own does not
// allocate it on every call (it escapes through the kernel table).
func attentionValues4With(k *simdKernels, outs *[4][]float32, ptrs *[4]*float32, e []float32, eStride int, values cacheRows) {
	n, dim, stride := values.n, values.dim, values.stride
	_ = values.data[(n-1)*stride+dim-1]
	_ = e[3*eStride+n-1]
	for _, o := range outs {
		_ = o[dim-1]
	}
	if k.values4 != nil && dim%16 == 0 {
		*ptrs = [4]*float32{&outs[0][0], &outs[1][0], &outs[2][0], &outs[3][0]}
		k.values4(ptrs, &e[0], eStride, &values.data[0], stride, n, dim)
		return
	}
	for j := range n {
		v := values.data[j*stride : j*stride+dim]
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
