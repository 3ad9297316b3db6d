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

// badFolder is a model folder broken one way, and the error Load must give.
type badFolder struct {
	name string
	from string // the fixture copied: "hf-bf16" or "mlx-4bit"; "" for no folder at all
	// breakIt breaks the copy in d.
	breakIt func(t *testing.T, d string)
	kind    error
	// mentions are what the message must name; the folder itself too if
	// namesFolder.
	mentions    []string
	namesFolder bool
}

const (
	hubFixture = "hf-bf16"
	mlxFixture = "mlx-4bit"
	hubL3      = "model.language_model.layers.3."
	mlxL0      = "language_model.model.layers.0."
)

// inConfig breaks a folder by editing its config.json.
func inConfig(edit func(c map[string]any)) func(t *testing.T, d string) {
	return func(t *testing.T, d string) { editConfig(t, d, edit) }
}

// inTensors breaks a folder by rewriting its model.safetensors.
func inTensors(edit func(t *testing.T, e *tensorEdit)) func(t *testing.T, d string) {
	return func(t *testing.T, d string) {
		p := filepath.Join(d, "model.safetensors")
		e := readTensors(t, p)
		edit(t, e)
		e.write(t, p)
	}
}

// removing breaks a folder by removing one of its files.
func removing(name string) func(t *testing.T, d string) {
	return func(t *testing.T, d string) { os.Remove(filepath.Join(d, name)) }
}

// quantization is the quantization block of an MLX config.
func quantization(c map[string]any) map[string]any { return c["quantization"].(map[string]any) }

var badFolders = []badFolder{
	{name: "missing folder", kind: ErrMissing, mentions: []string{"config.json"}},
	{name: "missing config", from: hubFixture, breakIt: removing("config.json"),
		kind: ErrMissing, mentions: []string{"no config.json"}, namesFolder: true},
	{name: "missing safetensors", from: hubFixture, breakIt: removing("model.safetensors"),
		kind: ErrMissing, mentions: []string{"model.safetensors"}, namesFolder: true},
	{name: "truncated safetensors", from: mlxFixture, breakIt: func(t *testing.T, d string) {
		p := filepath.Join(d, "model.safetensors")
		st, _ := os.Stat(p)
		os.Truncate(p, st.Size()-1000)
	}, kind: ErrWeights, mentions: []string{"model.safetensors", "truncated"}},
	{name: "truncated header", from: mlxFixture, breakIt: func(t *testing.T, d string) {
		os.Truncate(filepath.Join(d, "model.safetensors"), 100)
	}, kind: ErrWeights, mentions: []string{"model.safetensors", "truncated"}},
	{name: "corrupt config", from: hubFixture, breakIt: func(t *testing.T, d string) {
		os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"model_type": "qwen3_5_moe", `), 0o644)
	}, kind: ErrConfig, mentions: []string{"config.json", "JSON"}},
	{name: "missing config field", from: hubFixture,
		breakIt: inConfig(func(c map[string]any) { delete(textConfig(c), "linear_value_head_dim") }),
		kind:    ErrConfig, mentions: []string{"text_config.linear_value_head_dim", "config.json"}},
	{name: "bad config value", from: hubFixture,
		breakIt: inConfig(func(c map[string]any) { textConfig(c)["num_key_value_heads"] = 3 }),
		kind:    ErrConfig, mentions: []string{"num_key_value_heads", "does not divide"}},
	{name: "layer_types length", from: hubFixture,
		breakIt: inConfig(func(c map[string]any) { textConfig(c)["num_hidden_layers"] = 5 }),
		kind:    ErrConfig, mentions: []string{"layer_types", "5"}},
	{name: "another architecture", from: hubFixture, breakIt: inConfig(func(c map[string]any) {
		c["model_type"] = "llama"
		c["architectures"] = []string{"LlamaForCausalLM"}
	}), kind: ErrArchitecture, mentions: []string{`"llama"`, "qwen3_5_moe"}},
	{name: "another text architecture", from: hubFixture,
		breakIt: inConfig(func(c map[string]any) { textConfig(c)["model_type"] = "qwen3_next" }),
		kind:    ErrArchitecture, mentions: []string{"text_config.model_type", `"qwen3_next"`}},
	{name: "unsupported rope scaling", from: hubFixture, breakIt: inConfig(func(c map[string]any) {
		textConfig(c)["rope_parameters"].(map[string]any)["rope_type"] = "yarn"
	}), kind: ErrConfig, mentions: []string{"rope_type", "yarn"}},
	{name: "wrong shape", from: hubFixture, breakIt: inTensors(func(t *testing.T, e *tensorEdit) {
		i := e.index(t, hubL3+"mlp.gate.weight")
		e.specs[i].Shape = []int{8, 128}
		e.data[i] = e.data[i][:8*128*2]
	}), kind: ErrWeights, mentions: []string{"model.safetensors: tensor " + hubL3 + "mlp.gate.weight has shape [8,128], config says [16,128]"}},
	{name: "wrong dtype", from: hubFixture, breakIt: inTensors(func(t *testing.T, e *tensorEdit) {
		i := e.index(t, hubL3+"self_attn.k_proj.weight")
		e.specs[i].DType = safetensors.I32
		e.specs[i].Shape = []int{128, 64}
	}), kind: ErrWeights, mentions: []string{hubL3 + "self_attn.k_proj.weight", "dtype I32"}},
	{name: "config disagrees with tensor shapes", from: hubFixture,
		breakIt: inConfig(func(c map[string]any) { textConfig(c)["moe_intermediate_size"] = 32 }),
		kind:    ErrWeights, mentions: []string{"mlp.experts.gate_up_proj", "[16,128,128]", "config says [16,64,128]"}},
	{name: "missing tensor", from: mlxFixture,
		breakIt: inTensors(func(t *testing.T, e *tensorEdit) { e.remove(t, mlxL0+"linear_attn.dt_bias") }),
		kind:    ErrWeights, mentions: []string{mlxL0 + "linear_attn.dt_bias", "missing"}},
	{name: "leftover tensor", from: hubFixture, breakIt: inTensors(func(t *testing.T, e *tensorEdit) {
		e.add("model.language_model.layers.1.mlp.extra_proj.weight", safetensors.BF16, []int{4, 4}, make([]byte, 32))
	}), kind: ErrWeights, mentions: []string{"model.layers.1.mlp.extra_proj.weight", "not part of"}},
	// A 4-layer config over 5 layers of weights: layer 4 is left over.
	{name: "extra layer", from: hubFixture, breakIt: inTensors(func(t *testing.T, e *tensorEdit) {
		e.add("model.language_model.layers.4.input_layernorm.weight", safetensors.BF16, []int{128}, make([]byte, 256))
	}), kind: ErrWeights, mentions: []string{"layers.4.input_layernorm.weight", "4-layer"}},
	{name: "quantization bits disagree", from: mlxFixture,
		breakIt: inConfig(func(c map[string]any) { quantization(c)["bits"] = 8 }),
		kind:    ErrQuantization, mentions: []string{"8 bits", "i.e. 4 bits", "disagrees"}},
	// Without the per-module overrides the 8-bit router looks 4-bit.
	{name: "quantization override missing", from: mlxFixture, breakIt: inConfig(func(c map[string]any) {
		q := quantization(c)
		for k := range q {
			if strings.Contains(k, "layers.") {
				delete(q, k)
			}
		}
		delete(c, "quantization_config")
	}), kind: ErrQuantization, mentions: []string{mlxL0 + "mlp.gate", "i.e. 8 bits"}},
	{name: "quantization group size disagrees", from: mlxFixture,
		breakIt: inConfig(func(c map[string]any) { quantization(c)["group_size"] = 32 }),
		kind:    ErrQuantization, mentions: []string{"group size 32", "i.e. group size 64"}},
	{name: "quantization block missing", from: mlxFixture, breakIt: inConfig(func(c map[string]any) {
		delete(c, "quantization")
		delete(c, "quantization_config")
	}), kind: ErrQuantization, mentions: []string{"no quantization block"}},
	{name: "quantization block on bf16 weights", from: hubFixture, breakIt: inConfig(func(c map[string]any) {
		c["quantization"] = map[string]any{"bits": 4, "group_size": 64, "mode": "affine"}
	}), kind: ErrQuantization, mentions: []string{"no tensor is quantized"}},
	{name: "unsupported quantization mode", from: mlxFixture,
		breakIt: inConfig(func(c map[string]any) { quantization(c)["mode"] = "mxfp4" }),
		kind:    ErrQuantization, mentions: []string{"mxfp4"}},
	{name: "unsupported bits", from: mlxFixture,
		breakIt: inConfig(func(c map[string]any) { quantization(c)["bits"] = 3 }),
		kind:    ErrQuantization, mentions: []string{"bits is 3"}},
	{name: "scales without biases", from: mlxFixture,
		breakIt: inTensors(func(t *testing.T, e *tensorEdit) { e.remove(t, mlxL0+"linear_attn.in_proj_z.biases") }),
		kind:    ErrQuantization, mentions: []string{mlxL0 + "linear_attn.in_proj_z.biases"}},
	{name: "no eos", from: hubFixture, breakIt: func(t *testing.T, d string) {
		os.Remove(filepath.Join(d, "generation_config.json"))
		editConfig(t, d, func(c map[string]any) { delete(textConfig(c), "eos_token_id") })
	}, kind: ErrConfig, mentions: []string{"eos_token_id"}},
	{name: "shard missing", from: hubFixture, breakIt: func(t *testing.T, d string) {
		shard(t, d, 2)
		os.Remove(filepath.Join(d, "model-00002-of-00002.safetensors"))
	}, kind: ErrMissing, mentions: []string{"model-00002-of-00002.safetensors", "listed in model.safetensors.index.json"}},
	{name: "shard index lies", from: hubFixture, breakIt: func(t *testing.T, d string) {
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
	}, kind: ErrWeights, mentions: []string{"lm_head.weight"}},
}

// TestBadFolders breaks a copy of a fixture folder each way of badFolders
// and loads it.
func TestBadFolders(t *testing.T) {
	for _, tc := range badFolders {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "nope")
			if tc.from != "" {
				d = copyFolder(t, fixtures.Path(t, "qwen35moe-tiny", tc.from))
				tc.breakIt(t, d)
			}
			mentions := tc.mentions
			if tc.namesFolder {
				mentions = append(slices.Clone(mentions), d)
			}
			expectError(t, d, tc.kind, mentions...)
		})
	}
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
