package gpu

import (
	"fmt"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

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
