package cpu

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/suzuran-app/suzuran/engine/model"
)

// A pass runs each block as the model calls it, over the rows of one or
// more segments (model.Segment): a pass of one sequence is the batch of one.
//
// Exactness across batches: a sequence's rows must come out bit for bit the
// same whatever else is in the pass. The row-wise work (embedding, norms,
// routing, attention and the scan per segment) is per row by construction;
// the matrix products are not, since matMul picks its kernel from the number
// of rows (the fused matrix-vector loop under gemmMinTokens rows, then two
// tilings of the dequantizing GEMM, and the GEMM pairs token rows). So the
// pass multiplies its rows in groups (rowGroup): the rows of every segment
// shorter than gemmMinTokens (decode steps, the tail of a prompt) together
// through the matrix-vector loop, which computes each row alone and reads
// each weight once for all of them, and each longer segment (a prefill
// chunk) through matMul on its own rows, exactly the call a pass of its own
// makes.

// segment is one sequence's part of a pass.
type segment struct {
	seq *sequence
	in  model.Input
	ids []int // the segment's tokens
	pos int   // position of ids[0]
	// row0 is the segment's first row in the pass's activations; its rows
	// are row0 … row0+len(ids)-1.
	row0 int
	// out is the segment's row in LastRow's output, -1 when it wants none.
	out int
}

// rowGroup is a set of an activation's rows multiplied in one call.
type rowGroup struct {
	rows []int
	// vec: the matrix-vector loop, whatever the number of rows; otherwise
	// matMul on these rows alone.
	vec bool
}

// pass is a pass over one or more segments (model.Pass).
type pass struct {
	b    *Backend
	segs []segment
	ids  []int // every row's token
	// rowSeg and rowPos are each row's segment index and position.
	rowSeg, rowPos []int
	// ropePos is each row's M-RoPE position (temporal, height, width): the
	// input's Positions, or the sequence's next text position on.
	ropePos [][3]int
	// groups split the pass's rows for the matrix products; outGroups the
	// rows of LastRow's output (one row per segment: all matrix-vector).
	groups, outGroups []rowGroup
	outputs           int // rows of LastRow's output
	res               []model.Result
	err               error // first failure; later blocks do nothing
	submitted         bool
	// stop, when set (model.Stopper), is asked between runs of bounded
	// work; halted records that it said yes, for every thread of the pass.
	stop   func() bool
	halted atomic.Bool
	// blockRows is the rows of a run of a matrix product: the backend's
	// (stopRows unless a test changed it).
	blockRows int
}

// Stopping inside a pass. A pass given a stop function (StopWhen) asks it
// before every run of work whose size does not grow with the pass's rows,
// so that a cancelled prefill ends a bounded amount of work after its
// cancellation, whatever its length. The blocks hold no checks of their
// own: their parallel regions go through pass.parallel (pool.stoppable),
// which asks before each work item, and the runs of a matrix product
// through pass.blocks; attention alone also asks inside an item, between
// the tiles of a block (attend), whose number grows with the context. The
// items:
//
//   - the matrix products of a segment's rows (projections, the router, the
//     shared and each routed expert's SwiGLU) run stopRows rows at a time
//     (a shorter tail joins the run before it); a row's arithmetic does not
//     depend on the run it is in (on the exact path every run has at least
//     packMinTokens rows, so it takes the same kernel as the whole call; the
//     fast path computes each row alone);
//   - attention asks before each block (attentionBlocks bounds a block's
//     scores, so its work, whatever the context);
//   - the DeltaNet's conv and scan run stopTokens tokens at a time, each
//     value head's scan carrying its state from run to run;
//   - the row-wise loops (norms, rotary, gates, routing, the MoE's combine)
//     run in pieces of at most stopTokens rows.
//
// Left between checks, and linear in the rows: the embedding and the
// norms between blocks, allocating and zeroing each block's buffers,
// building the attention blocks' lists, appending to the KV cache, the
// conv's window, and in the MoE the map of each group's rows and their
// quantization for the experts. On the demo model the longest CPU time of
// the process between two checks measured 5–6 ms at 500 tokens, 5–12 ms at
// 2000 and 33–48 ms at 8000 (TestStopBoundsWork), against seconds for a
// block's whole stretch at 8000 tokens.
const (
	stopRows   = 128
	stopTokens = 256
)

// StopWhen implements model.Stopper.
func (p *pass) StopWhen(stop func() bool) { p.stop = stop }

// stopping reports whether the pass was told to stop, asking stop if it
// has not said yes yet. Any thread of the pass may call it.
func (p *pass) stopping() bool {
	if p.stop == nil {
		return false
	}
	if p.halted.Load() {
		return true
	}
	if p.stop() {
		p.halted.Store(true)
		return true
	}
	return false
}

// stopped is stopping for the pass's own goroutine, between parallel
// regions: once told to stop the pass fails with model.ErrStopped, and it
// reports true whenever the pass has failed.
func (p *pass) stopped() bool {
	if p.err == nil && p.stopping() {
		p.fail(model.ErrStopped)
	}
	return p.err != nil
}

// parallel runs fn over [0, n) on the backend's pool in pieces of at
// least grain and at most most items, with the pass's stop asked before
// each piece (pool.stoppable), and reports whether the pass goes on: false
// once it was told to stop (it then fails with model.ErrStopped) or has
// failed. fn holds no stop checks: a row loop passes stopTokens as most,
// so that a stop waits for at most stopTokens rows a thread.
func (p *pass) parallel(n, grain, most int, fn func(lo, hi int)) bool {
	var stop func() bool
	if p.stop != nil {
		stop = p.stopping
	}
	p.b.pool.stoppable(stop, n, grain, most, fn)
	return !p.stopped()
}

// blocks splits count rows into runs of blockRows, the last between
// blockRows and twice that, calling fn on each with a stop check before;
// false once stop said yes. Any thread of the pass may call it.
func (p *pass) blocks(count int, fn func(lo, hi int)) bool {
	for _, r := range p.runs(count) {
		if p.stopping() {
			return false
		}
		fn(r[0], r[1])
	}
	return true
}

// runs is blocks' split of count rows: [lo, hi) runs of blockRows, the
// last between blockRows and twice that.
func (p *pass) runs(count int) [][2]int {
	n := p.blockRows
	if n <= 0 {
		n = stopRows
	}
	var rs [][2]int
	for lo := 0; lo < count; {
		hi := lo + n
		if count-hi < n {
			hi = count
		}
		rs = append(rs, [2]int{lo, hi})
		lo = hi
	}
	return rs
}

var _ model.Pass = (*pass)(nil)

// Begin implements model.Backend.
func (b *Backend) Begin(segs []model.Segment) (model.Pass, error) {
	p, err := b.begin(segs)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (b *Backend) begin(segs []model.Segment) (*pass, error) {
	if len(segs) == 0 {
		return nil, errors.New("a pass needs at least one segment")
	}
	p := &pass{b: b, segs: make([]segment, len(segs)), res: make([]model.Result, len(segs))}
	seen := make(map[*sequence]bool, len(segs))
	var vecRows []int
	for i := range segs {
		sg, err := b.segment(segs[i], len(segs) > 1)
		if err != nil {
			if len(segs) > 1 {
				err = fmt.Errorf("segment %d: %w", i, err)
			}
			return nil, err
		}
		if seen[sg.seq] {
			return nil, fmt.Errorf("segment %d: the sequence is already in this pass", i)
		}
		seen[sg.seq] = true
		sg.row0 = len(p.ids)
		sg.out = -1
		if (&segs[i]).Output() {
			sg.out = p.outputs
			p.outputs++
		}
		p.ids = append(p.ids, sg.ids...)
		rows := make([]int, len(sg.ids))
		for t := range sg.ids {
			rows[t] = sg.row0 + t
			p.rowSeg = append(p.rowSeg, i)
			p.rowPos = append(p.rowPos, sg.pos+t)
			if sg.in.Positions != nil {
				p.ropePos = append(p.ropePos, sg.in.Positions[t])
			} else {
				p.ropePos = append(p.ropePos, model.TextPosition(sg.seq.ropeNext+t))
			}
		}
		if len(rows) < gemmMinTokens {
			vecRows = append(vecRows, rows...)
		} else {
			p.groups = append(p.groups, rowGroup{rows: rows})
		}
		p.segs[i] = sg
		p.res[i] = model.Result{Token: -1}
		if sg.in.Hidden {
			p.res[i].Hidden = make([][]float32, len(b.w.Layers)+1)
		}
	}
	if len(vecRows) > 0 {
		p.groups = append(p.groups, rowGroup{rows: vecRows, vec: true})
	}
	out := make([]int, p.outputs)
	for i := range out {
		out[i] = i
	}
	p.outGroups = []rowGroup{{rows: out, vec: true}}
	for i := range p.segs {
		p.segs[i].seq.busy = true
	}
	return p, nil
}

// segment checks one segment of a pass and resolves its tokens.
func (b *Backend) segment(s model.Segment, batched bool) (segment, error) {
	seq, ok := s.Seq.(*sequence)
	in := s.In
	switch {
	case !ok || seq.b != b:
		return segment{}, errors.New("sequence comes from another backend")
	case seq.layers == nil:
		return segment{}, errors.New("sequence is closed")
	case seq.busy:
		return segment{}, errors.New("a pass is already recording on this sequence")
	case seq.broken:
		return segment{}, errors.New("an earlier pass on this sequence failed: restore a snapshot or start a new sequence")
	case batched && in.Logits == model.LogitsAll:
		return segment{}, errors.New("every row's logits are returned only by a pass of one sequence")
	}
	ids := in.IDs
	if len(ids) == 0 {
		if seq.sampled < 0 {
			return segment{}, errors.New("pass has no token ids and the sequence's previous pass sampled none")
		}
		ids = []int{seq.sampled}
	}
	if seq.Pos()+len(ids) > seq.max {
		return segment{}, fmt.Errorf("sequence is full: %d tokens held, %d more would pass its capacity of %d",
			seq.Pos(), len(ids), seq.max)
	}
	for _, id := range ids {
		if id < 0 || id >= b.w.Embed.Out {
			return segment{}, fmt.Errorf("token id %d is outside the vocabulary [0, %d)", id, b.w.Embed.Out)
		}
	}
	if in.Embeds != nil && len(in.Embeds) != len(ids) || in.Positions != nil && len(in.Positions) != len(ids) {
		return segment{}, fmt.Errorf("input has %d embedding entries and %d positions for %d ids", len(in.Embeds), len(in.Positions), len(ids))
	}
	for t, e := range in.Embeds {
		if e != nil && len(e) != b.cfg.HiddenSize {
			return segment{}, fmt.Errorf("embedding of row %d has %d values, the model's hidden size is %d", t, len(e), b.cfg.HiddenSize)
		}
	}
	if in.Sample != nil && !in.Sample.Greedy() && b.sampler == nil {
		return segment{}, errors.New("the CPU backend was made without a sampler: only greedy sampling is available")
	}
	return segment{seq: seq, in: in, ids: append([]int(nil), ids...), pos: seq.Pos()}, nil
}

// rows is the number of rows of the pass's activations.
func (p *pass) rows() int { return len(p.ids) }

// tensor unwraps an activation of this backend.
func (p *pass) tensor(a model.Activation) *tensor {
	t, ok := a.(*tensor)
	if !ok {
		p.fail(fmt.Errorf("activation %T does not come from the CPU backend", a))
		return newTensor(0, 0)
	}
	return t
}

func (p *pass) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// Embed implements model.Blocks.
func (p *pass) Embed(table *model.Matrix) model.Activation {
	x := newTensor(p.rows(), table.In)
	if p.err != nil {
		return x
	}
	for t, id := range p.ids {
		dequantRow(table, id, x.row(t))
	}
	for _, s := range p.segs {
		for t, e := range s.in.Embeds {
			if e != nil {
				copy(x.row(s.row0+t), e)
			}
		}
	}
	return x
}

// RMSNorm implements model.Blocks.
func (p *pass) RMSNorm(xa model.Activation, weight []float32) model.Activation {
	x := p.tensor(xa)
	y := newTensor(x.rows, x.width)
	if p.err != nil {
		return y
	}
	if len(weight) != x.width {
		p.fail(fmt.Errorf("norm weight has %d elements, activation width is %d", len(weight), x.width))
		return y
	}
	p.b.pool.parallelFor(x.rows, 8, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			rmsNorm(y.row(t), x.row(t), weight, p.b.cfg.RMSNormEps)
		}
	})
	return y
}

// AddRMSNorm implements model.Blocks.
func (p *pass) AddRMSNorm(ra, da model.Activation, weight []float32) model.Activation {
	r, d := p.tensor(ra), p.tensor(da)
	if p.err == nil && (r.rows != d.rows || r.width != d.width) {
		p.fail(fmt.Errorf("residual [%d, %d] and update [%d, %d] differ in shape", r.rows, r.width, d.rows, d.width))
	}
	if p.err != nil || len(weight) != r.width {
		return p.RMSNorm(r, weight) // fails, or has failed
	}
	// The residual sum and the norm row by row in one parallel region.
	y := newTensor(r.rows, r.width)
	p.b.pool.parallelFor(r.rows, 8, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			rr, dr := r.row(t), d.row(t)
			for i, v := range dr[:len(rr)] {
				rr[i] += v
			}
			rmsNorm(y.row(t), rr, weight, p.b.cfg.RMSNormEps)
		}
	})
	return y
}

// LastRow implements model.Blocks: the last row of each segment that wants
// an output.
func (p *pass) LastRow(xa model.Activation) model.Activation {
	x := p.tensor(xa)
	y := newTensor(p.outputs, x.width)
	if p.err != nil {
		return y
	}
	if x.rows != p.rows() {
		p.fail(fmt.Errorf("LastRow of %d rows in a pass of %d", x.rows, p.rows()))
		return y
	}
	for _, s := range p.segs {
		if s.out >= 0 {
			copy(y.row(s.out), x.row(s.row0+len(s.ids)-1))
		}
	}
	return y
}

// Head implements model.Blocks.
func (p *pass) Head(xa model.Activation, lmHead *model.Matrix) model.Activation {
	x := p.tensor(xa)
	y := newTensor(x.rows, lmHead.Out)
	if p.err == nil {
		p.matMul(y.data, x, lmHead)
	}
	return y
}

// groupsOf says how x's rows are multiplied: x is either a full activation
// of the pass or LastRow's output.
func (p *pass) groupsOf(x *tensor) []rowGroup {
	switch x.rows {
	case p.rows():
		return p.groups
	case p.outputs:
		return p.outGroups
	}
	p.fail(fmt.Errorf("activation of %d rows in a pass of %d rows and %d outputs", x.rows, p.rows(), p.outputs))
	return nil
}

// matMul computes y = x·wᵀ for x with the pass's rows (or LastRow's), in
// its row groups.
func (p *pass) matMul(y []float32, x *tensor, w *model.Matrix) {
	p.project(x, projection{y, w})
}

// projection is one matrix applied to a shared input by project.
type projection struct {
	y []float32
	w *model.Matrix
}

// project computes y = x·wᵀ for each projection of the same input x, group
// by group: a matrix-vector group runs every projection in one parallel
// region, a matrix-product group one matMul each.
func (p *pass) project(x *tensor, outs ...projection) {
	for _, o := range outs {
		if x.width != o.w.In {
			p.fail(fmt.Errorf("%s: input width %d, the matrix takes %d", o.w.Name, x.width, o.w.In))
			return
		}
	}
	groups := p.groupsOf(x)
	if p.err != nil {
		return
	}
	for _, g := range groups {
		if g.vec {
			// Decode rows: a few per sequence, however long the pass.
			if !p.stopped() {
				p.b.projectRows(x, g, outs)
			}
			continue
		}
		if !p.blocks(len(g.rows), func(lo, hi int) {
			p.b.projectRows(x, rowGroup{rows: g.rows[lo:hi]}, outs)
		}) {
			p.stopped()
			return
		}
	}
}

// projectRows computes the projections for the rows of one group.
func (b *Backend) projectRows(x *tensor, g rowGroup, outs []projection) {
	n := len(g.rows)
	var xs []float32
	ys := make([][]float32, len(outs))
	// A run of consecutive rows (a segment, or a part of one) is read and
	// written in place; other rows are gathered and scattered.
	r0, inPlace := contiguous(g.rows)
	if inPlace {
		xs = x.data[r0*x.width : (r0+n)*x.width]
		for i, o := range outs {
			ys[i] = o.y[r0*o.w.Out : (r0+n)*o.w.Out]
		}
	} else {
		xs, _ = gatherRows(x, g.rows)
		for i, o := range outs {
			ys[i] = make([]float32, n*o.w.Out)
		}
	}
	// The fast path computes each row alone whatever the call, and one
	// call over all the projections quantizes x once for them.
	if g.vec || b.quantizedActivations() {
		jobs := make([]vecJob, len(outs))
		for i, o := range outs {
			jobs[i] = vecJob{y: ys[i], x: xs, rows: n, w: o.w}
		}
		b.matVecs(jobs)
	} else {
		for i, o := range outs {
			b.matMul(ys[i], xs, n, o.w)
		}
	}
	if inPlace {
		return
	}
	for i, o := range outs {
		out := o.w.Out
		for j, r := range g.rows {
			copy(o.y[r*out:(r+1)*out], ys[i][j*out:(j+1)*out])
		}
	}
}

// contiguous reports whether rows are consecutive, from r0.
func contiguous(rows []int) (r0 int, ok bool) {
	if len(rows) == 0 {
		return 0, false
	}
	for i, r := range rows {
		if r != rows[0]+i {
			return 0, false
		}
	}
	return rows[0], true
}

// gatherRows returns the given rows of x as one [len(rows), width] block: x's
// own data when they are all of x in order (whole), a copy otherwise.
func gatherRows(x *tensor, rows []int) (data []float32, whole bool) {
	whole = len(rows) == x.rows
	for i, r := range rows {
		if r != i {
			whole = false
			break
		}
	}
	if whole {
		return x.data, true
	}
	data = make([]float32, len(rows)*x.width)
	for i, r := range rows {
		copy(data[i*x.width:(i+1)*x.width], x.row(r))
	}
	return data, false
}

// outputRow is segment i's row of logits l: its LastRow row, or the last
// row when a lone segment asked for every row.
func (p *pass) outputRow(l *tensor, i int) []float32 {
	s := &p.segs[i]
	if l.rows == p.outputs && s.out >= 0 {
		return l.row(s.out)
	}
	if len(p.segs) == 1 && l.rows == p.rows() {
		return l.row(l.rows - 1)
	}
	p.fail(fmt.Errorf("logits of %d rows do not hold segment %d's row", l.rows, i))
	return nil
}

// Sample implements model.Pass.
func (p *pass) Sample(la model.Activation) {
	for i := range p.segs {
		if s := p.segs[i].in.Sample; s != nil {
			p.sample(la, i, s)
		}
	}
}

// sample chooses segment i's next token with s.
func (p *pass) sample(la model.Activation, i int, s *model.Sampling) {
	l := p.tensor(la)
	if p.err != nil || l.rows == 0 {
		return
	}
	row := p.outputRow(l, i)
	if row == nil {
		return
	}
	if s.Greedy() {
		p.res[i].Token = model.ArgMax(row)
		return
	}
	seg := &p.segs[i]
	history := make([]int, 0, len(seg.seq.tokens)+len(seg.ids))
	history = append(append(history, seg.seq.tokens...), seg.ids...)
	p.res[i].Token = p.b.sampler.Sample(row, s, history)
}

// Hidden implements model.Blocks.
func (p *pass) Hidden(index int, ra model.Activation) {
	if p.err != nil {
		return
	}
	r := p.tensor(ra)
	for i, s := range p.segs {
		if !s.in.Hidden {
			continue
		}
		if index < 0 || index >= len(p.res[i].Hidden) {
			p.fail(fmt.Errorf("hidden state index %d outside [0, %d)", index, len(p.res[i].Hidden)))
			return
		}
		p.res[i].Hidden[index] = append([]float32(nil), r.data[s.row0*r.width:(s.row0+len(s.ids))*r.width]...)
	}
}

// Logits implements model.Blocks. A lone segment's result takes the logits
// tensor's memory, which is not used after this.
func (p *pass) Logits(la model.Activation) {
	if p.err != nil {
		return
	}
	l := p.tensor(la)
	if len(p.segs) == 1 {
		if p.segs[0].in.Logits != model.LogitsNone {
			p.res[0].Logits = l.data
		}
		return
	}
	for i, s := range p.segs {
		if s.in.Logits != model.LogitsNone {
			if row := p.outputRow(l, i); row != nil {
				p.res[i].Logits = append([]float32(nil), row...)
			}
		}
	}
}

// Submit implements model.Blocks: the work is done, so the sequences
// advance.
func (p *pass) Submit() {
	if p.submitted {
		return
	}
	p.submitted = true
	for _, s := range p.segs {
		seq := s.seq
		seq.busy = false
		if p.err != nil {
			// Some layers may have advanced and others not: the state is
			// no longer a state of any token prefix.
			seq.broken = true
			continue
		}
		seq.tokens = append(seq.tokens, s.ids...)
		for _, q := range p.ropePos[s.row0 : s.row0+len(s.ids)] {
			seq.ropeNext = max(seq.ropeNext, q[0]+1, q[1]+1, q[2]+1)
		}
	}
	if p.err == nil {
		for i, s := range p.segs {
			s.seq.sampled = p.res[i].Token
		}
	}
}

// Abandon implements model.Abandoner. The blocks called so far have run
// on the sequences, which are left broken until a snapshot is restored.
func (p *pass) Abandon() {
	if p.submitted {
		return
	}
	p.submitted = true
	for _, s := range p.segs {
		s.seq.busy = false
		s.seq.broken = true
	}
}

// Wait implements model.Pass: it submits the pass if that is not done yet
// and returns its results.
func (p *pass) Wait() ([]model.Result, error) {
	p.Submit()
	if p.err != nil {
		return nil, p.err
	}
	return p.res, nil
}
