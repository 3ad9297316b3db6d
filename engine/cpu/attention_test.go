package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

func f32Matrix(rng *rand.Rand, name string, out, in int, scale float64) model.Matrix {
	vals := make([]float32, out*in)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64() * scale)
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))
	return model.Matrix{Name: name, Out: out, In: in, DType: model.F32, Data: data}
}

// randomAttention is a one-layer model of cfg's gated attention block with
// random f32 projections (scale 0.3) and q/k norm weights 1 ± spread.
func randomAttention(rng *rand.Rand, cfg model.Config, spread float64) *model.Weights {
	H, KV, D, hidden := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.HiddenSize
	att := &model.Attention{QNorm: make([]float32, D), KNorm: make([]float32, D)}
	att.Q = f32Matrix(rng, "q", 2*H*D, hidden, 0.3)
	att.K = f32Matrix(rng, "k", KV*D, hidden, 0.3)
	att.V = f32Matrix(rng, "v", KV*D, hidden, 0.3)
	att.O = f32Matrix(rng, "o", hidden, H*D, 0.3)
	for i := range D {
		att.QNorm[i] = float32(1 + spread*rng.NormFloat64())
		att.KNorm[i] = float32(1 + spread*rng.NormFloat64())
	}
	return &model.Weights{Config: cfg, Layers: []model.Layer{{Attention: att}}, Embed: model.Matrix{Out: 100}}
}

// TestAttentionBlock runs the gated attention block over two passes (five
// tokens, then two through the cache) on awkward sizes — 6 query heads on
// 2 kv heads (GQA 3), head_dim 24 with 8 rotary dims — against the float64
// block (reference.Attention), fed one row at a time. Tolerance 1e-4 of the
// output scale: the f32 path rounds a few hundred products per output.
func TestAttentionBlock(t *testing.T) {
	withKernels(t, func(t *testing.T, k kernelSet) {
		const hidden, H, KV, D, rot = 20, 6, 2, 24, 8
		cfg := model.Config{HiddenSize: hidden, NumLayers: 1, NumHeads: H, NumKVHeads: KV, HeadDim: D,
			RotaryDim: rot, RopeTheta: 1e4, RMSNormEps: 1e-6}
		rng := rand.New(rand.NewPCG(21, 22))
		w := randomAttention(rng, cfg, 0.5)
		att := w.Layers[0].Attention
		b := &Backend{cfg: cfg, w: w, pool: pool{threads: 3}, kern: k}
		seq, err := b.NewSequence(16)
		if err != nil {
			t.Fatal(err)
		}

		// The float64 reference keeps its own cache of normed, rotated keys.
		state := &reference.LayerState{Keys: make([][][]float64, KV), Values: make([][][]float64, KV)}
		expected := func(x []float32) []float64 {
			return reference.Attention(&cfg, att, state, [][]float64{reference.Float64(x)})[0]
		}

		pos := 0
		for _, n := range []int{5, 2} {
			x := newTensor(n, hidden)
			for i := range x.data {
				x.data[i] = float32(rng.NormFloat64())
			}
			p, err := b.Begin([]model.Segment{{Seq: seq, In: model.Input{IDs: make([]int, n)}}})
			if err != nil {
				t.Fatal(err)
			}
			got := p.Attention(0, att, x).(*tensor)
			p.Submit()
			if _, err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			for r := range n {
				want := expected(x.row(r))
				var scale, diff float64
				for i, wv := range want {
					scale = max(scale, math.Abs(wv))
					diff = max(diff, math.Abs(float64(got.row(r)[i])-wv))
				}
				if diff > 1e-4*scale {
					t.Fatalf("position %d: error %.3g of output scale %.3g", pos, diff, scale)
				}
				pos++
			}
		}
	})
}

// TestAttentionKernels checks the four-row score and value loops against a
// float64 computation on sizes that are not multiples of the tile or the
// vector width (tolerance 1e-5 of the output scale: the f32 loops round
// about dim products per output), and, where the assembly runs, that it
// gives bit for bit what dot4 and axpy give, so that a row's result does
// not depend on which loop computed it.
func TestAttentionKernels(t *testing.T) {
	withKernels(t, testAttentionKernels)
}

func testAttentionKernels(t *testing.T, k kernelSet) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ n, dim, stride int }{{1, 16, 16}, {7, 48, 100}, {33, 256, 512}, {5, 24, 24}, {64, 256, 256}} {
		t.Run(fmt.Sprintf("n%d_dim%d_stride%d", c.n, c.dim, c.stride), func(t *testing.T) {
			const scale = 0.0625
			var q [4][]float32
			for l := range q {
				q[l] = randomVector(rng, c.dim)
			}
			keys := randomVector(rng, c.n*c.stride)
			values := randomVector(rng, c.n*c.stride)
			eStride := c.n + 3
			e := randomVector(rng, 4*eStride)
			base := [4][]float32{}
			for l := range base {
				base[l] = randomVector(rng, c.dim)
			}
			run := func(k *simdKernels) (scores []float32, outs [4][]float32) {
				scores = make([]float32, 4*eStride)
				attentionScores4(k, &q, cacheRows{keys, c.stride, c.n, c.dim}, scale, scores, eStride)
				for l := range outs {
					outs[l] = append([]float32(nil), base[l]...)
				}
				attentionValues4(k, &outs, e, eStride, cacheRows{values, c.stride, c.n, c.dim})
				return scores, outs
			}
			scores, outs := run(&k.f32)
			for l := range 4 {
				for j := range c.n {
					var want float64
					for d := range c.dim {
						want += float64(q[l][d]) * float64(keys[j*c.stride+d])
					}
					want *= scale
					if got := float64(scores[l*eStride+j]); math.Abs(got-want) > 1e-5*math.Sqrt(float64(c.dim)) {
						t.Fatalf("score %d,%d = %v, want %v", l, j, got, want)
					}
				}
				for d := range c.dim {
					want := float64(base[l][d])
					for j := range c.n {
						want += float64(e[l*eStride+j]) * float64(values[j*c.stride+d])
					}
					if got := float64(outs[l][d]); math.Abs(got-want) > 1e-5*math.Sqrt(float64(c.n)) {
						t.Fatalf("output %d,%d = %v, want %v", l, d, got, want)
					}
				}
			}
			if k.f32.scores4 == nil {
				return
			}
			loops := k.f32
			loops.scores4, loops.values4 = nil, nil
			goScores, goOuts := run(&loops)
			for i := range scores {
				if i%eStride < c.n && math.Float32bits(scores[i]) != math.Float32bits(goScores[i]) {
					t.Fatalf("score %d: assembly %v, dot4 %v", i, scores[i], goScores[i])
				}
			}
			for l := range outs {
				for d := range outs[l] {
					if math.Float32bits(outs[l][d]) != math.Float32bits(goOuts[l][d]) {
						t.Fatalf("output %d,%d: assembly %v, axpy %v", l, d, outs[l][d], goOuts[l][d])
					}
				}
			}
		})
	}
}

// TestAttentionHeadSets checks that how a kv head's group of heads is cut
// into blocks (attentionHeadSet: the whole group of 10 on 1 or 2 threads,
// sets of 8 on 4, of 4 on 16) changes no bit of the block's output, over a
// prompt and then decode steps through the cache: a row's arithmetic must
// not depend on the rows beside it in its block. Head dim 32, so the
// four-row assembly loops run where there are any.
func TestAttentionHeadSets(t *testing.T) {
	withKernels(t, func(t *testing.T, k kernelSet) {
		const hidden, H, KV, D, rot = 24, 20, 2, 32, 8
		cfg := model.Config{HiddenSize: hidden, NumLayers: 1, NumHeads: H, NumKVHeads: KV, HeadDim: D,
			RotaryDim: rot, RopeTheta: 1e4, RMSNormEps: 1e-6}
		rng := rand.New(rand.NewPCG(31, 32))
		w := randomAttention(rng, cfg, 0)
		att := w.Layers[0].Attention
		var inputs []*tensor
		for _, n := range []int{7, 1, 1, 1} {
			x := newTensor(n, hidden)
			for i := range x.data {
				x.data[i] = float32(rng.NormFloat64())
			}
			inputs = append(inputs, x)
		}
		var want [][]float32
		for _, threads := range []int{1, 2, 4, 16} {
			b := &Backend{cfg: cfg, w: w, pool: pool{threads: threads}, kern: k}
			seq, err := b.NewSequence(16)
			if err != nil {
				t.Fatal(err)
			}
			for step, x := range inputs {
				p, err := b.begin([]model.Segment{{Seq: seq, In: model.Input{IDs: make([]int, x.rows)}}})
				if err != nil {
					t.Fatal(err)
				}
				if step == len(inputs)-1 {
					wantSet := map[int]int{1: 10, 2: 10, 4: 8, 16: 4}[threads]
					if got := p.attentionHeadSet(H / KV); got != wantSet {
						t.Fatalf("%d threads: a decode step's blocks take %d heads, want %d", threads, got, wantSet)
					}
				}
				got := p.Attention(0, att, x).(*tensor).data
				p.Submit()
				if p.err != nil {
					t.Fatal(p.err)
				}
				if threads == 1 {
					want = append(want, got)
					continue
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[step][i]) {
						t.Fatalf("%d threads, pass %d: output %d is %v, on 1 thread %v", threads, step, i, got[i], want[step][i])
					}
				}
			}
		}
	})
}

// TestAttentionTiles checks attention over the cache (attendCache) against
// a float64 softmax on chunks that start and end off the tile grid (head
// dim 64: tiles of 128 positions): 1 token on an empty cache, 1 token
// after a full tile, 129 and 300 tokens from empty, 77 tokens after 250
// cached positions, on 6 heads reading 2 kv heads (GQA groups of 3, so
// quads are padded). The keys grow along the positions, so a row's
// maximum rises from tile to tile and the online softmax's rescaling runs.
// Tolerance 1e-4 of the output scale on both precisions: the f32 sums
// round a few hundred terms and the fast exponentials are within 2 ulp.
// Then the 77 tokens again one pass each, as decode steps: every bit must
// match the chunk's, since tiles start at multiples of the tile whatever
// the pass.
func TestAttentionTiles(t *testing.T) {
	withKernels(t, func(t *testing.T, k kernelSet) {
		for _, precision := range []Precision{PrecisionExact, PrecisionFast} {
			t.Run(string(precision), func(t *testing.T) { testAttentionTiles(t, k, precision) })
		}
	})
}

func testAttentionTiles(t *testing.T, k kernelSet, precision Precision) {
	const H, KV, D = 6, 2, 64
	if tile := attentionTile(D); tile != 128 {
		t.Fatalf("attentionTile(%d) = %d, want 128", D, tile)
	}
	cfg := model.Config{HiddenSize: 8, NumLayers: 1, NumHeads: H, NumKVHeads: KV, HeadDim: D,
		RotaryDim: 16, RopeTheta: 1e4, RMSNormEps: 1e-6}
	b := &Backend{cfg: cfg, w: &model.Weights{Config: cfg, Layers: make([]model.Layer, 1), Embed: model.Matrix{Out: 100}},
		pool: pool{threads: 2}, kern: k, precision: precision}
	rng := rand.New(rand.NewPCG(41, 42))
	run := func(seq *sequence, pos int, qg []float32) []float32 {
		n := len(qg) / (H * 2 * D)
		seq.tokens = make([]int, pos)
		p, err := b.begin([]model.Segment{{Seq: seq, In: model.Input{IDs: make([]int, n)}}})
		if err != nil {
			t.Fatal(err)
		}
		o := make([]float32, n*H*D)
		p.attendCache(0, qg, o)
		seq.busy = false
		return o
	}
	for _, c := range []struct{ cached, n int }{{0, 1}, {128, 1}, {0, 129}, {0, 300}, {250, 77}} {
		total := c.cached + c.n
		s, err := b.NewSequence(total)
		if err != nil {
			t.Fatal(err)
		}
		seq := s.(*sequence)
		keys := randomVector(rng, total*KV*D)
		for j := range total {
			for i := range KV * D {
				keys[j*KV*D+i] *= float32(0.5 + 2*float64(j)/float64(total))
			}
		}
		seq.layers[0].k, seq.layers[0].v = keys, randomVector(rng, total*KV*D)
		qg := randomVector(rng, c.n*H*2*D)
		got := run(seq, c.cached, qg)
		for tok := range c.n {
			pos := c.cached + tok
			for h := range H {
				q := qg[(tok*H+h)*2*D:][:D]
				gate := qg[(tok*H+h)*2*D+D:][:D]
				kv := h / (H / KV)
				scores := make([]float64, pos+1)
				maxScore := math.Inf(-1)
				for j := range scores {
					for d := range D {
						scores[j] += float64(q[d]) * float64(keys[(j*KV+kv)*D+d])
					}
					scores[j] /= math.Sqrt(D)
					maxScore = max(maxScore, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - maxScore)
					sum += scores[j]
				}
				want := make([]float64, D)
				var scale, diff float64
				for d := range D {
					for j, e := range scores {
						want[d] += e / sum * float64(seq.layers[0].v[(j*KV+kv)*D+d])
					}
					want[d] /= 1 + math.Exp(-float64(gate[d]))
					scale = max(scale, math.Abs(want[d]))
				}
				for d := range D {
					diff = max(diff, math.Abs(float64(got[(tok*H+h)*D+d])-want[d]))
				}
				if diff > 1e-4*scale {
					t.Fatalf("cached %d, %d tokens: token %d head %d: error %.3g of output scale %.3g", c.cached, c.n, tok, h, diff, scale)
				}
			}
		}
		if c.n != 77 {
			continue
		}
		for tok := range c.n {
			one := run(seq, c.cached+tok, qg[tok*H*2*D:(tok+1)*H*2*D])
			for i, v := range one {
				if w := got[tok*H*D+i]; math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("token %d alone: output %d is %v, in the chunk %v", tok, i, v, w)
				}
			}
		}
	}
}
