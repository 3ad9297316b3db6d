package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

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

// copyF32 records dst = src for n floats (the Hidden debug hook).
func (e *encoder) copyF32(src, dst loc, n int) {
	const threads = 256
	e.dispatch("copy_f32", device.Size3{X: ceilDiv(n, threads)}, device.Size3{X: threads},
		int64(4*n), int64(4*n), bytesArg(0, pack(&copyParams{Count: u32(n)})), src.arg(1), dst.arg(2))
}
