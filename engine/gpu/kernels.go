package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
)

// Launch geometry shared with the .metal sources (the #defines there).
const (
	simdWidth      = 32
	gemvRows       = 4 // GEMV_ROWS
	gemvSimdgroups = 2 // GEMV_SIMDGROUPS
	gemvTokens     = 8 // GEMV_TOKENS
	moeRows        = 4 // MOE_ROWS
	moeSimdgroups  = 2 // MOE_SIMDGROUPS
	moeGroupTokens = 8 // MOE_GROUP_TOKENS
	dnSimdgroups   = 2 // DN_SIMDGROUPS
	dnCols         = 4 // DN_COLS
	dnMaxKeyDim    = 256
	attnMaxDim     = 512 // ATTN_MAX_DIM
	convMaxKernel  = 8   // CONV_MAX_KERNEL
	stepMaxSeqs    = 8   // CONV_MAX_SEQS, DN_MAX_SEQS, EMBED_MAX_SEQS, ARGMAX_MAX_SEQS: sequences per multi-sequence step dispatch
	moeMaxExperts  = 512 // 32·MOE_MAX_PER_LANE
	moeMaxTopK     = 16
	attnSplitLen   = 256 // keys per attention chunk
	argmaxChunk    = 4096
)

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Alignment flags of common.h: vector loads need natural alignment.
const (
	rowsAligned8 = 1 // ROWS_ALIGNED_8: every weight row starts on 8 bytes
	xAligned16   = 2 // X_ALIGNED_16: every activation row starts on 16 bytes
)

// loadFlags says which vector loads a dispatch may use: weight rows
// aligned (checked at load) and activation rows at off + 4·stride·i.
func loadFlags(rows bool, xOff, xStride int) int {
	f := 0
	if rows {
		f |= rowsAligned8
	}
	if xOff%16 == 0 && xStride%4 == 0 {
		f |= xAligned16
	}
	return f
}

// encoder records dispatches into one command buffer, resolving pipelines
// through the backend's cache and summing the declared traffic.
type encoder struct {
	b     *Backend
	cb    device.CommandBuffer
	stats *Counters
	err   error
	// together is set while recording a group of independent dispatches.
	together bool
}

// independent records the dispatches fn makes with no barrier between them
// and one after, so that a concurrent encoder (Metal's) may overlap them.
// They must read only what was written before the group and write disjoint
// memory: the projections of one input into separate outputs, for example.
func (e *encoder) independent(fn func()) {
	e.together = true
	fn()
	e.together = false
	if e.err == nil {
		e.cb.Barrier()
	}
}

// dispatch records one kernel launch followed by a barrier (unless inside
// independent): every kernel of a pass reads what the one before it wrote,
// and the scratch memory of a block is reused by the next, so the order
// must hold.
func (e *encoder) dispatch(name string, groups, threads device.Size3, read, write int64, args ...device.Arg) {
	if e.err != nil {
		return
	}
	p, err := e.b.pipeline(name)
	if err != nil {
		e.err = err
		return
	}
	if groups.Y == 0 {
		groups.Y = 1
	}
	if groups.Z == 0 {
		groups.Z = 1
	}
	if threads.Y == 0 {
		threads.Y = 1
	}
	if threads.Z == 0 {
		threads.Z = 1
	}
	if groups.X == 0 {
		return
	}
	if n := threads.X * threads.Y * threads.Z; n > p.MaxThreadsPerThreadgroup() {
		e.err = fmt.Errorf("kernel %s: %d threads per threadgroup, the pipeline allows %d", name, n, p.MaxThreadsPerThreadgroup())
		return
	}
	e.cb.Dispatch(device.Dispatch{Pipeline: p, Threadgroups: groups, Threads: threads, Args: args,
		ReadBytes: read, WriteBytes: write})
	if !e.together {
		e.cb.Barrier()
	}
	e.stats.Dispatches++
	e.stats.ReadBytes += read
	e.stats.WriteBytes += write
}

func bytesArg(index int, b []byte) device.Arg { return device.Arg{Index: index, Bytes: b} }

// act is an activation: rows × width f32 values in device memory, row i at
// byte offset off + 4·i·stride.
type act struct {
	loc
	rows, width, stride int
}

func (a *act) Rows() int  { return a.rows }
func (a *act) Width() int { return a.width }

// row returns the activation's row i as a one-row view.
func (a *act) row(i int) *act {
	return &act{loc: loc{a.buf, a.off + 4*i*a.stride}, rows: 1, width: a.width, stride: a.stride}
}

func (a *act) bytes() int64 { return int64(4 * a.rows * a.width) }

// gemv records y[t] = W·x[t] for every row of x, reading W once per
// gemvTokens rows.
func (e *encoder) gemv(w *devMatrix, x, y *act) {
	m := w.m
	if x.width != m.In || y.width != m.Out || x.rows != y.rows {
		e.fail(fmt.Errorf("gemv %s: x [%d,%d] → y [%d,%d] does not fit [%d,%d]", m.Name, x.rows, x.width, y.rows, y.width, m.Out, m.In))
		return
	}
	perGroup := gemvRows * gemvSimdgroups
	// Each threadgroup row reads the weights once for gemvTokens token rows.
	tokenGroups := ceilDiv(x.rows, gemvTokens)
	e.dispatch("gemv_"+w.format+"_f32",
		device.Size3{X: ceilDiv(m.Out, perGroup), Y: tokenGroups}, device.Size3{X: simdWidth * gemvSimdgroups},
		int64(tokenGroups)*w.bytes+x.bytes(), y.bytes(),
		bytesArg(0, pack(&gemvParams{In: u32(m.In), Out: u32(m.Out), XStride: u32(x.stride), YStride: u32(y.stride),
			GroupSize: u32(m.GroupSize), Flags: u32(loadFlags(w.aligned, x.off, x.stride)), Rows: u32(x.rows)})),
		w.data.arg(1), w.scales.arg(2), w.biases.arg(3), x.arg(4), y.arg(5))
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// embed gathers rows of table for the token ids at ids (int32, one per row
// of out) and appends the ids to history at pos0.
func (e *encoder) embed(table *devMatrix, ids loc, out *act, history loc, pos0 int) {
	m := table.m
	const threads = 256
	e.dispatch("embed_"+table.format+"_f32",
		device.Size3{X: ceilDiv(m.In, threads), Y: out.rows}, device.Size3{X: threads},
		int64(out.rows)*(table.bytes/int64(m.Out)+4), out.bytes()+int64(4*out.rows),
		bytesArg(0, pack(&embedParams{Hidden: u32(m.In), Vocab: u32(m.Out), GroupSize: u32(m.GroupSize), Pos0: u32(pos0)})),
		table.data.arg(1), table.scales.arg(2), table.biases.arg(3), ids.arg(4), out.arg(5), history.arg(6))
}

// embedSteps gathers one row of table for each of len(ids) sequences' decode
// steps: row z of out for the id at ids[z] (one int32: the host's id or the
// sequence's ring slot), appended at histories[z] (the sequence's history
// at its position), stepMaxSeqs sequences per dispatch. Each row holds the
// bits embed gives it alone.
func (e *encoder) embedSteps(table *devMatrix, ids []loc, out *act, histories []loc) {
	if out.rows != len(ids) || len(histories) != len(ids) {
		e.fail(fmt.Errorf("embed steps: %d rows for %d ids and %d histories", out.rows, len(ids), len(histories)))
		return
	}
	m := table.m
	const threads = 256
	for z0 := 0; z0 < len(ids); z0 += stepMaxSeqs {
		n := min(stepMaxSeqs, len(ids)-z0)
		rows := out.rowsOf(z0, n)
		args := append([]device.Arg{
			bytesArg(0, pack(&embedSeqsParams{Hidden: u32(m.In), Vocab: u32(m.Out), GroupSize: u32(m.GroupSize), Rows: u32(n)})),
			table.data.arg(1), table.scales.arg(2), table.biases.arg(3), rows.arg(4)},
			seqArgs(5, ids[z0:z0+n])...)
		args = append(args, seqArgs(5+stepMaxSeqs, histories[z0:z0+n])...)
		e.dispatch("embed_seqs_"+table.format+"_f32",
			device.Size3{X: ceilDiv(m.In, threads), Y: n}, device.Size3{X: threads},
			int64(n)*(table.bytes/int64(m.Out)+4), rows.bytes()+int64(4*n), args...)
	}
}

func packNorm(width, xStride, yStride int, eps float32) []byte {
	return pack(&normParams{Width: u32(width), XStride: u32(xStride), YStride: u32(yStride), Eps: eps})
}

// rmsnorm records y = RMSNorm(x)·w per row.
func (e *encoder) rmsnorm(x *act, w loc, eps float32, y *act) {
	e.dispatch("rmsnorm_f32", device.Size3{X: x.rows}, device.Size3{X: simdWidth},
		x.bytes()+int64(4*x.width), y.bytes(),
		bytesArg(0, packNorm(x.width, x.stride, y.stride, eps)), x.arg(1), w.arg(2), y.arg(3))
}

// addRMSNorm records residual += delta; y = RMSNorm(residual)·w.
func (e *encoder) addRMSNorm(residual, delta *act, w loc, eps float32, y *act) {
	if residual.stride != delta.stride {
		e.fail(fmt.Errorf("add_rmsnorm: residual and delta strides differ (%d, %d)", residual.stride, delta.stride))
		return
	}
	e.dispatch("add_rmsnorm_f32", device.Size3{X: residual.rows}, device.Size3{X: simdWidth},
		residual.bytes()+delta.bytes()+int64(4*residual.width), residual.bytes()+y.bytes(),
		bytesArg(0, packNorm(residual.width, residual.stride, y.stride, eps)),
		residual.arg(1), delta.arg(2), w.arg(3), y.arg(4))
}

// gatedNorm records y = RMSNorm(o)·w·silu(z) over rows of width, o and z
// contiguous.
func (e *encoder) gatedNorm(o, z loc, rows, width int, w loc, eps float32, y loc) {
	n := int64(4 * rows * width)
	e.dispatch("gated_rmsnorm_silu_f32", device.Size3{X: rows}, device.Size3{X: simdWidth},
		2*n+int64(4*width), n,
		bytesArg(0, packNorm(width, width, width, eps)), o.arg(1), z.arg(2), w.arg(3), y.arg(4))
}

// conv records the causal depthwise conv + SiLU over rows tokens of x,
// advancing state.
func (e *encoder) conv(x *act, w, state loc, kernel int, out *act) {
	c := x.width
	const threads = 256
	stateBytes := int64(4 * (kernel - 1) * c)
	e.dispatch("conv1d_causal_silu_f32", device.Size3{X: ceilDiv(c, threads)}, device.Size3{X: threads},
		x.bytes()+int64(4*c*kernel)+stateBytes, out.bytes()+stateBytes,
		bytesArg(0, pack(&convParams{Channels: u32(c), Taps: u32(kernel), Rows: u32(x.rows)})), x.arg(1), w.arg(2), state.arg(3), out.arg(4))
}

// seqArgs binds the per-sequence buffers of a multi-sequence step kernel
// from index first: stepMaxSeqs arguments, the unused ones bound to the
// first sequence's buffer (the kernel never reads them).
func seqArgs(first int, bufs []loc) []device.Arg {
	args := make([]device.Arg, stepMaxSeqs)
	for i := range args {
		l := bufs[0]
		if i < len(bufs) {
			l = bufs[i]
		}
		args[i] = l.arg(first + i)
	}
	return args
}

// convSteps records one token of each of len(states) sequences — row z of x
// and out is sequence z's, advancing states[z] — stepMaxSeqs sequences per
// dispatch. Each sequence's row is computed as conv computes a one-row pass.
func (e *encoder) convSteps(x *act, w loc, states []loc, kernel int, out *act) {
	if x.rows != len(states) || out.rows != x.rows {
		e.fail(fmt.Errorf("conv steps: %d rows for %d sequences", x.rows, len(states)))
		return
	}
	c := x.width
	const threads = 256
	stateBytes := int64(4 * (kernel - 1) * c)
	for z0 := 0; z0 < len(states); z0 += stepMaxSeqs {
		n := min(stepMaxSeqs, len(states)-z0)
		xs, outs := x.rowsOf(z0, n), out.rowsOf(z0, n)
		args := append([]device.Arg{bytesArg(0, pack(&convParams{Channels: u32(c), Taps: u32(kernel), Rows: u32(n)})),
			xs.arg(1), w.arg(2), outs.arg(3)}, seqArgs(4, states[z0:z0+n])...)
		e.dispatch("conv1d_step_seqs_f32", device.Size3{X: ceilDiv(c, threads), Y: n}, device.Size3{X: threads},
			xs.bytes()+int64(4*c*kernel)+int64(n)*stateBytes, outs.bytes()+int64(n)*stateBytes, args...)
	}
}

// deltaNetShape is the DeltaNet's head layout.
type deltaNetShape struct {
	keyHeads, valueHeads, keyDim, valueDim int
}

// deltaNetBufs are the DeltaNet recurrence's operands: the conv output
// (q ‖ k ‖ v), the gate inputs a and b, the per-head A_log and dt_bias, the
// recurrent state and the output.
type deltaNetBufs struct {
	conv, a, b, aLog, dtBias, state, o loc
}

// deltaNetScan records the recurrence over rows tokens.
func (e *encoder) deltaNetScan(s deltaNetShape, rows int, d deltaNetBufs) {
	stateBytes := int64(4 * s.valueHeads * s.valueDim * s.keyDim)
	width := 2*s.keyHeads*s.keyDim + s.valueHeads*s.valueDim
	name := "deltanet_scan_f32"
	if rows == 1 {
		name = "deltanet_step_f32"
	}
	e.dispatch(name,
		device.Size3{X: ceilDiv(s.valueDim, dnCols*dnSimdgroups), Y: s.valueHeads}, device.Size3{X: simdWidth * dnSimdgroups},
		int64(4*rows*(width+2*s.valueHeads))+int64(8*s.valueHeads)+stateBytes,
		int64(4*rows*s.valueHeads*s.valueDim)+stateBytes,
		bytesArg(0, pack(&deltaNetParams{Rows: u32(rows), KeyHeads: u32(s.keyHeads), ValueHeads: u32(s.valueHeads),
			KeyDim: u32(s.keyDim), ValueDim: u32(s.valueDim)})),
		d.conv.arg(1), d.a.arg(2), d.b.arg(3), d.aLog.arg(4), d.dtBias.arg(5), d.state.arg(6), d.o.arg(7))
}

// deltaNetSteps records one token of each of len(states) sequences: row z
// of d's conv, a, b and o is sequence z's, its recurrent state states[z]
// (d.state is unused), stepMaxSeqs sequences per dispatch, each computed as
// deltaNetScan computes a one-row pass.
func (e *encoder) deltaNetSteps(s deltaNetShape, d deltaNetBufs, states []loc) {
	stateBytes := int64(4 * s.valueHeads * s.valueDim * s.keyDim)
	width := 2*s.keyHeads*s.keyDim + s.valueHeads*s.valueDim
	at := func(l loc, z, rowFloats int) loc { return loc{l.buf, l.off + 4*z*rowFloats} }
	for z0 := 0; z0 < len(states); z0 += stepMaxSeqs {
		n := min(stepMaxSeqs, len(states)-z0)
		args := append([]device.Arg{
			bytesArg(0, pack(&deltaNetParams{Rows: u32(n), KeyHeads: u32(s.keyHeads), ValueHeads: u32(s.valueHeads),
				KeyDim: u32(s.keyDim), ValueDim: u32(s.valueDim)})),
			at(d.conv, z0, width).arg(1), at(d.a, z0, s.valueHeads).arg(2), at(d.b, z0, s.valueHeads).arg(3),
			d.aLog.arg(4), d.dtBias.arg(5), at(d.o, z0, s.valueHeads*s.valueDim).arg(6)},
			seqArgs(7, states[z0:z0+n])...)
		e.dispatch("deltanet_step_seqs_f32",
			device.Size3{X: ceilDiv(s.valueDim, dnCols*dnSimdgroups), Y: s.valueHeads, Z: n},
			device.Size3{X: simdWidth * dnSimdgroups},
			int64(4*n*(width+2*s.valueHeads))+int64(8*s.valueHeads)+int64(n)*stateBytes,
			int64(4*n*s.valueHeads*s.valueDim)+int64(n)*stateBytes, args...)
	}
}

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

// routerTopK records softmax/top-k/renormalise over logits [rows, stride]
// (router logits then the shared gate's), writing ids and weights [rows, k+1].
func (e *encoder) routerTopK(experts, topK, rows int, logits loc, stride int, ids, weights loc) {
	e.dispatch("moe_router_topk_f32", device.Size3{X: rows}, device.Size3{X: simdWidth},
		int64(4*rows*(experts+1)), int64(8*rows*(topK+1)),
		bytesArg(0, pack(&routerParams{Experts: u32(experts), TopK: u32(topK), LogitsStride: u32(stride)})), logits.arg(1), ids.arg(2), weights.arg(3))
}

// moeShape is what the expert kernels need to know.
type moeShape struct {
	hidden, inter, sharedInter, experts, slots, hStride, groupSize, sharedGroupSize int
	rows                                                                            int // the grouped decode kernels' token rows
}

// pack packs ExpertParams with the load flags of the routed and the
// shared matrices.
func (s moeShape) pack(flags, sharedFlags int) []byte {
	return pack(&expertParams{Hidden: u32(s.hidden), Inter: u32(s.inter), SharedInter: u32(s.sharedInter),
		Experts: u32(s.experts), Slots: u32(s.slots), HStride: u32(s.hStride), GroupSize: u32(s.groupSize),
		SharedGroupSize: u32(s.sharedGroupSize), Flags: u32(flags), SharedFlags: u32(sharedFlags), Rows: u32(s.rows)})
}

// moeBufs are the expert kernels' operands: the normalised input x, the
// routing (ids and weights, [rows, slots]), the expert activations h, the
// routing plan of a chunk and the output y.
type moeBufs struct {
	x                      *act
	ids, weights, h, y     loc
	offsets, cursor, tiles loc // the plan: row offsets, scatter cursors, block map
	rowOf, tokenOf, ye     loc // each assignment's row, each row's token, per-row outputs
}

// moeGroupedDecode records the experts of up to moeGroupTokens rows grouped
// by expert (each expert's weights read once for every row that chose it):
// h per (row, slot), then ye = down·h per (row, slot) into b.ye, then
// y[t] = Σ_slot weight·ye in slot order through b.rowOf, which must hold
// the identity 0…rows·slots−1. The declared reads count every row's routed
// experts as distinct, the most the step can read; how many were shared is
// known only after the pass (Counters.SharedExpertBytes).
func (e *encoder) moeGroupedDecode(s moeShape, rows int, b moeBufs, w *devMoE) {
	if rows > moeGroupTokens {
		e.fail(fmt.Errorf("moe: %d rows in one grouped decode, the kernels serve at most %d", rows, moeGroupTokens))
		return
	}
	gate, up, sGate, sUp, down, sDown := w.gate, w.up, w.sGate, w.sUp, w.down, w.sDown
	x, ids, h := b.x.loc, b.ids, b.h
	perGroup := moeRows * moeSimdgroups
	entries := rows * s.slots
	routed := int64(rows * (s.slots - 1))
	s.rows = rows
	read := routed*(gate.expertBytes+up.expertBytes) + sGate.bytes + sUp.bytes + int64(4*rows*s.hidden+4*entries)
	e.dispatch("moe_gate_up_grouped_"+gate.format+"_f32",
		device.Size3{X: ceilDiv(max(s.inter, s.sharedInter), perGroup), Y: entries},
		device.Size3{X: simdWidth * moeSimdgroups},
		read, int64(4*rows*(s.slots-1)*s.inter+4*rows*s.sharedInter),
		bytesArg(0, s.pack(loadFlags(gate.aligned && up.aligned, x.off, s.hidden), loadFlags(sGate.aligned && sUp.aligned, x.off, s.hidden))),
		x.arg(1), ids.arg(2), h.arg(3),
		device.Arg{Index: 4, Buffer: gate.data}, device.Arg{Index: 5, Buffer: gate.scales},
		device.Arg{Index: 6, Buffer: gate.biases}, device.Arg{Index: 7, Buffer: gate.table},
		device.Arg{Index: 8, Buffer: up.data}, device.Arg{Index: 9, Buffer: up.scales},
		device.Arg{Index: 10, Buffer: up.biases}, device.Arg{Index: 11, Buffer: up.table},
		sGate.data.arg(12), sGate.scales.arg(13), sGate.biases.arg(14),
		sUp.data.arg(15), sUp.scales.arg(16), sUp.biases.arg(17))
	s.groupSize, s.sharedGroupSize = down.groupSize, sDown.m.GroupSize
	read = routed*down.expertBytes + sDown.bytes + int64(4*rows*(s.slots-1)*s.inter+4*rows*s.sharedInter+4*entries)
	e.dispatch("moe_down_grouped_"+down.format+"_f32",
		device.Size3{X: ceilDiv(s.hidden, perGroup), Y: entries}, device.Size3{X: simdWidth * moeSimdgroups},
		read, int64(4*entries*s.hidden),
		bytesArg(0, s.pack(loadFlags(down.aligned, h.off, s.hStride), loadFlags(sDown.aligned, h.off, s.hStride))),
		h.arg(1), ids.arg(2), b.ye.arg(3),
		device.Arg{Index: 4, Buffer: down.data}, device.Arg{Index: 5, Buffer: down.scales},
		device.Arg{Index: 6, Buffer: down.biases}, device.Arg{Index: 7, Buffer: down.table},
		sDown.data.arg(8), sDown.scales.arg(9), sDown.biases.arg(10))
	e.moeCombine(rows, s.slots, s.hidden, b)
}

// argmax records the greedy choice over one row of vocab logits into out
// (one int32), through per-chunk partials in scratch (4·chunks bytes each).
func (e *encoder) argmax(logits loc, vocab int, partVal, partID, out loc) {
	e.argmaxSteps([]loc{logits}, vocab, partVal, partID, []loc{out})
}

// argmaxSteps records the greedy choice of each of len(rows) rows of vocab
// logits — rows[z] wherever it lies — into outs[z] (one int32 each, a
// sequence's ring slot), stepMaxSeqs rows per pair of dispatches, through
// per-chunk partials in scratch (4·chunks bytes per row each, for
// min(len(rows), stepMaxSeqs) rows). A row's choice is the one argmax gives
// it alone.
func (e *encoder) argmaxSteps(rows []loc, vocab int, partVal, partID loc, outs []loc) {
	if len(rows) != len(outs) || len(rows) == 0 {
		e.fail(fmt.Errorf("argmax: %d rows for %d outputs", len(rows), len(outs)))
		return
	}
	chunks := ceilDiv(vocab, argmaxChunk)
	for z0 := 0; z0 < len(rows); z0 += stepMaxSeqs {
		n := min(stepMaxSeqs, len(rows)-z0)
		p := pack(&argmaxParams{Vocab: u32(vocab), Chunk: argmaxChunk, Chunks: u32(chunks), Rows: u32(n)})
		e.dispatch("argmax_partial_seqs_f32", device.Size3{X: chunks, Y: n}, device.Size3{X: simdWidth},
			int64(4*n*vocab), int64(8*n*chunks),
			append([]device.Arg{bytesArg(0, p), partVal.arg(1), partID.arg(2)}, seqArgs(3, rows[z0:z0+n])...)...)
		e.dispatch("argmax_final_seqs_i32", device.Size3{X: n}, device.Size3{X: simdWidth},
			int64(8*n*chunks), int64(4*n),
			append([]device.Arg{bytesArg(0, p), partVal.arg(1), partID.arg(2)}, seqArgs(3, outs[z0:z0+n])...)...)
	}
}

// copyF32 records dst = src for n floats (the Hidden debug hook).
func (e *encoder) copyF32(src, dst loc, n int) {
	const threads = 256
	e.dispatch("copy_f32", device.Size3{X: ceilDiv(n, threads)}, device.Size3{X: threads},
		int64(4*n), int64(4*n), bytesArg(0, pack(&copyParams{Count: u32(n)})), src.arg(1), dst.arg(2))
}

// Prefill tiles (gemm_tile.h). The grouped GEMMs use gemmBM×gemmBN tiles
// with either operand type (the block map is cut in gemmBM rows); the dense
// half GEMM uses gemmHalfBM×gemmHalfBN.
const (
	gemmBM      = 32
	gemmBN      = 32
	gemmHalfBM  = 64 // GEMMH_BM
	gemmHalfBN  = 32 // GEMMH_BN
	gemmThreads = 128
	// gemvMaxRows is the most token rows a projection runs as a GEMV; past
	// it a GEMM tile reads each weight once per 32 rows instead of per row.
	gemvMaxRows = 8
	planThreads = 256 // MOE_PLAN_THREADS
	planMax     = 513 // MOE_PLAN_MAX
)

// gemm records y = x·Wᵀ with the tiled kernel for the operand type.
func (e *encoder) gemm(w *devMatrix, x, y *act, ops Operands) {
	m := w.m
	if x.width != m.In || y.width != m.Out || x.rows != y.rows {
		e.fail(fmt.Errorf("gemm %s: x [%d,%d] → y [%d,%d] does not fit [%d,%d]", m.Name, x.rows, x.width, y.rows, y.width, m.Out, m.In))
		return
	}
	name, bm, bn := "gemm_"+w.format+"_f32", gemmBM, gemmBN
	if ops == HalfOperands {
		name, bm, bn = "gemm_half_"+w.format+"_f32", gemmHalfBM, gemmHalfBN
	}
	tilesM, tilesN := ceilDiv(x.rows, bm), ceilDiv(m.Out, bn)
	e.dispatch(name,
		device.Size3{X: tilesN, Y: tilesM}, device.Size3{X: gemmThreads},
		int64(tilesM)*w.bytes+x.bytes()*int64(tilesN), y.bytes(),
		bytesArg(0, pack(&gemmParams{In: u32(m.In), Out: u32(m.Out), Rows: u32(x.rows), XStride: u32(x.stride),
			YStride: u32(y.stride), GroupSize: u32(m.GroupSize)})),
		w.data.arg(1), w.scales.arg(2), w.biases.arg(3), x.arg(4), y.arg(5))
}

// planBound is the block map length for n routed rows over groups experts:
// every expert's rows fill whole tiles except its last.
func planBound(n, groups int) int { return ceilDiv(n, gemmBM) + min(groups, n) }

// moePlan records the histogram, scan and block map.
func (e *encoder) moePlan(n, groups int, b moeBufs) {
	ids, offsets, cursor, tiles := b.ids, b.offsets, b.cursor, b.tiles
	bound := planBound(n, groups)
	e.dispatch("moe_plan_u32", device.Size3{X: 1}, device.Size3{X: planThreads},
		int64(4*n), int64(4*(groups+1)+4*groups+16*bound),
		bytesArg(0, pack(&planParams{Assignments: u32(n), Groups: u32(groups), Bound: u32(bound)})), ids.arg(1), offsets.arg(2), cursor.arg(3), tiles.arg(4))
}

// moeScatter records each (token, slot) taking the next row of its expert:
// rowOf [n] and tokenOf [n] come out.
func (e *encoder) moeScatter(n, slots int, b moeBufs) {
	ids, cursor, rowOf, tokenOf := b.ids, b.cursor, b.rowOf, b.tokenOf
	const threads = 256
	e.dispatch("moe_scatter_rows_u32", device.Size3{X: ceilDiv(n, threads)}, device.Size3{X: threads},
		int64(4*n), int64(8*n),
		bytesArg(0, pack(&scatterParams{Assignments: u32(n), Slots: u32(slots)})), ids.arg(1), cursor.arg(2), rowOf.arg(3), tokenOf.arg(4))
}

func (s moeShape) packGrouped(xStride int) []byte {
	return pack(&groupedParams{Hidden: u32(s.hidden), Inter: u32(s.inter), SharedInter: u32(s.sharedInter),
		Experts: u32(s.experts), HStride: u32(s.hStride), GroupSize: u32(s.groupSize),
		SharedGroupSize: u32(s.sharedGroupSize), XStride: u32(xStride)})
}

// groupedKernel names the grouped GEMM kernel for the operand type.
func (e *encoder) groupedKernel(proj, format string) string {
	if e.b.opt.GEMMOperands == HalfOperands {
		return "moe_gemm_" + proj + "_half_" + format + "_f32"
	}
	return "moe_gemm_" + proj + "_" + format + "_f32"
}

// groupedWeightBytes bounds what the tiles read of one projection: each
// tile reads its expert's whole matrix slice for its column block.
func groupedWeightBytes(tiles int, expertBytes, sharedBytes int64) int64 {
	return int64(tiles) * max(expertBytes, sharedBytes)
}

// moeGemmGateUp records h = silu(X·gateᵀ)⊙(X·upᵀ) per block-map tile, the
// rows of X gathered from x through tokenOf.
func (e *encoder) moeGemmGateUp(s moeShape, n int, b moeBufs, w *devMoE) {
	gate, up, sGate, sUp := w.gate, w.up, w.sGate, w.sUp
	x, tiles, tokenOf, h := b.x, b.tiles, b.tokenOf, b.h
	bound := planBound(n, s.experts+1)
	e.dispatch(e.groupedKernel("gate_up", gate.format),
		device.Size3{X: ceilDiv(max(s.inter, s.sharedInter), gemmBN), Y: bound}, device.Size3{X: gemmThreads},
		groupedWeightBytes(bound, gate.expertBytes+up.expertBytes, sGate.bytes+sUp.bytes)+int64(4*n*s.hidden)+int64(16*bound+4*n),
		int64(4*n*s.hStride),
		bytesArg(0, s.packGrouped(x.stride)), tiles.arg(1), x.arg(2), h.arg(3),
		device.Arg{Index: 4, Buffer: gate.data}, device.Arg{Index: 5, Buffer: gate.scales},
		device.Arg{Index: 6, Buffer: gate.biases}, device.Arg{Index: 7, Buffer: gate.table},
		device.Arg{Index: 8, Buffer: up.data}, device.Arg{Index: 9, Buffer: up.scales},
		device.Arg{Index: 10, Buffer: up.biases}, device.Arg{Index: 11, Buffer: up.table},
		sGate.data.arg(12), sGate.scales.arg(13), sGate.biases.arg(14),
		sUp.data.arg(15), sUp.scales.arg(16), sUp.biases.arg(17), tokenOf.arg(18))
}

// moeGemmDown records ye = H·downᵀ per block-map tile.
func (e *encoder) moeGemmDown(s moeShape, n int, b moeBufs, w *devMoE) {
	down, sDown := w.down, w.sDown
	tiles, h, ye := b.tiles, b.h, b.ye
	bound := planBound(n, s.experts+1)
	e.dispatch(e.groupedKernel("down", down.format),
		device.Size3{X: ceilDiv(s.hidden, gemmBN), Y: bound}, device.Size3{X: gemmThreads},
		groupedWeightBytes(bound, down.expertBytes, sDown.bytes)+int64(4*n*s.hStride)+int64(16*bound),
		int64(4*n*s.hidden),
		bytesArg(0, s.packGrouped(0)), tiles.arg(1), h.arg(2), ye.arg(3),
		device.Arg{Index: 4, Buffer: down.data}, device.Arg{Index: 5, Buffer: down.scales},
		device.Arg{Index: 6, Buffer: down.biases}, device.Arg{Index: 7, Buffer: down.table},
		sDown.data.arg(8), sDown.scales.arg(9), sDown.biases.arg(10))
}

// moeCombine records y[t] = Σ_slot weight·ye[row_of[t, slot]].
func (e *encoder) moeCombine(rows, slots, hidden int, b moeBufs) {
	ye, rowOf, weights, y := b.ye, b.rowOf, b.weights, b.y
	const threads = 256
	e.dispatch("moe_combine_f32", device.Size3{X: ceilDiv(hidden, threads), Y: rows}, device.Size3{X: threads},
		int64(4*rows*slots*hidden+8*rows*slots), int64(4*rows*hidden),
		bytesArg(0, pack(&combineParams{Hidden: u32(hidden), Slots: u32(slots)})), ye.arg(1), rowOf.arg(2), weights.arg(3), y.arg(4))
}

// Device sampling (sample.metal).
const (
	topkThreads   = 256
	topkPerThread = 16
	topkChunk     = topkThreads * topkPerThread
	// topkMax is the largest top-k the device draws; larger (or off) is
	// sampled on the host.
	topkMax = 256
)

// penalties records the repetition, presence and frequency penalties of s
// over history[:count] into logits (a private copy of the row).
func (e *encoder) penalties(s *model.Sampling, history loc, count int, counts, flags, logits loc) {
	const threads = 256
	p := pack(&penaltyParams{Count: u32(count), From: u32(max(0, min(s.GeneratedFrom, count))),
		Repetition: s.RepetitionPenalty, Presence: s.PresencePenalty, Frequency: s.FrequencyPenalty})
	g := device.Size3{X: ceilDiv(count, threads)}
	th := device.Size3{X: threads}
	e.dispatch("sample_penalty_clear_u32", g, th, int64(4*count), int64(8*count),
		bytesArg(0, p), history.arg(1), counts.arg(2), flags.arg(3))
	e.dispatch("sample_penalty_count_u32", g, th, int64(4*count), int64(8*count),
		bytesArg(0, p), history.arg(1), counts.arg(2), flags.arg(3))
	e.dispatch("sample_penalty_apply_f32", g, th, int64(16*count), int64(8*count),
		bytesArg(0, p), history.arg(1), counts.arg(2), flags.arg(3), logits.arg(4))
}

// topK records the top-k draw over one row of vocab logits into out.
func (e *encoder) topK(s *model.Sampling, logits loc, vocab, position int, candVal, candID, out loc) {
	chunks := ceilDiv(vocab, topkChunk)
	p := pack(&topKParams{Vocab: u32(vocab), Chunks: u32(chunks), K: u32(s.TopK), Temperature: s.Temperature,
		TopP: s.TopP, MinP: s.MinP, SeedLo: uint32(s.Seed), SeedHi: uint32(s.Seed >> 32), Position: u32(position)})
	e.dispatch("sample_topk_partial_f32", device.Size3{X: chunks}, device.Size3{X: topkThreads},
		int64(4*vocab), int64(8*chunks*s.TopK), bytesArg(0, p), logits.arg(1), candVal.arg(2), candID.arg(3))
	e.dispatch("sample_topk_final_f32", device.Size3{X: 1}, device.Size3{X: topkThreads},
		int64(8*chunks*s.TopK), int64(4*chunks*s.TopK+4), bytesArg(0, p), candVal.arg(1), candID.arg(2), out.arg(3))
}
