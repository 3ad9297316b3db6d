package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// copyFolder copies a model folder into a fresh temporary directory, where a
// test may break it.
func copyFolder(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// tensorEdit is the in-memory content of a safetensors file, for rewriting.
type tensorEdit struct {
	specs []safetensors.TensorSpec
	data  [][]byte
	meta  map[string]string
}

func readTensors(t *testing.T, path string) *tensorEdit {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := &tensorEdit{meta: f.Header.Metadata}
	for _, n := range f.Names() {
		tt, _ := f.Tensor(n)
		e.specs = append(e.specs, safetensors.TensorSpec{Name: n, DType: tt.DType, Shape: slices.Clone(tt.Shape)})
		e.data = append(e.data, slices.Clone(tt.Data))
	}
	return e
}

func (e *tensorEdit) index(t *testing.T, name string) int {
	t.Helper()
	for i, s := range e.specs {
		if s.Name == name {
			return i
		}
	}
	t.Fatalf("no tensor %s", name)
	return -1
}

func (e *tensorEdit) remove(t *testing.T, name string) {
	i := e.index(t, name)
	e.specs = slices.Delete(e.specs, i, i+1)
	e.data = slices.Delete(e.data, i, i+1)
}

func (e *tensorEdit) add(name string, dt safetensors.DType, shape []int, data []byte) {
	e.specs = append(e.specs, safetensors.TensorSpec{Name: name, DType: dt, Shape: shape})
	e.data = append(e.data, data)
}

func (e *tensorEdit) write(t *testing.T, path string) {
	t.Helper()
	if err := safetensors.WriteFile(path, e.specs, e.data, e.meta); err != nil {
		t.Fatal(err)
	}
}

// editConfig rewrites config.json through a generic JSON map.
func editConfig(t *testing.T, dir string, edit func(cfg map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	out, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func textConfig(cfg map[string]any) map[string]any { return cfg["text_config"].(map[string]any) }

// expectError loads dir and checks the error's kind and that its message
// names what a user needs to fix.
func expectError(t *testing.T, dir string, kind error, mentions ...string) {
	t.Helper()
	m, err := Load(dir)
	if err == nil {
		m.Close()
		t.Fatalf("Load succeeded, want %v", kind)
	}
	if !errors.Is(err, kind) {
		t.Errorf("error %q is not %v", err, kind)
	}
	for _, s := range mentions {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestBadFolders(t *testing.T) {
	hub := fixtures.Path(t, "qwen35moe-tiny", "hf-bf16")
	mlx := fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit")
	const hubL3 = "model.language_model.layers.3."
	const mlxL0 = "language_model.model.layers.0."

	t.Run("missing folder", func(t *testing.T) {
		expectError(t, filepath.Join(t.TempDir(), "nope"), ErrMissing, "config.json")
	})
	t.Run("missing config", func(t *testing.T) {
		d := copyFolder(t, hub)
		os.Remove(filepath.Join(d, "config.json"))
		expectError(t, d, ErrMissing, "no config.json", d)
	})
	t.Run("missing safetensors", func(t *testing.T) {
		d := copyFolder(t, hub)
		os.Remove(filepath.Join(d, "model.safetensors"))
		expectError(t, d, ErrMissing, "model.safetensors", d)
	})
	t.Run("truncated safetensors", func(t *testing.T) {
		d := copyFolder(t, mlx)
		p := filepath.Join(d, "model.safetensors")
		st, _ := os.Stat(p)
		os.Truncate(p, st.Size()-1000)
		expectError(t, d, ErrWeights, "model.safetensors", "truncated")
	})
	t.Run("truncated header", func(t *testing.T) {
		d := copyFolder(t, mlx)
		os.Truncate(filepath.Join(d, "model.safetensors"), 100)
		expectError(t, d, ErrWeights, "model.safetensors", "truncated")
	})
	t.Run("corrupt config", func(t *testing.T) {
		d := copyFolder(t, hub)
		os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"model_type": "qwen3_5_moe", `), 0o644)
		expectError(t, d, ErrConfig, "config.json", "JSON")
	})
	t.Run("missing config field", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) { delete(textConfig(c), "linear_value_head_dim") })
		expectError(t, d, ErrConfig, "text_config.linear_value_head_dim", "config.json")
	})
	t.Run("bad config value", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) { textConfig(c)["num_key_value_heads"] = 3 })
		expectError(t, d, ErrConfig, "num_key_value_heads", "does not divide")
	})
	t.Run("layer_types length", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) { textConfig(c)["num_hidden_layers"] = 5 })
		expectError(t, d, ErrConfig, "layer_types", "5")
	})
	t.Run("another architecture", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) {
			c["model_type"] = "llama"
			c["architectures"] = []string{"LlamaForCausalLM"}
		})
		expectError(t, d, ErrArchitecture, `"llama"`, "qwen3_5_moe")
	})
	t.Run("another text architecture", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) { textConfig(c)["model_type"] = "qwen3_next" })
		expectError(t, d, ErrArchitecture, "text_config.model_type", `"qwen3_next"`)
	})
	t.Run("unsupported rope scaling", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) {
			textConfig(c)["rope_parameters"].(map[string]any)["rope_type"] = "yarn"
		})
		expectError(t, d, ErrConfig, "rope_type", "yarn")
	})
	t.Run("wrong shape", func(t *testing.T) {
		d := copyFolder(t, hub)
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		i := e.index(t, hubL3+"mlp.gate.weight")
		e.specs[i].Shape = []int{8, 128}
		e.data[i] = e.data[i][:8*128*2]
		e.write(t, p)
		expectError(t, d, ErrWeights, "model.safetensors: tensor "+hubL3+"mlp.gate.weight has shape [8,128], config says [16,128]")
	})
	t.Run("wrong dtype", func(t *testing.T) {
		d := copyFolder(t, hub)
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		i := e.index(t, hubL3+"self_attn.k_proj.weight")
		e.specs[i].DType = safetensors.I32
		e.specs[i].Shape = []int{128, 64}
		e.write(t, p)
		expectError(t, d, ErrWeights, hubL3+"self_attn.k_proj.weight", "dtype I32")
	})
	t.Run("config disagrees with tensor shapes", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) { textConfig(c)["moe_intermediate_size"] = 32 })
		expectError(t, d, ErrWeights, "mlp.experts.gate_up_proj", "[16,128,128]", "config says [16,64,128]")
	})
	t.Run("missing tensor", func(t *testing.T) {
		d := copyFolder(t, mlx)
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		e.remove(t, mlxL0+"linear_attn.dt_bias")
		e.write(t, p)
		expectError(t, d, ErrWeights, mlxL0+"linear_attn.dt_bias", "missing")
	})
	t.Run("leftover tensor", func(t *testing.T) {
		d := copyFolder(t, hub)
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		e.add("model.language_model.layers.1.mlp.extra_proj.weight", safetensors.BF16, []int{4, 4}, make([]byte, 32))
		e.write(t, p)
		expectError(t, d, ErrWeights, "model.layers.1.mlp.extra_proj.weight", "not part of")
	})
	t.Run("extra layer", func(t *testing.T) {
		// A 4-layer config over 5 layers of weights: layer 4 is left over.
		d := copyFolder(t, hub)
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		e.add("model.language_model.layers.4.input_layernorm.weight", safetensors.BF16, []int{128}, make([]byte, 256))
		e.write(t, p)
		expectError(t, d, ErrWeights, "layers.4.input_layernorm.weight", "4-layer")
	})
	t.Run("quantization bits disagree", func(t *testing.T) {
		d := copyFolder(t, mlx)
		editConfig(t, d, func(c map[string]any) { c["quantization"].(map[string]any)["bits"] = 8 })
		expectError(t, d, ErrQuantization, "8 bits", "i.e. 4 bits", "disagrees")
	})
	t.Run("quantization override missing", func(t *testing.T) {
		// Without the per-module overrides the 8-bit router looks 4-bit.
		d := copyFolder(t, mlx)
		editConfig(t, d, func(c map[string]any) {
			q := c["quantization"].(map[string]any)
			for k := range q {
				if strings.Contains(k, "layers.") {
					delete(q, k)
				}
			}
			delete(c, "quantization_config")
		})
		expectError(t, d, ErrQuantization, mlxL0+"mlp.gate", "i.e. 8 bits")
	})
	t.Run("quantization group size disagrees", func(t *testing.T) {
		d := copyFolder(t, mlx)
		editConfig(t, d, func(c map[string]any) { c["quantization"].(map[string]any)["group_size"] = 32 })
		expectError(t, d, ErrQuantization, "group size 32", "i.e. group size 64")
	})
	t.Run("quantization block missing", func(t *testing.T) {
		d := copyFolder(t, mlx)
		editConfig(t, d, func(c map[string]any) {
			delete(c, "quantization")
			delete(c, "quantization_config")
		})
		expectError(t, d, ErrQuantization, "no quantization block")
	})
	t.Run("quantization block on bf16 weights", func(t *testing.T) {
		d := copyFolder(t, hub)
		editConfig(t, d, func(c map[string]any) {
			c["quantization"] = map[string]any{"bits": 4, "group_size": 64, "mode": "affine"}
		})
		expectError(t, d, ErrQuantization, "no tensor is quantized")
	})
	t.Run("unsupported quantization mode", func(t *testing.T) {
		d := copyFolder(t, mlx)
		editConfig(t, d, func(c map[string]any) { c["quantization"].(map[string]any)["mode"] = "mxfp4" })
		expectError(t, d, ErrQuantization, "mxfp4")
	})
	t.Run("unsupported bits", func(t *testing.T) {
		d := copyFolder(t, mlx)
		editConfig(t, d, func(c map[string]any) { c["quantization"].(map[string]any)["bits"] = 3 })
		expectError(t, d, ErrQuantization, "bits is 3")
	})
	t.Run("scales without biases", func(t *testing.T) {
		d := copyFolder(t, mlx)
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		e.remove(t, mlxL0+"linear_attn.in_proj_z.biases")
		e.write(t, p)
		expectError(t, d, ErrQuantization, mlxL0+"linear_attn.in_proj_z.biases")
	})
	t.Run("no eos", func(t *testing.T) {
		d := copyFolder(t, hub)
		os.Remove(filepath.Join(d, "generation_config.json"))
		editConfig(t, d, func(c map[string]any) { delete(textConfig(c), "eos_token_id") })
		expectError(t, d, ErrConfig, "eos_token_id")
	})
	t.Run("shard missing", func(t *testing.T) {
		d := copyFolder(t, hub)
		shard(t, d, 2)
		os.Remove(filepath.Join(d, "model-00002-of-00002.safetensors"))
		expectError(t, d, ErrMissing, "model-00002-of-00002.safetensors", "listed in model.safetensors.index.json")
	})
	t.Run("shard index lies", func(t *testing.T) {
		d := copyFolder(t, hub)
		shard(t, d, 2)
		idx := filepath.Join(d, safetensors.IndexFileName)
		raw, _ := os.ReadFile(idx)
		var m map[string]map[string]string
		json.Unmarshal(raw, &m)
		other := "model-00002-of-00002.safetensors"
		if m["weight_map"]["lm_head.weight"] == other {
			other = "model-00001-of-00002.safetensors"
		}
		m["weight_map"]["lm_head.weight"] = other
		out, _ := json.Marshal(m)
		os.WriteFile(idx, out, 0o644)
		expectError(t, d, ErrWeights, "lm_head.weight")
	})
}

// shard splits dir/model.safetensors into n shards with an index, the way
// Hugging Face and MLX save large checkpoints, and removes the single file.
func shard(t *testing.T, dir string, n int) {
	t.Helper()
	single := filepath.Join(dir, safetensors.SingleFileName)
	e := readTensors(t, single)
	weightMap := map[string]string{}
	for s := 0; s < n; s++ {
		part := &tensorEdit{meta: e.meta}
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, n)
		for i := s; i < len(e.specs); i += n {
			part.specs = append(part.specs, e.specs[i])
			part.data = append(part.data, e.data[i])
			weightMap[e.specs[i].Name] = name
		}
		part.write(t, filepath.Join(dir, name))
	}
	out, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFileName), out, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(single)
}

// sameMatrix checks two matrices hold the same values row by row.
func sameMatrix(t *testing.T, a, b model.Matrix) {
	t.Helper()
	if a.Out != b.Out || a.In != b.In || a.DType != b.DType {
		t.Fatalf("%s vs %s: [%d,%d] %v vs [%d,%d] %v", a.Name, b.Name, a.Out, a.In, a.DType, b.Out, b.In, b.DType)
	}
	ra, rb := make([]float32, a.In), make([]float32, b.In)
	for i := 0; i < a.Out; i++ {
		a.Row(i, ra)
		b.Row(i, rb)
		if !slices.Equal(ra, rb) {
			t.Fatalf("%s vs %s: row %d differs", a.Name, b.Name, i)
		}
	}
}

func TestShardedLoadsLikeSingle(t *testing.T) {
	for _, src := range []string{fixtures.Path(t, "qwen35moe-tiny", "hf-bf16"), fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit")} {
		d := copyFolder(t, src)
		shard(t, d, 3)
		if _, err := os.Stat(filepath.Join(d, safetensors.SingleFileName)); err == nil {
			t.Fatal("single file still present")
		}
		a, b := load(t, src).Weights, load(t, d).Weights
		sameMatrix(t, a.Embed, b.Embed)
		sameMatrix(t, a.LMHead, b.LMHead)
		for i := range a.Layers {
			sameMatrix(t, a.Layers[i].MoE.Down[7], b.Layers[i].MoE.Down[7])
			sameMatrix(t, a.Layers[i].MoE.Router, b.Layers[i].MoE.Router)
			if !slices.Equal(a.Layers[i].InputNorm, b.Layers[i].InputNorm) {
				t.Errorf("layer %d input norm differs", i)
			}
		}
	}
}

// TestUnfusedExperts rewrites the hub's fused experts as the per-expert
// tensors save_pretrained may write, and checks they bind to the same values.
func TestUnfusedExperts(t *testing.T) {
	src := fixtures.Path(t, "qwen35moe-tiny", "hf-bf16")
	d := copyFolder(t, src)
	p := filepath.Join(d, "model.safetensors")
	e := readTensors(t, p)
	const E, I, H = 16, 64, 128
	for l := 0; l < 4; l++ {
		pre := fmt.Sprintf("model.language_model.layers.%d.mlp.experts.", l)
		gu := e.data[e.index(t, pre+"gate_up_proj")]
		dn := e.data[e.index(t, pre+"down_proj")]
		e.remove(t, pre+"gate_up_proj")
		e.remove(t, pre+"down_proj")
		for x := 0; x < E; x++ {
			base := x * 2 * I * H * 2
			e.add(fmt.Sprintf("%s%d.gate_proj.weight", pre, x), safetensors.BF16, []int{I, H}, gu[base:base+I*H*2])
			e.add(fmt.Sprintf("%s%d.up_proj.weight", pre, x), safetensors.BF16, []int{I, H}, gu[base+I*H*2:base+2*I*H*2])
			e.add(fmt.Sprintf("%s%d.down_proj.weight", pre, x), safetensors.BF16, []int{H, I}, dn[x*H*I*2:(x+1)*H*I*2])
		}
	}
	e.write(t, p)
	fused, unfused := load(t, src).Weights, load(t, d).Weights
	for l := range fused.Layers {
		for x := 0; x < E; x++ {
			sameMatrix(t, fused.Layers[l].MoE.Gate[x], unfused.Layers[l].MoE.Gate[x])
			sameMatrix(t, fused.Layers[l].MoE.Up[x], unfused.Layers[l].MoE.Up[x])
			sameMatrix(t, fused.Layers[l].MoE.Down[x], unfused.Layers[l].MoE.Down[x])
		}
	}
	// The fused split puts gate rows first: expert 0's gate row 0 is the
	// first row of gate_up_proj, its up row 0 is row I.
	row := make([]float32, H)
	fused.Layers[0].MoE.Up[0].Row(0, row)
	raw := e.data[e.index(t, "model.language_model.layers.0.mlp.experts.0.up_proj.weight")]
	want := make([]float32, H)
	safetensors.DecodeFloat32(want, safetensors.BF16, raw)
	if !slices.Equal(row, want) {
		t.Error("fused up_proj view does not start at row I of gate_up_proj")
	}
}

// TestCorruptHeadersNeverPanic flips bytes across the safetensors header of
// a real checkpoint: every variant must load or fail with an error.
func TestCorruptHeadersNeverPanic(t *testing.T) {
	src := fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit")
	d := copyFolder(t, src)
	p := filepath.Join(d, "model.safetensors")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	hlen := int(orig[0]) | int(orig[1])<<8 | int(orig[2])<<16
	failures := 0
	for i := 0; i < 120; i++ {
		b := slices.Clone(orig)
		// A deterministic spread of positions and replacement digits,
		// biased to the offsets and shapes that the JSON is made of.
		pos := 8 + (i*7919)%hlen
		b[pos] = "0123456789[],:\"x"[i%16]
		if i%10 == 0 {
			b[i%8] ^= 0x40 // the length field itself
		}
		os.WriteFile(p, b, 0o644)
		m, err := Load(d)
		if err != nil {
			failures++
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("variant %d: error %v is not *Error", i, err)
			}
			continue
		}
		m.Close()
	}
	if failures == 0 {
		t.Error("no corrupted variant was rejected")
	}
	t.Logf("%d of 120 corrupted headers rejected, the rest still valid", failures)
}
