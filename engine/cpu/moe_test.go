package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

// newTestMoE makes a small MoE layer: the experts' matrices in dtype
// (4-bit affine in groups of 64, or F32), the router and shared-expert gate
// in F32.
func newTestMoE(rng *rand.Rand, cfg *model.Config, dtype model.DType) *model.MoE {
	H, E, I, S := cfg.HiddenSize, cfg.NumExperts, cfg.MoEIntermediate, cfg.SharedIntermediate
	m := &model.MoE{Gate: make([]model.Matrix, E), Up: make([]model.Matrix, E), Down: make([]model.Matrix, E)}
	matrix := func(dt model.DType, out, in int) model.Matrix { return newTestMatrix(rng, dt, out, in, 4, 64).m }
	m.Router = matrix(model.F32, E, H)
	m.SharedExpert = matrix(model.F32, 1, H)
	m.SharedGate = matrix(dtype, S, H)
	m.SharedUp = matrix(dtype, S, H)
	m.SharedDown = matrix(dtype, H, S)
	for e := range E {
		m.Gate[e] = matrix(dtype, I, H)
		m.Up[e] = matrix(dtype, I, H)
		m.Down[e] = matrix(dtype, H, I)
	}
	return m
}

// TestMoEBatchComposition runs the MoE block and the RMSNorm on one
// sequence's rows alone and inside passes with other sequences (decode
// steps and prefill chunks choosing overlapping experts, so experts are
// grouped across sequences) and requires the sequence's rows to come out
// bit for bit the same: the invariant continuous batching relies on. The
// rows alone are also checked against the float64 MoE (reference.SparseMoE):
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
		w := &model.Weights{Config: cfg, Layers: []model.Layer{{MoE: *m}}, Embed: model.Matrix{Out: 100}}
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
					want := reference.SparseMoE(&cfg, m, [][]float64{reference.Float64(x[r*cfg.HiddenSize : (r+1)*cfg.HiddenSize])})[0]
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
		all := p.prepareExpertInputs(m, groupX, []*expertWork{ex})
		if all == nil {
			t.Fatal("no prepared input for a 4-bit expert on the fast path")
		}
		want := p.swiGLU(ex.x, &m.Gate[2], &m.Up[2], &m.Down[2], nil)
		got := p.swiGLU(ex.x, &m.Gate[2], &m.Up[2], &m.Down[2], expertInput(all, ex, tokens, in))
		for i := range want.data {
			if math.Float32bits(got.data[i]) != math.Float32bits(want.data[i]) {
				t.Fatalf("element %d: %v from the group's records, %v from the expert's own", i, got.data[i], want.data[i])
			}
		}
	})
}
