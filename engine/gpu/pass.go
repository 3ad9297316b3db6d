package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
)

// arena hands out scratch device memory by bumping an offset through a list
// of buffers that grows on demand and is kept between passes.
type arena struct {
	dev  device.Device
	bufs []device.Buffer
	cur  int
	off  int
}

// align keeps every allocation on a 256-byte boundary, which satisfies
// Metal's offset rules for every argument kind.
const align = 256

func (a *arena) reset() { a.cur, a.off = 0, 0 }

func (a *arena) alloc(n int) (loc, error) {
	n = (max(n, 4) + align - 1) &^ (align - 1)
	for a.cur < len(a.bufs) {
		if a.off+n <= a.bufs[a.cur].Len() {
			l := loc{buf: a.bufs[a.cur], off: a.off}
			a.off += n
			return l, nil
		}
		a.cur++
		a.off = 0
	}
	size := max(n, 1<<20)
	if k := len(a.bufs); k > 0 {
		size = max(size, 2*a.bufs[k-1].Len())
	}
	// Grow geometrically, but never past what the device can make; one
	// allocation larger than that is the device's error to report.
	size = max(n, min(size, a.dev.MaxBufferLength()))
	buf, err := a.dev.NewBuffer(size)
	if err != nil {
		return loc{}, fmt.Errorf("scratch of %d bytes: %w", size, err)
	}
	a.bufs = append(a.bufs, buf)
	a.cur = len(a.bufs) - 1
	a.off = n
	return loc{buf: buf}, nil
}

// passScratch is the scratch memory of one pass in flight: the pass arena
// (residual stream, ids, logits, hidden copies: alive for the whole pass)
// and two block arenas that successive blocks alternate between, so a block
// reads its input from the other arena while its own is reused.
type passScratch struct {
	pass   arena
	blocks [2]arena
	owner  *pass // the pass using it, until its Wait
}

// A pass records the model over the rows of one or more segments
// (model.Segment) into one command buffer: a pass of one sequence is the
// batch of one. Rows are laid out with the short segments first — every
// segment of at most gemvMaxRows rows, decode steps (one row) before the
// others (a prompt's tail) — then each longer one (a prefill chunk). The projections
// run the short rows together through the GEMV, which reads each weight
// once for up to gemvTokens rows and forms each row's sums as for that row
// alone, and each long segment through the GEMM on its own rows, exactly
// the call a pass of its own makes; the MoE groups the short rows' experts
// across sequences the same way. So a sequence's logits and tokens do not
// depend on what else is in the pass. Attention and the DeltaNet run each
// segment on its own sequence's state.

// segment is one sequence's part of a pass.
type segment struct {
	seq  *sequence
	in   model.Input
	rows int
	pos0 int
	// row0 is the segment's first row in the pass's activations.
	row0 int
	// out is the segment's row in LastRow's output, -1 when it wants none.
	out int

	sampleSlot int // ring slot the sampler writes, -1 when not sampling
	// hostSample, when set, makes Wait sample hostRow on the host and write
	// the id into the ring slot.
	hostSample *model.Sampling
	hostRow    *act
	hidden     []loc
}

// rowRange is a run of the pass's rows projected by one kernel choice:
// short rows through the GEMV however many, a long segment through the
// GEMM.
type rowRange struct {
	from, n int
	gemv    bool
}

// groupedDecode is one grouped expert dispatch of a step, remembered so
// that Wait can count the experts its rows shared.
type groupedDecode struct {
	ids         loc
	rows, slots int
	expertBytes int64 // gate + up + down of one routed expert
}

// pass is one forward pass recorded into one command buffer.
type pass struct {
	b      *Backend
	segs   []segment
	rows   int
	short  int // rows [0, short) belong to the short segments
	steps  int // rows [0, steps) are the one-row segments, in segment order
	ranges []rowRange
	// outputs is the number of rows of LastRow's output.
	outputs int
	sc      *passScratch
	enc     encoder
	cnt     Counters

	// block counts the blocks recorded so far; block arena block%2 is the
	// current one. An activation remembers the block that made it, and a
	// block may only read activations of the block before it (or the
	// pass-long ones, gen -1), since older block scratch has been reused.
	block int
	gens  map[*act]int

	logits   *act
	identity loc // 0, 1, … in the pass arena: the grouped decode's combine order
	info     loc // the decode steps' positions and cache sizes (attnStepInfo)
	grouped  []groupedDecode
	state    int // 0 recording, 1 submitted, 2 done
	decode   bool
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

// checkSegment checks what a segment needs before any work is recorded.
func (b *Backend) checkSegment(sg model.Segment, batched bool) (*sequence, error) {
	seq, ok := sg.Seq.(*sequence)
	in := sg.In
	switch {
	case !ok || seq.b != b:
		return nil, errors.New("sequence belongs to another backend")
	case seq.closed:
		return nil, errors.New("sequence is closed")
	case batched && in.Logits == model.LogitsAll:
		return nil, errors.New("every row's logits are returned only by a pass of one sequence")
	}
	rows := in.Tokens()
	if seq.pos+rows > seq.maxToks {
		return nil, fmt.Errorf("sequence is full: %d tokens held, %d more would pass its capacity of %d", seq.pos, rows, seq.maxToks)
	}
	if len(in.IDs) == 0 && seq.lastSlot < 0 {
		return nil, errors.New("pass without ids, but the sequence has no sampled token to consume")
	}
	if len(in.IDs) == 0 && seq.hostPending != nil {
		return nil, errors.New("the previous pass samples on the host (top-k off or above 256): wait for it before beginning the next")
	}
	for _, id := range in.IDs {
		if id < 0 || id >= b.cfg.VocabSize {
			return nil, fmt.Errorf("token id %d is outside the vocabulary of %d", id, b.cfg.VocabSize)
		}
	}
	return seq, nil
}

func (b *Backend) begin(segs []model.Segment) (*pass, error) {
	if len(segs) == 0 {
		return nil, errors.New("a pass needs at least one segment")
	}
	p := &pass{b: b, segs: make([]segment, len(segs)), gens: map[*act]int{}, decode: true}
	seen := make(map[*sequence]bool, len(segs))
	for i := range segs {
		seq, err := b.checkSegment(segs[i], len(segs) > 1)
		if err == nil && seen[seq] {
			err = errors.New("the sequence is already in this pass")
		}
		if err != nil {
			if len(segs) > 1 {
				err = fmt.Errorf("segment %d: %w", i, err)
			}
			return nil, err
		}
		seen[seq] = true
		rows := segs[i].In.Tokens()
		p.segs[i] = segment{seq: seq, in: segs[i].In, rows: rows, pos0: seq.pos, out: -1, sampleSlot: -1}
		if (&segs[i]).Output() {
			p.segs[i].out = p.outputs
			p.outputs++
		}
		p.rows += rows
		p.decode = p.decode && rows == 1
	}
	// Decode steps (one row) first, so that the multi-sequence step
	// kernels find sequence z at row z; then the other short segments; then
	// each long one on its own rows.
	row := 0
	for i := range p.segs {
		if s := &p.segs[i]; s.rows == 1 {
			s.row0 = row
			row++
		}
	}
	p.steps = row
	for i := range p.segs {
		if s := &p.segs[i]; s.rows > 1 && s.rows <= gemvMaxRows {
			s.row0 = row
			row += s.rows
		}
	}
	p.short = row
	if p.short > 0 {
		p.ranges = append(p.ranges, rowRange{from: 0, n: p.short, gemv: true})
	}
	for i := range p.segs {
		if s := &p.segs[i]; s.rows > gemvMaxRows {
			s.row0 = row
			p.ranges = append(p.ranges, rowRange{from: row, n: s.rows})
			row += s.rows
		}
	}

	b.mu.Lock()
	slot := b.count % 2
	sc := b.slots[slot]
	if sc == nil {
		sc = &passScratch{pass: arena{dev: b.dev}, blocks: [2]arena{{dev: b.dev}, {dev: b.dev}}}
		b.slots[slot] = sc
	}
	if sc.owner != nil && sc.owner.state != 2 {
		b.mu.Unlock()
		return nil, errors.New("two passes are already in flight: wait for the older one before beginning another")
	}
	b.count++
	b.mu.Unlock()

	// A decode step records straight into one command buffer. Any other
	// pass (a prefill chunk, alone or beside decode steps) is held on the
	// host and split by planned work when it is submitted (splitBuffer).
	var cb device.CommandBuffer
	if p.decode {
		var err error
		if cb, err = b.dev.NewCommandBuffer(); err != nil {
			return nil, err
		}
		p.cnt.CommandBuffers++
	} else {
		cb = newSplitBuffer(b.dev, b.opt.CommandBufferBytes)
	}
	p.sc = sc
	sc.owner = p
	sc.pass.reset()
	p.cnt.Sequences = int64(len(p.segs))
	p.enc = encoder{b: b, cb: cb, stats: &p.cnt}
	for i := range p.segs {
		p.segs[i].seq.inFlight++
	}
	return p, nil
}

// newAct allocates an activation [rows, width] in the current block arena,
// or in the pass arena when long is set.
func (p *pass) newAct(rows, width int, long bool) *act {
	a := &act{rows: rows, width: width, stride: width}
	var err error
	if long {
		a.loc, err = p.sc.pass.alloc(4 * rows * width)
		p.gens[a] = -1
	} else {
		a.loc, err = p.sc.blocks[p.block%2].alloc(4 * rows * width)
		p.gens[a] = p.block
	}
	if err != nil {
		p.enc.fail(err)
	}
	return a
}

// scratch allocates n bytes in the current block arena.
func (p *pass) scratch(n int) loc {
	l, err := p.sc.blocks[p.block%2].alloc(n)
	if err != nil {
		p.enc.fail(err)
	}
	return l
}

// startBlock moves to the next block arena.
func (p *pass) startBlock() {
	p.block++
	p.sc.blocks[p.block%2].reset()
}

// input checks that x is one of this pass's activations and still alive.
func (p *pass) input(x model.Activation, what string) *act {
	a, ok := x.(*act)
	if !ok {
		p.enc.fail(fmt.Errorf("%s: activation of type %T does not belong to the GPU backend", what, x))
		return nil
	}
	g, ok := p.gens[a]
	if !ok {
		p.enc.fail(fmt.Errorf("%s: activation comes from another pass", what))
		return nil
	}
	if g >= 0 && g < p.block-1 {
		p.enc.fail(fmt.Errorf("%s: activation made %d blocks ago; its scratch memory has been reused", what, p.block-g))
		return nil
	}
	return a
}

func (p *pass) failed() bool { return p.enc.err != nil }

func (p *pass) vec(v []float32) loc {
	l, err := p.b.vec(v)
	if err != nil {
		p.enc.fail(err)
	}
	return l
}

// rowsOf is the view of rows [from, from+n) of a.
func (a *act) rowsOf(from, n int) *act {
	return &act{loc: loc{a.buf, a.off + 4*from*a.stride}, rows: n, width: a.width, stride: a.stride}
}

// Embed implements model.Blocks: each segment's rows gather their ids, from
// the host or, for a decode step without ids, from the sequence's ring slot
// that the previous pass's sampler wrote. The decode steps (rows [0,
// steps)) gather together, one dispatch for up to stepMaxSeqs sequences;
// each longer segment gathers its own rows.
func (p *pass) Embed(table *model.Matrix) model.Activation {
	p.startBlock()
	t := p.b.mats[table]
	x := p.newAct(p.rows, table.In, true)
	if t == nil {
		p.enc.fail(fmt.Errorf("embedding %s was not prepared for the device", table.Name))
		return x
	}
	var hostIDs loc
	var stepIDs, stepHistories []loc
	for i := range p.segs {
		s := &p.segs[i]
		var ids loc
		if len(s.in.IDs) > 0 {
			if hostIDs.buf == nil {
				var err error
				if hostIDs, err = p.sc.pass.alloc(4 * p.rows); err != nil {
					p.enc.fail(err)
					return x
				}
			}
			ids = loc{hostIDs.buf, hostIDs.off + 4*s.row0}
			dst := ids.buf.Bytes()[ids.off:]
			for j, id := range s.in.IDs {
				binary.LittleEndian.PutUint32(dst[4*j:], uint32(int32(id)))
			}
			s.seq.ids = append(s.seq.ids, s.in.IDs...)
		} else {
			ids = s.seq.tokenLoc(s.seq.lastSlot)
			s.seq.ids = append(s.seq.ids, s.seq.lastSampled)
		}
		if s.rows == 1 {
			// Rows [0, steps) hold the decode steps in segment order.
			stepIDs = append(stepIDs, ids)
			stepHistories = append(stepHistories, loc{buf: s.seq.history, off: 4 * s.pos0})
			continue
		}
		p.enc.embed(t, ids, x.rowsOf(s.row0, s.rows), loc{buf: s.seq.history}, s.pos0)
	}
	if len(stepIDs) > 0 {
		p.enc.embedSteps(t, stepIDs, x.rowsOf(0, p.steps), stepHistories)
	}
	return x
}

// RMSNorm implements model.Blocks.
func (p *pass) RMSNorm(x model.Activation, weight []float32) model.Activation {
	in := p.input(x, "rmsnorm")
	p.startBlock()
	if in == nil {
		return p.newAct(x.Rows(), x.Width(), false)
	}
	y := p.newAct(in.rows, in.width, false)
	p.enc.rmsnorm(in, p.vec(weight), p.b.cfg.RMSNormEps, y)
	return y
}

// AddRMSNorm implements model.Blocks.
func (p *pass) AddRMSNorm(residual, delta model.Activation, weight []float32) model.Activation {
	r := p.input(residual, "add_rmsnorm residual")
	d := p.input(delta, "add_rmsnorm delta")
	p.startBlock()
	if r == nil || d == nil {
		return p.newAct(residual.Rows(), residual.Width(), false)
	}
	y := p.newAct(r.rows, r.width, false)
	p.enc.addRMSNorm(r, d, p.vec(weight), p.b.cfg.RMSNormEps, y)
	return y
}

// project records y = x·Wᵀ with the kernel that fits the pass.
func (p *pass) project(m *model.Matrix, x, y *act) {
	d := p.b.mats[m]
	if d == nil {
		p.enc.fail(fmt.Errorf("matrix %s was not prepared for the device", m.Name))
		return
	}
	p.projectDev(d, x, y)
}

// projectDev projects with the configured GEMM operand type.
func (p *pass) projectDev(d *devMatrix, x, y *act) {
	p.projectOps(d, x, y, p.b.opt.GEMMOperands)
}

// projectOps chooses the kernel per run of rows: the short segments' rows
// (and LastRow's output, one row per segment) through the GEMV, each long
// segment through the tiled GEMM with the given operand type, on its own
// rows as a pass of its own would.
func (p *pass) projectOps(d *devMatrix, x, y *act, ops Operands) {
	if x.rows != p.rows {
		p.enc.gemv(d, x, y)
		return
	}
	for _, r := range p.ranges {
		xr, yr := x.rowsOf(r.from, r.n), y.rowsOf(r.from, r.n)
		if r.gemv {
			p.enc.gemv(d, xr, yr)
		} else {
			p.enc.gemm(d, xr, yr, ops)
		}
	}
}

// Hidden implements model.Blocks: a copy of each asking segment's rows of
// the residual stream, read after the pass (a debug aid; it adds
// dispatches).
func (p *pass) Hidden(index int, residual model.Activation) {
	var in *act
	for i := range p.segs {
		s := &p.segs[i]
		if !s.in.Hidden {
			continue
		}
		if in == nil {
			if in = p.input(residual, "hidden"); in == nil {
				return
			}
		}
		dst, err := p.sc.pass.alloc(4 * s.rows * in.width)
		if err != nil {
			p.enc.fail(err)
			return
		}
		for len(s.hidden) <= index {
			s.hidden = append(s.hidden, loc{})
		}
		s.hidden[index] = dst
		p.enc.copyF32(in.rowsOf(s.row0, s.rows).loc, dst, s.rows*in.width)
	}
}

// Logits implements model.Blocks.
func (p *pass) Logits(logits model.Activation) {
	if in := p.input(logits, "logits"); in != nil {
		p.logits = in
	}
}

// Submit implements model.Blocks.
func (p *pass) Submit() {
	if p.state != 0 {
		return
	}
	p.state = 1
	if p.failed() {
		// Nothing runs: the device gets back the recording (on Metal the
		// command buffer, its autorelease pool and the locked OS thread),
		// and each sequence keeps the ids it had.
		p.enc.cb.Discard()
		for i := range p.segs {
			s := &p.segs[i]
			s.seq.ids = s.seq.ids[:min(len(s.seq.ids), s.pos0)]
		}
		return
	}
	if sb, ok := p.enc.cb.(*splitBuffer); ok {
		p.cnt.CommandBuffers += int64(sb.Parts())
	}
	p.enc.cb.Commit()
	for i := range p.segs {
		s := &p.segs[i]
		seq := s.seq
		seq.pos += s.rows
		if s.hostSample != nil {
			seq.hostPending = p
		}
		if s.sampleSlot >= 0 {
			seq.lastSlot = s.sampleSlot
			seq.lastSampled = -1 // known at this pass's Wait
			seq.ring = (seq.ring + 1) % tokenSlots
		}
	}
}

// Abandon implements model.Abandoner: a pass still recording is failed,
// its command buffer discarded and the pass retired as Wait would, so the
// device and the sequences are ready for the next pass.
func (p *pass) Abandon() {
	if p.state != 0 {
		return
	}
	p.enc.fail(errors.New("the pass was abandoned while recording; nothing of it ran"))
	p.Wait()
}

// read copies n bytes of device memory to the host, counting it as a
// mid-step readback unless the pass has finished.
func (p *pass) read(l loc, n int) []byte {
	if p.state != 2 {
		p.cnt.MidStepReadbacks++
	}
	return append([]byte(nil), l.buf.Bytes()[l.off:l.off+n]...)
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Wait implements model.Pass: it submits the pass if that is not done
// yet, waits for the device and returns each segment's result.
func (p *pass) Wait() ([]model.Result, error) {
	if p.state == 2 {
		return nil, errors.New("pass already waited on")
	}
	if p.state == 0 {
		p.Submit()
	}
	for i := range p.segs {
		p.segs[i].seq.inFlight--
	}
	defer p.finish()
	if p.failed() {
		p.state = 2
		return nil, p.enc.err
	}
	p.cnt.HostWaits++
	err := p.enc.cb.Wait()
	p.state = 2
	if err != nil {
		return nil, err
	}
	res := make([]model.Result, len(p.segs))
	for i := range p.segs {
		if res[i], err = p.result(i); err != nil {
			return nil, err
		}
	}
	p.countSharedExperts()
	return res, nil
}

// result reads segment i's outputs after the pass.
func (p *pass) result(i int) (model.Result, error) {
	s := &p.segs[i]
	seq := s.seq
	res := model.Result{Token: -1}
	if p.logits != nil && s.in.Logits != model.LogitsNone {
		l := p.logits
		if len(p.segs) > 1 || l.rows != p.rows {
			l = p.outputRow(l, i)
		}
		if l != nil {
			res.Logits = floats(p.read(l.loc, 4*l.rows*l.width))
		}
	}
	for _, h := range s.hidden {
		res.Hidden = append(res.Hidden, floats(p.read(h, 4*s.rows*p.b.cfg.HiddenSize)))
	}
	if s.hostSample != nil {
		if seq.hostPending == p {
			seq.hostPending = nil
		}
		row := floats(p.read(s.hostRow.loc, 4*s.hostRow.width))
		history := seq.ids[:s.pos0+s.rows]
		if slices.Contains(history, -1) {
			return res, errors.New("host sampling needs the whole token history, but an earlier sampled token was never read: wait for every pass")
		}
		id := p.b.sampler.Sample(row, s.hostSample, history)
		binary.LittleEndian.PutUint32(seq.tokens.Bytes()[4*s.sampleSlot:], uint32(int32(id)))
		p.cnt.HostSamples++
	}
	if s.sampleSlot >= 0 {
		res.Token = seq.readToken(s.sampleSlot)
		// The next pass may already have consumed this token on the device:
		// fill in its place in the sequence's ids.
		idx := s.pos0 + s.rows
		if idx < len(seq.ids) && seq.ids[idx] == -1 {
			seq.ids[idx] = res.Token
		}
		if seq.lastSlot == s.sampleSlot {
			seq.lastSampled = res.Token
		}
	}
	return res, nil
}

// countSharedExperts counts, from the routing the pass wrote, the routed
// experts that the grouped decode read once for several rows: each repeat
// is an expert's gate, up and down not read again.
func (p *pass) countSharedExperts() {
	for _, g := range p.grouped {
		ids := p.read(g.ids, 4*g.rows*g.slots)
		seen := map[uint32]bool{}
		for r := 0; r < g.rows; r++ {
			for s := 0; s < g.slots-1; s++ { // the last slot is the shared expert, declared once
				id := binary.LittleEndian.Uint32(ids[4*(r*g.slots+s):])
				if seen[id] {
					p.cnt.SharedExpertBytes += g.expertBytes
				}
				seen[id] = true
			}
		}
	}
}

// finish books the pass's counters under its phase.
func (p *pass) finish() {
	p.cnt.Passes = 1
	p.cnt.Tokens = int64(p.rows)
	if p.decode {
		positions := make([]int, len(p.segs))
		for i := range p.segs {
			positions[i] = p.segs[i].pos0
		}
		p.cnt.MinimumBytes = p.b.minimumStepBytes(positions)
	}
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.decode {
		p.b.stats.Decode.add(p.cnt)
	} else {
		p.b.stats.Prefill.add(p.cnt)
	}
}
