package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

func TestRouterTopK(t *testing.T) {
	rng := testRand(t)
	cases := []struct{ experts, k, rows int }{{16, 4, 3}, {256, 8, 2}, {45, 3, 1}, {500, 16, 2}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("e%d_k%d", c.experts, c.k), func(t *testing.T) {
			stride := c.experts + 3
			logits := randFloats(rng, c.rows*stride, 4)
			if c.experts == 16 {
				// A tie: the lower id must win.
				logits[5], logits[9] = 10, 10
			}
			slots := c.k + 1
			got := twice(t, func(r *kernelRig) [][]byte {
				ids, w := r.zeros(4*c.rows*slots), r.zeros(4*c.rows*slots)
				r.run(func(e *encoder) {
					e.routerTopK(routerShape{experts: c.experts, topK: c.k, rows: c.rows, stride: stride}, r.buf(f32Bytes(logits)), ids, w)
				})
				return [][]byte{ids.buf.Bytes()[:4*c.rows*slots], w.buf.Bytes()[:4*c.rows*slots]}
			})
			for tt := 0; tt < c.rows; tt++ {
				ids, weights := reference.Route(reference.Float64(logits[tt*stride:][:c.experts]), c.k)
				for s := 0; s <= c.k; s++ {
					gid := int32(binary.LittleEndian.Uint32(got[0][4*(tt*slots+s):]))
					gw := math.Float32frombits(binary.LittleEndian.Uint32(got[1][4*(tt*slots+s):]))
					wantID, wantW := c.experts, reference.Sigmoid(float64(logits[tt*stride+c.experts]))
					if s < c.k {
						wantID, wantW = ids[s], weights[s]
					}
					// Softmax and renormalisation in f32: 1e-5 relative.
					if int(gid) != wantID || math.Abs(float64(gw)-wantW) > 1e-5*wantW {
						t.Fatalf("token %d slot %d: got expert %d weight %v, want %d weight %v", tt, s, gid, gw, wantID, wantW)
					}
				}
			}
		})
	}
}

func TestMoEExperts(t *testing.T) {
	rng := testRand(t)
	var cases []moeCase
	for _, f := range []string{"bf16", "q4", "q8", "f32", "f16"} {
		cases = append(cases, moeCase{f, true, 37, FloatOperands, false}, moeCase{f, true, 37, HalfOperands, false},
			moeCase{f, false, 3, FloatOperands, true}, moeCase{f, false, 8, FloatOperands, true})
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s_grouped_%s_rows%d", c.format, c.ops, c.rows)
		if c.decode {
			name = fmt.Sprintf("%s_decode_rows%d", c.format, c.rows)
		}
		t.Run(name, func(t *testing.T) {
			f := newMoEFixture(rng, c.format, c.rows)
			rows, hidden := c.rows, f.s.hidden
			got := twice(t, func(r *kernelRig) [][]byte { return f.run(r, c) })
			if c.grouped {
				checkPlan(t, got[1], f.ids, f.s.experts+1, rows*f.s.slots)
			}
			if c.decode && !bytes.Equal(got[0][4*(rows-1)*hidden:], got[3]) {
				t.Errorf("row %d's output differs between the %d-row grouped decode and a decode of its own", rows-1, rows)
			}
			want := f.want()
			if c.ops == HalfOperands {
				f.checkHalf(t, got, want)
				return
			}
			// Two chained f32 products and a weighted sum of three; outputs
			// cancel, so the bound is relative to the largest output:
			// 1e-5·(|y| + max|y|).
			checkClose(t, "moe y", floats(got[0]), want, 1e-5, maxAbs(want))
		})
	}
}

// moeCase is one case of TestMoEExperts.
type moeCase struct {
	format  string
	grouped bool
	rows    int
	ops     Operands // grouped only: the decode kernels are GEMVs in f32
	// decode: the grouped decode kernels (a few rows, each expert read
	// once for the rows that chose it) instead of the block-map GEMMs.
	decode bool
}

// moeFixture is a TestMoEExperts case's random experts, routing and input.
type moeFixture struct {
	gate, up, down    []*model.Matrix
	sGate, sUp, sDown *model.Matrix
	x, wts            []float32
	ids               []int32 // each token's k routed experts, then the shared one
	idb               []byte  // ids as uint32
	s                 moeShape
	rows, gs          int
}

func newMoEFixture(rng *rand.Rand, format string, rows int) *moeFixture {
	const experts, k = 5, 2
	hidden, inter, sharedInter := 192, 40, 24
	gs := 64
	if format == "q4" || format == "q8" {
		// Quantized rows need the input width to be a multiple of
		// the group size, which the down projection's is not at 40.
		inter, sharedInter, gs = 64, 32, 32
	}
	mk := func(out, in int) []*model.Matrix {
		ms := make([]*model.Matrix, experts)
		for e := range ms {
			ms[e] = randMatrix(rng, format, out, in, gs)
		}
		return ms
	}
	f := &moeFixture{rows: rows, gs: gs}
	f.gate, f.up, f.down = mk(inter, hidden), mk(inter, hidden), mk(hidden, inter)
	f.sGate, f.sUp = randMatrix(rng, format, sharedInter, hidden, gs), randMatrix(rng, format, sharedInter, hidden, gs)
	f.sDown = randMatrix(rng, format, hidden, sharedInter, gs)
	f.x = randFloats(rng, rows*hidden, 1)
	slots := k + 1
	// Each token: k distinct routed experts, then the shared one.
	f.ids = make([]int32, 0, rows*slots)
	f.wts = make([]float32, 0, rows*slots)
	for tt := 0; tt < rows; tt++ {
		perm := rng.Perm(experts)
		for s := 0; s < k; s++ {
			f.ids = append(f.ids, int32(perm[s]))
		}
		f.ids = append(f.ids, experts)
		f.wts = append(f.wts, randFloats(rng, slots, 1)...)
	}
	f.idb = make([]byte, 4*len(f.ids))
	for i, id := range f.ids {
		binary.LittleEndian.PutUint32(f.idb[4*i:], uint32(id))
	}
	f.s = moeShape{hidden: hidden, inter: inter, sharedInter: sharedInter, experts: experts, slots: slots,
		hStride: max(inter, sharedInter), groupSize: gs, sharedGroupSize: gs}
	return f
}

// stackExperts is ms as the device holds a layer's routed experts: one
// buffer each of data, scales and biases, and the table of offsets.
func (r *kernelRig) stackExperts(ms []*model.Matrix, gs int) *devExperts {
	d := &devExperts{out: ms[0].Out, in: ms[0].In, groupSize: gs}
	d.format, _ = matrixFormat(ms[0])
	var data, sc, bi []byte
	table := make([]byte, 24*len(ms))
	for e, m := range ms {
		binary.LittleEndian.PutUint64(table[24*e:], uint64(len(data)))
		binary.LittleEndian.PutUint64(table[24*e+8:], uint64(len(sc)))
		binary.LittleEndian.PutUint64(table[24*e+16:], uint64(len(bi)))
		data = append(data, m.Data...)
		sc = append(sc, m.Scales...)
		bi = append(bi, m.Biases...)
	}
	d.data = r.buf(data).buf
	d.scales, d.biases = d.data, d.data
	if len(sc) > 0 {
		d.scales, d.biases = r.buf(sc).buf, r.buf(bi).buf
	}
	d.table = r.buf(table).buf
	d.expertBytes = int64(len(ms[0].Data) + len(ms[0].Scales) + len(ms[0].Biases))
	d.aligned = ms[0].RowBytes()%8 == 0
	return d
}

// run runs case c's kernels on r: y, then for the block-map GEMMs the plan
// and h in (token, slot) order, for the grouped decode the last row run
// alone.
func (f *moeFixture) run(r *kernelRig, c moeCase) [][]byte {
	s, rows, hidden, slots, experts := f.s, f.rows, f.s.hidden, f.s.slots, f.s.experts
	n := rows * slots
	r.b.opt.GEMMOperands = c.ops
	g, u, dn := r.stackExperts(f.gate, f.gs), r.stackExperts(f.up, f.gs), r.stackExperts(f.down, f.gs)
	h := r.zeros(4 * n * s.hStride)
	y := r.zeros(4 * rows * hidden)
	idl := r.buf(f.idb)
	xl := r.buf(f32Bytes(f.x))
	wl := r.buf(f32Bytes(f.wts))
	w := &devMoE{gate: g, up: u, down: dn, sGate: r.devMatrixOf(f.sGate), sUp: r.devMatrixOf(f.sUp), sDown: r.devMatrixOf(f.sDown)}
	b := moeBufs{x: actAt(xl, rows, hidden), ids: idl, weights: wl, h: h, y: y}
	groups := experts + 1
	var alone []byte
	if c.decode {
		// The rows grouped by expert, then the last row alone:
		// its bits must not depend on the rows beside it.
		identity := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(identity[4*i:], uint32(i))
		}
		b.rowOf, b.ye = r.buf(identity), r.zeros(4*n*hidden)
		r.run(func(e *encoder) { e.moeGroupedDecode(s, rows, b, w) })
		last := rows - 1
		one := moeBufs{x: actAt(loc{xl.buf, 4 * last * hidden}, 1, hidden), ids: loc{idl.buf, 4 * last * slots},
			weights: loc{wl.buf, 4 * last * slots}, h: r.zeros(4 * slots * s.hStride), y: r.zeros(4 * hidden),
			rowOf: b.rowOf, ye: r.zeros(4 * slots * hidden)}
		r.run(func(e *encoder) { e.moeGroupedDecode(s, 1, one, w) })
		alone = f32Bytes(r.floatsAt(one.y, hidden))
		return [][]byte{f32Bytes(r.floatsAt(y, rows*hidden)), nil, nil, alone}
	}
	if c.grouped {
		b.cursor = r.zeros(4 * groups)
		b.offsets, b.tiles = r.zeros(4*(groups+1)), r.zeros(16*planBound(n, groups))
		b.rowOf, b.tokenOf, b.ye = r.zeros(4*n), r.zeros(4*n), r.zeros(4*n*hidden)
	}
	r.run(func(e *encoder) {
		e.moePlan(n, groups, b)
		e.moeScatter(n, slots, b)
		e.moeGemmGateUp(s, n, b, w)
		e.moeGemmDown(s, n, b, w)
		e.moeCombine(rows, slots, hidden, b)
	})
	var plan, hOrdered []byte
	if c.grouped {
		plan = append(append(plan, b.offsets.buf.Bytes()...), b.tiles.buf.Bytes()...)
		// h in (token, slot) order: its rows land where the
		// atomics put them, which may differ between runs.
		rowOf := b.rowOf.buf.Bytes()
		hb := b.h.buf.Bytes()
		for i := 0; i < n; i++ {
			row := int(binary.LittleEndian.Uint32(rowOf[4*i:]))
			hOrdered = append(hOrdered, hb[4*row*s.hStride:4*(row+1)*s.hStride]...)
		}
	}
	return [][]byte{f32Bytes(r.floatsAt(y, rows*hidden)), plan, hOrdered}
}

// expert is the matrices of expert id, the shared one past the routed.
func (f *moeFixture) expert(id int32) (g, u, d *model.Matrix) {
	if int(id) < f.s.experts {
		return f.gate[id], f.up[id], f.down[id]
	}
	return f.sGate, f.sUp, f.sDown
}

// want is y in float64: each slot's reference.Expert, weighted.
func (f *moeFixture) want() []float64 {
	rows, hidden, slots := f.rows, f.s.hidden, f.s.slots
	want := make([]float64, rows*hidden)
	for tt := 0; tt < rows; tt++ {
		xt := [][]float64{reference.Float64(f.x[tt*hidden:][:hidden])}
		for sl := 0; sl < slots; sl++ {
			g, u, d := f.expert(f.ids[tt*slots+sl])
			for row, v := range reference.Expert(g, u, d, xt)[0] {
				want[tt*hidden+row] += float64(f.wts[tt*slots+sl]) * v
			}
		}
	}
	return want
}

// checkHalf checks a half-operand case's h and y against stagedMoE and y
// against the unrounded reference want.
func (f *moeFixture) checkHalf(t *testing.T, got [][]byte, want []float64) {
	t.Helper()
	s, slots := f.s, f.s.slots
	hk := floats(got[2])
	var hGot []float32
	for i := 0; i < f.rows*slots; i++ {
		width := s.inter
		if int(f.ids[i]) == s.experts {
			width = s.sharedInter
		}
		hGot = append(hGot, hk[i*s.hStride:][:width]...)
	}
	tight, hWant := stagedMoE(hk, func(tt, sl int) (g, u, d *model.Matrix) { return f.expert(f.ids[tt*slots+sl]) },
		f.x, f.wts, slots, s.hStride)
	// From operands staged the same way, the products are exact
	// in f32 and only the f32 sums differ: h within 1e-5 of
	// its largest value, y (two chained sums and the weighted
	// combine) within 1e-5 of the largest output.
	checkClose(t, "moe h (half operands)", hGot, hWant, 1e-5, maxAbs(hWant))
	checkClose(t, "moe y (half operands)", floats(got[0]), tight, 1e-5, maxAbs(tight))
	// Against the unrounded reference: the weights of both
	// stages rounded to half (≤ 2⁻¹¹ relative each; the
	// activations keep 22 bits) through two chained products:
	// about 2·2⁻¹¹ ≈ 1e-3 of the largest output.
	checkClose(t, "moe y", floats(got[0]), want, 1e-3, maxAbs(want))
}

// stagedMoE is the MoE kernels' output from operands staged as the half
// tiles stage them (refGEMVHalf), with h, the input of the down
// projection, taken from the kernel (hKernel), so that the down stage is
// checked on its own inputs. It also returns the h it computes, in (token,
// slot) order. expert gives the matrices of a token's slot.
func stagedMoE(hKernel []float32, expert func(tt, sl int) (gate, up, down *model.Matrix), x, wts []float32,
	slots, hStride int) ([]float64, []float64) {
	rows := len(wts) / slots
	hidden := len(x) / rows
	y := make([]float64, rows*hidden)
	var h []float64
	for tt := 0; tt < rows; tt++ {
		xt := x[tt*hidden:][:hidden]
		for sl := 0; sl < slots; sl++ {
			gm, um, dm := expert(tt, sl)
			for i := range gm.Out {
				g, _ := refGEMVHalf(gm, xt, i)
				u, _ := refGEMVHalf(um, xt, i)
				h = append(h, reference.SiLU(g)*u)
			}
			hv := hKernel[(tt*slots+sl)*hStride:][:gm.Out]
			for row := 0; row < hidden; row++ {
				dv, _ := refGEMVHalf(dm, hv, row)
				y[tt*hidden+row] += float64(wts[tt*slots+sl]) * dv
			}
		}
	}
	return y, h
}

// checkPlan checks the routing plan against a count of ids: row offsets are
// the exclusive prefix sum of the histogram, and the block map lists each
// expert's rows in tiles of gemmBM, then "no tile" up to the bound.
func checkPlan(t *testing.T, plan []byte, ids []int32, groups, n int) {
	t.Helper()
	u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(plan[4*i:]) }
	hist := make([]int, groups)
	for _, id := range ids {
		hist[id]++
	}
	row, tile := 0, 0
	tiles := groups + 1 // the block map starts after the offsets
	for e := 0; e < groups; e++ {
		if int(u32(e)) != row {
			t.Fatalf("offset of expert %d: %d, want %d", e, u32(e), row)
		}
		for j := 0; j*gemmBM < hist[e]; j++ {
			got := [3]uint32{u32(tiles + 4*tile), u32(tiles + 4*tile + 1), u32(tiles + 4*tile + 2)}
			want := [3]uint32{uint32(e), uint32(row + j*gemmBM), uint32(min(gemmBM, hist[e]-j*gemmBM))}
			if got != want {
				t.Fatalf("tile %d: %v, want %v", tile, got, want)
			}
			tile++
		}
		row += hist[e]
	}
	if int(u32(groups)) != n {
		t.Fatalf("total rows %d, want %d", u32(groups), n)
	}
	for ; tile < planBound(n, groups); tile++ {
		if u32(tiles+4*tile) != 0xffffffff {
			t.Fatalf("tile %d past the used ones is not marked empty", tile)
		}
	}
}
