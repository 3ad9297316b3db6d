package gpu

import (
	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

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
