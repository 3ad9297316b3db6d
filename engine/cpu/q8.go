package cpu

import (
	"math"
	"slices"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The fast path of the quantized matrix products (Precision Fast). Each
// token row of x is quantized to int8 per weight group, and a group's
// product is an integer dot product scaled once:
//
//	Σ_i x_i·(s·q_i + b) ≈ Σ_i d·xq_i·(s·q_i + b) = s·d·Σ_i q_i·xq_i + b·d·Σ_i xq_i
//
// with d = max|x|/127 over the group and xq_i = round(x_i/d). The bias goes
// through the sum of the rounded activations, not the exact Σx: then the
// result is exactly the product of the weights with the rounded x, whose
// error Σ w_i·(x_i − d·xq_i) scales with the weights themselves. With the
// exact Σx the codes' mean (about 7.5·s for 4 bits, which the bias cancels)
// would meet the rounding errors alone: on the fixtures that made a layer's
// output 10× less accurate. The weights are the checkpoint's bytes, used in place: the
// 4-bit codes 0..15 and the 8-bit codes 0..255 are unsigned, the
// activations signed, which is the operand order of vpdpbusd (AVX-512 VNNI),
// vpmaddubsw (AVX2) and, after a bias of 128, sdot (arm64).
//
// Every kernel computes one (weight row, token row) pair with the same
// arithmetic whatever else the call holds: eight int32 lanes per unit of
// the row (a group, or two groups of 32 4-bit weights side by side), each
// lane the exact sum of its products, then per unit and lane
// acc += fma(float(isum), s·d, b·d·Σxq) (the bias only in the first lane
// of its group), and at the end one fixed horizontal sum. Integer sums are exact, so the vector width and the
// number of token rows a kernel handles at once do not change a bit of a
// row's result: a token's logits are the same alone or in any batch, which
// continuous batching relies on. The SIMD levels share this float chain
// and agree bit for bit; the Go loops round the products separately (Go
// has no float32 fused multiply-add) and agree to a few ulp.

// q8Layout is how the int8 kernels walk the rows of one affine matrix and
// how a token row is prepared for it. A unit is the stretch of a row
// between two float updates of the accumulator: one weight group, or, for
// 4-bit weights in groups of 32, two groups side by side (lanes 0–3 and
// 4–7), so that every unit fills whole 32-byte loads.
type q8Layout struct {
	bits, group int
	wide        bool // int16 activations (PrecisionFast), else int8
	split       bool // two groups of 32 4-bit weights per unit
	unitElems   int  // weights per unit
	chunks      int  // 32-byte weight loads per unit
	units       int  // units per row
	rowBytes    int  // packed weight bytes per row
	xqBytes     int  // quantized activation bytes per unit
	recordBytes int  // one token row prepared: units × (xqBytes + 64)
}

// newQ8Layout returns the layout for w, or false when the int8 kernels do
// not take it: not affine, a group size other than 32 and multiples of 64
// for 4 bits or multiples of 32 for 8 bits, or 4-bit groups of 32 in rows
// that are not whole units of 64.
func newQ8Layout(w *model.Matrix, wide bool) (q8Layout, bool) {
	if w.DType != model.Affine {
		return q8Layout{}, false
	}
	l := q8Layout{bits: w.Bits, group: w.GroupSize, wide: wide}
	switch {
	case w.Bits == 4 && w.GroupSize == 32:
		l.split, l.unitElems = true, 64
	case w.Bits == 4 && w.GroupSize%64 == 0:
		l.unitElems = w.GroupSize
	case w.Bits == 8 && w.GroupSize%32 == 0:
		l.unitElems = w.GroupSize
	default:
		return q8Layout{}, false
	}
	if w.In%l.unitElems != 0 {
		return q8Layout{}, false
	}
	l.chunks = l.unitElems * w.Bits / 8 / 32
	l.units = w.In / l.unitElems
	l.rowBytes = w.In * w.Bits / 8
	l.xqBytes = l.unitElems
	if wide {
		l.xqBytes *= 2
	}
	l.recordBytes = l.units * (l.xqBytes + 64)
	return l, true
}

// position is where element e of a unit goes among the unit's quantized
// activations (in elements). 4-bit rows hold elements 2k and 2k+1 in the
// low and high nibble of byte k, so each 64-wide chunk of x is stored in
// the order the nibbles of a 32-byte load come out: with int8 activations
// the even elements, then the odd ones; with int16 activations, which the
// kernels meet sixteen bytes at a time, the even then the odd elements of
// bytes 0–15, then those of bytes 16–31. 8-bit rows keep x's order.
func (l *q8Layout) position(e int) int {
	if l.bits == 8 {
		return e
	}
	c, j := e/64, e%64
	if l.wide {
		k := j / 2
		return c*64 + (k/16)*32 + (j%2)*16 + k%16
	}
	return c*64 + (j%2)*32 + j/2
}

// laneGroup is the group of the unit that lane k of the kernels' eight
// int32 lanes sums: the only group unless split, else the first group in
// lanes 0–3 with int8 activations, in lanes 0, 1, 4 and 5 with int16 ones
// (the order in which vphaddd folds the two halves' lanes).
func (l *q8Layout) laneGroup(k int) int {
	switch {
	case !l.split:
		return 0
	case l.wide:
		return (k / 2) % 2
	}
	return k / 4
}

// laneOf is the int32 lane that byte k of a 32-byte weight chunk adds into
// (q8RowGo's copy of the kernels' lanes).
func (l *q8Layout) laneOf(k int) int {
	switch {
	case !l.wide:
		return k / 4 // vpdpbusd: four bytes per lane
	case l.split:
		h, i := k/16, (k%16)/4
		return i%2 + 2*h + 4*(i/2)
	}
	return (k % 16) / 2 // vpdpwssd on sixteen bytes widened: two per lane
}

// quantize prepares one token row x [In] into rec [recordBytes]: per unit
// the int8 activations in kernel order, then eight lanes of d (the
// activation scale of the lane's group) and eight lanes of d·Σxq (the
// group's sum of rounded activations in its first lane, zero elsewhere).
//
// With k's assembly (int16 activations only) each group's rounding runs
// there, with the same operations; k nil or without it runs the Go loop.
func (l *q8Layout) quantize(rec []byte, x []float32, k *q8Kernels) {
	per := l.unitElems / l.group // groups per unit: 2 when split, else 1
	var perm16 *uint16
	if l.wide && k != nil && k.quantW16 != nil && l.group%32 == 0 {
		perm16 = &blockPerm[0][0]
		if l.bits == 4 {
			perm16 = &blockPerm[1][0]
		}
	}
	levels := float32(127)
	if l.wide {
		levels = 32767
	}
	// Where each element of a unit goes, 64 at a time (position repeats
	// every 64 elements, offset by 64).
	var perm [64]int
	for e := range perm {
		perm[e] = l.position(e)
	}
	var stack [128]int32
	q := stack[:]
	if l.group > len(stack) {
		q = make([]int32, l.group)
	}
	q = q[:l.group]
	for u := range l.units {
		xu := x[u*l.unitElems : (u+1)*l.unitElems]
		r := rec[u*(l.xqBytes+64) : (u+1)*(l.xqBytes+64)]
		xq := r[:l.xqBytes]
		d := (*[8]float32)(unsafe.Pointer(&r[l.xqBytes]))
		xs := (*[8]float32)(unsafe.Pointer(&r[l.xqBytes+32]))
		*xs = [8]float32{}
		for g := range per {
			seg := xu[g*l.group : (g+1)*l.group]
			var amax float32
			if perm16 != nil {
				amax = k.absMax(&seg[0], len(seg))
			} else {
				for _, v := range seg {
					amax = max(amax, abs32(v))
				}
			}
			var scale, inv float32
			if amax > 0 {
				scale, inv = amax/levels, levels/amax
			}
			base := g * l.group
			var sum int32
			if perm16 != nil {
				// A group starts a block of 32 (position keeps each
				// block's elements inside it).
				sum = k.quantW16(&seg[0], len(seg), inv, int32(levels), &xq[2*base], perm16)
			} else {
				for i, v := range seg {
					// Adding and subtracting 1.5·2²³ rounds |v·inv| ≤ 2¹⁵
					// to the nearest integer (ties to even) in float32;
					// the conversion keeps the product rounded on its own
					// (no fused multiply-add), as the assembly does.
					f := float32(v*inv) + 12582912
					qi := int32(f - 12582912)
					qi = min(max(qi, -int32(levels)), int32(levels))
					q[i] = qi
					sum += qi
				}
				for i, qi := range q {
					e := base + i
					pos := e&^63 + perm[e&63]
					if l.wide {
						xq[2*pos], xq[2*pos+1] = byte(qi), byte(qi>>8)
					} else {
						xq[pos] = byte(int8(qi))
					}
				}
			}
			first := true
			for k := range 8 {
				if l.laneGroup(k) != g {
					continue
				}
				d[k] = scale
				if first {
					xs[k] = scale * float32(sum)
					first = false
				}
			}
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// q8Tile is what an int8 kernel computes: one weight row against tokens
// consecutive prepared token rows, writing one float per token. The
// assembly reads the fields by offset: keep the order and the 8-byte
// fields.
type q8Tile struct {
	w         *byte    // the row's packed weights
	scales    *uint16  // the row's BF16 scales, one per group
	biases    *uint16  // the row's BF16 biases
	units     int      // units per row
	chunks    int      // 32-byte weight loads per unit
	x         *byte    // the first token's prepared row
	xStride   int      // bytes from one prepared token row to the next
	tokens    int      // token rows, at least 1
	out       *float32 // the first token's output
	outStride int      // bytes from one token's output to the next
	rows      int      // weight rows, for the multi-row kernels (q8Kernels.rows)
	quads     *byte    // the first token's quad table (q8Input.quads), for the two-row kernels
	// The two-row kernels' working space: per unit of a row pair, s·d and
	// b·d·Σxq of both rows and four tokens (16 floats a unit); and the
	// row pairs left.
	work  *float32
	pairs int
	redo  bool // set by a two-row kernel: a bias is not finite, run the rows again
}

// q8Kernels are one instruction set's int8 kernels; nil fields run the Go
// loops (q8RowsGo).
type q8Kernels struct {
	q4      func(t *q8Tile) // 4-bit, groups of 64 or multiples, int8 activations
	q4Split func(t *q8Tile) // 4-bit, groups of 32, int8 activations
	q8      func(t *q8Tile) // 8-bit, groups of multiples of 32, int8 activations
	// The same with int16 activations (vpdpwssd, vpmaddwd).
	w4, w4Split, w8 func(t *q8Tile)
	// Four tokens at a time, t.tokens a multiple of 4 (int16 activations,
	// one group per unit); nil where the one-token kernel serves.
	w4Quad, w8Quad func(t *q8Tile)
	// t.rows consecutive weight rows against one, two and four tokens
	// (indices 0, 1, 2; int16 activations, one group per unit), the
	// outputs of a row 4 bytes after the previous row's; nil where the
	// kernels above serve. The weights of each unit are unpacked once for
	// all the tokens, and one call covers a block of rows.
	w4Rows, w8Rows [3]func(t *q8Tile)
	// t.rows consecutive weight rows, an even number, two at a time
	// against four tokens (int16 activations, one group per unit), outputs
	// as the multi-row kernels'; nil where those serve alone.
	w4Pair, w8Pair func(t *q8Tile)
	// The int16 rounding of a group in assembly (nil: the Go loop):
	// absMax is max|x_i| over n elements (a multiple of 16); quantW16
	// rounds n elements (a multiple of 32) as quantize does, stores each
	// block of 32 in the order perm gives and returns the sum.
	absMax   func(x *float32, n int) float32
	quantW16 func(x *float32, n int, inv float32, levels int32, xq *byte, perm *uint16) int32
}

// blockPerm is, for each layout order of 32 int16 activations, the element
// of the block stored at each position: 4-bit rows store the even elements,
// then the odd ones (position), 8-bit rows keep x's order.
var blockPerm = func() (p [2][32]uint16) {
	for i := range 32 {
		p[0][i] = uint16(i)
		if i < 16 {
			p[1][i] = uint16(2 * i)
		} else {
			p[1][i] = uint16(2*(i-16) + 1)
		}
	}
	return p
}()

// rowKernels returns the multi-row kernels for l, or nil.
func (k *q8Kernels) rowKernels(l *q8Layout) *[3]func(*q8Tile) {
	var r *[3]func(*q8Tile)
	switch {
	case !l.wide || l.split:
		return nil
	case l.bits == 8:
		r = &k.w8Rows
	default:
		r = &k.w4Rows
	}
	if r[0] == nil {
		return nil
	}
	return r
}

// pair returns the two-row kernel for l, or nil.
func (k *q8Kernels) pair(l *q8Layout) func(*q8Tile) {
	switch {
	case !l.wide || l.split:
		return nil
	case l.bits == 8:
		return k.w8Pair
	}
	return k.w4Pair
}

// quad returns the four-token kernel for l, or nil.
func (k *q8Kernels) quad(l *q8Layout) func(*q8Tile) {
	switch {
	case !l.wide || l.split:
		return nil
	case l.bits == 8:
		return k.w8Quad
	}
	return k.w4Quad
}

// kernel returns the assembly kernel for l, or nil for the Go loops.
func (k *q8Kernels) kernel(l *q8Layout) func(*q8Tile) {
	switch {
	case l.bits == 8 && l.wide:
		return k.w8
	case l.bits == 8:
		return k.q8
	case l.split && l.wide:
		return k.w4Split
	case l.split:
		return k.q4Split
	case l.wide:
		return k.w4
	}
	return k.q4
}

// q8RowGo is the Go version of a kernel for one weight row o and one
// prepared token row rec: the same lanes and the same order of float
// operations as the assembly, with each product rounded separately.
func q8RowGo(l *q8Layout, w *model.Matrix, o int, rec []byte) float32 {
	row := w.Data[o*l.rowBytes : (o+1)*l.rowBytes]
	groups := w.In / w.GroupSize
	scales := u16s(w.Scales)[o*groups : (o+1)*groups]
	biases := u16s(w.Biases)[o*groups : (o+1)*groups]
	per := l.unitElems / l.group
	// act reads quantized activation i of the unit.
	act := func(xq []byte, i int) int32 {
		if l.wide {
			return int32(int16(uint16(xq[2*i]) | uint16(xq[2*i+1])<<8))
		}
		return int32(int8(xq[i]))
	}
	var acc [8]float32
	for u := range l.units {
		r := rec[u*(l.xqBytes+64) : (u+1)*(l.xqBytes+64)]
		d := (*[8]float32)(unsafe.Pointer(&r[l.xqBytes]))
		xs := (*[8]float32)(unsafe.Pointer(&r[l.xqBytes+32]))
		var isum [8]int32
		for c := range l.chunks {
			wb := row[(u*l.chunks+c)*32 : (u*l.chunks+c+1)*32]
			for k, q := range wb {
				lane := l.laneOf(k)
				if l.bits == 8 {
					isum[lane] += int32(q) * act(r, c*32+k)
					continue
				}
				// The positions of elements 2k and 2k+1 of the chunk.
				lo, hi := l.position(c*64+2*k), l.position(c*64+2*k+1)
				isum[lane] += int32(q&15)*act(r, lo) + int32(q>>4)*act(r, hi)
			}
		}
		for k := range 8 {
			g := u*per + l.laneGroup(k)
			s, b := bf16(scales[g]), bf16(biases[g])
			c, p := float32(s*d[k]), float32(b*xs[k])
			acc[k] += float32(float32(isum[k])*c) + p
		}
	}
	// The assembly's horizontal sum: the halves, then two pairwise adds.
	h0, h1, h2, h3 := acc[0]+acc[4], acc[1]+acc[5], acc[2]+acc[6], acc[3]+acc[7]
	return (h0 + h1) + (h2 + h3)
}

// q8Input is x prepared for one layout: rows token rows of recordBytes.
type q8Input struct {
	layout q8Layout
	data   []byte
	// quads is, where a two-row kernel takes the layout, per four token
	// rows and per unit, the unit's d and d·Σxq of the four tokens as the
	// kernel reads them: [d0 d1 d2 d3 d0 d1 d2 d3 s0 s1 s2 s3 s0 s1 s2 s3]
	// (s the first lane's d·Σxq), copied from the records; else nil.
	quads []float32
	buf   *[]byte // data's buffer (the records, then quads), from the byte pools
}

// newQ8Input returns room for rows prepared token rows of l, with a quad
// table if withQuads, in a buffer of the byte pools (6 KiB a token row for
// a 2048-wide input with int16 activations, 3 MiB for a 512-token chunk,
// which every product call would otherwise allocate); release hands it
// back.
func newQ8Input(l q8Layout, rows int, withQuads bool) *q8Input {
	n, quads := rows*l.recordBytes, 0
	if withQuads {
		quads = l.quadFloats(rows)
	}
	buf := getBytes(n + 4*quads)
	p := &q8Input{layout: l, data: (*buf)[:n], buf: buf}
	if quads > 0 {
		p.quads = unsafe.Slice((*float32)(unsafe.Pointer(&(*buf)[n])), quads)
	}
	return p
}

// release hands p's buffer back to the pools; p is not used after.
func (p *q8Input) release() { putBytes(p.buf) }

// prepareQ8 quantizes the rows of x for the layout l.
func (b *Backend) prepareQ8(l q8Layout, x []float32, rows, in int) *q8Input {
	p := newQ8Input(l, rows, b.kern.q8.pair(&l) != nil)
	b.pool.parallelFor(rows, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			l.quantize(p.data[t*l.recordBytes:(t+1)*l.recordBytes], x[t*in:(t+1)*in], &b.kern.q8)
			p.setQuad(t)
		}
	})
	return p
}

// quadFloats is the length of the quad table for rows token rows.
func (l *q8Layout) quadFloats(rows int) int { return (rows + 3) / 4 * l.units * 16 }

// setQuad copies token row t's d and d·Σxq from its record into the quad
// table; without one it does nothing.
func (p *q8Input) setQuad(t int) {
	if p.quads == nil {
		return
	}
	l := &p.layout
	rec := p.data[t*l.recordBytes : (t+1)*l.recordBytes]
	for u := range l.units {
		tail := rec[u*(l.xqBytes+64)+l.xqBytes:]
		d := *(*float32)(unsafe.Pointer(&tail[0]))
		xs := *(*float32)(unsafe.Pointer(&tail[32]))
		q := p.quads[((t/4)*l.units+u)*16:][:16]
		q[t%4], q[4+t%4], q[8+t%4], q[12+t%4] = d, d, xs, xs
	}
}

// rowRange is token rows [lo, hi) of p as an input of their own. The quad
// table goes with them where lo starts a quad; else the rows run through
// the kernels that read only the records.
func (p *q8Input) rowRange(lo, hi int) *q8Input {
	rb := p.layout.recordBytes
	r := &q8Input{layout: p.layout, data: p.data[lo*rb : hi*rb]}
	if p.quads != nil && lo%4 == 0 {
		per := p.layout.units * 16
		r.quads = p.quads[lo/4*per : (hi+3)/4*per]
	}
	return r
}

// exactRowBlock is how many rows of a matrix the int8 kernels do not take
// fastProducts runs through the exact per-token loops at a time: 32 rows of
// 2048 BF16 weights (128 KiB) stay in L2 while every token row passes.
const exactRowBlock = 32

// fastProducts runs matrix products on the fast path, in one parallel
// region over all their output rows like matVecs. Affine matrices the int8
// kernels take go through them, with x prepared once per layout and shared
// by the jobs over the same input (q, k and v; the experts' gate and up);
// other matrices run the exact per-token loops of matVec, which are just as
// independent of the number of token rows.
func (b *Backend) fastProducts(jobs []vecJob) {
	inputs := make([]*q8Input, len(jobs))
	total := 0
	for i := range jobs {
		j := &jobs[i]
		total += j.w.Out
		l, ok := newQ8Layout(j.w, b.precision == PrecisionFast)
		if !ok {
			j.k = &b.kern.f32
			prepareVecJob(j, jobs[:i])
			continue
		}
		for e := range i {
			if inputs[e] != nil && inputs[e].layout == l && jobs[e].rows == j.rows && &jobs[e].x[0] == &j.x[0] {
				inputs[i] = inputs[e]
				break
			}
		}
		if inputs[i] == nil {
			inputs[i] = b.prepareQ8(l, j.x, j.rows, j.w.In)
		}
	}
	b.pool.run(total, productPiece(total, b.pool.threads), nil, func(lo, hi int) {
		base := 0
		for i := range jobs {
			j := &jobs[i]
			a, z := max(lo-base, 0), min(hi-base, j.w.Out)
			base += j.w.Out
			if a >= z {
				continue
			}
			if inputs[i] != nil {
				b.kern.q8.q8Rows(j.y, j.rows, j.w, inputs[i], a, z)
				continue
			}
			for r0 := a; r0 < z; r0 += exactRowBlock {
				j.rowsRange(r0, min(r0+exactRowBlock, z))
			}
		}
	})
	for i, p := range inputs {
		if p != nil && !slices.Contains(inputs[:i], p) { // shared inputs go back once
			p.release()
		}
	}
}

// productPiece is the weight rows of a piece of a product region over
// total rows: about 16 pieces per thread, in multiples of 16 rows, so that
// a thread slowed by the rest of the machine leaves the others a short
// tail. A piece of a prefill's product passes every token row over its
// weight rows, so small pieces cost little more than the atomic counter;
// which thread computes a row does not change its arithmetic.
func productPiece(total, threads int) int {
	n := (total + 16*max(threads, 1) - 1) / (16 * max(threads, 1))
	return max((n+15)/16*16, 16)
}

// fastRowBlock is how many weight rows q8Rows takes at a time: 128 rows of
// a 2048-wide 4-bit matrix (128 KiB) stay in a core's L2 cache while four
// prepared token rows at a time (24 KiB with int16 activations) pass over
// them from L1, so each weight is read from memory once per call and from
// L2 once per four tokens.
const fastRowBlock = 128

// q8Rows computes y[t, o] for o in [lo, hi) and every token row of p.
func (k *q8Kernels) q8Rows(y []float32, rows int, w *model.Matrix, p *q8Input, lo, hi int) {
	l := &p.layout
	kern, quad := k.kernel(l), k.quad(l)
	groups := w.In / w.GroupSize
	scales, biases := u16s(w.Scales), u16s(w.Biases)
	// One tile for the whole call: the kernel is called through a func
	// value, so the tile escapes, and this way it is allocated once.
	tile := new(q8Tile)
	// work is the two-row kernels' working space, where they run.
	var work []float32
	// block runs f on rows [o0, o1) against n tokens from t.
	block := func(f func(*q8Tile), o0, o1, t, n int) {
		*tile = q8Tile{w: &w.Data[o0*l.rowBytes], scales: &scales[o0*groups], biases: &biases[o0*groups],
			units: l.units, chunks: l.chunks, x: &p.data[t*l.recordBytes], xStride: l.recordBytes,
			tokens: n, out: &y[t*w.Out+o0], outStride: 4 * w.Out, rows: o1 - o0}
		if work != nil && n == 4 {
			tile.quads, tile.work = (*byte)(unsafe.Pointer(&p.quads[t/4*l.units*16])), &work[0]
		}
		f(tile)
	}
	run := func(f func(*q8Tile), o, t, n int) { block(f, o, o+1, t, n) }
	if rk := k.rowKernels(l); rk != nil {
		pair := k.pair(l)
		if pair != nil && p.quads != nil && rows >= 4 {
			wp := scratch.get(16 * l.units)
			defer scratch.put(wp)
			work = *wp
		}
		for r0 := lo; r0 < hi; r0 += fastRowBlock {
			r1 := min(r0+fastRowBlock, hi)
			for t := 0; t < rows; {
				f, n := rk[0], 1
				switch {
				case rows-t >= 4:
					f, n = rk[2], 4
				case rows-t >= 2:
					f, n = rk[1], 2
				}
				// Four tokens go through the two-row kernel, an odd
				// block's last row through the four-token one.
				mid := r0
				if n == 4 && work != nil {
					mid = r0 + (r1-r0)&^1
					if mid > r0 {
						block(pair, r0, mid, t, n)
						if tile.redo {
							block(f, r0, mid, t, n)
						}
					}
				}
				if mid < r1 {
					block(f, mid, r1, t, n)
				}
				t += n
			}
		}
		return
	}
	for r0 := lo; r0 < hi; r0 += fastRowBlock {
		r1 := min(r0+fastRowBlock, hi)
		t := 0
		if quad != nil {
			for ; t+4 <= rows; t += 4 {
				for o := r0; o < r1; o++ {
					run(quad, o, t, 4)
				}
			}
		}
		if t == rows {
			continue
		}
		for o := r0; o < r1; o++ {
			if kern != nil {
				run(kern, o, t, rows-t)
				continue
			}
			for tt := t; tt < rows; tt++ {
				y[tt*w.Out+o] = q8RowGo(l, w, o, p.data[tt*l.recordBytes:(tt+1)*l.recordBytes])
			}
		}
	}
}
