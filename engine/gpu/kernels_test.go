package gpu

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// Each kernel test builds fresh random inputs (the seed is logged so a
// failure can be replayed with SUZURAN_KERNEL_SEED), runs the kernel under
// the emulator twice with different fiber orders, demands identical bits,
// and compares with a plain float64 Go reference within a stated tolerance.

// kernelRig runs recorded dispatches on a test device with one fiber order.
type kernelRig struct {
	t   *testing.T
	dev device.Device
	b   *Backend
}

func newRig(t *testing.T, seed uint64) *kernelRig {
	dev := openTestDevice(t, seed)
	return &kernelRig{t: t, dev: dev, b: &Backend{dev: dev, pipes: map[string]device.Pipeline{}}}
}

// run records with fn into one command buffer, commits and waits.
func (r *kernelRig) run(fn func(e *encoder)) {
	r.t.Helper()
	cb, err := r.dev.NewCommandBuffer()
	if err != nil {
		r.t.Fatal(err)
	}
	var c Counters
	e := &encoder{b: r.b, cb: cb, stats: &c}
	fn(e)
	if e.err != nil {
		r.t.Fatal(e.err)
	}
	cb.Commit()
	if err := cb.Wait(); err != nil {
		r.t.Fatal(err)
	}
}

// buf uploads b into a new device buffer.
func (r *kernelRig) buf(b []byte) loc {
	r.t.Helper()
	buf, err := upload(r.dev, b)
	if err != nil {
		r.t.Fatal(err)
	}
	return loc{buf: buf}
}

func (r *kernelRig) zeros(n int) loc { return r.buf(make([]byte, n)) }

func (r *kernelRig) floatsAt(l loc, n int) []float32 {
	return floats(l.buf.Bytes()[l.off : l.off+4*n])
}

// twice runs body under two fiber orders and checks that the byte slices it
// returns are identical; it returns the first run's.
func twice(t *testing.T, body func(r *kernelRig) [][]byte) [][]byte {
	t.Helper()
	a := body(newRig(t, 1))
	b := body(newRig(t, 0x9e3779b97f4a7c15))
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("output %d differs between two fiber orders: a race or a read of uninitialised memory", i)
		}
	}
	return a
}

func testRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := envSeed(); s != 0 {
		seed = s
	}
	t.Logf("random inputs from seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
}

func randFloats(rng *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return out
}

func bf16s(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], safetensors.Float32ToBF16(x))
	}
	return b
}

// randMatrix makes a random [out, in] matrix in the given kernel format.
func randMatrix(rng *rand.Rand, format string, out, in, group int) *model.Matrix {
	m := &model.Matrix{Name: "test." + format, Out: out, In: in}
	vals := randFloats(rng, out*in, 0.5)
	switch format {
	case "f32":
		m.DType, m.Data = model.F32, f32Bytes(vals)
	case "f16":
		m.DType = model.F16
		m.Data = make([]byte, 2*len(vals))
		for i, x := range vals {
			binary.LittleEndian.PutUint16(m.Data[2*i:], safetensors.Float32ToF16(x))
		}
	case "bf16":
		m.DType, m.Data = model.BF16, bf16s(vals)
	case "q4", "q8":
		bits := 4
		if format == "q8" {
			bits = 8
		}
		m.DType, m.Bits, m.GroupSize = model.Affine, bits, group
		m.Data = make([]byte, out*in*bits/8)
		for i := 0; i < len(m.Data); i += 4 {
			binary.LittleEndian.PutUint32(m.Data[i:], rng.Uint32())
		}
		groups := out * in / group
		// Scales keep dequantized weights O(1) whatever the bit width.
		m.Scales = bf16s(randFloats(rng, groups, 1/float64(int(1)<<bits)))
		m.Biases = bf16s(randFloats(rng, groups, 0.3))
	default:
		panic(format)
	}
	return m
}

// devMatrixOf uploads m for a kernel test.
func (r *kernelRig) devMatrixOf(m *model.Matrix) *devMatrix {
	r.t.Helper()
	format, err := matrixFormat(m)
	if err != nil {
		r.t.Fatal(err)
	}
	// Test buffers start aligned: rows are 8-byte aligned when their length is.
	d := &devMatrix{m: m, format: format, data: r.buf(m.Data), bytes: int64(len(m.Data)), aligned: m.RowBytes()%8 == 0}
	d.scales, d.biases = d.data, d.data
	if m.DType == model.Affine {
		d.scales, d.biases = r.buf(m.Scales), r.buf(m.Biases)
	}
	return d
}

func actAt(l loc, rows, width int) *act {
	return &act{loc: l, rows: rows, width: width, stride: width}
}

// f32Tol is the error bound of an f32 sum of n terms of total magnitude mag:
// about n·ε·mag in the worst case; the kernels sum in a tree (lanes, then
// simd_sum), so log-depth rounding keeps them far inside 1e-5·mag for the
// sizes here. 1e-5 relative to the magnitude is the tolerance of every
// f32 accumulation below.
const f32Tol = 1e-5

func TestGEMV(t *testing.T) {
	rng := testRand(t)
	cases := []struct {
		format          string
		out, in, groups int
		rows            int
		xOff            int // bytes before x: 4 makes its rows unaligned for vector loads
	}{
		{"f32", 37, 203, 0, 3, 0},
		{"f16", 29, 96, 0, 2, 0},
		{"bf16", 45, 204, 0, 3, 0}, // multiple of 4: the vector path
		{"bf16", 45, 204, 0, 2, 4}, // x unaligned: the scalar path
		{"bf16", 13, 201, 0, 1, 0}, // odd width: the scalar path
		{"q4", 37, 320, 64, 3, 0},
		{"q4", 37, 320, 64, 2, 4},
		{"q4", 9, 96, 32, 1, 0},
		{"q8", 21, 192, 64, 2, 0},
		{"q8", 6, 64, 64, 3, 4},
		// Past one threadgroup's GEMV_TOKENS token rows: the weights are
		// read once per 8 rows, the last group partly filled.
		{"q4", 37, 320, 64, 11, 0},
		{"q8", 21, 192, 64, 8, 4},
		{"bf16", 45, 204, 0, 9, 0},
		{"f16", 29, 96, 0, 10, 0},
		{"f32", 37, 203, 0, 5, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%dx%d_rows%d_xoff%d", c.format, c.out, c.in, c.rows, c.xOff), func(t *testing.T) {
			m := randMatrix(rng, c.format, c.out, c.in, c.groups)
			x := randFloats(rng, c.rows*c.in, 1)
			got := twice(t, func(r *kernelRig) [][]byte {
				dm := r.devMatrixOf(m)
				xb := r.buf(append(make([]byte, c.xOff), f32Bytes(x)...))
				xb.off += c.xOff
				xa := actAt(xb, c.rows, c.in)
				y := actAt(r.zeros(4*c.rows*c.out), c.rows, c.out)
				r.run(func(e *encoder) { e.gemv(dm, xa, y) })
				// The last token row alone, as a sequence decoding by
				// itself: its bits must not depend on the rows beside it.
				last := c.rows - 1
				y1 := actAt(r.zeros(4*c.out), 1, c.out)
				r.run(func(e *encoder) { e.gemv(dm, xa.row(last), y1) })
				return [][]byte{f32Bytes(r.floatsAt(y.loc, c.rows*c.out)), f32Bytes(r.floatsAt(y1.loc, c.out))}
			})
			y := floats(got[0])
			if !bytes.Equal(got[0][4*(c.rows-1)*c.out:], got[1]) {
				t.Errorf("token row %d differs between the %d-row dispatch and a dispatch of its own", c.rows-1, c.rows)
			}
			worst := 0.0
			for t0 := 0; t0 < c.rows; t0++ {
				for row := 0; row < c.out; row++ {
					want, mag := reference.Dot(m, row, reference.Float64(x[t0*c.in:(t0+1)*c.in]))
					err := math.Abs(float64(y[t0*c.out+row]) - want)
					if !(err <= f32Tol*mag) {
						t.Fatalf("row %d token %d: got %v, want %v (tolerance %g)", row, t0, y[t0*c.out+row], want, f32Tol*mag)
					}
					worst = max(worst, err/mag)
				}
			}
			t.Logf("max error relative to Σ|w·x|: %.3g", worst)
		})
	}
}

func TestEmbed(t *testing.T) {
	rng := testRand(t)
	for _, format := range []string{"f32", "f16", "bf16", "q4", "q8"} {
		t.Run(format, func(t *testing.T) {
			vocab, hidden := 50, 320
			m := randMatrix(rng, format, vocab, hidden, 64)
			ids := []int32{3, 49, 0, 17, 3}
			idb := make([]byte, 4*len(ids))
			for i, id := range ids {
				binary.LittleEndian.PutUint32(idb[4*i:], uint32(id))
			}
			const pos0 = 3
			got := twice(t, func(r *kernelRig) [][]byte {
				dm := r.devMatrixOf(m)
				out := actAt(r.zeros(4*len(ids)*hidden), len(ids), hidden)
				history := r.zeros(4 * (pos0 + len(ids)))
				r.run(func(e *encoder) { e.embed(dm, r.buf(idb), out, history, pos0) })
				return [][]byte{f32Bytes(r.floatsAt(out.loc, len(ids)*hidden)), history.buf.Bytes()}
			})
			out := floats(got[0])
			if !bytes.Equal(got[1][4*pos0:], idb) {
				t.Fatalf("history after the gather: % x, want the ids % x at position %d", got[1], idb, pos0)
			}
			// Dequantization is one multiply-add in f32 on both sides: exact.
			for i, id := range ids {
				for j := 0; j < hidden; j++ {
					if want := m.At(int(id), j); out[i*hidden+j] != want {
						t.Fatalf("token %d (id %d) element %d: got %v, want %v", i, id, j, out[i*hidden+j], want)
					}
				}
			}
		})
	}
}

// sameTogetherAlone demands that the first half of got (the outputs of
// several sequences' steps recorded in one dispatch) be the bits of the
// second half (the same steps recorded one sequence at a time); what says
// which output is which.
func sameTogetherAlone(t *testing.T, got [][]byte, what string) {
	t.Helper()
	half := len(got) / 2
	for i := range half {
		if !bytes.Equal(got[i], got[half+i]) {
			t.Fatalf("output %d%s differs between the steps in one dispatch and each alone", i, what)
		}
	}
}

// TestEmbedSteps gathers the decode steps of 11 sequences (two dispatches
// of at most 8), each id read from its own buffer and appended to its own
// history at its own position, and demands the bits of embed run for each
// id alone (which TestEmbed checks against the table): exact, since both
// are the same single dequantization.
func TestEmbedSteps(t *testing.T) {
	rng := testRand(t)
	const n, vocab, hidden = 11, 50, 320
	for _, format := range []string{"bf16", "q4"} {
		t.Run(format, func(t *testing.T) {
			m := randMatrix(rng, format, vocab, hidden, 64)
			ids := make([]int32, n)
			pos := make([]int, n)
			for z := range ids {
				ids[z], pos[z] = int32(rng.IntN(vocab)), rng.IntN(20)
			}
			id := func(z int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(ids[z])) }
			got := twice(t, func(r *kernelRig) [][]byte {
				var out [][]byte
				for _, together := range []bool{true, false} {
					dm := r.devMatrixOf(m)
					x := actAt(r.zeros(4*n*hidden), n, hidden)
					idLocs, histories := make([]loc, n), make([]loc, n)
					for z := range n {
						// Each id at the end of a ring of 4, as a sampler slot.
						ring := r.zeros(16)
						copy(ring.buf.Bytes()[12:], id(z))
						idLocs[z] = loc{ring.buf, 12}
						histories[z] = r.zeros(4 * (pos[z] + 1))
					}
					r.run(func(e *encoder) {
						if together {
							at := make([]loc, n)
							for z := range n {
								at[z] = loc{histories[z].buf, 4 * pos[z]}
							}
							e.embedSteps(dm, idLocs, x, at)
							return
						}
						for z := range n {
							e.embed(dm, idLocs[z], x.row(z), histories[z], pos[z])
						}
					})
					out = append(out, f32Bytes(r.floatsAt(x.loc, n*hidden)))
					for z := range n {
						out = append(out, histories[z].buf.Bytes()[:4*(pos[z]+1)])
					}
				}
				return out
			})
			sameTogetherAlone(t, got, "")
			for z := range n {
				if h := got[1+z]; !bytes.Equal(h[4*pos[z]:], id(z)) || !bytes.Equal(h[:4*pos[z]], make([]byte, 4*pos[z])) {
					t.Fatalf("sequence %d: history % x, want id %d at position %d only", z, h, ids[z], pos[z])
				}
				x := floats(got[0])[z*hidden : (z+1)*hidden]
				for j := range hidden {
					if want := m.At(int(ids[z]), j); x[j] != want {
						t.Fatalf("sequence %d (id %d) element %d: got %v, want %v", z, ids[z], j, x[j], want)
					}
				}
			}
		})
	}
}

// checkClose compares got with want elementwise: |got−want| ≤ tol·(|want|+floor).
func checkClose(t *testing.T, what string, got []float32, want []float64, tol, floor float64) float64 {
	t.Helper()
	worst := 0.0
	for i := range want {
		err := math.Abs(float64(got[i]) - want[i])
		lim := tol * (math.Abs(want[i]) + floor)
		if !(err <= lim) {
			t.Fatalf("%s[%d]: got %v, want %v (tolerance %g)", what, i, got[i], want[i], lim)
		}
		worst = max(worst, err/(math.Abs(want[i])+floor))
	}
	t.Logf("%s: max error %.3g (relative, floor %g)", what, worst, floor)
	return worst
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}

func TestNorms(t *testing.T) {
	rng := testRand(t)
	const rows, width = 5, 333
	const eps = 1e-6
	x := randFloats(rng, rows*width, 3)
	d := randFloats(rng, rows*width, 1)
	z := randFloats(rng, rows*width, 4)
	w := randFloats(rng, width, 2)
	got := twice(t, func(r *kernelRig) [][]byte {
		xa := actAt(r.buf(f32Bytes(x)), rows, width)
		res := actAt(r.buf(f32Bytes(x)), rows, width)
		da := actAt(r.buf(f32Bytes(d)), rows, width)
		wl := r.buf(f32Bytes(w))
		y1 := actAt(r.zeros(4*rows*width), rows, width)
		y2 := actAt(r.zeros(4*rows*width), rows, width)
		y3 := r.zeros(4 * rows * width)
		zl := r.buf(f32Bytes(z))
		r.run(func(e *encoder) {
			e.rmsnorm(xa, wl, eps, y1)
			e.addRMSNorm(res, da, wl, eps, y2)
			e.gatedNorm(xa.loc, zl, rows, width, wl, eps, y3)
		})
		return [][]byte{f32Bytes(r.floatsAt(y1.loc, rows*width)), f32Bytes(r.floatsAt(y2.loc, rows*width)),
			f32Bytes(r.floatsAt(res.loc, rows*width)), f32Bytes(r.floatsAt(y3, rows*width))}
	})
	var want1, want2, wantRes, want3 []float64
	for i := 0; i < rows; i++ {
		xr := reference.Float64(x[i*width : (i+1)*width])
		sum := make([]float64, width) // residual + delta, added in f32 as the kernel stores it
		for j := range sum {
			sum[j] = float64(x[i*width+j] + d[i*width+j])
		}
		want1 = append(want1, reference.RMSNorm(xr, w, eps)...)
		wantRes = append(wantRes, sum...)
		want2 = append(want2, reference.RMSNorm(sum, w, eps)...)
		want3 = append(want3, reference.GatedRMSNorm(xr, reference.Float64(z[i*width:(i+1)*width]), w, eps)...)
	}
	// Elementwise results of an f32 sum of squares, a rsqrt and two or three
	// products: a few ulps, within 1e-5 relative (floor 1e-3 for values near 0).
	checkClose(t, "rmsnorm", floats(got[0]), want1, 1e-5, 1e-3)
	checkClose(t, "add_rmsnorm", floats(got[1]), want2, 1e-5, 1e-3)
	checkClose(t, "add_rmsnorm residual", floats(got[2]), wantRes, 0, 0)
	checkClose(t, "gated_rmsnorm_silu", floats(got[3]), want3, 1e-5, 1e-3)
}

func TestConv(t *testing.T) {
	rng := testRand(t)
	const channels, taps = 301, 4
	for _, rows := range []int{1, 2, 7} {
		t.Run(fmt.Sprint("rows", rows), func(t *testing.T) {
			x := randFloats(rng, rows*channels, 2)
			w := randFloats(rng, channels*taps, 1)
			st := randFloats(rng, (taps-1)*channels, 2)
			got := twice(t, func(r *kernelRig) [][]byte {
				xa := actAt(r.buf(f32Bytes(x)), rows, channels)
				stl := r.buf(f32Bytes(st))
				out := actAt(r.zeros(4*rows*channels), rows, channels)
				r.run(func(e *encoder) { e.conv(xa, r.buf(f32Bytes(w)), stl, taps, out) })
				return [][]byte{f32Bytes(r.floatsAt(out.loc, rows*channels)), f32Bytes(r.floatsAt(stl, (taps-1)*channels))}
			})
			want, wantState := convWant(w, taps, st, x, channels)
			// Four f32 products of O(1) terms and a SiLU; the sum may cancel
			// to near zero, so the bound is 1e-5 relative with a floor of 1.
			checkClose(t, "conv", floats(got[0]), want, 1e-5, 1)
			checkClose(t, "conv state", floats(got[1]), wantState, 0, 0)
		})
	}
}

// convWant is reference.Conv over the kernels' layouts: weights [C, taps],
// the conv state and the input as rows of width C. It returns the output
// and the state after, flattened.
func convWant(w []float32, taps int, state, x []float32, width int) ([]float64, []float64) {
	conv := make([][]float32, width)
	for ch := range conv {
		conv[ch] = w[ch*taps : (ch+1)*taps]
	}
	rows := func(v []float32) [][]float64 {
		var out [][]float64
		for i := 0; i < len(v); i += width {
			out = append(out, reference.Float64(v[i:i+width]))
		}
		return out
	}
	st := rows(state)
	out := reference.Conv(conv, &st, rows(x))
	return slices.Concat(out...), slices.Concat(st...)
}

// deltaNetGates are the inputs of DeltaNet's gates: a and b per row and
// value head, A_log and dt_bias per value head.
type deltaNetGates struct{ a, b, aLog, dtBias []float32 }

// deltaNetWant is reference.DeltaNetHead over every row and value head,
// from the kernel's state layout [Hv, Dv, Dk] and back.
func deltaNetWant(s deltaNetShape, rows int, conv []float32, g deltaNetGates, state []float32) ([]float64, []float64) {
	width := 2*s.keyHeads*s.keyDim + s.valueHeads*s.valueDim
	dk, dv := s.keyDim, s.valueDim
	// The reference's state per value head, [Dk][Dv].
	heads := make([][]float64, s.valueHeads)
	for j := range heads {
		heads[j] = make([]float64, dk*dv)
		for col := range dv {
			for d := range dk {
				heads[j][d*dv+col] = float64(state[(j*dv+col)*dk+d])
			}
		}
	}
	c := &model.Config{LinearKeyHeads: s.keyHeads, LinearValueHeads: s.valueHeads, LinearKeyHeadDim: dk,
		LinearValueHeadDim: dv, DeltaNetL2Eps: 1e-6}
	w := &model.DeltaNet{ALog: g.aLog, DtBias: g.dtBias}
	o := make([]float64, rows*s.valueHeads*dv)
	for t := 0; t < rows; t++ {
		row := reference.Float64(conv[t*width : (t+1)*width])
		for j := 0; j < s.valueHeads; j++ {
			ab := t*s.valueHeads + j
			copy(o[ab*dv:], reference.DeltaNetHead(c, w, heads[j], j, row, float64(g.a[ab]), float64(g.b[ab])))
		}
	}
	st := make([]float64, len(state))
	for j := range heads {
		for col := range dv {
			for d := range dk {
				st[(j*dv+col)*dk+d] = heads[j][d*dv+col]
			}
		}
	}
	return o, st
}

func TestDeltaNetScan(t *testing.T) {
	rng := testRand(t)
	cases := []struct {
		s    deltaNetShape
		rows int
	}{
		{deltaNetShape{keyHeads: 2, valueHeads: 4, keyDim: 32, valueDim: 32}, 1},
		{deltaNetShape{keyHeads: 2, valueHeads: 4, keyDim: 40, valueDim: 23}, 9},  // dims not multiples of 32 or 4
		{deltaNetShape{keyHeads: 1, valueHeads: 2, keyDim: 128, valueDim: 70}, 3}, // 4 state rows per lane
	}
	for _, c := range cases {
		s := c.s
		t.Run(fmt.Sprintf("k%d_v%d_rows%d", s.keyDim, s.valueDim, c.rows), func(t *testing.T) {
			width := 2*s.keyHeads*s.keyDim + s.valueHeads*s.valueDim
			conv := randFloats(rng, c.rows*width, 1)
			a := randFloats(rng, c.rows*s.valueHeads, 2)
			b := randFloats(rng, c.rows*s.valueHeads, 2)
			aLog := randFloats(rng, s.valueHeads, 1)
			dt := randFloats(rng, s.valueHeads, 1)
			state := randFloats(rng, s.valueHeads*s.valueDim*s.keyDim, 0.5)
			got := twice(t, func(r *kernelRig) [][]byte {
				stl := r.buf(f32Bytes(state))
				o := r.zeros(4 * c.rows * s.valueHeads * s.valueDim)
				r.run(func(e *encoder) {
					e.deltaNetScan(s, c.rows, deltaNetBufs{conv: r.buf(f32Bytes(conv)), a: r.buf(f32Bytes(a)), b: r.buf(f32Bytes(b)),
						aLog: r.buf(f32Bytes(aLog)), dtBias: r.buf(f32Bytes(dt)), state: stl, o: o})
				})
				return [][]byte{f32Bytes(r.floatsAt(o, c.rows*s.valueHeads*s.valueDim)), f32Bytes(r.floatsAt(stl, len(state)))}
			})
			wantO, wantS := deltaNetWant(s, c.rows, conv, deltaNetGates{a, b, aLog, dt}, state)
			// f32 state updated over a few tokens, values O(1): 1e-4 absolute
			// (floor 1) leaves room for the accumulated rounding, and a wrong
			// index or gate is off by O(0.1) or more.
			checkClose(t, "deltanet o", floats(got[0]), wantO, 1e-4, 1)
			checkClose(t, "deltanet state", floats(got[1]), wantS, 1e-4, 1)
		})
	}
}

func bf16Round(v float64) float64 {
	return float64(safetensors.BF16ToFloat32(safetensors.Float32ToBF16(float32(v))))
}

// kernelAngles are the rotation angles at pos as the kernel forms them
// from its inverse frequencies: an f32 product, like transformers' rotary
// embedding.
func kernelAngles(invFreq []float32, pos int) []float64 {
	angles := make([]float64, len(invFreq))
	for i := range angles {
		angles[i] = float64(float32(pos) * invFreq[i])
	}
	return angles
}

func TestAttention(t *testing.T) {
	rng := testRand(t)
	cases := []attnShape{
		{headDim: 64, rotaryDim: 16, qHeads: 4, kvHeads: 2, pos0: 0, maxSeq: 300, rows: 5, eps: 1e-6},
		{headDim: 96, rotaryDim: 24, qHeads: 6, kvHeads: 2, pos0: 270, maxSeq: 300, rows: 1, eps: 1e-6},  // two key chunks
		{headDim: 256, rotaryDim: 64, qHeads: 2, kvHeads: 1, pos0: 250, maxSeq: 270, rows: 9, eps: 1e-6}, // chunk edge inside the pass
		{headDim: 32, rotaryDim: 16, qHeads: 6, kvHeads: 2, pos0: 40, maxSeq: 200, rows: 70, eps: 1e-6},  // several key tiles and query blocks
	}
	var all []attnShape
	for _, s := range cases {
		all = append(all, s)
		s.kvF32 = true
		all = append(all, s)
	}
	for _, s := range all {
		t.Run(fmt.Sprintf("d%d_pos%d_rows%d_kv%s", s.headDim, s.pos0, s.rows, s.kvName()), func(t *testing.T) {
			d := s.headDim
			qg := randFloats(rng, s.rows*s.qHeads*2*d, 2)
			k := randFloats(rng, s.rows*s.kvHeads*d, 2)
			v := randFloats(rng, s.rows*s.kvHeads*d, 2)
			qn := randFloats(rng, d, 1)
			kn := randFloats(rng, d, 1)
			inv := make([]float32, s.rotaryDim/2)
			for i := range inv {
				inv[i] = float32(math.Pow(1e7, -float64(2*i)/float64(s.rotaryDim)))
			}
			// The cache before the pass: random rows.
			cacheLen := s.kvHeads * s.maxSeq * d
			encode, decode := bf16s, func(b []byte, i int) float64 {
				return float64(safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
			}
			round := bf16Round
			if s.kvF32 {
				encode, decode = f32Bytes, func(b []byte, i int) float64 {
					return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
				}
				round = func(v float64) float64 { return float64(float32(v)) }
			}
			k0 := encode(randFloats(rng, cacheLen, 1))
			v0 := encode(randFloats(rng, cacheLen, 1))
			got := twice(t, func(r *kernelRig) [][]byte {
				kc, vc := r.buf(k0), r.buf(v0)
				q := r.zeros(4 * s.rows * s.qHeads * d)
				parts := s.rows * s.qHeads * s.splits()
				pO, pM, pL := r.zeros(4*parts*d), r.zeros(4*parts), r.zeros(4*parts)
				o := r.zeros(4 * s.rows * s.qHeads * d)
				o2 := r.zeros(4 * s.rows * s.qHeads * d)
				b := attnBufs{qg: r.buf(f32Bytes(qg)), k: r.buf(f32Bytes(k)), v: r.buf(f32Bytes(v)),
					qNorm: r.buf(f32Bytes(qn)), kNorm: r.buf(f32Bytes(kn)), invFreq: r.buf(f32Bytes(inv)),
					kCache: kc, vCache: vc, q: q, partO: pO, partM: pM, partL: pL, o: o}
				prefill := b
				prefill.o = o2
				r.run(func(e *encoder) {
					e.attnQNormRope(s, b)
					e.attnKVWrite(s, b)
					e.attnSplit(s, b)
					e.attnReduceGate(s, b)
					e.attnPrefill(s, prefill)
				})
				return [][]byte{f32Bytes(r.floatsAt(q, s.rows*s.qHeads*d)), append([]byte(nil), kc.buf.Bytes()...),
					append([]byte(nil), vc.buf.Bytes()...), f32Bytes(r.floatsAt(o, s.rows*s.qHeads*d)),
					f32Bytes(r.floatsAt(o2, s.rows*s.qHeads*d))}
			})
			// Reference: q and the new keys, the cache after the pass, attention.
			wantQ := make([]float64, s.rows*s.qHeads*d)
			kcache := make([]float64, cacheLen)
			vcache := make([]float64, cacheLen)
			for i := range kcache {
				kcache[i] = decode(k0, i)
				vcache[i] = decode(v0, i)
			}
			for tt := 0; tt < s.rows; tt++ {
				pos := s.pos0 + tt
				for h := 0; h < s.qHeads; h++ {
					src := qg[(tt*s.qHeads+h)*2*d:][:d]
					copy(wantQ[(tt*s.qHeads+h)*d:], reference.Rotate(reference.RMSNorm(reference.Float64(src), qn, float64(s.eps)), kernelAngles(inv, pos)))
				}
				for h := 0; h < s.kvHeads; h++ {
					kr := reference.Rotate(reference.RMSNorm(reference.Float64(k[(tt*s.kvHeads+h)*d:][:d]), kn, float64(s.eps)), kernelAngles(inv, pos))
					for j := 0; j < d; j++ {
						kcache[(h*s.maxSeq+pos)*d+j] = round(kr[j])
						vcache[(h*s.maxSeq+pos)*d+j] = round(float64(v[(tt*s.kvHeads+h)*d+j]))
					}
				}
			}
			// q: normalise and rotate in f32: 1e-5 relative, floor 1e-2.
			checkClose(t, "q", floats(got[0]), wantQ, 1e-5, 1e-2)
			// Cache: the kernel rounds its f32 result to the cache type; a
			// value near a rounding boundary may land one bf16 step (2^-8
			// relative) away, or differ by f32 rounding (1e-5 relative).
			gotK, gotV := got[1], got[2]
			ktol := 1.0 / 128
			if s.kvF32 {
				ktol = 1e-5
			}
			for i := range kcache {
				gk, gv := decode(gotK, i), decode(gotV, i)
				if math.Abs(gk-kcache[i]) > math.Abs(kcache[i])*ktol+1e-6 || gv != vcache[i] {
					t.Fatalf("cache element %d: k %v v %v, want %v %v", i, gk, gv, kcache[i], vcache[i])
				}
				kcache[i] = gk // attend over what the kernel stored
			}
			gotQ := floats(got[0])
			wantO := make([]float64, s.rows*s.qHeads*d)
			for tt := 0; tt < s.rows; tt++ {
				last := s.pos0 + tt
				for h := 0; h < s.qHeads; h++ {
					kvh := h / (s.qHeads / s.kvHeads)
					var keys, values [][]float64
					for key := 0; key <= last; key++ {
						keys = append(keys, kcache[(kvh*s.maxSeq+key)*d:][:d])
						values = append(values, vcache[(kvh*s.maxSeq+key)*d:][:d])
					}
					q := reference.Float64(gotQ[(tt*s.qHeads+h)*d:][:d])
					gate := reference.Float64(qg[(tt*s.qHeads+h)*2*d+d:][:d])
					copy(wantO[(tt*s.qHeads+h)*d:], reference.GatedAttention(q, keys, values, gate))
				}
			}
			// Softmax-weighted means of O(1) values over up to 280 keys in
			// f32: 1e-4 absolute (floor 1) covers the exp and sum rounding.
			checkClose(t, "attention o (split + reduce)", floats(got[3]), wantO, 1e-4, 1)
			checkClose(t, "attention o (tiled prefill)", floats(got[4]), wantO, 1e-4, 1)
		})
	}
}

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
				r.run(func(e *encoder) { e.routerTopK(c.experts, c.k, c.rows, r.buf(f32Bytes(logits)), stride, ids, w) })
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
	type mcase struct {
		format  string
		grouped bool
		rows    int
		ops     Operands // grouped only: the decode kernels are GEMVs in f32
		// decode: the grouped decode kernels (a few rows, each expert read
		// once for the rows that chose it) instead of the block-map GEMMs.
		decode bool
	}
	var cases []mcase
	for _, f := range []string{"bf16", "q4", "q8", "f32", "f16"} {
		cases = append(cases, mcase{f, true, 37, FloatOperands, false}, mcase{f, true, 37, HalfOperands, false},
			mcase{f, false, 3, FloatOperands, true}, mcase{f, false, 8, FloatOperands, true})
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s_grouped_%s_rows%d", c.format, c.ops, c.rows)
		if c.decode {
			name = fmt.Sprintf("%s_decode_rows%d", c.format, c.rows)
		}
		t.Run(name, func(t *testing.T) {
			format, rows := c.format, c.rows
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
			gate, up, down := mk(inter, hidden), mk(inter, hidden), mk(hidden, inter)
			sGate, sUp := randMatrix(rng, format, sharedInter, hidden, gs), randMatrix(rng, format, sharedInter, hidden, gs)
			sDown := randMatrix(rng, format, hidden, sharedInter, gs)
			x := randFloats(rng, rows*hidden, 1)
			slots := k + 1
			// Each token: k distinct routed experts, then the shared one.
			ids := make([]int32, 0, rows*slots)
			wts := make([]float32, 0, rows*slots)
			for tt := 0; tt < rows; tt++ {
				perm := rng.Perm(experts)
				for s := 0; s < k; s++ {
					ids = append(ids, int32(perm[s]))
				}
				ids = append(ids, experts)
				wts = append(wts, randFloats(rng, slots, 1)...)
			}
			idb := make([]byte, 4*len(ids))
			for i, id := range ids {
				binary.LittleEndian.PutUint32(idb[4*i:], uint32(id))
			}
			s := moeShape{hidden: hidden, inter: inter, sharedInter: sharedInter, experts: experts, slots: slots,
				hStride: max(inter, sharedInter), groupSize: gs, sharedGroupSize: gs}
			n := rows * slots
			got := twice(t, func(r *kernelRig) [][]byte {
				r.b.opt.GEMMOperands = c.ops
				stack := func(ms []*model.Matrix) *devExperts {
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
				g, u, dn := stack(gate), stack(up), stack(down)
				h := r.zeros(4 * n * s.hStride)
				y := r.zeros(4 * rows * hidden)
				idl := r.buf(idb)
				xl := r.buf(f32Bytes(x))
				wl := r.buf(f32Bytes(wts))
				w := &devMoE{gate: g, up: u, down: dn, sGate: r.devMatrixOf(sGate), sUp: r.devMatrixOf(sUp), sDown: r.devMatrixOf(sDown)}
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
			})
			if c.grouped {
				checkPlan(t, got[1], ids, experts+1, n)
			}
			if c.decode && !bytes.Equal(got[0][4*(rows-1)*hidden:], got[3]) {
				t.Errorf("row %d's output differs between the %d-row grouped decode and a decode of its own", rows-1, rows)
			}
			expert := func(id int32) (g, u, d *model.Matrix) {
				if int(id) < experts {
					return gate[id], up[id], down[id]
				}
				return sGate, sUp, sDown
			}
			// want is y in float64: each slot's reference.Expert, weighted.
			want := make([]float64, rows*hidden)
			for tt := 0; tt < rows; tt++ {
				xt := [][]float64{reference.Float64(x[tt*hidden:][:hidden])}
				for sl := 0; sl < slots; sl++ {
					g, u, d := expert(ids[tt*slots+sl])
					for row, v := range reference.Expert(g, u, d, xt)[0] {
						want[tt*hidden+row] += float64(wts[tt*slots+sl]) * v
					}
				}
			}
			if c.ops == HalfOperands {
				hk := floats(got[2])
				var hGot []float32
				for i := 0; i < n; i++ {
					width := inter
					if int(ids[i]) == experts {
						width = sharedInter
					}
					hGot = append(hGot, hk[i*s.hStride:][:width]...)
				}
				tight, hWant := stagedMoE(hk, func(tt, sl int) (g, u, d *model.Matrix) { return expert(ids[tt*slots+sl]) },
					x, wts, slots, s.hStride)
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
				return
			}
			// Two chained f32 products and a weighted sum of three; outputs
			// cancel, so the bound is relative to the largest output:
			// 1e-5·(|y| + max|y|).
			checkClose(t, "moe y", floats(got[0]), want, 1e-5, maxAbs(want))
		})
	}
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

// toHalf rounds v to the nearest half, ties to even.
func toHalf(v float32) float32 {
	return safetensors.F16ToFloat32(safetensors.Float32ToF16(v))
}

// halfWeight is what the half GEMMs stage for a dequantized weight: the
// nearest half (clamped to ±65504).
func halfWeight(v float32) float64 {
	return float64(toHalf(min(max(v, -65504), 65504)))
}

// halfActivation is what the half GEMMs multiply for an activation: the sum
// of hi = half(v) and lo = half(v − hi) (gemm_split), v clamped to ±65504.
func halfActivation(v float32) float64 {
	v = min(max(v, -65504), 65504)
	hi := toHalf(v)
	return float64(hi) + float64(toHalf(v-hi))
}

// refGEMVHalf is reference.Dot with the operands the half tiles stage: a
// statement of the kernels' rounding, not of the model.
func refGEMVHalf(m *model.Matrix, x []float32, row int) (float64, float64) {
	var s, mag float64
	for j := 0; j < m.In; j++ {
		p := halfWeight(m.At(row, j)) * halfActivation(x[j])
		s += p
		mag += math.Abs(p)
	}
	return s, mag
}

// halfTol bounds the half GEMMs against the unrounded float64 reference:
// each weight is rounded to half (≤ 2⁻¹¹ ≈ 4.9e-4 of itself; bf16 and f16
// weights are exact), each activation keeps 22 bits as hi + lo, so the sum
// is off by at most 4.9e-4·Σ|w·x| plus the f32 summation: 6e-4. Against a
// reference that stages the same operands, the products are exact in f32
// and only f32Tol remains.
const halfTol = 6e-4

var operandTypes = []Operands{HalfOperands, FloatOperands}

// TestGEMM runs the dense prefill GEMM with each operand type on sizes that
// are not tile multiples (and one that is). Half operands are checked twice:
// against a reference that stages the same operands (f32Tol: only the f32
// sums differ) and against the unrounded float64 reference (halfTol).
func TestGEMM(t *testing.T) {
	rng := testRand(t)
	cases := []struct {
		format          string
		out, in, groups int
		rows            int
	}{
		{"f32", 37, 203, 0, 45},
		{"f16", 5, 40, 0, 70},
		{"bf16", 70, 96, 0, 33},
		{"q4", 33, 320, 64, 40},
		{"q8", 21, 192, 64, 9},
		{"q4", 64, 128, 64, 64}, // whole f32 tiles, whole half tile rows
		{"q8", 65, 160, 32, 131},
		{"f16", 19, 72, 0, 12}, // with activations past half's range
	}
	for _, ops := range operandTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s_%s_%dx%d_rows%d", ops, c.format, c.out, c.in, c.rows), func(t *testing.T) {
				m := randMatrix(rng, c.format, c.out, c.in, c.groups)
				x := randFloats(rng, c.rows*c.in, 1)
				if c.rows == 12 {
					// Staged as ±65504 (the clamp), so the half outputs
					// match the staged-operand reference only.
					x[3], x[c.in+5] = 1e5, -7e4
				}
				got := twice(t, func(r *kernelRig) [][]byte {
					dm := r.devMatrixOf(m)
					xa := actAt(r.buf(f32Bytes(x)), c.rows, c.in)
					y := actAt(r.zeros(4*c.rows*c.out), c.rows, c.out)
					r.run(func(e *encoder) { e.gemm(dm, xa, y, ops) })
					return [][]byte{f32Bytes(r.floatsAt(y.loc, c.rows*c.out))}
				})
				y := floats(got[0])
				worst, worstRounded := 0.0, 0.0
				for t0 := 0; t0 < c.rows; t0++ {
					xr := x[t0*c.in : (t0+1)*c.in]
					for row := 0; row < c.out; row++ {
						g := float64(y[t0*c.out+row])
						want, mag := reference.Dot(m, row, reference.Float64(xr))
						tol := f32Tol
						if ops == HalfOperands {
							tol = halfTol
							wr, magr := refGEMVHalf(m, xr, row)
							err := math.Abs(g - wr)
							if !(err <= f32Tol*magr) {
								t.Fatalf("row %d token %d: got %v, want %v from the staged operands (tolerance %g)", row, t0, g, wr, f32Tol*magr)
							}
							worstRounded = max(worstRounded, err/magr)
						}
						if math.IsInf(g, 0) || math.IsNaN(g) {
							t.Fatalf("row %d token %d: %v", row, t0, g)
						}
						err := math.Abs(g - want)
						if c.rows == 12 && ops == HalfOperands && (t0 == 0 || t0 == 1) {
							continue // clamped rows: checked against the staged operands above
						}
						if !(err <= tol*mag) {
							t.Fatalf("row %d token %d: got %v, want %v (tolerance %g)", row, t0, g, want, tol*mag)
						}
						worst = max(worst, err/mag)
					}
				}
				t.Logf("max error relative to Σ|w·x|: %.3g against float64; %.3g against the staged operands", worst, worstRounded)
			})
		}
	}
}

func TestParseOperands(t *testing.T) {
	for _, o := range operandTypes {
		got, err := ParseOperands(o.String())
		if err != nil || got != o {
			t.Fatalf("ParseOperands(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseOperands("bf16"); err == nil {
		t.Fatal("ParseOperands accepted bf16")
	}
}

func TestArgmax(t *testing.T) {
	rng := testRand(t)
	for _, vocab := range []int{1, 33, 4096, 10007} {
		t.Run(fmt.Sprint("vocab", vocab), func(t *testing.T) {
			logits := randFloats(rng, vocab, 10)
			if vocab > 100 {
				// The largest value twice, in two chunks: the lower id wins.
				logits[vocab-1], logits[vocab/3] = 20, 20
			}
			chunks := ceilDiv(vocab, argmaxChunk)
			got := twice(t, func(r *kernelRig) [][]byte {
				out := r.zeros(4)
				r.run(func(e *encoder) {
					e.argmax(r.buf(f32Bytes(logits)), vocab, r.zeros(4*chunks), r.zeros(4*chunks), out)
				})
				return [][]byte{out.buf.Bytes()[:4]}
			})
			want := 0
			for i, v := range logits {
				if v > logits[want] {
					want = i
				}
			}
			if g := int(int32(binary.LittleEndian.Uint32(got[0]))); g != want {
				t.Fatalf("argmax %d, want %d", g, want)
			}
		})
	}
}

// TestArgmaxSteps chooses the greedy ids of 11 rows in one call (two pairs
// of dispatches of at most 8 rows), each row in its own buffer and its id
// written to its own slot, ties placed across chunks; every id must be the
// lowest index of its row's largest logit, as a sequential scan finds it.
func TestArgmaxSteps(t *testing.T) {
	rng := testRand(t)
	const n, vocab = 11, 10007
	rows := make([][]float32, n)
	want := make([]int, n)
	for z := range rows {
		rows[z] = randFloats(rng, vocab, 10)
		if z%2 == 0 {
			a, b := rng.IntN(vocab), rng.IntN(vocab)
			rows[z][a], rows[z][b] = 20, 20
		}
		for i, v := range rows[z] {
			if v > rows[z][want[z]] {
				want[z] = i
			}
		}
	}
	chunks := ceilDiv(vocab, argmaxChunk)
	got := twice(t, func(r *kernelRig) [][]byte {
		logits, outs := make([]loc, n), make([]loc, n)
		for z := range n {
			logits[z] = r.buf(f32Bytes(rows[z]))
			// The id goes to slot 2 of a ring of 4.
			outs[z] = loc{r.zeros(16).buf, 8}
		}
		r.run(func(e *encoder) {
			e.argmaxSteps(logits, vocab, r.zeros(4*stepMaxSeqs*chunks), r.zeros(4*stepMaxSeqs*chunks), outs)
		})
		out := make([][]byte, n)
		for z := range n {
			out[z] = append([]byte(nil), outs[z].buf.Bytes()...)
		}
		return out
	})
	for z := range n {
		ring := got[z]
		if g := int(int32(binary.LittleEndian.Uint32(ring[8:]))); g != want[z] {
			t.Fatalf("row %d: argmax %d, want %d", z, g, want[z])
		}
		if !bytes.Equal(ring[:8], make([]byte, 8)) || !bytes.Equal(ring[12:], make([]byte, 4)) {
			t.Fatalf("row %d: the ring's other slots were written: % x", z, ring)
		}
	}
}

// TestSample draws tokens on the device and with engine/sample's host
// sampler from the same logits and parameters. The penalised logits must be
// equal bit for bit (both sides do the same f32 operations) and so must the
// top-k survivors (plain comparisons of f32 logits, lower id first on ties).
// The device then sums the probabilities in f32 where the host uses f64, so
// the ids may differ when a sum lands within rounding of a decision boundary:
// about once in 1,500 runs of this test (~100,000 draws), the run seeded
// 1795954632034809036 being one (case 2 draw 6: u·kept fell 1.25e-7 of the
// total mass short of a cumulative boundary). A differing id is accepted only when sampleRef shows it is the
// choice on the other side of such a boundary, within sampleBoundaryEps.
func TestSample(t *testing.T) {
	rng := testRand(t)
	cases := []model.Sampling{
		{Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 1},
		{Temperature: 1.0, TopK: 1},
		{Temperature: 1.3, TopK: 256, TopP: 0.95, MinP: 0.05},
		{Temperature: 0.6, TopK: 40, RepetitionPenalty: 1.3, PresencePenalty: 1.5, FrequencyPenalty: 0.4, GeneratedFrom: 30},
		{RepetitionPenalty: 2, PresencePenalty: 1}, // greedy after penalties
		{Temperature: 0.9, TopK: 7, MinP: 0.5},
		{Temperature: 0.3, TopK: 20, TopP: 0.9}, // ties with the largest logit
		{Temperature: 5, TopK: 4},               // ties across the top-k boundary
	}
	// tieRank: for these cases four tokens are given one value that ranks at
	// that place, so that the order among equal logits (lower id first)
	// decides the draw order (rank 1, a low temperature puts most of the mass
	// there) or which of them survive top-k (rank K, a high temperature makes
	// the last survivor as likely as any).
	tieRank := map[int]int{6: 1, 7: 4}
	const vocab = 10007 // three top-k chunks, the last partial
	for ci, c := range cases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			host := sample.New()
			const draws = 12
			logits := make([][]float32, draws)
			history := make([][]int, draws)
			seeds := make([]uint64, draws)
			for d := range logits {
				// Logits bunched near the top so that penalties and the
				// filters change the outcome; a few −inf and NaN entries.
				logits[d] = randFloats(rng, vocab, 3)
				for i := 0; i < 5; i++ {
					logits[d][rng.IntN(vocab)] = float32(math.Inf(-1))
				}
				logits[d][rng.IntN(vocab)] = float32(math.NaN())
				history[d] = make([]int, 40+rng.IntN(30))
				for i := range history[d] {
					// Repeats, and tokens among the largest logits.
					history[d][i] = rng.IntN(60)
					logits[d][history[d][i]] = 3 + float32(rng.Float64())
				}
				if r := tieRank[ci]; r > 0 {
					tieAtRank(rng, logits[d], r)
				}
				seeds[d] = rng.Uint64()
			}
			// Each draw returns the token id and the (penalised) row.
			got := twice(t, func(r *kernelRig) [][]byte {
				var out [][]byte
				for d := range logits {
					s := c
					s.Seed = seeds[d]
					hb := make([]byte, 4*len(history[d]))
					for i, id := range history[d] {
						binary.LittleEndian.PutUint32(hb[4*i:], uint32(id))
					}
					row := r.buf(f32Bytes(logits[d]))
					tok := r.zeros(4)
					r.run(func(e *encoder) {
						if penaltiesOn(&s) {
							e.penalties(&s, r.buf(hb), len(history[d]), r.zeros(4*vocab), r.zeros(4*vocab), row)
						}
						if s.Temperature <= 0 {
							chunks := ceilDiv(vocab, argmaxChunk)
							e.argmax(row, vocab, r.zeros(4*chunks), r.zeros(4*chunks), tok)
							return
						}
						chunks := ceilDiv(vocab, topkChunk)
						e.topK(&s, row, vocab, len(history[d]), r.zeros(4*chunks*s.TopK), r.zeros(4*chunks*s.TopK), tok)
					})
					out = append(out, append([]byte(nil), tok.buf.Bytes()[:4]...),
						append([]byte(nil), row.buf.Bytes()[row.off:row.off+4*vocab]...))
				}
				return out
			})
			for d := range logits {
				s := c
				s.Seed = seeds[d]
				want := host.Sample(logits[d], &s, history[d])
				penalised := penalise(logits[d], &s, history[d])
				if !bytes.Equal(got[2*d+1], f32Bytes(penalised)) {
					t.Fatalf("draw %d: the device's penalised logits differ from engine/sample's rule", d)
				}
				g := int(int32(binary.LittleEndian.Uint32(got[2*d])))
				if g == want {
					continue
				}
				if s.Temperature <= 0 {
					t.Fatalf("draw %d: greedy: device chose %d, host %d", d, g, want)
				}
				ref := sampleRef(penalised, &s, len(history[d]))
				if !ref.allows(want) {
					t.Fatalf("draw %d: host chose %d, which the reference does not allow:\n%s", d, want, ref.report)
				}
				if !ref.allows(g) {
					t.Fatalf("draw %d: device chose %d, host %d; no decision was within %g of a boundary:\n%s",
						d, g, want, sampleBoundaryEps, ref.report)
				}
				t.Logf("draw %d: device chose %d, host %d, a choice within f32 rounding of a boundary:\n%s", d, g, want, ref.report)
			}
		})
	}
}

// tieAtRank gives four tokens outside the history (ids ≥ 60) one value: the
// largest logit for rank 1, else one between the (rank−1)-th and rank-th
// largest, so that the tied tokens start at that rank. Two of them are one
// thread's stride apart in a top-k chunk, one is in the next chunk and one
// anywhere, so that every level of the device's selection meets a tie.
func tieAtRank(rng *rand.Rand, logits []float32, rank int) {
	var sorted []float32
	for _, v := range logits {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), -1) {
			sorted = append(sorted, v)
		}
	}
	slices.SortFunc(sorted, func(a, b float32) int { return cmp.Compare(b, a) })
	v := sorted[0]
	if rank > 1 {
		v = sorted[rank-2] + (sorted[rank-1]-sorted[rank-2])/2
	}
	j := 60 + rng.IntN(topkChunk)
	ids := []int{j, j + topkThreads, j + topkChunk + 7}
	for len(ids) < 4 {
		if id := 60 + rng.IntN(len(logits)-60); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		logits[id] = v
	}
}

// sampleBoundaryEps is how close, as a fraction of the total probability
// mass, a sum must come to a decision boundary for the device's f32 result
// to be allowed to fall on the other side of it. The device adds up to 256
// probabilities of at most 1 in f32: the recursive-summation error bound is
// (n−1)·2⁻²⁴ ≈ 1.5e-5 of the total; expf adds a few ulps per term and the
// uniform is rounded to f32 (2⁻²⁴ relative). The typical error is far
// smaller (√n·2⁻²⁴ ≈ 1e-6), so the bound is loose but a wrong rule is not
// hidden by it: it must also name the exact token across the boundary.
const sampleBoundaryEps = 2e-5

// penalise applies engine/sample's penalties to a copy of logits, as its
// package doc defines them: repetition over every distinct history token
// (positive logits divided, others multiplied), then presence and frequency
// over history[GeneratedFrom:], in f32 as both samplers compute them.
func penalise(logits []float32, s *model.Sampling, history []int) []float32 {
	l := append([]float32(nil), logits...)
	if !penaltiesOn(s) {
		return l
	}
	seen := map[int]bool{}
	counts := map[int]int{}
	from := min(max(s.GeneratedFrom, 0), len(history))
	for i, id := range history {
		seen[id] = true
		if i >= from {
			counts[id]++
		}
	}
	for id := range seen {
		if rp := s.RepetitionPenalty; rp != 0 && rp != 1 {
			if l[id] > 0 {
				l[id] /= rp
			} else {
				l[id] *= rp
			}
		}
		if c := counts[id]; c > 0 && (s.PresencePenalty != 0 || s.FrequencyPenalty != 0) {
			l[id] -= s.PresencePenalty + s.FrequencyPenalty*float32(c)
		}
	}
	return l
}

// sampleChoices is the set of tokens a correct sampler may draw for one row:
// the float64 choice, plus the choice across each decision boundary that a
// sum came within sampleBoundaryEps of.
type sampleChoices struct {
	ids    map[int]bool
	report string // the candidates near each close boundary, for a failure
}

func (c *sampleChoices) allows(id int) bool { return c.ids[id] }

// sampleRef follows engine/sample's rule in float64 on penalised logits
// (top-k, so Temperature > 0 and 0 < TopK < len(logits)): survivors in
// descending logit order, lower id first; p = exp((l−max)/T); top-p keeps
// the shortest prefix whose mass reaches TopP of the total; min-p keeps those
// with p ≥ MinP·pmax; the draw is the first survivor whose cumulative mass
// exceeds u·kept. Where a top-p, min-p or draw comparison is within
// sampleBoundaryEps of equality both outcomes are followed.
func sampleRef(logits []float32, s *model.Sampling, position int) *sampleChoices {
	type cand struct {
		id    int
		logit float32
	}
	var cs []cand
	for id, v := range logits {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), -1) {
			cs = append(cs, cand{id, v})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(b.logit, a.logit) })
	cs = cs[:min(s.TopK, len(cs))]
	out := &sampleChoices{ids: map[int]bool{}}
	if len(cs) == 0 {
		out.ids[0] = true
		return out
	}
	invT := 1 / s.Temperature
	cum := make([]float64, len(cs)) // cum[i]: mass of cs[0..i]
	total := 0.0
	for i, c := range cs {
		total += math.Exp(float64((c.logit - cs[0].logit) * invT))
		cum[i] = total
	}
	prob := func(i int) float64 { return math.Exp(float64((cs[i].logit - cs[0].logit) * invT)) }
	eps := sampleBoundaryEps * total
	note := func(what string, i int, x float64) {
		out.report += fmt.Sprintf("  %s: index %d (id %d, logit %v, p %.9g): cum %.12g vs %.12g, gap %.3g of the total\n",
			what, i, cs[i].id, cs[i].logit, prob(i)/total, cum[i]/total, x/total, (cum[i]-x)/total)
	}

	// Possible top-p prefix lengths: the float64 one, and any other whose
	// cumulative mass is within eps of the target.
	topP := map[int]bool{}
	if s.TopP > 0 && s.TopP < 1 {
		target := float64(s.TopP) * total
		exact := len(cs)
		for i := range cs {
			if cum[i] >= target {
				exact = i + 1
				break
			}
		}
		topP[exact] = true
		for i := range cs {
			if math.Abs(cum[i]-target) <= eps {
				topP[i+1] = true
				note("top-p cut", i, target)
			}
		}
	} else {
		topP[len(cs)] = true
	}
	// Possible min-p prefix lengths (p is monotone along the order, and
	// pmax = 1).
	minP := map[int]bool{len(cs): true}
	if s.MinP > 0 {
		minP = map[int]bool{}
		keep := float64(s.MinP)
		exact := 0
		for exact < len(cs) && prob(exact) >= keep {
			exact++
		}
		minP[exact] = true
		for i := range cs {
			if math.Abs(prob(i)-keep) <= sampleBoundaryEps {
				minP[i] = true
				minP[i+1] = true
				out.report += fmt.Sprintf("  min-p threshold: index %d (id %d, logit %v): p/pmax %.12g vs %.12g\n",
					i, cs[i].id, cs[i].logit, prob(i), keep)
			}
		}
	}
	u := sample.Uniform(s.Seed, position)
	for kp := range topP {
		for km := range minP {
			keep := max(min(kp, km), 1)
			x := u * cum[keep-1]
			pick := keep - 1
			for i := 0; i < keep; i++ {
				if cum[i] > x {
					pick = i
					break
				}
			}
			out.ids[cs[pick].id] = true
			for i := 0; i+1 < keep; i++ {
				if math.Abs(cum[i]-x) <= eps {
					out.ids[cs[i].id], out.ids[cs[i+1].id] = true, true
					note(fmt.Sprintf("draw boundary (keep %d, u %.12g)", keep, u), i, x)
				}
			}
		}
	}
	return out
}

func TestCopy(t *testing.T) {
	rng := testRand(t)
	const n = 1000 // not a multiple of the 256-thread groups
	src := randFloats(rng, n, 1)
	got := twice(t, func(r *kernelRig) [][]byte {
		dst := r.zeros(4 * (n + 1))
		r.run(func(e *encoder) { e.copyF32(r.buf(f32Bytes(src)), dst, n) })
		return [][]byte{dst.buf.Bytes()}
	})
	// A copy is exact, and the element past the end stays untouched.
	if !bytes.Equal(got[0][:4*n], f32Bytes(src)) || !bytes.Equal(got[0][4*n:], make([]byte, 4)) {
		t.Fatal("copy_f32 did not copy exactly n floats")
	}
}

// TestStepsOfSeveralSequences runs the decode-step kernels that serve
// several sequences in one dispatch (the DeltaNet conv and recurrence,
// each sequence on its own state) against the float64 references, and
// demands the bits of each sequence's step run alone through the
// one-sequence kernels: a sequence's step must not depend on which others
// share the dispatch. 11 sequences take two dispatches of at most 8.
func TestStepsOfSeveralSequences(t *testing.T) {
	rng := testRand(t)
	s := deltaNetShape{keyHeads: 2, valueHeads: 4, keyDim: 40, valueDim: 23}
	width := 2*s.keyHeads*s.keyDim + s.valueHeads*s.valueDim
	const taps = 4
	for _, n := range []int{3, 11} {
		t.Run(fmt.Sprint("seqs", n), func(t *testing.T) {
			x := randFloats(rng, n*width, 2)
			w := randFloats(rng, width*taps, 1)
			a := randFloats(rng, n*s.valueHeads, 2)
			b := randFloats(rng, n*s.valueHeads, 2)
			aLog := randFloats(rng, s.valueHeads, 1)
			dt := randFloats(rng, s.valueHeads, 1)
			convStates := make([][]float32, n)
			states := make([][]float32, n)
			for z := range n {
				convStates[z] = randFloats(rng, (taps-1)*width, 2)
				states[z] = randFloats(rng, s.valueHeads*s.valueDim*s.keyDim, 0.5)
			}
			vw := s.valueHeads * s.valueDim
			// outputs: together (mixed, o, every state), then alone (the same).
			got := twice(t, func(r *kernelRig) [][]byte {
				var out [][]byte
				for _, together := range []bool{true, false} {
					wl, al, bl := r.buf(f32Bytes(w)), r.buf(f32Bytes(a)), r.buf(f32Bytes(b))
					aLogl, dtl := r.buf(f32Bytes(aLog)), r.buf(f32Bytes(dt))
					xa := actAt(r.buf(f32Bytes(x)), n, width)
					mixed := actAt(r.zeros(4*n*width), n, width)
					o := r.zeros(4 * n * vw)
					cs, ss := make([]loc, n), make([]loc, n)
					for z := range n {
						cs[z], ss[z] = r.buf(f32Bytes(convStates[z])), r.buf(f32Bytes(states[z]))
					}
					d := deltaNetBufs{conv: mixed.loc, a: al, b: bl, aLog: aLogl, dtBias: dtl, o: o}
					r.run(func(e *encoder) {
						if together {
							e.convSteps(xa, wl, cs, taps, mixed)
							e.deltaNetSteps(s, d, ss)
							return
						}
						for z := range n {
							e.conv(xa.row(z), wl, cs[z], taps, mixed.row(z))
							e.deltaNetScan(s, 1, deltaNetBufs{conv: mixed.row(z).loc, a: loc{al.buf, 4 * z * s.valueHeads},
								b: loc{bl.buf, 4 * z * s.valueHeads}, aLog: aLogl, dtBias: dtl, state: ss[z], o: loc{o.buf, 4 * z * vw}})
						}
					})
					out = append(out, f32Bytes(r.floatsAt(mixed.loc, n*width)), f32Bytes(r.floatsAt(o, n*vw)))
					for z := range n {
						out = append(out, f32Bytes(r.floatsAt(cs[z], len(convStates[z]))), f32Bytes(r.floatsAt(ss[z], len(states[z]))))
					}
				}
				return out
			})
			sameTogetherAlone(t, got, "")
			mixed := floats(got[0])
			for z := range n {
				// The conv of one token: tolerance as in TestConv.
				want, _ := convWant(w, taps, convStates[z], x[z*width:(z+1)*width], width)
				checkClose(t, fmt.Sprint("conv of sequence ", z), mixed[z*width:(z+1)*width], want, 1e-5, 1)
				// The recurrence from the kernel's conv output: tolerance
				// as in TestDeltaNetScan.
				gates := deltaNetGates{a[z*s.valueHeads : (z+1)*s.valueHeads], b[z*s.valueHeads : (z+1)*s.valueHeads], aLog, dt}
				wantO, wantS := deltaNetWant(s, 1, mixed[z*width:(z+1)*width], gates, states[z])
				checkClose(t, fmt.Sprint("deltanet o of sequence ", z), floats(got[1])[z*vw:(z+1)*vw], wantO, 1e-4, 1)
				checkClose(t, fmt.Sprint("deltanet state of sequence ", z), floats(got[3+2*z]), wantS, 1e-4, 1)
			}
		})
	}
}

// TestAttentionSteps runs the attention kernels that serve several
// sequences' decode steps in one dispatch — each row at its own position
// in its own cache of its own capacity, some past one key chunk — and
// demands the bits of each sequence's step run alone through the
// one-sequence kernels (which TestAttention checks against the float64
// reference): outputs and caches. 10 sequences take two dispatches of at
// most 8.
func TestAttentionSteps(t *testing.T) {
	rng := testRand(t)
	const headDim, rot, qHeads, kvHeads = 40, 16, 4, 2
	for _, kvF32 := range []bool{false, true} {
		for _, n := range []int{3, 10} {
			t.Run(fmt.Sprintf("kvf32_%v_seqs%d", kvF32, n), func(t *testing.T) {
				elem := 2
				if kvF32 {
					elem = 4
				}
				pos := make([]int, n)
				maxSeq := make([]int, n)
				caches := make([][2][]byte, n)
				for z := range n {
					pos[z] = rng.IntN(600)
					maxSeq[z] = pos[z] + 1 + rng.IntN(50)
					for kv := range 2 {
						c := make([]byte, elem*kvHeads*maxSeq[z]*headDim)
						vals := randFloats(rng, len(c)/elem, 1)
						if kvF32 {
							c = f32Bytes(vals)
						} else {
							c = bf16s(vals)
						}
						caches[z][kv] = c
					}
				}
				qg := randFloats(rng, n*qHeads*2*headDim, 1)
				k := randFloats(rng, n*kvHeads*headDim, 1)
				v := randFloats(rng, n*kvHeads*headDim, 1)
				qNorm, kNorm := randFloats(rng, headDim, 1), randFloats(rng, headDim, 1)
				inv := make([]float32, rot/2)
				for i := range inv {
					inv[i] = float32(math.Pow(1e4, -float64(2*i)/rot))
				}
				base := attnShape{headDim: headDim, rotaryDim: rot, qHeads: qHeads, kvHeads: kvHeads, eps: 1e-6, kvF32: kvF32}
				got := twice(t, func(r *kernelRig) [][]byte {
					var out [][]byte
					for _, together := range []bool{true, false} {
						seqs := make([]kvSeq, n)
						for z := range n {
							seqs[z] = kvSeq{k: r.buf(caches[z][0]), v: r.buf(caches[z][1]), pos: pos[z], maxSeq: maxSeq[z]}
						}
						b := attnBufs{qg: r.buf(f32Bytes(qg)), k: r.buf(f32Bytes(k)), v: r.buf(f32Bytes(v)),
							qNorm: r.buf(f32Bytes(qNorm)), kNorm: r.buf(f32Bytes(kNorm)), invFreq: r.buf(f32Bytes(inv)),
							q: r.zeros(4 * n * qHeads * headDim), o: r.zeros(4 * n * qHeads * headDim)}
						if together {
							s := base
							for _, q := range seqs {
								s.keys = max(s.keys, q.pos+1)
							}
							parts := n * qHeads * s.splits()
							b.partO, b.partM, b.partL = r.zeros(4*parts*headDim), r.zeros(4*parts), r.zeros(4*parts)
							info := r.buf(attnStepInfo(seqs))
							r.run(func(e *encoder) {
								e.attnStepsNormRope(base, b, seqs, info)
								e.attnStepsSplit(base, b, seqs, info)
								e.attnStepsReduce(base, b, seqs, info)
							})
						} else {
							for z := range n {
								s := base
								s.pos0, s.maxSeq, s.rows = pos[z], maxSeq[z], 1
								at := func(l loc, floats int) loc { return loc{l.buf, l.off + 4*z*floats} }
								bz := b
								bz.qg, bz.q, bz.o = at(b.qg, qHeads*2*headDim), at(b.q, qHeads*headDim), at(b.o, qHeads*headDim)
								bz.k, bz.v = at(b.k, kvHeads*headDim), at(b.v, kvHeads*headDim)
								bz.kCache, bz.vCache = seqs[z].k, seqs[z].v
								parts := qHeads * s.splits()
								bz.partO, bz.partM, bz.partL = r.zeros(4*parts*headDim), r.zeros(4*parts), r.zeros(4*parts)
								r.run(func(e *encoder) {
									e.attnQNormRope(s, bz)
									e.attnKVWrite(s, bz)
									e.attnSplit(s, bz)
									e.attnReduceGate(s, bz)
								})
							}
						}
						out = append(out, f32Bytes(r.floatsAt(b.o, n*qHeads*headDim)))
						for z := range n {
							out = append(out, append([]byte(nil), seqs[z].k.buf.Bytes()...), append([]byte(nil), seqs[z].v.buf.Bytes()...))
						}
					}
					return out
				})
				sameTogetherAlone(t, got, " (0: attention output, then each sequence's keys and values)")
				// The caches changed only at each sequence's new position.
				for z := range n {
					row := elem * headDim
					for kv := range 2 {
						c := got[1+2*z+kv]
						for h := range kvHeads {
							for p := range maxSeq[z] {
								off := (h*maxSeq[z] + p) * row
								if changed := !bytes.Equal(c[off:off+row], caches[z][kv][off:off+row]); changed != (p == pos[z]) {
									t.Fatalf("sequence %d cache %d head %d row %d: changed %v, only row %d should", z, kv, h, p, changed, pos[z])
								}
							}
						}
					}
				}
			})
		}
	}
}
