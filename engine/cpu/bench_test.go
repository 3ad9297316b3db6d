package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// fullConfig is Qwen3.6-35B-A3B's text config (shared
// fixtures/qwen3.6-35b-a3b/config.json) cut to the given layers.
func fullConfig(types []model.LayerType) model.Config {
	return model.Config{
		HiddenSize: 2048, NumLayers: len(types), LayerTypes: types,
		NumHeads: 16, NumKVHeads: 2, HeadDim: 256,
		LinearKeyHeads: 16, LinearValueHeads: 32, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
		ConvKernel: 4, NumExperts: 256, ExpertsPerToken: 8, MoEIntermediate: 512, SharedIntermediate: 512,
		VocabSize: 248320, RMSNormEps: 1e-6, RopeTheta: 1e7, RotaryDim: 64, MaxPositions: 262144,
	}
}

// synthWeights builds random weights of cfg's shapes in the MLX layout
// (affine 4-bit, group 64; router and shared-expert gate 8-bit). Expert
// weights are shared between layers to halve the memory the benchmark
// needs; every layer still reads them from memory, since 256 experts
// (453 MB) are far larger than any cache.
func synthWeights(cfg model.Config, seed uint64) *model.Weights {
	rng := rand.New(rand.NewPCG(seed, 1))
	fill := func(b []byte) {
		for i := 0; i+8 <= len(b); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				b[i+j] = byte(v >> (8 * j))
			}
		}
	}
	bf16s := func(n int, mean, spread float64) []byte {
		b := make([]byte, 2*n)
		for i := range n {
			putU16(b, i, toBF16(float32(mean+spread*rng.NormFloat64())))
		}
		return b
	}
	affine := func(name string, out, in, bits int) model.Matrix {
		groups := out * in / 64
		m := model.Matrix{Name: name, Out: out, In: in, DType: model.Affine, Bits: bits, GroupSize: 64,
			Data: make([]byte, out*in*bits/8)}
		fill(m.Data)
		// w = s·q + b centred on zero: b = -s·(2^bits-1)/2.
		s := 0.02 / float64(int(1)<<bits)
		m.Scales = bf16s(groups, s, s/10)
		m.Biases = bf16s(groups, -s*float64((int(1)<<bits)-1)/2, s/10)
		return m
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	c := &cfg
	H, I := c.HiddenSize, c.MoEIntermediate
	moe := model.MoE{
		Router:       affine("router", c.NumExperts, H, 8),
		SharedGate:   affine("shared.gate", c.SharedIntermediate, H, 4),
		SharedUp:     affine("shared.up", c.SharedIntermediate, H, 4),
		SharedDown:   affine("shared.down", H, c.SharedIntermediate, 4),
		SharedExpert: affine("shared_expert_gate", 1, H, 8),
	}
	for e := range c.NumExperts {
		moe.Gate = append(moe.Gate, affine(fmt.Sprintf("experts.%d.gate", e), I, H, 4))
		moe.Up = append(moe.Up, affine(fmt.Sprintf("experts.%d.up", e), I, H, 4))
		moe.Down = append(moe.Down, affine(fmt.Sprintf("experts.%d.down", e), H, I, 4))
	}
	head := affine("lm_head", c.VocabSize, H, 4)
	w := &model.Weights{Config: cfg, Embed: head, LMHead: head, FinalNorm: ones(H)}
	for i, t := range c.LayerTypes {
		l := model.Layer{InputNorm: ones(H), PostNorm: ones(H), MoE: moe}
		if t == model.LinearAttention {
			ch := deltaNetChannels(c)
			d := &model.DeltaNet{
				QKV:    affine(fmt.Sprintf("layers.%d.in_proj_qkv", i), ch, H, 4),
				Z:      affine(fmt.Sprintf("layers.%d.in_proj_z", i), c.LinearValueHeads*c.LinearValueHeadDim, H, 4),
				B:      affine(fmt.Sprintf("layers.%d.in_proj_b", i), c.LinearValueHeads, H, 4),
				A:      affine(fmt.Sprintf("layers.%d.in_proj_a", i), c.LinearValueHeads, H, 4),
				Out:    affine(fmt.Sprintf("layers.%d.out_proj", i), H, c.LinearValueHeads*c.LinearValueHeadDim, 4),
				ALog:   make([]float32, c.LinearValueHeads),
				DtBias: make([]float32, c.LinearValueHeads),
				Norm:   ones(c.LinearValueHeadDim),
			}
			for range ch {
				taps := make([]float32, c.ConvKernel)
				for j := range taps {
					taps[j] = float32(rng.NormFloat64() * 0.3)
				}
				d.Conv = append(d.Conv, taps)
			}
			l.DeltaNet = d
		} else {
			D := c.HeadDim
			l.Attention = &model.Attention{
				Q:     affine(fmt.Sprintf("layers.%d.q_proj", i), c.NumHeads*D*2, H, 4),
				K:     affine(fmt.Sprintf("layers.%d.k_proj", i), c.NumKVHeads*D, H, 4),
				V:     affine(fmt.Sprintf("layers.%d.v_proj", i), c.NumKVHeads*D, H, 4),
				O:     affine(fmt.Sprintf("layers.%d.o_proj", i), H, c.NumHeads*D, 4),
				QNorm: ones(D), KNorm: ones(D),
			}
		}
		w.Layers = append(w.Layers, l)
	}
	return w
}

// blockTimes wraps a CPU pass and adds up the wall time of each kind of
// block; the CPU runs a block when it is called, so this is its cost.
type blockTimes struct {
	model.Pass
	deltaNet, attention, moe, head, total time.Duration
}

func (b *blockTimes) DeltaNet(layer int, w *model.DeltaNet, x model.Activation) model.Activation {
	defer b.since(&b.deltaNet, time.Now())
	return b.Pass.DeltaNet(layer, w, x)
}

func (b *blockTimes) Attention(layer int, w *model.Attention, x model.Activation) model.Activation {
	defer b.since(&b.attention, time.Now())
	return b.Pass.Attention(layer, w, x)
}

func (b *blockTimes) MoE(layer int, w *model.MoE, x model.Activation) model.Activation {
	defer b.since(&b.moe, time.Now())
	return b.Pass.MoE(layer, w, x)
}

func (b *blockTimes) Head(x model.Activation, w *model.Matrix) model.Activation {
	defer b.since(&b.head, time.Now())
	return b.Pass.Head(x, w)
}

func (b *blockTimes) since(d *time.Duration, t time.Time) { *d += time.Since(t) }

// runTimed runs one pass through the timing wrapper.
func runTimed(tb testing.TB, be *Backend, w *model.Weights, seq model.Sequence, in model.Input, bt *blockTimes) model.Result {
	start := time.Now()
	p, err := be.Begin(seq, in)
	if err != nil {
		tb.Fatal(err)
	}
	bt.Pass = p
	model.Forward(bt, w, in)
	bt.Submit()
	res, err := bt.Wait()
	if err != nil {
		tb.Fatal(err)
	}
	bt.total += time.Since(start)
	return res
}

// report turns block times over n passes of tokens each into per-layer
// times and the projection to the full 40 layers (30 DeltaNet, 10
// attention; every layer has an MoE).
func report(b *testing.B, bt *blockTimes, w *model.Weights, n, tokens int) {
	var dnLayers, attLayers int
	for _, l := range w.Layers {
		if l.DeltaNet != nil {
			dnLayers++
		} else {
			attLayers++
		}
	}
	per := func(d time.Duration, layers int) float64 { return d.Seconds() / float64(n*layers) }
	moe := per(bt.moe, dnLayers+attLayers)
	dn := per(bt.deltaNet, dnLayers) + moe
	att := per(bt.attention, attLayers) + moe
	head := per(bt.head, 1)
	other := per(bt.total-bt.deltaNet-bt.attention-bt.moe-bt.head, 1)
	full := 30*dn + 10*att + head + other
	b.ReportMetric(float64(n*tokens)/bt.total.Seconds(), "tok/s")
	b.ReportMetric(dn*1e3, "ms/deltanet-layer")
	b.ReportMetric(att*1e3, "ms/attention-layer")
	b.ReportMetric(moe*1e3, "ms/moe")
	b.ReportMetric(head*1e3, "ms/head")
	b.ReportMetric(full*1e3, "ms/pass-40-layers")
	b.ReportMetric(float64(tokens)/full, "tok/s-40-layers")
}

var benchWeights *model.Weights

func benchSetup(b *testing.B) (*Backend, *model.Weights) {
	if benchWeights == nil {
		benchWeights = synthWeights(fullConfig([]model.LayerType{model.LinearAttention, model.FullAttention}), 7)
	}
	be, err := New(benchWeights, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return be, benchWeights
}

func benchPrompt(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 13) % 248000
	}
	return ids
}

// BenchmarkDecode measures one decode step (greedy, through the cache) after
// a 32-token prompt, on one full-size DeltaNet layer and one full-size
// attention layer, and projects the full model.
func BenchmarkDecode(b *testing.B) {
	be, w := benchSetup(b)
	seq, err := be.NewSequence(4096)
	if err != nil {
		b.Fatal(err)
	}
	greedy := &model.Sampling{}
	if _, err := model.Prefill(be, w, seq, benchPrompt(32), 0, model.Input{Sample: greedy}); err != nil {
		b.Fatal(err)
	}
	var bt blockTimes
	b.ResetTimer()
	for range b.N {
		runTimed(b, be, w, seq, model.Input{Sample: greedy}, &bt)
	}
	report(b, &bt, w, b.N, 1)
}

// BenchmarkPrefill512 measures a 512-token prefill chunk (logits of the last
// row only) on the same two layers and projects the full model.
func BenchmarkPrefill512(b *testing.B) {
	be, w := benchSetup(b)
	prompt := benchPrompt(512)
	var bt blockTimes
	b.ResetTimer()
	for range b.N {
		seq, err := be.NewSequence(1024)
		if err != nil {
			b.Fatal(err)
		}
		runTimed(b, be, w, seq, model.Input{IDs: prompt, Logits: model.LogitsLast}, &bt)
	}
	report(b, &bt, w, b.N, len(prompt))
}
