package checkpoint

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

func load(t *testing.T, dir string) *Model {
	t.Helper()
	m, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkStructure verifies that every slot of the weights is bound with the
// shapes the config implies.
func checkStructure(t *testing.T, w *model.Weights) {
	t.Helper()
	c := w.Config
	mat := func(m model.Matrix, out, in int) {
		t.Helper()
		if m.Out != out || m.In != in {
			t.Errorf("%s: shape [%d,%d], want [%d,%d]", m.Name, m.Out, m.In, out, in)
		}
		if err := m.Validate(); err != nil {
			t.Error(err)
		}
	}
	vec := func(name string, v []float32, n int) {
		t.Helper()
		if len(v) != n {
			t.Errorf("%s: length %d, want %d", name, len(v), n)
		}
	}
	H := c.HiddenSize
	mat(w.Embed, c.VocabSize, H)
	mat(w.LMHead, c.VocabSize, H)
	vec("final norm", w.FinalNorm, H)
	if len(w.Layers) != c.NumLayers {
		t.Fatalf("%d layers, want %d", len(w.Layers), c.NumLayers)
	}
	for i, l := range w.Layers {
		vec("input norm", l.InputNorm, H)
		vec("post norm", l.PostNorm, H)
		switch c.LayerTypes[i] {
		case model.LinearAttention:
			d := l.DeltaNet
			if d == nil || l.Attention != nil {
				t.Fatalf("layer %d: want only DeltaNet", i)
			}
			ch := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
			mat(d.QKV, ch, H)
			mat(d.Z, c.LinearValueHeads*c.LinearValueHeadDim, H)
			mat(d.B, c.LinearValueHeads, H)
			mat(d.A, c.LinearValueHeads, H)
			mat(d.Out, H, c.LinearValueHeads*c.LinearValueHeadDim)
			if len(d.Conv) != ch || len(d.Conv[0]) != c.ConvKernel {
				t.Errorf("layer %d conv: [%d][%d]", i, len(d.Conv), len(d.Conv[0]))
			}
			vec("A_log", d.ALog, c.LinearValueHeads)
			vec("dt_bias", d.DtBias, c.LinearValueHeads)
			vec("deltanet norm", d.Norm, c.LinearValueHeadDim)
		case model.FullAttention:
			a := l.Attention
			if a == nil || l.DeltaNet != nil {
				t.Fatalf("layer %d: want only Attention", i)
			}
			mat(a.Q, 2*c.NumHeads*c.HeadDim, H)
			mat(a.K, c.NumKVHeads*c.HeadDim, H)
			mat(a.V, c.NumKVHeads*c.HeadDim, H)
			mat(a.O, H, c.NumHeads*c.HeadDim)
			vec("q norm", a.QNorm, c.HeadDim)
			vec("k norm", a.KNorm, c.HeadDim)
		}
		m := l.MoE
		mat(m.Router, c.NumExperts, H)
		mat(m.SharedGate, c.SharedIntermediate, H)
		mat(m.SharedUp, c.SharedIntermediate, H)
		mat(m.SharedDown, H, c.SharedIntermediate)
		mat(m.SharedExpert, 1, H)
		if len(m.Gate) != c.NumExperts || len(m.Up) != c.NumExperts || len(m.Down) != c.NumExperts {
			t.Fatalf("layer %d: %d/%d/%d experts", i, len(m.Gate), len(m.Up), len(m.Down))
		}
		for e := range m.Gate {
			mat(m.Gate[e], c.MoEIntermediate, H)
			mat(m.Up[e], c.MoEIntermediate, H)
			mat(m.Down[e], H, c.MoEIntermediate)
		}
	}
}

func TestLoadFixtures(t *testing.T) {
	cases := []struct {
		dir    string
		layout Layout
		quant  bool
	}{
		{fixtures.Path(t, "qwen35moe-tiny", "hf-bf16"), Hub, false},
		{fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit"), MLX, true},
		{fixtures.Demo(t), MLX, true},
		{filepath.Join("testdata", "qwen35moe-alt", "hf-bf16"), Hub, false},
		{filepath.Join("testdata", "qwen35moe-alt", "mlx-4bit"), MLX, true},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(filepath.Dir(tc.dir))+"/"+filepath.Base(tc.dir), func(t *testing.T) {
			m := load(t, tc.dir)
			if m.Layout != tc.layout {
				t.Errorf("layout %v, want %v", m.Layout, tc.layout)
			}
			w := m.Weights
			checkStructure(t, w)
			if got := w.Layers[0].MoE.Gate[0].DType == model.Affine; got != tc.quant {
				t.Errorf("experts quantized = %v, want %v", got, tc.quant)
			}
			if tc.quant {
				// The router and shared-expert gate are 8-bit overrides.
				if b := w.Layers[0].MoE.Router.Bits; b != 8 {
					t.Errorf("router bits %d, want 8", b)
				}
				if b := w.Layers[0].MoE.SharedExpert.Bits; b != 8 {
					t.Errorf("shared expert gate bits %d, want 8", b)
				}
				if b := w.Embed.Bits; b != 4 {
					t.Errorf("embedding bits %d, want 4", b)
				}
			}
			if len(w.Config.EOSTokenIDs) == 0 {
				t.Error("no EOS ids")
			}
		})
	}
}

// TestConfigValues pins the parsed config of the tiny fixture against its
// config.json and generation_config.json.
func TestConfigValues(t *testing.T) {
	m := load(t, fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit"))
	c := m.Weights.Config
	want := []model.LayerType{model.LinearAttention, model.LinearAttention, model.LinearAttention, model.FullAttention}
	for i, lt := range want {
		if c.LayerTypes[i] != lt {
			t.Errorf("layer %d type %v, want %v", i, c.LayerTypes[i], lt)
		}
	}
	if c.RotaryDim != 16 || c.RopeTheta != 1e7 || c.RMSNormEps != 1e-6 || c.DeltaNetNormEps != 1e-6 {
		t.Errorf("rotary %d theta %v eps %v DeltaNet norm eps %v", c.RotaryDim, c.RopeTheta, c.RMSNormEps, c.DeltaNetNormEps)
	}
	if len(c.EOSTokenIDs) != 2 || c.EOSTokenIDs[0] != 1022 || c.EOSTokenIDs[1] != 1020 {
		t.Errorf("eos %v, want [1022 1020]", c.EOSTokenIDs)
	}
	g := m.Generation
	if g.TopK != 20 || g.TopP != 0.95 || g.Temperature != 1 {
		t.Errorf("generation %+v", g)
	}
	q := c.Quantization
	if q == nil || q.Bits != 4 || q.GroupSize != 64 || q.Mode != "affine" || len(q.Overrides) != 8 {
		t.Fatalf("quantization %+v", q)
	}
	if s := q.Spec("language_model.model.layers.2.mlp.shared_expert_gate"); s.Bits != 8 {
		t.Errorf("override spec %+v", s)
	}
}

// TestMLXMatchesHub compares the dequantized 4/8-bit matrices with the bf16
// ones they were quantized from. A wrong nibble order, group index or
// fused-expert split gives errors of several quantization steps; correct
// decoding stays within half a step (plus bf16 rounding of scale and bias).
func TestMLXMatchesHub(t *testing.T) {
	for _, name := range []string{"qwen35moe-tiny", "qwen35moe-alt"} {
		t.Run(name, func(t *testing.T) {
			root := fixtures.Path(t, name)
			if name == "qwen35moe-alt" {
				root = filepath.Join("testdata", name)
			}
			hub := load(t, filepath.Join(root, "hf-bf16")).Weights
			mlx := load(t, filepath.Join(root, "mlx-4bit")).Weights
			la := 0
			for i, lt := range hub.Config.LayerTypes {
				if lt == model.FullAttention {
					la = i
					break
				}
			}
			E := hub.Config.NumExperts
			pairs := []struct{ h, m model.Matrix }{
				{hub.Embed, mlx.Embed},
				{hub.LMHead, mlx.LMHead},
				{hub.Layers[0].DeltaNet.QKV, mlx.Layers[0].DeltaNet.QKV},
				{hub.Layers[0].DeltaNet.Out, mlx.Layers[0].DeltaNet.Out},
				{hub.Layers[0].DeltaNet.B, mlx.Layers[0].DeltaNet.B},
				{hub.Layers[la].Attention.Q, mlx.Layers[la].Attention.Q},
				{hub.Layers[la].Attention.O, mlx.Layers[la].Attention.O},
				{hub.Layers[0].MoE.Router, mlx.Layers[0].MoE.Router},
				{hub.Layers[0].MoE.SharedExpert, mlx.Layers[0].MoE.SharedExpert},
				{hub.Layers[0].MoE.SharedDown, mlx.Layers[0].MoE.SharedDown},
				{hub.Layers[1].MoE.Gate[E-1], mlx.Layers[1].MoE.Gate[E-1]},
				{hub.Layers[1].MoE.Up[1], mlx.Layers[1].MoE.Up[1]},
				{hub.Layers[1].MoE.Down[E/2], mlx.Layers[1].MoE.Down[E/2]},
			}
			for _, p := range pairs {
				compareQuantized(t, p.h, p.m)
			}
			// Norms: hub w becomes 1+w; MLX stored bf16(1+w). They agree to
			// bf16 rounding of numbers near 1 (2^-8 relative).
			closeVec(t, "final norm", hub.FinalNorm, mlx.FinalNorm, 1.0/256)
			closeVec(t, "input norm", hub.Layers[1].InputNorm, mlx.Layers[1].InputNorm, 1.0/256)
			closeVec(t, "q norm", hub.Layers[la].Attention.QNorm, mlx.Layers[la].Attention.QNorm, 1.0/256)
			// Stored identically in both layouts: exact.
			closeVec(t, "deltanet norm", hub.Layers[0].DeltaNet.Norm, mlx.Layers[0].DeltaNet.Norm, 0)
			closeVec(t, "A_log", hub.Layers[0].DeltaNet.ALog, mlx.Layers[0].DeltaNet.ALog, 0)
			closeVec(t, "dt_bias", hub.Layers[0].DeltaNet.DtBias, mlx.Layers[0].DeltaNet.DtBias, 0)
			for ch := range hub.Layers[0].DeltaNet.Conv {
				closeVec(t, "conv", hub.Layers[0].DeltaNet.Conv[ch], mlx.Layers[0].DeltaNet.Conv[ch], 0)
			}
			// The hub stores zero-centred norms far from zero in these
			// fixtures, so a missing 1+w would show as a mean far from 1.
			var mean float64
			for _, v := range hub.FinalNorm {
				mean += float64(v)
			}
			if mean /= float64(len(hub.FinalNorm)); math.Abs(mean-1) > 0.1 {
				t.Errorf("hub final norm multiplier mean %v, want ≈ 1 (1+w with w centred on 0)", mean)
			}
		})
	}
}

func compareQuantized(t *testing.T, h, m model.Matrix) {
	t.Helper()
	if m.DType != model.Affine || h.DType != model.BF16 {
		t.Fatalf("%s/%s: dtypes %v/%v", h.Name, m.Name, h.DType, m.DType)
	}
	if h.Out != m.Out || h.In != m.In {
		t.Fatalf("%s: shapes differ", h.Name)
	}
	hr, mr := make([]float32, h.In), make([]float32, h.In)
	levels := float64(int(1)<<m.Bits - 1)
	var sumErr, sumStep float64
	for i := 0; i < h.Out; i++ {
		h.Row(i, hr)
		m.Row(i, mr)
		for g := 0; g < h.In; g += m.GroupSize {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, v := range hr[g : g+m.GroupSize] {
				lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			}
			step := (hi - lo) / levels
			tol := 0.5*step*1.05 + math.Abs(lo)/256 + step*levels/256
			for j := g; j < g+m.GroupSize; j++ {
				d := math.Abs(float64(hr[j] - mr[j]))
				if d > tol {
					t.Fatalf("%s (%d-bit) [%d,%d]: dequantized %v, bf16 %v: error %.3g > %.3g (step %.3g)", m.Name, m.Bits, i, j, mr[j], hr[j], d, tol, step)
				}
				sumErr += d
				sumStep += step
			}
			// At must agree with Row.
			if a := m.At(i, g); a != mr[g] {
				t.Fatalf("%s: At(%d,%d)=%v, Row gives %v", m.Name, i, g, a, mr[g])
			}
		}
	}
	// Round-to-nearest gives a mean error of a quarter step; a decoding bug
	// that stays within the bound by luck would not.
	if r := sumErr / sumStep; r > 0.35 {
		t.Errorf("%s: mean error %.3f steps, want ≈ 0.25", m.Name, r)
	}
}

func closeVec(t *testing.T, name string, a, b []float32, rel float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", name, len(a), len(b))
	}
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > rel*math.Abs(float64(a[i])) {
			t.Fatalf("%s[%d]: %v vs %v", name, i, a[i], b[i])
		}
	}
}
