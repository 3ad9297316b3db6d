package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

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
