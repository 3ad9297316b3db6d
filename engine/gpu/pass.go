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

// pass is one forward pass recorded into one command buffer.
type pass struct {
	b    *Backend
	seq  *sequence
	in   model.Input
	rows int
	pos0 int
	sc   *passScratch
	enc  encoder
	cnt  Counters

	// block counts the blocks recorded so far; block arena block%2 is the
	// current one. An activation remembers the block that made it, and a
	// block may only read activations of the block before it (or the
	// pass-long ones, gen -1), since older block scratch has been reused.
	block int
	gens  map[*act]int

	logits     *act
	sampleSlot int // ring slot the sampler writes, -1 when not sampling
	// hostSample, when set, makes Wait sample hostRow on the host and write
	// the id into the ring slot.
	hostSample *model.Sampling
	hostRow    *act
	hidden     []loc
	hiddenRows int
	state      int // 0 recording, 1 submitted, 2 done
	decode     bool
}

var _ model.Pass = (*pass)(nil)

// Begin implements model.Backend.
func (b *Backend) Begin(s model.Sequence, in model.Input) (model.Pass, error) {
	seq, ok := s.(*sequence)
	if !ok || seq.b != b {
		return nil, errors.New("sequence belongs to another backend")
	}
	if seq.closed {
		return nil, errors.New("sequence is closed")
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

	cb, err := b.dev.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	p := &pass{b: b, seq: seq, in: in, rows: rows, pos0: seq.pos, sc: sc, sampleSlot: -1,
		gens: map[*act]int{}, decode: rows == 1}
	sc.owner = p
	sc.pass.reset()
	p.cnt.CommandBuffers++
	p.enc = encoder{b: b, cb: cb, stats: &p.cnt}
	seq.inFlight++
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

// Embed implements model.Pass.
func (p *pass) Embed(table *model.Matrix) model.Activation {
	p.startBlock()
	t := p.b.mats[table]
	x := p.newAct(p.rows, table.In, true)
	if t == nil {
		p.enc.fail(fmt.Errorf("embedding %s was not prepared for the device", table.Name))
		return x
	}
	var ids loc
	if len(p.in.IDs) > 0 {
		var err error
		if ids, err = p.sc.pass.alloc(4 * p.rows); err != nil {
			p.enc.fail(err)
			return x
		}
		dst := ids.buf.Bytes()[ids.off:]
		for i, id := range p.in.IDs {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(int32(id)))
		}
		p.seq.ids = append(p.seq.ids, p.in.IDs...)
	} else {
		ids = p.seq.tokenLoc(p.seq.lastSlot)
		p.seq.ids = append(p.seq.ids, p.seq.lastSampled)
	}
	p.enc.embed(t, ids, x, loc{buf: p.seq.history}, p.pos0)
	return x
}

// RMSNorm implements model.Pass.
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

// AddRMSNorm implements model.Pass.
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

// DeltaNet implements model.Pass.
func (p *pass) DeltaNet(layer int, w *model.DeltaNet, x model.Activation) model.Activation {
	in := p.input(x, "deltanet")
	p.startBlock()
	c := &p.b.cfg
	out := p.newAct(x.Rows(), c.HiddenSize, false)
	dd := p.b.deltas[w]
	state, conv := p.seq.state[layer], p.seq.conv[layer]
	if in == nil || dd == nil || state == nil {
		p.enc.fail(fmt.Errorf("layer %d: no DeltaNet prepared for it", layer))
		return out
	}
	t := in.rows
	shape := deltaNetShape{keyHeads: c.LinearKeyHeads, valueHeads: c.LinearValueHeads,
		keyDim: c.LinearKeyHeadDim, valueDim: c.LinearValueHeadDim}
	channels := w.QKV.Out
	vw := shape.valueHeads * shape.valueDim
	qkv := p.newAct(t, channels, false)
	z := p.newAct(t, vw, false)
	a := p.newAct(t, shape.valueHeads, false)
	bb := p.newAct(t, shape.valueHeads, false)
	mixed := p.newAct(t, channels, false)
	o := p.newAct(t, vw, false)
	p.enc.independent(func() {
		p.project(&w.QKV, in, qkv)
		p.project(&w.Z, in, z)
		p.project(&w.A, in, a)
		p.project(&w.B, in, bb)
	})
	p.enc.conv(qkv, loc{buf: dd.conv}, loc{buf: conv}, c.ConvKernel, mixed)
	p.enc.deltaNetScan(shape, t, deltaNetBufs{conv: mixed.loc, a: a.loc, b: bb.loc,
		aLog: loc{buf: dd.aLog}, dtBias: loc{buf: dd.dtBias}, state: loc{buf: state}, o: o.loc})
	p.enc.gatedNorm(o.loc, z.loc, t*shape.valueHeads, shape.valueDim, loc{buf: dd.norm}, c.DeltaNetNormEps, o.loc)
	p.project(&w.Out, o, out)
	return out
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

// projectDev chooses between the GEMV (decode, a few rows) and the tiled
// GEMM (prefill chunks), the latter with the configured operand type.
func (p *pass) projectDev(d *devMatrix, x, y *act) {
	p.projectOps(d, x, y, p.b.opt.GEMMOperands)
}

// projectOps is projectDev with the GEMM's operand type given.
func (p *pass) projectOps(d *devMatrix, x, y *act, ops Operands) {
	if x.rows > gemvMaxRows {
		p.enc.gemm(d, x, y, ops)
		return
	}
	p.enc.gemv(d, x, y)
}

// Attention implements model.Pass.
func (p *pass) Attention(layer int, w *model.Attention, x model.Activation) model.Activation {
	in := p.input(x, "attention")
	p.startBlock()
	c := &p.b.cfg
	out := p.newAct(x.Rows(), c.HiddenSize, false)
	kc, vc := p.seq.kCache[layer], p.seq.vCache[layer]
	if in == nil || kc == nil {
		p.enc.fail(fmt.Errorf("layer %d: no KV cache for it", layer))
		return out
	}
	t := in.rows
	s := attnShape{headDim: c.HeadDim, rotaryDim: c.RotaryDim, qHeads: c.NumHeads, kvHeads: c.NumKVHeads,
		pos0: p.pos0, maxSeq: p.seq.maxToks, rows: t, eps: c.RMSNormEps, kvF32: p.b.opt.KVCacheF32}
	qg := p.newAct(t, w.Q.Out, false)
	k := p.newAct(t, w.K.Out, false)
	v := p.newAct(t, w.V.Out, false)
	q := p.newAct(t, s.qHeads*s.headDim, false)
	o := p.newAct(t, s.qHeads*s.headDim, false)
	p.enc.independent(func() {
		p.project(&w.Q, in, qg)
		p.project(&w.K, in, k)
		p.project(&w.V, in, v)
	})
	bufs := attnBufs{qg: qg.loc, k: k.loc, v: v.loc, qNorm: p.vec(w.QNorm), kNorm: p.vec(w.KNorm),
		invFreq: loc{buf: p.b.invFreq}, kCache: loc{buf: kc}, vCache: loc{buf: vc}, q: q.loc, o: o.loc}
	p.enc.independent(func() {
		p.enc.attnQNormRope(s, bufs)
		p.enc.attnKVWrite(s, bufs)
	})
	if t >= attnPrefillMinRows {
		p.enc.attnPrefill(s, bufs)
	} else {
		parts := t * s.qHeads * s.splits()
		bufs.partO = p.scratch(4 * parts * s.headDim)
		bufs.partM = p.scratch(4 * parts)
		bufs.partL = p.scratch(4 * parts)
		p.enc.attnSplit(s, bufs)
		p.enc.attnReduceGate(s, bufs)
	}
	p.project(&w.O, o, out)
	return out
}

// MoE implements model.Pass.
func (p *pass) MoE(layer int, w *model.MoE, x model.Activation) model.Activation {
	in := p.input(x, "moe")
	p.startBlock()
	c := &p.b.cfg
	out := p.newAct(x.Rows(), c.HiddenSize, false)
	dm := p.b.experts[w]
	if in == nil || dm == nil {
		p.enc.fail(fmt.Errorf("layer %d: no experts prepared for it", layer))
		return out
	}
	t := in.rows
	e, k := c.NumExperts, c.ExpertsPerToken
	slots := k + 1
	// Router logits and the shared expert's gate logit share one row.
	logits := p.newAct(t, e+1, false)
	routerOut := &act{loc: logits.loc, rows: t, width: e, stride: e + 1}
	gateOut := &act{loc: loc{logits.buf, logits.off + 4*e}, rows: t, width: 1, stride: e + 1}
	// Both write the same rows of logits, in disjoint columns.
	p.enc.independent(func() {
		// f32 operands whatever the option: the router's logits choose
		// experts, and half rounding (2⁻¹¹ of each operand) flips near-tied
		// choices that f32 keeps; the matrices are [E+1, H], a small part
		// of the layer's work.
		p.projectOps(dm.router, in, routerOut, FloatOperands)
		p.projectOps(dm.sharedGG, in, gateOut, FloatOperands)
	})
	b := moeBufs{x: in, ids: p.scratch(4 * t * slots), weights: p.scratch(4 * t * slots), y: out.loc}
	p.enc.routerTopK(e, k, t, logits.loc, e+1, b.ids, b.weights)
	s := moeShape{hidden: c.HiddenSize, inter: dm.gate.out, sharedInter: dm.sGate.m.Out, experts: e, slots: slots,
		groupSize: dm.gate.groupSize, sharedGroupSize: dm.sGate.m.GroupSize}
	s.hStride = max(s.inter, s.sharedInter)
	b.h = p.scratch(4 * t * slots * s.hStride)
	if t <= gemvMaxRows {
		// Few rows: read each chosen expert's rows by id, once per token.
		p.enc.moeGateUp(s, t, b, dm)
		s.groupSize, s.sharedGroupSize = dm.down.groupSize, dm.sDown.m.GroupSize
		p.enc.moeDownCombine(s, t, b, dm)
		return out
	}
	// A chunk: sort the (token, slot) rows by expert on the GPU and run
	// grouped GEMMs over the block map, gathering each row's token, so each
	// expert's weights are read once per tile.
	n := t * slots
	groups := e + 1
	if groups > planMax {
		p.enc.fail(fmt.Errorf("%d experts: the routing plan holds at most %d", e, planMax-1))
		return out
	}
	b.offsets = p.scratch(4 * (groups + 1))
	b.cursor = p.scratch(4 * groups)
	b.tiles = p.scratch(16 * planBound(n, groups))
	b.rowOf = p.scratch(4 * n)
	b.tokenOf = p.scratch(4 * n)
	b.ye = p.scratch(4 * n * c.HiddenSize)
	p.enc.moePlan(n, groups, b)
	p.enc.moeScatter(n, slots, b)
	p.enc.moeGemmGateUp(s, n, b, dm)
	s.groupSize, s.sharedGroupSize = dm.down.groupSize, dm.sDown.m.GroupSize
	p.enc.moeGemmDown(s, n, b, dm)
	p.enc.moeCombine(t, slots, c.HiddenSize, b)
	return out
}

// LastRow implements model.Pass.
func (p *pass) LastRow(x model.Activation) model.Activation {
	in := p.input(x, "last row")
	if in == nil {
		return x
	}
	r := in.row(in.rows - 1)
	p.gens[r] = p.gens[in]
	return r
}

// Head implements model.Pass.
func (p *pass) Head(x model.Activation, lmHead *model.Matrix) model.Activation {
	in := p.input(x, "head")
	p.startBlock()
	logits := p.newAct(x.Rows(), lmHead.Out, true)
	if in == nil {
		return logits
	}
	p.project(lmHead, in, logits)
	return logits
}

// Sample implements model.Pass: the chosen id goes to the sequence's next
// ring slot, where the next pass's embedding gather finds it. Greedy and
// top-k draws (1 ≤ TopK ≤ 256, below the vocabulary) run on the device with
// the penalties; other parameters (top-k off, which walks the whole
// vocabulary in id order) are sampled on the host after the pass, and the
// next pass may begin only once this one has been waited on.
func (p *pass) Sample(logits model.Activation, s *model.Sampling) {
	in := p.input(logits, "sample")
	if in == nil {
		return
	}
	slot := p.seq.ring
	p.sampleSlot = slot
	vocab := in.width
	last := in.row(in.rows - 1)
	position := p.pos0 + p.rows // the history's length: the position of the chosen token
	greedy := s.Temperature <= 0
	if !greedy && (s.TopK <= 0 || s.TopK > topkMax || s.TopK >= vocab) {
		p.hostSample = s
		p.hostRow = last
		return
	}
	row := last.loc
	if penaltiesOn(s) {
		work, err := p.sc.pass.alloc(4 * vocab)
		if err != nil {
			p.enc.fail(err)
			return
		}
		p.enc.copyF32(row, work, vocab)
		p.enc.penalties(s, loc{buf: p.seq.history}, position, p.scratch(4*vocab), p.scratch(4*vocab), work)
		row = work
	}
	if greedy {
		chunks := ceilDiv(vocab, argmaxChunk)
		p.enc.argmax(row, vocab, p.scratch(4*chunks), p.scratch(4*chunks), p.seq.tokenLoc(slot))
		return
	}
	chunks := ceilDiv(vocab, topkChunk)
	p.enc.topK(s, row, vocab, position, p.scratch(4*chunks*s.TopK), p.scratch(4*chunks*s.TopK), p.seq.tokenLoc(slot))
}

// penaltiesOn is engine/sample's rule for when penalties change logits.
func penaltiesOn(s *model.Sampling) bool {
	return (s.RepetitionPenalty != 0 && s.RepetitionPenalty != 1) || s.PresencePenalty != 0 || s.FrequencyPenalty != 0
}

// Hidden implements model.Pass: a copy of the residual stream, read after
// the pass (a debug aid; it adds dispatches).
func (p *pass) Hidden(index int, residual model.Activation) {
	if !p.in.Hidden {
		return
	}
	in := p.input(residual, "hidden")
	if in == nil {
		return
	}
	dst, err := p.sc.pass.alloc(4 * in.rows * in.width)
	if err != nil {
		p.enc.fail(err)
		return
	}
	for len(p.hidden) <= index {
		p.hidden = append(p.hidden, loc{})
	}
	p.hidden[index] = dst
	p.hiddenRows = in.rows
	p.enc.copyF32(in.loc, dst, in.rows*in.width)
}

// Logits implements model.Pass.
func (p *pass) Logits(logits model.Activation) {
	if in := p.input(logits, "logits"); in != nil {
		p.logits = in
	}
}

// Submit implements model.Pass.
func (p *pass) Submit() {
	if p.state != 0 {
		return
	}
	p.state = 1
	if p.failed() {
		// Nothing runs: the device gets back the recording (on Metal the
		// command buffer, its autorelease pool and the locked OS thread),
		// and the sequence keeps the ids it had.
		p.enc.cb.Discard()
		p.seq.ids = p.seq.ids[:min(len(p.seq.ids), p.pos0)]
		return
	}
	p.enc.cb.Commit()
	p.seq.pos += p.rows
	if p.hostSample != nil {
		p.seq.hostPending = p
	}
	if p.sampleSlot >= 0 {
		p.seq.lastSlot = p.sampleSlot
		p.seq.lastSampled = -1 // known at this pass's Wait
		p.seq.ring = (p.seq.ring + 1) % tokenSlots
	}
}

// Abandon implements model.Abandoner: a pass still recording is failed,
// its command buffer discarded and the pass retired as Wait would, so the
// device and the sequence are ready for the next pass.
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

// Wait implements model.Pass.
func (p *pass) Wait() (model.Result, error) {
	res := model.Result{Token: -1}
	if p.state == 2 {
		return res, errors.New("pass already waited on")
	}
	if p.state == 0 {
		p.Submit()
	}
	p.seq.inFlight--
	defer p.finish()
	if p.failed() {
		p.state = 2
		return res, p.enc.err
	}
	p.cnt.HostWaits++
	err := p.enc.cb.Wait()
	p.state = 2
	if err != nil {
		return res, err
	}
	if p.logits != nil {
		res.Logits = floats(p.read(p.logits.loc, 4*p.logits.rows*p.logits.width))
	}
	for _, h := range p.hidden {
		res.Hidden = append(res.Hidden, floats(p.read(h, 4*p.hiddenRows*p.b.cfg.HiddenSize)))
	}
	if p.hostSample != nil {
		if p.seq.hostPending == p {
			p.seq.hostPending = nil
		}
		row := floats(p.read(p.hostRow.loc, 4*p.hostRow.width))
		history := p.seq.ids[:p.pos0+p.rows]
		if slices.Contains(history, -1) {
			return res, errors.New("host sampling needs the whole token history, but an earlier sampled token was never read: wait for every pass")
		}
		id := p.b.sampler.Sample(row, p.hostSample, history)
		binary.LittleEndian.PutUint32(p.seq.tokens.Bytes()[4*p.sampleSlot:], uint32(int32(id)))
		p.cnt.HostSamples++
	}
	if p.sampleSlot >= 0 {
		res.Token = p.seq.readToken(p.sampleSlot)
		// The next pass may already have consumed this token on the device:
		// fill in its place in the sequence's ids.
		idx := p.pos0 + p.rows
		if idx < len(p.seq.ids) && p.seq.ids[idx] == -1 {
			p.seq.ids[idx] = res.Token
		}
		if p.seq.lastSlot == p.sampleSlot {
			p.seq.lastSampled = res.Token
		}
	}
	return res, nil
}

// finish books the pass's counters under its phase.
func (p *pass) finish() {
	p.cnt.Passes = 1
	p.cnt.Tokens = int64(p.rows)
	if p.decode {
		p.cnt.MinimumBytes = p.b.MinimumDecodeBytes(p.pos0)
	}
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.decode {
		p.b.stats.Decode.add(p.cnt)
	} else {
		p.b.stats.Prefill.add(p.cnt)
	}
}
