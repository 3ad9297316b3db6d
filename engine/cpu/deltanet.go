package cpu

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// DeltaNet implements model.Blocks: the Gated DeltaNet of engine/model/MODEL.md, each
// segment on its own sequence's state.
//
//	qkv = x·Wqkvᵀ;  z = x·Wzᵀ;  b = x·Wbᵀ;  a = x·Waᵀ
//	q, k, v = split(silu(causal depthwise conv(qkv)));  q, k L2-normalised, q /= √Dk
//	beta = sigmoid(b);  decay = exp(−exp(A_log)·softplus(a + dt_bias))
//	per value head: S = decay·S;  S += k ⊗ beta·(v − Sᵀk);  o = Sᵀq
//	o = RMSNorm(o)·silu(z);  out = o·Woutᵀ
//
// The scan is sequential in the tokens, the same function as the chunked
// form transformers uses for prefill; it serves prefill and decode alike.
func (p *pass) DeltaNet(layer int, w *model.DeltaNet, xa model.Activation) model.Activation {
	c := &p.b.cfg
	x := p.tensor(xa)
	out := newTensor(x.rows, c.HiddenSize)
	if p.err != nil {
		return out
	}
	T := x.rows
	Hk, Hv, Dk, Dv := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	C := deltaNetChannels(c)
	act := p.b.acts()
	var buf blockBuffers
	defer buf.release()

	// The pre-conv rows, after room for the first segment's conv state:
	// its conv reads the two in place (window).
	back := len(p.segs[0].seq.layers[layer].conv)
	preRoom := buf.floats(back + T*C)
	z := buf.floats(T * Hv * Dv)
	b := buf.floats(T * Hv)
	a := buf.floats(T * Hv)
	p.project(x, projection{preRoom[back:], &w.QKV}, projection{z, &w.Z}, projection{b, &w.B}, projection{a, &w.A})
	if p.err != nil {
		return out
	}
	mixed := buf.floats(T * C)
	if !p.deltaNetConv(layer, w, preRoom, mixed, &buf) {
		return out
	}

	beta := buf.floats(T * Hv)
	decay := buf.floats(T * Hv)
	if !p.parallel(T, 4, stopTokens, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			normalizeQueryKey(mixed[t*C:(t+1)*C], Hk, Dk, c.DeltaNetL2Eps)
			deltaNetGates(beta[t*Hv:(t+1)*Hv], decay[t*Hv:(t+1)*Hv], b[t*Hv:(t+1)*Hv], a[t*Hv:(t+1)*Hv], w)
		}
	}) {
		return out
	}
	o := buf.floats(T * Hv * Dv)
	if !p.deltaNetScan(layer, deltaScanRows{mixed: mixed, decay: decay, beta: beta, out: o}) {
		return out
	}
	if !p.parallel(T*Hv, 16, stopTokens, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gatedRMSNorm(o[i*Dv:(i+1)*Dv], z[i*Dv:(i+1)*Dv], w.Norm, c.DeltaNetNormEps, act)
		}
	}) {
		return out
	}
	p.matMul(out.data, &tensor{rows: T, width: Hv * Dv, data: o}, &w.Out)
	return out
}

// deltaNetConv runs every segment's conv over the pre-conv rows (after
// the first segment's conv state, preRoom) into mixed, in one parallel
// region over the channels, and keeps each segment's new conv state;
// false when the pass stopped or failed.
func (p *pass) deltaNetConv(layer int, w *model.DeltaNet, preRoom, mixed []float32, buf *blockBuffers) bool {
	C := deltaNetChannels(&p.b.cfg)
	back := len(p.segs[0].seq.layers[layer].conv)
	pre := preRoom[back:]
	act := p.b.acts()
	convs := make([]causalConv, len(p.segs))
	for i, seg := range p.segs {
		rows := seg.row0 * C
		convs[i] = causalConv{taps: w.Conv, state: seg.seq.layers[layer].conv, channels: C,
			in: pre[rows : rows+len(seg.ids)*C], out: mixed[rows : rows+len(seg.ids)*C], act: act,
			row: convRowFor(p.b.kern.isa)}
		if i == 0 {
			copy(preRoom, convs[i].state)
			convs[i].rows = preRoom[:back+len(seg.ids)*C]
		} else {
			convs[i].window(buf)
		}
	}
	// Each run of stopTokens tokens of a segment is a conv of its own over
	// its rows and the K-1 before them (an output row depends on its inputs
	// only), and each part of it a piece of one region, with a stop check
	// before it; the pieces (a few dozen at a prefill) go out one at a time.
	var parts []causalConv
	for i := range convs {
		parts = append(parts, convs[i].runs(stopTokens)...)
	}
	channelParts := (C + convChannels - 1) / convChannels
	if !p.parallel(len(parts)*channelParts, 1, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ch := i % channelParts * convChannels
			parts[i/channelParts].channelsSilu(ch, min(ch+convChannels, C))
		}
	}) {
		return false
	}
	for i := range convs {
		convs[i].keepState()
	}
	return true
}

// deltaScanRows are the pass's rows a DeltaNet scan reads and writes: the
// conv's output, each row's gates per value head, and the output rows.
type deltaScanRows struct {
	mixed, decay, beta, out []float32
}

// deltaNetScan runs the scan: per segment and value head, each on its own
// sequence's state; value head j reads key head j/(Hv/Hk)
// (repeat_interleave). The scans go stopTokens tokens at a time, one
// parallel region per run, each head's state carried from run to run, so
// that the region's stop checks come between runs; a region's scans are
// handed out one at a time: a few dozen of them, so pieces of several
// would leave a thread idle for the last. False when the pass stopped or
// failed.
func (p *pass) deltaNetScan(layer int, r deltaScanRows) bool {
	c := &p.b.cfg
	Hk, Hv, Dk, Dv := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	C := deltaNetChannels(c)
	longest := 0
	for _, seg := range p.segs {
		longest = max(longest, len(seg.ids))
	}
	var segs []*segment // the segments with tokens from t0 on
	for t0 := 0; t0 < longest; t0 += stopTokens {
		segs = segs[:0]
		for i := range p.segs {
			if len(p.segs[i].ids) > t0 {
				segs = append(segs, &p.segs[i])
			}
		}
		if !p.parallel(len(segs)*Hv, 1, 1, func(lo, hi int) {
			for task := lo; task < hi; task++ {
				seg, j := segs[task/Hv], task%Hv
				r0, r1 := seg.row0+t0, seg.row0+min(t0+stopTokens, len(seg.ids))
				scan := deltaScan{
					state: seg.seq.layers[layer].recurrent[j*Dk*Dv : (j+1)*Dk*Dv],
					rows:  r.mixed[r0*C : r1*C], channels: C,
					query: (j / (Hv / Hk)) * Dk, key: Hk*Dk + (j/(Hv/Hk))*Dk, value: 2*Hk*Dk + j*Dv,
					keyDim: Dk, valueDim: Dv,
					out: r.out[r0*Hv*Dv:], outStride: Hv * Dv, outOffset: j * Dv,
					decay: r.decay[r0*Hv:], beta: r.beta[r0*Hv:], gateStride: Hv, head: j,
					kern: &p.b.kern.f32,
				}
				scan.run()
			}
		}) {
			return false
		}
	}
	return true
}

// causalConv is one segment's causal depthwise convolution: the K-1 rows of
// conv state, then the segment's pre-conv rows, each output row silu of
// the K taps over the K rows ending at it.
type causalConv struct {
	taps     [][]float32 // [channels][K]
	state    []float32   // [K-1, channels]: the rows before the segment
	channels int
	in, out  []float32 // [rows, channels]
	rows     []float32 // state then in
	act      *activations
	// row is the conv of one row's run of channels (convRowGo or its
	// assembly, which gives the same bits).
	row func(out, rows []float32, stride int, taps []float32, k int)
}

// window lays out the state then the segment's rows in a buffer of buf.
func (c *causalConv) window(buf *blockBuffers) {
	c.rows = buf.floats(len(c.state) + len(c.in))
	copy(c.rows[copy(c.rows, c.state):], c.in)
}

// channelsSilu computes the output of channels [lo, hi), a row at a
// time: the taps' sums (from 0, tap by tap in order, for each channel),
// then silu over the row's run of them.
func (c *causalConv) channelsSilu(lo, hi int) {
	C := c.channels
	n := len(c.in) / C
	w := hi - lo
	K := len(c.taps[lo])
	tp := scratch.get(K * w) // the taps of [lo, hi), [K, w]
	defer scratch.put(tp)
	taps := *tp
	for ch := lo; ch < hi; ch++ {
		for j, tap := range c.taps[ch] {
			taps[j*w+ch-lo] = tap
		}
	}
	row := c.row
	if row == nil {
		row = convRowGo
	}
	for t := range n {
		out := c.out[t*C+lo : t*C+hi]
		row(out, c.rows[t*C+lo:], C, taps, K)
		c.act.silu(out, out)
	}
}

// convRowGo writes out[i] = Σ_j taps[j·w+i]·rows[j·stride+i] for i < w =
// len(out) and j < k, each sum from 0 in the order of j.
func convRowGo(out, rows []float32, stride int, taps []float32, k int) {
	w := len(out)
	clear(out)
	for j := range k {
		r := rows[j*stride : j*stride+w]
		tj := taps[j*w : (j+1)*w]
		for i := range out {
			out[i] += tj[i] * r[i]
		}
	}
}

// convChannels is how many channels of a conv one piece computes.
const convChannels = 256

// runs splits the conv into convs of at most n output rows each, over
// the same rows: each reads the K-1 rows before its own.
func (c *causalConv) runs(n int) []causalConv {
	C := c.channels
	rows := len(c.in) / C
	back := len(c.state) / C
	var parts []causalConv
	for t0 := 0; t0 < rows; t0 += n {
		t1 := min(t0+n, rows)
		parts = append(parts, causalConv{taps: c.taps, channels: C,
			in: c.in[t0*C : t1*C], out: c.out[t0*C : t1*C], rows: c.rows[t0*C : (t1+back)*C], act: c.act, row: c.row})
	}
	return parts
}

// keepState keeps the last K-1 rows as the state for the next pass.
func (c *causalConv) keepState() { copy(c.state, c.rows[len(c.rows)-len(c.state):]) }

// normalizeQueryKey L2-normalises each query and key head of one row of
// the conv's output ([q heads | k heads | v heads]), scaling q by 1/√Dk;
// eps is the config's (1e-6 for the real model).
func normalizeQueryKey(row []float32, heads, dim int, eps float64) {
	qScale := 1 / math.Sqrt(float64(dim))
	for h := range heads {
		l2Normalize(row[h*dim:(h+1)*dim], eps, qScale)
		l2Normalize(row[(heads+h)*dim:(heads+h+1)*dim], eps, 1)
	}
}

// deltaNetGates computes one row's beta = sigmoid(b) and
// decay = exp(g), g = −exp(A_log)·softplus(a + dt_bias), per value head.
func deltaNetGates(beta, decay, b, a []float32, w *model.DeltaNet) {
	for j := range beta {
		beta[j] = sigmoid(b[j])
		g := -math.Exp(float64(w.ALog[j])) * softplus(float64(a[j]+w.DtBias[j]))
		decay[j] = float32(math.Exp(g))
	}
}

// gatedRMSNorm is the DeltaNet's output norm of one head: RMSNorm with the
// plain weight, then the gate silu(z).
func gatedRMSNorm(o, z, weight []float32, eps float32, act *activations) {
	rmsNorm(o, o, weight, eps)
	act.swiGLU(o, z[:len(o)], o)
}

// deltaScan is one value head's part of the scan over a segment's rows.
//
// The scan runs token by token over the whole state (64 KiB at full size,
// in L2). It is not bound by moving the state: carrying blocks of 32 state
// rows (16 KiB, in L1) through every token before the next block, which
// gives the same arithmetic bit for bit since the rows are independent,
// measured the same (BenchmarkDeltaScan, one head through 512 tokens:
// 1.8–2.7 ms CPU whole, 2.0–2.8 ms in blocks, on the loaded 2-core
// machine); the time goes to the two dependent dot products per row.
type deltaScan struct {
	state             []float32 // [valueDim, keyDim], transposed
	rows              []float32 // the segment's conv output rows
	channels          int
	query, key, value int // offsets of this head's q, k, v in a row
	keyDim, valueDim  int
	out               []float32 // o rows from the segment's first
	outStride         int
	outOffset         int
	decay, beta       []float32 // per row and value head, from the segment's first
	gateStride, head  int
	kern              *simdKernels // the backend's f32 kernels
}

// run advances the state through every token.
func (s *deltaScan) run() {
	Dk := s.keyDim
	for t := range len(s.rows) / s.channels {
		row := s.rows[t*s.channels : (t+1)*s.channels]
		o := s.out[t*s.outStride+s.outOffset:]
		g := t*s.gateStride + s.head
		deltaStepWith(s.kern, &deltaStep{S: s.state, k: row[s.key : s.key+Dk], q: row[s.query : s.query+Dk],
			v: row[s.value : s.value+s.valueDim], o: o[:s.valueDim], decay: s.decay[g], beta: s.beta[g]})
	}
}

// deltaStep is one value head's step of the scan for one token: its state
// S, kept transposed, [Dv, Dk] (row d is column d of S), so that both Sᵀk
// and Sᵀq are dot products along contiguous rows; the token's key, query
// and value; the output o (Dv); and the token's gates.
type deltaStep struct {
	S, k, q, v, o []float32
	decay, beta   float32
}

// deltaStepWith advances one value head's state by one token and writes
// its output, with the kernels of kern: S = decay·S; S += k ⊗ beta·(v − Sᵀk);
// o = Sᵀq.
func deltaStepWith(kern *simdKernels, st *deltaStep) {
	S, k, q, v, o := st.S, st.k, st.q, st.v, st.o
	decay, beta := st.decay, st.beta
	dk, dv := len(k), len(v)
	if kern.deltaStep != nil && dk%8 == 0 {
		_ = S[dv*dk-1]
		_ = o[dv-1]
		kern.deltaStep(&S[0], &k[0], &q[0], &v[0], &o[0], dk, dv, decay, beta)
		return
	}
	for d := range dv {
		row := S[d*dk : (d+1)*dk]
		var kv float32
		for i := range row {
			row[i] *= decay
			kv += row[i] * k[i]
		}
		delta := beta * (v[d] - kv)
		var out float32
		for i := range row {
			row[i] += delta * k[i]
			out += row[i] * q[i]
		}
		o[d] = out
	}
}
