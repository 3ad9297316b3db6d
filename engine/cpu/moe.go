package cpu

import (
	"math"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// MoE implements model.Blocks: the sparse MoE of engine/model/MODEL.md.
//
//	route: p = softmax(x·Wrouterᵀ) over all experts; the top k, weights renormalised
//	y = sigmoid(x·w_shared_gate)·shared(x) + Σ_e w_e·expert_e(x),  expert(x) = down(silu(gate·x) ⊙ up·x)
//
// Only the chosen experts' weights are read: the rows routed to an expert
// are gathered so that its weights are read once per pass. Each row's sum
// is taken in a fixed order, the shared expert then the routed experts in
// index order, whatever the other rows chose.
func (p *pass) MoE(layer int, w *model.MoE, xa model.Activation) model.Activation {
	c := &p.b.cfg
	x := p.tensor(xa)
	out := newTensor(x.rows, c.HiddenSize)
	if p.err != nil {
		return out
	}
	T, H, E, topK := x.rows, x.width, c.NumExperts, c.ExpertsPerToken
	act := p.b.acts()
	var buf blockBuffers
	defer buf.release()

	routerLogits := buf.floats(T * E)
	p.matMul(routerLogits, x, &w.Router)
	if p.err != nil {
		return out
	}
	// Every row's route in three arrays of topK entries a row.
	routes := make([]expertRoute, T)
	chosen, slots, weights := make([]int, T*topK), make([]int, T*topK), buf.floats(T*topK)
	for t := range routes {
		routes[t] = expertRoute{experts: chosen[t*topK : (t+1)*topK], weights: weights[t*topK : (t+1)*topK],
			slots: slots[t*topK : (t+1)*topK]}
	}
	if !p.parallel(T, 8, stopTokens, func(lo, hi int) {
		probsp := getFloats(E)
		defer putFloats(probsp)
		for t := lo; t < hi; t++ {
			route(&routes[t], routerLogits[t*E:(t+1)*E], *probsp, act)
		}
	}) {
		return out
	}
	// tokens[e] lists the rows routed to expert e, in row order; a row's
	// route keeps its place in each of its experts' lists.
	tokens := make([][]int, E)
	for t := range routes {
		for i, e := range routes[t].experts {
			routes[t].slots[i] = len(tokens[e])
			tokens[e] = append(tokens[e], t)
		}
	}

	// The experts run group by group of the pass's rows (see rowGroup), so
	// that each row is computed as in a pass of its own sequence.
	// sharedY's data and routedY's slices are made by expertsRows (see
	// storeRows), after the routing, so that the pass does not zero them
	// on its own thread first.
	moe := experts{w: w, x: x, tokens: tokens, gate: buf.floats(T), sharedY: &tensor{rows: T, width: H},
		routedY: make([][]float32, E), buf: &buf}
	for _, g := range p.groupsOf(x) {
		if !p.expertsRows(&moe, g) {
			return out
		}
	}
	gate, sharedY, routedY := moe.gate, moe.sharedY, moe.routedY
	add := scaleAddFor(p.b.kern.isa)
	p.parallel(T, 4, stopTokens, func(lo, hi int) {
		routed := make([][]float32, topK)
		for t := lo; t < hi; t++ {
			r := &routes[t]
			for i, e := range r.experts {
				routed[i] = routedY[e][r.slots[i]*H : (r.slots[i]+1)*H]
			}
			combineExperts(out.row(t), sigmoid(gate[t]), sharedY.row(t), r.weights, routed, add)
		}
	})
	return out
}

// expertRoute is one row's choice of experts: their indices in increasing
// order with their renormalised weights, and each one's row (slot) in its
// expert's output.
type expertRoute struct {
	experts []int
	weights []float32
	slots   []int
}

// route is engine/model/MODEL.md's routing of one row into r, whose slices hold topK
// entries: softmax over every expert's logit (probs is scratch of the same
// length), the topK most likely, their probabilities renormalised to sum
// to 1 (summed most likely first).
func route(r *expertRoute, logits, probs []float32, act *activations) {
	act.softmax(probs, logits)
	chosen := r.experts
	topKIndices(chosen, probs)
	var sum float32
	for _, e := range chosen {
		sum += probs[e]
	}
	slices.Sort(chosen)
	for i, e := range chosen {
		r.weights[i] = probs[e] / sum
	}
}

// combineExperts writes one row's MoE output: the shared expert's output
// times its gate, then each routed expert's output times its weight, in
// the order given (experts' index order), added by add (scaleAddFor).
func combineExperts(y []float32, sharedGate float32, shared, weights []float32, routed [][]float32, add func(y, x []float32, a float32)) {
	for d, v := range shared[:len(y)] {
		y[d] = sharedGate * v
	}
	for i, r := range routed {
		add(y, r[:len(y)], weights[i])
	}
}

// scaleAddGo is y[i] += a·x[i].
func scaleAddGo(y, x []float32, a float32) {
	for i, v := range x[:len(y)] {
		y[i] += a * v
	}
}

// experts is the MoE's work over the pass's rows x, group by group:
// tokens[e] lists the rows routed to expert e, in row order; the outputs
// are gate[t] (the shared expert's gate logit) and sharedY's row t for
// each row t, and row i of routedY[e] for each tokens[e][i]. buf holds the
// block's buffers (the outputs among them) until the block ends.
type experts struct {
	w       *model.MoE
	x       *tensor
	tokens  [][]int
	gate    []float32
	sharedY *tensor
	routedY [][]float32
	buf     *blockBuffers
}

// expertGroup is one group of rows' share of experts: in maps a pass row
// to its index in the group, groupX holds the group's rows, and active
// lists the experts that rows of the group are routed to.
type expertGroup struct {
	*experts
	g      rowGroup
	in     map[int]int
	groupX *tensor
	active []*expertWork
}

// expertsRows runs the shared expert and the routed experts on the rows of
// group g into ex's outputs (see experts): a matrix-vector group through
// expertsDecode, a prefill segment through expertsPrefill. False when the
// pass stopped or failed.
func (p *pass) expertsRows(ex *experts, g rowGroup) bool {
	H := ex.x.width
	eg := &expertGroup{experts: ex, g: g, in: make(map[int]int, len(g.rows))}
	for i, t := range g.rows {
		eg.in[t] = i
	}
	gx, _ := gatherRows(ex.x, g.rows)
	eg.groupX = &tensor{rows: len(g.rows), width: H, data: gx}
	// The active experts with the group's rows routed to each. An expert
	// that gets every row of the group (always, for a one-token decode
	// step) reads the group's x itself, so matVecs prepares x once for all
	// of them.
	for e, ts := range ex.tokens {
		work := &expertWork{e: e}
		for i, t := range ts {
			if _, ok := eg.in[t]; ok {
				work.rows = append(work.rows, i)
			}
		}
		if len(work.rows) == 0 {
			continue
		}
		work.x = eg.groupX
		eg.active = append(eg.active, work)
	}
	if g.vec {
		return p.expertsDecode(eg)
	}
	return p.expertsPrefill(eg)
}

// gather copies an expert's rows out of x, unless it has all of the
// group's, into a buffer of the pools; it returns the buffer, nil for none.
func (eg *expertGroup) gather(ex *expertWork) *[]float32 {
	if len(ex.rows) == eg.groupX.rows {
		return nil
	}
	H := eg.x.width
	xp := getFloats(len(ex.rows) * H)
	ex.x = &tensor{rows: len(ex.rows), width: H, data: *xp}
	for j, i := range ex.rows {
		copy(ex.x.row(j), eg.x.row(eg.tokens[ex.e][i]))
	}
	return xp
}

// expertsDecode runs a matrix-vector group (decode steps, of any number of
// sequences): every gate and up projection in one parallel region, then
// every down projection in another, so that an expert chosen by rows of
// several sequences is read once.
func (p *pass) expertsDecode(eg *expertGroup) bool {
	w, buf, active := eg.w, eg.buf, eg.active
	if !p.parallel(len(active), 4, 0, func(lo, hi int) {
		for _, ex := range active[lo:hi] {
			if xp := eg.gather(ex); xp != nil {
				buf.keep(xp)
			}
		}
	}) {
		return false
	}
	groupX := eg.groupX
	groupGate := buf.floats(groupX.rows)
	shared := &expertWork{x: groupX}
	jobs := []vecJob{{y: groupGate, x: groupX.data, rows: groupX.rows, w: &w.SharedExpert}}
	addGateUp := func(ex *expertWork, g, u *model.Matrix) {
		ex.hidden = buf.tensor(ex.x.rows, g.Out)
		ex.up = buf.floats(ex.x.rows * u.Out)
		jobs = append(jobs, vecJob{y: ex.hidden.data, x: ex.x.data, rows: ex.x.rows, w: g},
			vecJob{y: ex.up, x: ex.x.data, rows: ex.x.rows, w: u})
	}
	addGateUp(shared, &w.SharedGate, &w.SharedUp)
	for _, ex := range active {
		addGateUp(ex, &w.Gate[ex.e], &w.Up[ex.e])
	}
	p.b.matVecs(jobs)
	jobs = jobs[:0]
	all := append([]*expertWork{shared}, active...)
	p.b.pool.parallelFor(len(all), 1, func(lo, hi int) {
		for _, ex := range all[lo:hi] {
			p.b.acts().swiGLU(ex.hidden.data, ex.hidden.data, ex.up)
		}
	})
	addDown := func(ex *expertWork, d *model.Matrix) {
		ex.y = buf.tensor(ex.x.rows, d.Out)
		jobs = append(jobs, vecJob{y: ex.y.data, x: ex.hidden.data, rows: ex.x.rows, w: d})
	}
	addDown(shared, &w.SharedDown)
	for _, ex := range active {
		addDown(ex, &w.Down[ex.e])
	}
	p.b.matVecs(jobs)
	H := eg.x.width
	for i, t := range eg.g.rows {
		eg.gate[t] = groupGate[i]
	}
	storeRows(&eg.sharedY.data, eg.sharedY.rows, H, eg.g.rows, shared.y, buf)
	for _, ex := range active {
		storeRows(&eg.routedY[ex.e], len(eg.tokens[ex.e]), H, ex.rows, ex.y, buf)
	}
	return true
}

// expertsPrefill runs a prefill segment: each expert's SwiGLU as matrix
// products over its rows routed to it. An expert's input rows and hidden
// rows go back to the pools as soon as its products are done.
//
// One expert per thread at a time: a few rows each (16 on average at 512
// tokens), so splitting each expert's products over the threads costs
// four regions per expert for little work in each. The shared expert
// joins them as runs of rows (those of pass.blocks), each on one thread
// too. The pieces are handed out one by one, those with the most rows
// first, so that the threads finish together; each expert gathers its
// rows, picks their prepared records and stores its output itself, inside
// the region. A row's arithmetic is the same whichever thread runs it (the
// shared expert's products, called inside the region, run on the calling
// thread and the helpers that are free).
func (p *pass) expertsPrefill(eg *expertGroup) bool {
	w, buf, groupX := eg.w, eg.buf, eg.groupX
	H := eg.x.width
	groupGate := buf.floats(groupX.rows)
	p.blocks(groupX.rows, func(lo, hi int) {
		p.b.matMul(groupGate[lo:hi], groupX.data[lo*H:hi*H], hi-lo, &w.SharedExpert)
	})
	if p.stopped() {
		return false
	}
	for i, t := range eg.g.rows {
		eg.gate[t] = groupGate[i]
	}
	all := p.prepareExpertInputs(w, groupX, eg.active)
	if all != nil {
		defer all.release()
	}
	shared := buf.tensor(groupX.rows, H)
	var pieces []moePiece
	for _, r := range p.runs(groupX.rows) {
		pieces = append(pieces, moePiece{rows: r[1] - r[0], shared: r})
	}
	for _, ex := range eg.active {
		pieces = append(pieces, moePiece{rows: len(ex.rows), ex: ex})
	}
	slices.SortStableFunc(pieces, func(a, b moePiece) int { return b.rows - a.rows })
	if !p.parallel(len(pieces), 1, 1, func(lo, hi int) {
		for _, pc := range pieces[lo:hi] {
			if pc.ex == nil {
				r0, r1 := pc.shared[0], pc.shared[1]
				run := &tensor{rows: r1 - r0, width: H, data: groupX.data[r0*H : r1*H]}
				p.swiGLUInto(shared.data[r0*H:r1*H], run, &w.SharedGate, &w.SharedUp, &w.SharedDown, nil)
			} else {
				p.routedExpert(eg, pc.ex, all)
			}
		}
	}) {
		return false
	}
	storeRows(&eg.sharedY.data, eg.sharedY.rows, H, eg.g.rows, shared, buf)
	return true
}

// routedExpert is one routed expert's piece of a prefill: its SwiGLU over
// its rows of the group, stored into routedY. With the rows prepared
// (all, prepareExpertInputs), the products read their records only: no
// copy of the expert's rows.
func (p *pass) routedExpert(eg *expertGroup, ex *expertWork, all *q8Input) {
	H := eg.x.width
	var xp *[]float32
	var prepared *q8Input
	if all != nil {
		prepared = expertInput(all, ex, eg.tokens, eg.in)
		ex.x = &tensor{rows: len(ex.rows), width: H}
	} else {
		xp = eg.gather(ex)
	}
	ex.y = eg.buf.tensor(ex.x.rows, H)
	p.swiGLURuns(ex.y, ex.x, &eg.w.Gate[ex.e], &eg.w.Up[ex.e], &eg.w.Down[ex.e], prepared)
	storeRows(&eg.routedY[ex.e], len(eg.tokens[ex.e]), H, ex.rows, ex.y, eg.buf)
	putFloats(xp)
	if prepared != nil {
		prepared.release()
	}
	ex.x, ex.y = nil, nil
}

// storeRows writes row j of y into row rows[j] of *dst, a matrix of n rows
// of width w that it takes from buf when *dst is nil: then y itself when
// its rows are all of dst's in order (a prefill's only group), with no
// copy.
func storeRows(dst *[]float32, n, w int, rows []int, y *tensor, buf *blockBuffers) {
	if *dst == nil {
		if r0, ok := contiguous(rows); ok && r0 == 0 && len(rows) == n {
			*dst = y.data[:n*w]
			return
		}
		*dst = buf.floats(n * w)
	}
	for j, i := range rows {
		copy((*dst)[i*w:(i+1)*w], y.row(j))
	}
}

// swiGLU is down(silu(gate·x) ⊙ up·x) for the rows of x, each a matrix
// product over all of them.
//
// prepared, when not nil, is x already quantized for gate and up (the fast
// path): both products then run here, on the calling thread.
func (p *pass) swiGLU(x *tensor, gate, up, down *model.Matrix, prepared *q8Input) *tensor {
	y := newTensor(x.rows, down.Out)
	p.swiGLUInto(y.data, x, gate, up, down, prepared)
	return y
}

// swiGLUInto is swiGLU into y, [x.rows, down.Out] and zeroed, with its
// hidden rows in buffers of the pools.
func (p *pass) swiGLUInto(y []float32, x *tensor, gate, up, down *model.Matrix, prepared *q8Input) {
	gp, up2 := getFloats(x.rows*gate.Out), getFloats(x.rows*up.Out)
	defer putFloats(gp)
	defer putFloats(up2)
	g := &tensor{rows: x.rows, width: gate.Out, data: *gp}
	u := *up2
	if prepared != nil {
		p.b.kern.q8.q8Rows(g.data, x.rows, gate, prepared, 0, gate.Out)
		p.b.kern.q8.q8Rows(u, x.rows, up, prepared, 0, up.Out)
	} else if p.b.quantizedActivations() {
		// One call for both, so x is quantized once for the two (the
		// fast path computes each row alone, whatever the call).
		p.b.matVecs([]vecJob{{y: g.data, x: x.data, rows: x.rows, w: gate}, {y: u, x: x.data, rows: x.rows, w: up}})
	} else {
		p.b.matMul(g.data, x.data, x.rows, gate)
		p.b.matMul(u, x.data, x.rows, up)
	}
	act := p.b.acts()
	p.b.pool.parallelFor(len(u), 4096, func(lo, hi int) {
		act.swiGLU(g.data[lo:hi], g.data[lo:hi], u[lo:hi])
	})
	p.b.matMul(y[:x.rows*down.Out], g.data, g.rows, down)
}

// swiGLURuns is swiGLU over the rows of x into y (zeroed) in runs (see
// pass.blocks), with a stop check before each: a row's arithmetic is the
// same as in one call over all of them. Once stop said yes the rest is
// left undone. x's data may be nil when prepared holds its rows.
func (p *pass) swiGLURuns(y, x *tensor, gate, up, down *model.Matrix, prepared *q8Input) {
	p.blocks(x.rows, func(lo, hi int) {
		run := &tensor{rows: hi - lo, width: x.width}
		if x.data != nil { // nil with prepared rows
			run.data = x.data[lo*x.width : hi*x.width]
		}
		var in *q8Input
		if prepared != nil {
			in = prepared.rowRange(lo, hi)
		}
		p.swiGLUInto(y.data[lo*y.width:hi*y.width], run, gate, up, down, in)
	})
}

// moePiece is one piece of the prefill's expert region: a routed expert's
// rows, or a run [shared[0], shared[1]) of the shared expert's.
type moePiece struct {
	rows   int
	ex     *expertWork
	shared [2]int
}

// expertWork is one expert's share of a group of rows in the MoE.
type expertWork struct {
	e      int
	rows   []int // indices into tokens[e] of the group's rows
	x      *tensor
	hidden *tensor // silu(gate·x) ⊙ up·x
	up     []float32
	y      *tensor
}

// prepareExpertInputs quantizes the group's rows once for the experts'
// gate and up products on the fast path (expertInput then hands each
// active expert its rows' records), instead of quantizing a row again for
// each of the 8 experts it is routed to. The records are those the
// expert's own call would make, so its products are unchanged. It returns
// nil when the products run otherwise (exact path, a layout the int8
// kernels do not take).
func (p *pass) prepareExpertInputs(w *model.MoE, groupX *tensor, active []*expertWork) *q8Input {
	if !p.b.quantizedActivations() || len(active) == 0 {
		return nil
	}
	l, ok := newQ8Layout(&w.Gate[active[0].e], p.b.precision == PrecisionFast)
	if !ok {
		return nil
	}
	for _, ex := range active {
		if ul, ok := newQ8Layout(&w.Up[ex.e], p.b.precision == PrecisionFast); !ok || ul != l {
			return nil
		}
		if gl, _ := newQ8Layout(&w.Gate[ex.e], p.b.precision == PrecisionFast); gl != l {
			return nil
		}
	}
	return p.b.prepareQ8(l, groupX.data, groupX.rows, groupX.width)
}

// expertInput copies the records of ex's rows out of all, the group's rows
// prepared by prepareExpertInputs (in maps a pass row to its group row),
// into a buffer of the pools (release hands it back once the products are
// done).
func expertInput(all *q8Input, ex *expertWork, tokens [][]int, in map[int]int) *q8Input {
	rb := all.layout.recordBytes
	p := newQ8Input(all.layout, len(ex.rows), all.quads != nil)
	for j, i := range ex.rows {
		r := in[tokens[ex.e][i]]
		copy(p.data[j*rb:(j+1)*rb], all.data[r*rb:(r+1)*rb])
		p.setQuad(j)
	}
	return p
}

// softmax writes the softmax of x into y, accumulating in float64.
func softmax(y, x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		y[i] = float32(e)
		sum += e
	}
	inv := 1 / sum
	for i := range y {
		y[i] = float32(float64(y[i]) * inv)
	}
}

// topKIndices fills idx with the indices of the len(idx) largest values of
// x, largest first, lower index first among equals.
func topKIndices(idx []int, x []float32) {
	n := 0
	for i, v := range x {
		// Insertion into the sorted prefix; k is small (8).
		if n == len(idx) && v <= x[idx[n-1]] {
			continue
		}
		j := min(n, len(idx)-1)
		for j > 0 && v > x[idx[j-1]] {
			idx[j] = idx[j-1]
			j--
		}
		idx[j] = i
		if n < len(idx) {
			n++
		}
	}
}
