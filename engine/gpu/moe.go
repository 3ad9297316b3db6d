package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// MoE implements model.Blocks.
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
	// The routing stays in the pass arena so that Wait can count the
	// experts the short rows shared.
	ids, err := p.sc.pass.alloc(4 * t * slots)
	if err != nil {
		p.enc.fail(err)
		return out
	}
	routing := moeBufs{x: in, ids: ids, weights: p.scratch(4 * t * slots), y: out.loc}
	p.enc.routerTopK(routerShape{experts: e, topK: k, rows: t, stride: e + 1}, logits.loc, routing.ids, routing.weights)
	s := moeShape{hidden: c.HiddenSize, inter: dm.gate.out, sharedInter: dm.sGate.m.Out, experts: e, slots: slots,
		groupSize: dm.gate.groupSize, sharedGroupSize: dm.sGate.m.GroupSize}
	s.hStride = max(s.inter, s.sharedInter)
	// rowsOf is the routing of rows [from, from+n).
	rowsOf := func(from, n int) moeBufs {
		return moeBufs{x: in.rowsOf(from, n), ids: loc{ids.buf, ids.off + 4*from*slots},
			weights: loc{routing.weights.buf, routing.weights.off + 4*from*slots}, y: out.rowsOf(from, n).loc}
	}
	for _, r := range p.ranges {
		if r.gemv {
			// The short rows, moeGroupTokens at a time: each expert read
			// once for the rows that chose it.
			for from := r.from; from < r.from+r.n; from += moeGroupTokens {
				n := min(moeGroupTokens, r.from+r.n-from)
				b := rowsOf(from, n)
				b.h = p.scratch(4 * n * slots * s.hStride)
				b.ye = p.scratch(4 * n * slots * c.HiddenSize)
				b.rowOf = p.identityRows(moeGroupTokens * slots)
				p.enc.moeGroupedDecode(s, n, b, dm)
				p.grouped = append(p.grouped, groupedDecode{ids: b.ids, rows: n, slots: slots,
					expertBytes: dm.gate.expertBytes + dm.up.expertBytes + dm.down.expertBytes})
			}
			continue
		}
		// A chunk: sort the (token, slot) rows by expert on the GPU and run
		// grouped GEMMs over the block map, gathering each row's token, so
		// each expert's weights are read once per tile.
		n := r.n * slots
		groups := e + 1
		if groups > planMax {
			p.enc.fail(fmt.Errorf("%d experts: the routing plan holds at most %d", e, planMax-1))
			return out
		}
		b := rowsOf(r.from, r.n)
		b.h = p.scratch(4 * n * s.hStride)
		b.offsets = p.scratch(4 * (groups + 1))
		b.cursor = p.scratch(4 * groups)
		b.tiles = p.scratch(16 * planBound(n, groups))
		b.rowOf = p.scratch(4 * n)
		b.tokenOf = p.scratch(4 * n)
		b.ye = p.scratch(4 * n * c.HiddenSize)
		p.enc.moePlan(n, groups, b)
		p.enc.moeScatter(n, slots, b)
		p.enc.moeGemmGateUp(s, n, b, dm)
		sd := s
		sd.groupSize, sd.sharedGroupSize = dm.down.groupSize, dm.sDown.m.GroupSize
		p.enc.moeGemmDown(sd, n, b, dm)
		p.enc.moeCombine(r.n, slots, c.HiddenSize, b)
	}
	return out
}

// identityRows is 0, 1, …, n−1 as uint32 in the pass arena, written once
// per pass (host writes may not go to block scratch, which later blocks
// reuse before the device runs).
func (p *pass) identityRows(n int) loc {
	if p.identity.buf == nil {
		var err error
		if p.identity, err = p.sc.pass.alloc(4 * n); err != nil {
			p.enc.fail(err)
			return loc{}
		}
		dst := p.identity.buf.Bytes()[p.identity.off:]
		for i := range n {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(i))
		}
	}
	return p.identity
}
