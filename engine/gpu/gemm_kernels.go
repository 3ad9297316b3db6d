package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

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
