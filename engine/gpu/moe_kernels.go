package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// routerShape is the router's geometry: rows of logits stride floats
// apart, experts router logits then the shared gate's in each, topK routed
// experts chosen per row.
type routerShape struct {
	experts, topK, rows, stride int
}

// routerTopK records softmax/top-k/renormalise over logits [rows, stride]
// (router logits then the shared gate's), writing ids and weights [rows, k+1].
func (e *encoder) routerTopK(s routerShape, logits, ids, weights loc) {
	experts, topK, rows, stride := s.experts, s.topK, s.rows, s.stride
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
