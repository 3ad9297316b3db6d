package checkpoint

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestFullSizeConfigs parses the real Qwen3.6-35B-A3B configs (hub and
// mlx-community) and checks the values engine/model/MODEL.md lists.
func TestFullSizeConfigs(t *testing.T) {
	for _, name := range []string{"qwen3.6-35b-a3b.json", "qwen3.6-35b-a3b.mlx-4bit.json"} {
		t.Run(name, func(t *testing.T) {
			// engine/synth embeds these; this package cannot import it.
			path := filepath.Join(fixtures.ModuleRoot(t), "engine", "synth", "configs", name)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseConfig(raw, path)
			if err != nil {
				t.Fatal(err)
			}
			got := []int{c.HiddenSize, c.NumLayers, c.NumHeads, c.NumKVHeads, c.HeadDim, c.LinearKeyHeads, c.LinearValueHeads,
				c.LinearKeyHeadDim, c.LinearValueHeadDim, c.ConvKernel, c.NumExperts, c.ExpertsPerToken, c.MoEIntermediate,
				c.SharedIntermediate, c.VocabSize, c.RotaryDim, c.MaxPositions}
			want := []int{2048, 40, 16, 2, 256, 16, 32, 128, 128, 4, 256, 8, 512, 512, 248320, 64, 262144}
			if !slices.Equal(got, want) {
				t.Errorf("sizes %v, want %v", got, want)
			}
			if c.RopeTheta != 1e7 || c.RMSNormEps != 1e-6 || c.TieWordEmbeddings {
				t.Errorf("theta %v eps %v tie %v", c.RopeTheta, c.RMSNormEps, c.TieWordEmbeddings)
			}
			for i, lt := range c.LayerTypes {
				if want := (i%4 == 3); (lt == model.FullAttention) != want {
					t.Errorf("layer %d type %v", i, lt)
				}
			}
			if !slices.Equal(c.EOSTokenIDs, []int{248044}) {
				t.Errorf("eos %v", c.EOSTokenIDs)
			}
			q := c.Quantization
			if name == "qwen3.6-35b-a3b.json" {
				if q != nil {
					t.Errorf("hub config has quantization %+v", q)
				}
				return
			}
			if q == nil || q.Bits != 4 || q.GroupSize != 64 || len(q.Overrides) != 80 {
				t.Fatalf("quantization %+v", q)
			}
			for _, m := range []string{"language_model.model.layers.39.mlp.gate", "language_model.model.layers.0.mlp.shared_expert_gate"} {
				if s := q.Spec(m); s.Bits != 8 || s.GroupSize != 64 {
					t.Errorf("%s: %+v", m, s)
				}
			}
			if s := q.Spec("language_model.model.layers.0.mlp.switch_mlp.up_proj"); s.Bits != 4 {
				t.Errorf("default spec %+v", s)
			}
		})
	}
}

// TestConfigVariants covers the other ways a valid config can be written:
// a bare text config, full_attention_interval instead of layer_types, flat
// legacy rope fields, and generation_config.json supplying more EOS ids.
func TestConfigVariants(t *testing.T) {
	src := fixtures.Path(t, "qwen35moe-tiny", "hf-bf16")
	base := load(t, src).Weights.Config

	t.Run("bare text config with legacy fields", func(t *testing.T) {
		d := copyFolder(t, src)
		editConfig(t, d, func(c map[string]any) {
			text := textConfig(c)
			for k := range c {
				delete(c, k)
			}
			for k, v := range text {
				c[k] = v
			}
			delete(c, "layer_types")
			c["full_attention_interval"] = 4
			rp := c["rope_parameters"].(map[string]any)
			delete(c, "rope_parameters")
			c["rope_theta"] = rp["rope_theta"]
			c["partial_rotary_factor"] = rp["partial_rotary_factor"]
		})
		got := load(t, d).Weights.Config
		if !slices.Equal(got.LayerTypes, base.LayerTypes) || got.RotaryDim != base.RotaryDim || got.RopeTheta != base.RopeTheta {
			t.Errorf("bare config parsed as %+v, want %+v", got, base)
		}
	})
	t.Run("interval default", func(t *testing.T) {
		d := copyFolder(t, src)
		editConfig(t, d, func(c map[string]any) { delete(textConfig(c), "layer_types") })
		got := load(t, d).Weights.Config
		if !slices.Equal(got.LayerTypes, base.LayerTypes) {
			t.Errorf("layer types %v, want %v", got.LayerTypes, base.LayerTypes)
		}
	})
	t.Run("eos merge", func(t *testing.T) {
		d := copyFolder(t, src)
		os.WriteFile(filepath.Join(d, "generation_config.json"), []byte(`{"eos_token_id": [1019, 1022], "top_k": 5}`), 0o644)
		m := load(t, d)
		if !slices.Equal(m.Weights.Config.EOSTokenIDs, []int{1019, 1022}) {
			t.Errorf("eos %v, want [1019 1022]", m.Weights.Config.EOSTokenIDs)
		}
		if m.Generation.TopK != 5 || m.Generation.TopP != 0 {
			t.Errorf("generation %+v", m.Generation)
		}
	})
	t.Run("eos out of vocabulary", func(t *testing.T) {
		d := copyFolder(t, src)
		os.WriteFile(filepath.Join(d, "generation_config.json"), []byte(`{"eos_token_id": 5000}`), 0o644)
		expectError(t, d, ErrConfig, "eos_token_id 5000")
	})
}

// TestParseConfigNeverPanics feeds truncated and type-confused configs.
func TestParseConfigNeverPanics(t *testing.T) {
	raw, err := os.ReadFile(fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(raw); n += 7 {
		if _, err := ParseConfig(raw[:n], "config.json"); err == nil {
			t.Fatalf("truncated config (%d bytes) accepted", n)
		}
	}
	var cfg map[string]any
	json.Unmarshal(raw, &cfg)
	text := cfg["text_config"].(map[string]any)
	for k := range text {
		for _, bad := range []any{"x", -1, 1.5, []any{}, map[string]any{}, nil} {
			old := text[k]
			text[k] = bad
			b, _ := json.Marshal(cfg)
			_, err := ParseConfig(b, "config.json")
			text[k] = old
			var e *Error
			if err != nil && !errors.As(err, &e) {
				t.Errorf("%s=%v: error %v is not *Error", k, bad, err)
			}
			if err != nil && !strings.Contains(err.Error(), "config.json") {
				t.Errorf("%s=%v: error %q does not name the file", k, bad, err)
			}
		}
	}
}
