package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// attnShape is the attention layer's geometry for one pass.
type attnShape struct {
	headDim, rotaryDim, qHeads, kvHeads int
	pos0, maxSeq, rows                  int
	// keys, when set, is the most keys a row of the pass attends to (the
	// multi-sequence steps, whose rows sit at their own positions).
	keys  int
	eps   float32
	kvF32 bool // the KV cache holds f32, else bf16
}

// kvName is the kernel name part of the cache element type.
func (s attnShape) kvName() string {
	if s.kvF32 {
		return "f32"
	}
	return "bf16"
}

// kvElem is the size of one cache element.
func (s attnShape) kvElem() int {
	if s.kvF32 {
		return 4
	}
	return 2
}

func (s attnShape) splits() int {
	if s.keys > 0 {
		return ceilDiv(s.keys, attnSplitLen)
	}
	return ceilDiv(s.pos0+s.rows, attnSplitLen)
}

func (s attnShape) pack() []byte {
	return pack(&attnParams{HeadDim: u32(s.headDim), RotaryDim: u32(s.rotaryDim), QHeads: u32(s.qHeads),
		KvHeads: u32(s.kvHeads), Pos0: u32(s.pos0), MaxSeq: u32(s.maxSeq), SplitLen: attnSplitLen,
		Splits: u32(s.splits()), Eps: s.eps, Scale: float32(1 / math.Sqrt(float64(s.headDim))), Rows: u32(s.rows)})
}

// attnBufs are the attention kernels' operands: the projections (qg is
// query ‖ gate per head), the norm weights and RoPE frequencies, the cache,
// the normalised queries, the split partials and the gated output.
type attnBufs struct {
	qg, k, v, qNorm, kNorm, invFreq loc
	kCache, vCache                  loc
	q, partO, partM, partL, o       loc
}

func (e *encoder) attnQNormRope(s attnShape, b attnBufs) {
	n := int64(4 * s.rows * s.qHeads * s.headDim)
	e.dispatch("attn_q_norm_rope_f32", device.Size3{X: s.qHeads, Y: s.rows}, device.Size3{X: simdWidth},
		n+int64(4*s.headDim+2*s.rotaryDim), n,
		bytesArg(0, s.pack()), b.qg.arg(1), b.qNorm.arg(2), b.invFreq.arg(3), b.q.arg(4))
}

func (e *encoder) attnKVWrite(s attnShape, b attnBufs) {
	n := int64(s.rows * s.kvHeads * s.headDim)
	e.dispatch("attn_kv_write_"+s.kvName(), device.Size3{X: s.kvHeads, Y: s.rows}, device.Size3{X: simdWidth},
		8*n+int64(4*s.headDim+2*s.rotaryDim), 2*int64(s.kvElem())*n,
		bytesArg(0, s.pack()), b.k.arg(1), b.v.arg(2), b.kNorm.arg(3), b.invFreq.arg(4), b.kCache.arg(5), b.vCache.arg(6))
}

// attnSplit records the chunked attention. A threadgroup serves all the
// query heads of one kv head, staging the kv head's rows once for them.
func (e *encoder) attnSplit(s attnShape, b attnBufs) {
	if s.headDim > prefillTile {
		e.fail(fmt.Errorf("head_dim %d does not fit the attention tile of %d floats", s.headDim, prefillTile))
		return
	}
	keys := int64(0)
	for t := 0; t < s.rows; t++ {
		keys += int64(s.pos0 + t + 1)
	}
	kvRead := keys * int64(s.kvHeads*s.headDim*2*s.kvElem())
	parts := int64(s.rows * s.qHeads * s.splits())
	group := s.qHeads / s.kvHeads
	e.dispatch("attn_split_"+s.kvName()+"_f32", device.Size3{X: s.kvHeads, Y: s.splits(), Z: s.rows},
		device.Size3{X: simdWidth * group},
		int64(4*s.rows*s.qHeads*s.headDim)+kvRead, parts*int64(4*(s.headDim+2)),
		bytesArg(0, s.pack()), b.q.arg(1), b.kCache.arg(2), b.vCache.arg(3), b.partO.arg(4), b.partM.arg(5), b.partL.arg(6))
}

// Prefill attention geometry (attention.metal).
const (
	prefillQueries = 8    // PREFILL_QUERIES
	prefillTile    = 2048 // PREFILL_TILE
	// attnPrefillMinRows is the fewest rows that use the tiled prefill
	// kernel; fewer rows (decode) split over the key length instead.
	attnPrefillMinRows = 8
)

// attnPrefill records the tiled causal attention of a chunk, gate applied.
func (e *encoder) attnPrefill(s attnShape, b attnBufs) {
	if s.headDim > prefillTile {
		e.fail(fmt.Errorf("head_dim %d does not fit the prefill attention tile of %d floats", s.headDim, prefillTile))
		return
	}
	blocks := ceilDiv(s.rows, prefillQueries)
	var keys int64
	for blk := 0; blk < blocks; blk++ {
		keys += int64(s.pos0 + min((blk+1)*prefillQueries, s.rows))
	}
	n := int64(4 * s.rows * s.qHeads * s.headDim)
	e.dispatch("attn_prefill_"+s.kvName()+"_f32", device.Size3{X: blocks, Y: s.qHeads}, device.Size3{X: simdWidth * prefillQueries},
		2*n+keys*int64(s.qHeads*s.headDim*2*s.kvElem()), n,
		bytesArg(0, s.pack()), b.q.arg(1), b.kCache.arg(2), b.vCache.arg(3), b.qg.arg(4), b.o.arg(5))
}

func (e *encoder) attnReduceGate(s attnShape, b attnBufs) {
	parts := int64(s.rows * s.qHeads * s.splits())
	n := int64(4 * s.rows * s.qHeads * s.headDim)
	e.dispatch("attn_reduce_gate_f32", device.Size3{X: s.qHeads, Y: s.rows}, device.Size3{X: simdWidth},
		parts*int64(4*(s.headDim+2))+n, n,
		bytesArg(0, s.pack()), b.partO.arg(1), b.partM.arg(2), b.partL.arg(3), b.qg.arg(4), b.o.arg(5))
}

// kvSeq is one sequence's cache and position in a multi-sequence attention
// step.
type kvSeq struct {
	k, v        loc
	pos, maxSeq int
}

// attnStepInfo is the (position, cache rows per kv head) pairs the
// multi-sequence attention kernels read, one per sequence, as uint32.
func attnStepInfo(seqs []kvSeq) []byte {
	b := make([]byte, 0, 8*len(seqs))
	for _, q := range seqs {
		b = binary.LittleEndian.AppendUint32(b, u32(q.pos))
		b = binary.LittleEndian.AppendUint32(b, u32(q.maxSeq))
	}
	return b
}

// attnStepChunks calls fn for each group of at most stepMaxSeqs sequences:
// the shape of the group's rows (s.keys set to the longest row's keys, so
// that every group lays its partials out alike), its first row and the
// group's bindings.
func attnStepChunks(s attnShape, b attnBufs, seqs []kvSeq, info loc, fn func(s attnShape, b attnBufs, seqs []kvSeq, info loc)) {
	for _, q := range seqs {
		s.keys = max(s.keys, q.pos+1)
	}
	splits := s.splits()
	at := func(l loc, z, rowFloats int) loc { return loc{l.buf, l.off + 4*z*rowFloats} }
	qw := s.qHeads * s.headDim
	for z0 := 0; z0 < len(seqs); z0 += stepMaxSeqs {
		n := min(stepMaxSeqs, len(seqs)-z0)
		sc := s
		sc.rows = n
		bc := b
		bc.qg, bc.q, bc.o = at(b.qg, z0, 2*qw), at(b.q, z0, qw), at(b.o, z0, qw)
		bc.k, bc.v = at(b.k, z0, s.kvHeads*s.headDim), at(b.v, z0, s.kvHeads*s.headDim)
		bc.partO = at(b.partO, z0, s.qHeads*splits*s.headDim)
		bc.partM, bc.partL = at(b.partM, z0, s.qHeads*splits), at(b.partL, z0, s.qHeads*splits)
		fn(sc, bc, seqs[z0:z0+n], loc{info.buf, info.off + 8*z0})
	}
}

// cacheArgs binds each sequence's keys from index first and values from
// first+stepMaxSeqs, unused slots bound to the first sequence's.
func cacheArgs(first int, seqs []kvSeq) []device.Arg {
	ks, vs := make([]loc, len(seqs)), make([]loc, len(seqs))
	for i, q := range seqs {
		ks[i], vs[i] = q.k, q.v
	}
	return append(seqArgs(first, ks), seqArgs(first+stepMaxSeqs, vs)...)
}

// attnStepsNormRope records, for decode steps of several sequences (row z
// at seqs[z].pos), the queries' norm and RoPE and the keys' and values'
// write into each sequence's own cache; info holds attnStepInfo(seqs).
func (e *encoder) attnStepsNormRope(s attnShape, b attnBufs, seqs []kvSeq, info loc) {
	attnStepChunks(s, b, seqs, info, func(s attnShape, b attnBufs, seqs []kvSeq, info loc) {
		nq := int64(4 * s.rows * s.qHeads * s.headDim)
		e.dispatch("attn_q_norm_rope_seqs_f32", device.Size3{X: s.qHeads, Y: s.rows}, device.Size3{X: simdWidth},
			nq+int64(4*s.headDim+2*s.rotaryDim+8*s.rows), nq,
			bytesArg(0, s.pack()), b.qg.arg(1), b.qNorm.arg(2), b.invFreq.arg(3), b.q.arg(4), info.arg(5))
		nk := int64(s.rows * s.kvHeads * s.headDim)
		e.dispatch("attn_kv_write_seqs_"+s.kvName(), device.Size3{X: s.kvHeads, Y: s.rows}, device.Size3{X: simdWidth},
			8*nk+int64(4*s.headDim+2*s.rotaryDim+8*s.rows), 2*int64(s.kvElem())*nk,
			append([]device.Arg{bytesArg(0, s.pack()), b.k.arg(1), b.v.arg(2), b.kNorm.arg(3), b.invFreq.arg(4), info.arg(5)},
				cacheArgs(6, seqs)...)...)
	})
}

// attnStepsSplit records the chunked attention of each row over its own
// sequence's cache, up to its own position.
func (e *encoder) attnStepsSplit(s attnShape, b attnBufs, seqs []kvSeq, info loc) {
	if s.headDim > prefillTile {
		e.fail(fmt.Errorf("head_dim %d does not fit the attention tile of %d floats", s.headDim, prefillTile))
		return
	}
	attnStepChunks(s, b, seqs, info, func(s attnShape, b attnBufs, seqs []kvSeq, info loc) {
		var keys int64
		for _, q := range seqs {
			keys += int64(q.pos + 1)
		}
		parts := int64(s.rows * s.qHeads * s.splits())
		e.dispatch("attn_split_seqs_"+s.kvName()+"_f32", device.Size3{X: s.kvHeads, Y: s.splits(), Z: s.rows},
			device.Size3{X: simdWidth * (s.qHeads / s.kvHeads)},
			int64(4*s.rows*s.qHeads*s.headDim)+keys*int64(s.kvHeads*s.headDim*2*s.kvElem())+int64(8*s.rows),
			parts*int64(4*(s.headDim+2)),
			append([]device.Arg{bytesArg(0, s.pack()), b.q.arg(1), b.partO.arg(2), b.partM.arg(3), b.partL.arg(4), info.arg(5)},
				cacheArgs(6, seqs)...)...)
	})
}

// attnStepsReduce merges each row's chunks and applies its gate.
func (e *encoder) attnStepsReduce(s attnShape, b attnBufs, seqs []kvSeq, info loc) {
	attnStepChunks(s, b, seqs, info, func(s attnShape, b attnBufs, _ []kvSeq, _ loc) { e.attnReduceGate(s, b) })
}
