package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Attention implements model.Blocks: the projections over every row; the
// norms, RoPE, cache write and attention per segment in its own sequence's
// cache at its own positions.
func (p *pass) Attention(layer int, w *model.Attention, x model.Activation) model.Activation {
	in := p.input(x, "attention")
	p.startBlock()
	c := &p.b.cfg
	out := p.newAct(x.Rows(), c.HiddenSize, false)
	if in == nil || p.segs[0].seq.kCache[layer] == nil {
		p.enc.fail(fmt.Errorf("layer %d: no KV cache for it", layer))
		return out
	}
	t := in.rows
	qg := p.newAct(t, w.Q.Out, false)
	k := p.newAct(t, w.K.Out, false)
	v := p.newAct(t, w.V.Out, false)
	q := p.newAct(t, c.NumHeads*c.HeadDim, false)
	o := p.newAct(t, c.NumHeads*c.HeadDim, false)
	p.enc.independent(func() {
		p.project(&w.Q, in, qg)
		p.project(&w.K, in, k)
		p.project(&w.V, in, v)
	})
	shape := attnShape{headDim: c.HeadDim, rotaryDim: c.RotaryDim, qHeads: c.NumHeads, kvHeads: c.NumKVHeads,
		eps: c.RMSNormEps, kvF32: p.b.opt.KVCacheF32}
	rowsOf := func(a *act, row0, n int) loc { return a.rowsOf(row0, n).loc }
	common := attnBufs{qNorm: p.vec(w.QNorm), kNorm: p.vec(w.KNorm), invFreq: loc{buf: p.b.invFreq}}
	// The decode steps (rows [0, steps)) run together, each row in its own
	// sequence's cache at its own position.
	var steps []kvSeq
	var stepBufs attnBufs
	var info loc
	if p.steps > 0 {
		stepBufs = common
		stepBufs.qg, stepBufs.k, stepBufs.v = qg.loc, k.loc, v.loc
		stepBufs.q, stepBufs.o = q.loc, o.loc
		steps, info = p.attnSteps(layer, shape, &stepBufs)
	}
	// Every longer segment on its own rows and cache.
	shapes := make([]attnShape, len(p.segs))
	bufs := make([]attnBufs, len(p.segs))
	for i := range p.segs {
		sg := &p.segs[i]
		if sg.rows == 1 {
			continue
		}
		shapes[i] = shape
		shapes[i].pos0, shapes[i].maxSeq, shapes[i].rows = sg.pos0, sg.seq.maxToks, sg.rows
		bufs[i] = common
		bufs[i].qg, bufs[i].k, bufs[i].v = rowsOf(qg, sg.row0, sg.rows), rowsOf(k, sg.row0, sg.rows), rowsOf(v, sg.row0, sg.rows)
		bufs[i].q, bufs[i].o = rowsOf(q, sg.row0, sg.rows), rowsOf(o, sg.row0, sg.rows)
		bufs[i].kCache, bufs[i].vCache = loc{buf: sg.seq.kCache[layer]}, loc{buf: sg.seq.vCache[layer]}
		if sg.rows < attnPrefillMinRows {
			parts := sg.rows * c.NumHeads * shapes[i].splits()
			bufs[i].partO = p.scratch(4 * parts * c.HeadDim)
			bufs[i].partM = p.scratch(4 * parts)
			bufs[i].partL = p.scratch(4 * parts)
		}
	}
	// Segments touch disjoint rows and caches: each stage of all of them
	// may overlap.
	p.enc.independent(func() {
		if p.steps > 0 {
			p.enc.attnStepsNormRope(shape, stepBufs, steps, info)
		}
		for i := range p.segs {
			if p.segs[i].rows > 1 {
				p.enc.attnQNormRope(shapes[i], bufs[i])
				p.enc.attnKVWrite(shapes[i], bufs[i])
			}
		}
	})
	p.enc.independent(func() {
		if p.steps > 0 {
			p.enc.attnStepsSplit(shape, stepBufs, steps, info)
		}
		for i := range p.segs {
			switch rows := p.segs[i].rows; {
			case rows >= attnPrefillMinRows:
				p.enc.attnPrefill(shapes[i], bufs[i])
			case rows > 1:
				p.enc.attnSplit(shapes[i], bufs[i])
			}
		}
	})
	p.enc.independent(func() {
		if p.steps > 0 {
			p.enc.attnStepsReduce(shape, stepBufs, steps, info)
		}
		for i := range p.segs {
			if rows := p.segs[i].rows; rows > 1 && rows < attnPrefillMinRows {
				p.enc.attnReduceGate(shapes[i], bufs[i])
			}
		}
	})
	p.project(&w.O, o, out)
	return out
}

// attnSteps is the decode steps' caches and positions (and their
// attnStepInfo) at layer, and their split partials in b.
func (p *pass) attnSteps(layer int, shape attnShape, b *attnBufs) ([]kvSeq, loc) {
	var steps []kvSeq
	for i := range p.segs {
		if sg := &p.segs[i]; sg.rows == 1 {
			steps = append(steps, kvSeq{k: loc{buf: sg.seq.kCache[layer]}, v: loc{buf: sg.seq.vCache[layer]},
				pos: sg.pos0, maxSeq: sg.seq.maxToks})
		}
	}
	info := p.stepInfo(steps)
	for _, q := range steps {
		shape.keys = max(shape.keys, q.pos+1)
	}
	parts := p.steps * shape.qHeads * shape.splits()
	b.partO = p.scratch(4 * parts * shape.headDim)
	b.partM = p.scratch(4 * parts)
	b.partL = p.scratch(4 * parts)
	return steps, info
}

// stepInfo is attnStepInfo of the decode steps in the pass arena, written
// once per pass: every attention layer sees the same positions.
func (p *pass) stepInfo(steps []kvSeq) loc {
	if p.info.buf == nil {
		b := attnStepInfo(steps)
		var err error
		if p.info, err = p.sc.pass.alloc(len(b)); err != nil {
			p.enc.fail(err)
			return loc{}
		}
		copy(p.info.buf.Bytes()[p.info.off:], b)
	}
	return p.info
}
