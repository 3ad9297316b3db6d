package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
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

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
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
