package cpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
)

// testMoE is a small MoE layer with the exact values of its weights.
type testMoE struct {
	w                                *model.MoE
	router, sharedExpert             [][]float64
	gate, up, down                   [][][]float64
	sharedGate, sharedUp, sharedDown [][]float64
}

// newTestMoE makes the experts' matrices in dtype (4-bit affine in groups
// of 64, or F32) and the router and shared-expert gate in F32.
func newTestMoE(rng *rand.Rand, cfg *model.Config, dtype model.DType) *testMoE {
	H, E, I, S := cfg.HiddenSize, cfg.NumExperts, cfg.MoEIntermediate, cfg.SharedIntermediate
	m := &testMoE{w: &model.MoE{Gate: make([]model.Matrix, E), Up: make([]model.Matrix, E), Down: make([]model.Matrix, E)},
		gate: make([][][]float64, E), up: make([][][]float64, E), down: make([][][]float64, E)}
	matrix := func(dt model.DType, out, in int) (model.Matrix, [][]float64) {
		t := newTestMatrix(rng, dt, out, in, 4, 64)
		return t.m, t.ref
	}
	m.w.Router, m.router = matrix(model.F32, E, H)
	m.w.SharedExpert, m.sharedExpert = matrix(model.F32, 1, H)
	m.w.SharedGate, m.sharedGate = matrix(dtype, S, H)
	m.w.SharedUp, m.sharedUp = matrix(dtype, S, H)
	m.w.SharedDown, m.sharedDown = matrix(dtype, H, S)
	for e := range E {
		m.w.Gate[e], m.gate[e] = matrix(dtype, I, H)
		m.w.Up[e], m.up[e] = matrix(dtype, I, H)
		m.w.Down[e], m.down[e] = matrix(dtype, H, I)
	}
	return m
}

// reference is engine/model/MODEL.md's MoE of one row in float64.
func (m *testMoE) reference(cfg *model.Config, x []float32) []float64 {
	E := cfg.NumExperts
	matVec := func(w [][]float64, x []float64) []float64 {
		y := make([]float64, len(w))
		for o := range y {
			for i, v := range x {
				y[o] += w[o][i] * v
			}
		}
		return y
	}
	silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	expert := func(gate, up, down [][]float64, x []float64) []float64 {
		g, u := matVec(gate, x), matVec(up, x)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		return matVec(down, g)
	}
	xf := make([]float64, len(x))
	for i, v := range x {
		xf[i] = float64(v)
	}
	logits := matVec(m.router, xf)
	maxLogit := slices.Max(logits)
	probs := make([]float64, E)
	for e, l := range logits {
		probs[e] = math.Exp(l - maxLogit)
	}
	order := make([]int, E)
	for e := range order {
		order[e] = e
	}
	slices.SortStableFunc(order, func(a, b int) int { return -cmp.Compare(probs[a], probs[b]) })
	chosen := order[:cfg.ExpertsPerToken]
	var chosenSum float64
	for _, e := range chosen {
		chosenSum += probs[e]
	}
	y := expert(m.sharedGate, m.sharedUp, m.sharedDown, xf)
	g := 1 / (1 + math.Exp(-matVec(m.sharedExpert, xf)[0]))
	for d := range y {
		y[d] *= g
	}
	for _, e := range chosen {
		ye := expert(m.gate[e], m.up[e], m.down[e], xf)
		for d := range y {
			y[d] += probs[e] / chosenSum * ye[d]
		}
	}
	return y
}

// TestMoEBatchComposition runs the MoE block and the RMSNorm on one
// sequence's rows alone and inside passes with other sequences (decode
// steps and prefill chunks choosing overlapping experts, so experts are
// grouped across sequences) and requires the sequence's rows to come out
// bit for bit the same: the invariant continuous batching relies on. The
// rows alone are also checked against a float64 MoE written from engine/model/MODEL.md:
// at 1e-4 of the output scale on the exact path (f32 sums of a few hundred
// products), at 5e-3 on the fast path (its bar: activations rounded to
// int16 per group). Both precisions, 4-bit and F32 experts, assembly and Go
// loops.
func TestMoEBatchComposition(t *testing.T) {
	for _, c := range []struct {
		precision Precision
		dtype     model.DType
		tolerance float64
	}{{PrecisionExact, model.F32, 1e-4}, {PrecisionExact, model.Affine, 1e-4}, {PrecisionFast, model.Affine, 5e-3}} {
		t.Run(fmt.Sprintf("%s_%v", c.precision, c.dtype), func(t *testing.T) {
			withKernels(t, func(t *testing.T, k kernelSet) {
				testMoEBatchComposition(t, k, c.precision, c.dtype, c.tolerance)
			})
		})
	}
}

func testMoEBatchComposition(t *testing.T, kern kernelSet, precision Precision, dtype model.DType, tolerance float64) {
	{
		cfg := model.Config{HiddenSize: 128, NumLayers: 1, NumExperts: 7, ExpertsPerToken: 3,
			MoEIntermediate: 64, SharedIntermediate: 128, RMSNormEps: 1e-6}
		rng := rand.New(rand.NewPCG(51, 52))
		m := newTestMoE(rng, &cfg, dtype)
		normWeight := randomVector(rng, cfg.HiddenSize)
		w := &model.Weights{Config: cfg, Layers: []model.Layer{{MoE: *m.w}}, Embed: model.Matrix{Out: 100}}
		b := &Backend{cfg: cfg, w: w, pool: pool{threads: 3}, kern: kern, precision: precision}

		// Each sequence's rows, fixed per sequence.
		rowsOf := func(seq, n int) []float32 {
			r := rand.New(rand.NewPCG(uint64(seq), 99))
			return randomVector(r, n*cfg.HiddenSize)
		}
		type part struct{ seq, rows int }
		run := func(parts []part) (moe, norm [][]float32) {
			var segs []model.Segment
			var x []float32
			for _, pt := range parts {
				s, err := b.NewSequence(64)
				if err != nil {
					t.Fatal(err)
				}
				segs = append(segs, model.Segment{Seq: s, In: model.Input{IDs: make([]int, pt.rows)}})
				x = append(x, rowsOf(pt.seq, pt.rows)...)
			}
			p, err := b.begin(segs)
			if err != nil {
				t.Fatal(err)
			}
			xt := &tensor{rows: len(x) / cfg.HiddenSize, width: cfg.HiddenSize, data: x}
			y := p.tensor(p.MoE(0, &w.Layers[0].MoE, xt))
			n := p.tensor(p.RMSNorm(xt, normWeight))
			if p.err != nil {
				t.Fatal(p.err)
			}
			row := 0
			for _, pt := range parts {
				moe = append(moe, y.data[row*cfg.HiddenSize:(row+pt.rows)*cfg.HiddenSize])
				norm = append(norm, n.data[row*cfg.HiddenSize:(row+pt.rows)*cfg.HiddenSize])
				row += pt.rows
			}
			return moe, norm
		}
		for _, c := range []struct {
			name  string
			alone part
			with  []part // the others, before and after it
		}{
			{"decode among decodes and a prefill chunk", part{1, 1}, []part{{2, 1}, {3, 6}, {4, 1}}},
			{"prefill chunk among decodes", part{1, 5}, []part{{2, 1}, {3, 2}}},
			{"short prompt tail among decodes", part{1, 3}, []part{{2, 3}, {3, 1}}},
			{"prefill chunk beside another", part{1, 8}, []part{{5, 9}}},
		} {
			t.Run(c.name, func(t *testing.T) {
				aloneMoE, aloneNorm := run([]part{c.alone})
				x := rowsOf(c.alone.seq, c.alone.rows)
				for r := range c.alone.rows {
					want := m.reference(&cfg, x[r*cfg.HiddenSize:(r+1)*cfg.HiddenSize])
					scale := 0.0
					for _, v := range want {
						scale = max(scale, math.Abs(v))
					}
					for d, v := range want {
						if got := float64(aloneMoE[0][r*cfg.HiddenSize+d]); math.Abs(got-v) > tolerance*scale {
							t.Fatalf("row %d dim %d: MoE %v, float64 reference %v", r, d, got, v)
						}
					}
				}
				parts := append(append([]part{c.with[0]}, c.alone), c.with[1:]...)
				moe, norm := run(parts)
				for i := range aloneMoE[0] {
					if math.Float32bits(moe[1][i]) != math.Float32bits(aloneMoE[0][i]) {
						t.Fatalf("MoE element %d: %v in the batch, %v alone", i, moe[1][i], aloneMoE[0][i])
					}
					if math.Float32bits(norm[1][i]) != math.Float32bits(aloneNorm[0][i]) {
						t.Fatalf("RMSNorm element %d: %v in the batch, %v alone", i, norm[1][i], aloneNorm[0][i])
					}
				}
			})
		}
	}
}

// TestCombineExpertsOrder checks that a row's MoE sum is taken in the order
// given, shared expert first: with values whose f32 sum depends on the
// order, the result is the left-to-right sum.
func TestCombineExpertsOrder(t *testing.T) {
	for _, isa := range ISAs() {
		// Rows of 17: the assembly's lanes and the Go loop's tail.
		y := make([]float32, 17)
		row := func(v float32) []float32 {
			r := make([]float32, len(y))
			for i := range r {
				r[i] = v
			}
			return r
		}
		combineExperts(y, 1, row(1e8), []float32{1, 1, 1}, [][]float32{row(-1e8), row(1), row(3)}, scaleAddFor(isa))
		for i, v := range y {
			if v != 4 {
				t.Fatalf("%s: element %d combined %v, want ((1e8 − 1e8) + 1) + 3 = 4", isa, i, v)
			}
		}
	}
}

// TestPreparedExpertInputs checks that an expert fed the records of its
// rows quantized once for the whole group (prepareExpertInputs) computes
// bit for bit what it computes quantizing its rows itself.
func TestPreparedExpertInputs(t *testing.T) {
	withKernels(t, func(t *testing.T, kern kernelSet) {
		cfg := model.Config{HiddenSize: 128, NumLayers: 1, NumExperts: 3, ExpertsPerToken: 2,
			MoEIntermediate: 64, SharedIntermediate: 64, RMSNormEps: 1e-6}
		rng := rand.New(rand.NewPCG(61, 62))
		m := newTestMoE(rng, &cfg, model.Affine)
		b := &Backend{cfg: cfg, pool: pool{threads: 2}, kern: kern, precision: PrecisionFast}
		p := &pass{b: b}
		const rows = 9
		groupX := &tensor{rows: rows, width: cfg.HiddenSize, data: randomVector(rng, rows*cfg.HiddenSize)}
		mine := []int{1, 4, 5, 8} // the group's rows routed to expert 2
		tokens := [][]int{nil, nil, mine}
		in := make(map[int]int, rows)
		for i := range rows {
			in[i] = i
		}
		ex := &expertWork{e: 2, rows: []int{0, 1, 2, 3}, x: newTensor(len(mine), cfg.HiddenSize)}
		for j, r := range mine {
			copy(ex.x.row(j), groupX.row(r))
		}
		all := p.prepareExpertInputs(m.w, groupX, []*expertWork{ex})
		if all == nil {
			t.Fatal("no prepared input for a 4-bit expert on the fast path")
		}
		want := p.swiGLU(ex.x, &m.w.Gate[2], &m.w.Up[2], &m.w.Down[2], nil)
		got := p.swiGLU(ex.x, &m.w.Gate[2], &m.w.Up[2], &m.w.Down[2], expertInput(all, ex, tokens, in))
		for i := range want.data {
			if math.Float32bits(got.data[i]) != math.Float32bits(want.data[i]) {
				t.Fatalf("element %d: %v from the group's records, %v from the expert's own", i, got.data[i], want.data[i])
			}
		}
	})
}
