package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The model_type values this package reads: the multimodal wrapper and the
// text model of Qwen3.5/3.6 MoE (same architecture and tensor names).
var (
	wrapperModelTypes = []string{"qwen3_5_moe"}
	textModelTypes    = []string{"qwen3_5_moe_text"}
)

// ReadConfig reads and validates dir/config.json and, when present,
// dir/generation_config.json.
func ReadConfig(dir string) (*model.Config, model.Generation, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, model.Generation{}, &Error{Kind: ErrMissing, Path: dir,
				Msg: "no config.json: this is not a model folder (expected a Qwen3.6-35B-A3B download with config.json and *.safetensors)"}
		}
		return nil, model.Generation{}, &Error{Kind: ErrMissing, Path: path, Msg: err.Error(), Err: err}
	}
	cfg, err := ParseConfig(raw, path)
	if err != nil {
		return nil, model.Generation{}, err
	}
	gen, err := readGeneration(dir)
	if err != nil {
		return nil, model.Generation{}, err
	}
	cfg.EOSTokenIDs = dedupe(append(slices.Clone(gen.EOSTokenIDs), cfg.EOSTokenIDs...))
	if len(cfg.EOSTokenIDs) == 0 {
		return nil, gen, &Error{Kind: ErrConfig, Path: dir,
			Msg: "no eos_token_id in config.json or generation_config.json: generation would never stop"}
	}
	for _, id := range cfg.EOSTokenIDs {
		if id < 0 || id >= cfg.VocabSize {
			return nil, gen, &Error{Kind: ErrConfig, Path: dir,
				Msg: fmt.Sprintf("eos_token_id %d is outside the vocabulary [0,%d)", id, cfg.VocabSize)}
		}
	}
	return cfg, gen, nil
}

// object is a JSON object whose fields are decoded on demand, so that an
// error can name the field that is missing or malformed.
type object struct {
	path   string // file, for messages
	prefix string // "text_config." when reading the nested text config
	fields map[string]json.RawMessage
}

func (o object) errorf(field, format string, args ...any) error {
	return &Error{Kind: ErrConfig, Path: o.path,
		Msg: fmt.Sprintf("field %s%s: %s", o.prefix, field, fmt.Sprintf(format, args...))}
}

func (o object) has(field string) bool {
	v, ok := o.fields[field]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (o object) decode(field string, v any) error {
	if err := json.Unmarshal(o.fields[field], v); err != nil {
		return o.errorf(field, "%s is not the expected type: %v", clip(o.fields[field]), err)
	}
	return nil
}

// positive reads a required integer field that must be ≥ 1.
func (o object) positive(field string) (int, error) {
	if !o.has(field) {
		return 0, o.errorf(field, "missing: the model needs it")
	}
	var f float64
	if err := o.decode(field, &f); err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f < 1 || f > math.MaxInt32 {
		return 0, o.errorf(field, "%v must be a positive integer", f)
	}
	return int(f), nil
}

func (o object) str(field string) (string, error) {
	if !o.has(field) {
		return "", nil
	}
	var s string
	err := o.decode(field, &s)
	return s, err
}

func (o object) sub(field string) (object, bool, error) {
	if !o.has(field) {
		return object{}, false, nil
	}
	var m map[string]json.RawMessage
	if err := o.decode(field, &m); err != nil {
		return object{}, false, err
	}
	return object{path: o.path, prefix: o.prefix + field + ".", fields: m}, true, nil
}

// ids reads an integer or a list of integers (eos_token_id is either).
func (o object) ids(field string) ([]int, error) {
	if !o.has(field) {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(o.fields[field], &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := o.decode(field, &many); err != nil {
		return nil, err
	}
	return many, nil
}

func clip(b []byte) string {
	s := string(b)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// ParseConfig parses a config.json (wrapper or bare text config). path is
// used in messages only.
func ParseConfig(raw []byte, path string) (*model.Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, &Error{Kind: ErrConfig, Path: path, Msg: "not valid JSON: " + err.Error(), Err: err}
	}
	root := object{path: path, fields: top}
	text, modelType, err := textPart(root)
	if err != nil {
		return nil, err
	}
	c := &model.Config{ModelType: modelType}
	if err := readSizes(text, c); err != nil {
		return nil, err
	}
	if err := readLayerTypes(text, c); err != nil {
		return nil, err
	}
	if err := readRope(text, c); err != nil {
		return nil, err
	}
	if err := checkFixedFeatures(text); err != nil {
		return nil, err
	}
	if err := readTokens(root, text, c); err != nil {
		return nil, err
	}
	q, err := readQuantization(root, c)
	if err != nil {
		return nil, err
	}
	c.Quantization = q
	// A vision_config that does not describe a tower this engine runs
	// leaves the text model usable: Model.Vision reports why.
	c.Vision, c.VisionErr = readVision(root, c)
	return c, nil
}

// textPart finds the text model's part of a config (text_config in a
// wrapper, else the config itself) and its model_type, which either part
// may state; it refuses a model this engine does not run.
func textPart(root object) (object, string, error) {
	text := root
	topType, err := root.str("model_type")
	if err != nil {
		return object{}, "", err
	}
	if root.has("text_config") {
		if text, _, err = root.sub("text_config"); err != nil {
			return object{}, "", err
		}
		if topType != "" && !slices.Contains(wrapperModelTypes, topType) {
			return object{}, "", archError(root.path, "model_type", topType)
		}
	}
	textType, err := text.str("model_type")
	if err != nil {
		return object{}, "", err
	}
	switch {
	case textType != "":
		if !slices.Contains(textModelTypes, textType) && !slices.Contains(wrapperModelTypes, textType) {
			return object{}, "", archError(root.path, text.prefix+"model_type", textType)
		}
	case topType != "":
		if !slices.Contains(wrapperModelTypes, topType) && !slices.Contains(textModelTypes, topType) {
			return object{}, "", archError(root.path, "model_type", topType)
		}
	default:
		return object{}, "", root.errorf("model_type", "missing: cannot tell which model this is (expected qwen3_5_moe)")
	}
	if textType == "" {
		textType = topType
	}
	return text, textType, nil
}

// readSizes reads the model's dimensions and rms_norm_eps, each required.
func readSizes(text object, c *model.Config) error {
	ints := []struct {
		field string
		dst   *int
	}{
		{"hidden_size", &c.HiddenSize},
		{"num_hidden_layers", &c.NumLayers},
		{"num_attention_heads", &c.NumHeads},
		{"num_key_value_heads", &c.NumKVHeads},
		{"head_dim", &c.HeadDim},
		{"linear_num_key_heads", &c.LinearKeyHeads},
		{"linear_num_value_heads", &c.LinearValueHeads},
		{"linear_key_head_dim", &c.LinearKeyHeadDim},
		{"linear_value_head_dim", &c.LinearValueHeadDim},
		{"linear_conv_kernel_dim", &c.ConvKernel},
		{"num_experts", &c.NumExperts},
		{"num_experts_per_tok", &c.ExpertsPerToken},
		{"moe_intermediate_size", &c.MoEIntermediate},
		{"shared_expert_intermediate_size", &c.SharedIntermediate},
		{"vocab_size", &c.VocabSize},
		{"max_position_embeddings", &c.MaxPositions},
	}
	for _, f := range ints {
		v, err := text.positive(f.field)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return text.errorf("num_key_value_heads", "%d does not divide num_attention_heads %d", c.NumKVHeads, c.NumHeads)
	}
	if c.LinearValueHeads%c.LinearKeyHeads != 0 {
		return text.errorf("linear_num_key_heads", "%d does not divide linear_num_value_heads %d", c.LinearKeyHeads, c.LinearValueHeads)
	}
	if c.ExpertsPerToken > c.NumExperts {
		return text.errorf("num_experts_per_tok", "%d is more than num_experts %d", c.ExpertsPerToken, c.NumExperts)
	}

	if !text.has("rms_norm_eps") {
		return text.errorf("rms_norm_eps", "missing: the model needs it")
	}
	var eps float64
	if err := text.decode("rms_norm_eps", &eps); err != nil {
		return err
	}
	if !(eps > 0 && eps < 1) {
		return text.errorf("rms_norm_eps", "%v must be in (0, 1)", eps)
	}
	c.RMSNormEps = float32(eps)
	c.DeltaNetNormEps = c.RMSNormEps
	c.DeltaNetL2Eps = 1e-6
	return nil
}

// readTokens reads tie_word_embeddings and the end-of-sequence ids.
func readTokens(root, text object, c *model.Config) error {
	// tie_word_embeddings may sit in the wrapper, the text config or both;
	// either saying true ties.
	for _, o := range []object{root, text} {
		if o.has("tie_word_embeddings") {
			var tie bool
			if err := o.decode("tie_word_embeddings", &tie); err != nil {
				return err
			}
			c.TieWordEmbeddings = c.TieWordEmbeddings || tie
		}
	}

	for _, o := range []object{text, root} {
		ids, err := o.ids("eos_token_id")
		if err != nil {
			return err
		}
		c.EOSTokenIDs = append(c.EOSTokenIDs, ids...)
	}
	c.EOSTokenIDs = dedupe(c.EOSTokenIDs)
	return nil
}

func archError(path, field, got string) error {
	return &Error{Kind: ErrArchitecture, Path: path,
		Msg: fmt.Sprintf("field %s is %q: this engine runs Qwen3.5/3.6 MoE models only (qwen3_5_moe, e.g. Qwen3.6-35B-A3B); pick that model's folder", field, got)}
}

func readLayerTypes(text object, c *model.Config) error {
	if text.has("layer_types") {
		var names []string
		if err := text.decode("layer_types", &names); err != nil {
			return err
		}
		if len(names) != c.NumLayers {
			return text.errorf("layer_types", "has %d entries, num_hidden_layers is %d", len(names), c.NumLayers)
		}
		c.LayerTypes = make([]model.LayerType, len(names))
		for i, n := range names {
			switch n {
			case "linear_attention":
				c.LayerTypes[i] = model.LinearAttention
			case "full_attention":
				c.LayerTypes[i] = model.FullAttention
			default:
				return text.errorf("layer_types", "entry %d is %q; expected linear_attention or full_attention", i, n)
			}
		}
		return nil
	}
	// transformers' default when layer_types is absent: every
	// full_attention_interval-th layer is full attention.
	interval := 4
	if text.has("full_attention_interval") {
		v, err := text.positive("full_attention_interval")
		if err != nil {
			return err
		}
		interval = v
	}
	c.LayerTypes = make([]model.LayerType, c.NumLayers)
	for i := range c.LayerTypes {
		if (i+1)%interval == 0 {
			c.LayerTypes[i] = model.FullAttention
		}
	}
	return nil
}

func readRope(text object, c *model.Config) error {
	theta, factor := math.NaN(), math.NaN()
	ropeType := ""
	rp, ok, err := text.sub("rope_parameters")
	if err != nil {
		return err
	}
	if !ok {
		// Older configs nest these under rope_scaling or keep them flat.
		if rp, ok, err = text.sub("rope_scaling"); err != nil {
			return err
		}
	}
	sources := []object{text}
	if ok {
		sources = []object{rp, text}
	}
	for _, o := range sources {
		if math.IsNaN(theta) && o.has("rope_theta") {
			if err := o.decode("rope_theta", &theta); err != nil {
				return err
			}
		}
		if math.IsNaN(factor) && o.has("partial_rotary_factor") {
			if err := o.decode("partial_rotary_factor", &factor); err != nil {
				return err
			}
		}
		if ropeType == "" {
			if ropeType, err = o.str("rope_type"); err != nil {
				return err
			}
			if ropeType == "" {
				if ropeType, err = o.str("type"); err != nil {
					return err
				}
			}
		}
	}
	if ropeType != "" && ropeType != "default" {
		return text.errorf("rope_parameters.rope_type", "%q is not supported (only default RoPE; remove the rope scaling from config.json)", ropeType)
	}
	if math.IsNaN(theta) {
		return text.errorf("rope_parameters.rope_theta", "missing: the model needs it")
	}
	if !(theta > 1) {
		return text.errorf("rope_parameters.rope_theta", "%v must be greater than 1", theta)
	}
	if math.IsNaN(factor) {
		return text.errorf("rope_parameters.partial_rotary_factor", "missing: the model needs it (0.25 for Qwen3.6-35B-A3B)")
	}
	rot := float64(c.HeadDim) * factor
	if !(factor > 0 && factor <= 1) || rot != math.Trunc(rot) || int(rot)%2 != 0 {
		return text.errorf("rope_parameters.partial_rotary_factor", "%v times head_dim %d must give an even number of rotary dimensions", factor, c.HeadDim)
	}
	c.RopeTheta = theta
	c.PartialRotaryFactor = factor
	c.RotaryDim = int(rot)
	if ok {
		return readMRoPE(rp, c)
	}
	return nil
}

// checkFixedFeatures rejects configs that switch off parts of the
// architecture the engine hard-wires.
func checkFixedFeatures(text object) error {
	for _, f := range []struct {
		field string
		want  bool
	}{{"attn_output_gate", true}, {"attention_bias", false}} {
		if !text.has(f.field) {
			continue
		}
		var v bool
		if err := text.decode(f.field, &v); err != nil {
			return err
		}
		if v != f.want {
			return text.errorf(f.field, "is %v; this architecture needs %v", v, f.want)
		}
	}
	act, err := text.str("hidden_act")
	if err != nil {
		return err
	}
	if act != "" && act != "silu" {
		return text.errorf("hidden_act", "%q is not supported (silu)", act)
	}
	return nil
}

// readQuantization reads the top-level "quantization" block that MLX writes
// (falling back to "quantization_config", which mlx-community duplicates).
// Keys other than group_size, bits and mode are module paths with their own
// {group_size, bits}, or false for a module left unquantized.
func readQuantization(root object, c *model.Config) (*model.Quantization, error) {
	field := "quantization"
	if !root.has(field) {
		field = "quantization_config"
		if !root.has(field) {
			return nil, nil
		}
	}
	blk, _, err := root.sub(field)
	if err != nil {
		return nil, err
	}
	qerr := func(format string, args ...any) error {
		return &Error{Kind: ErrQuantization, Path: root.path, Msg: fmt.Sprintf("field %s: %s", field, fmt.Sprintf(format, args...))}
	}
	if blk.has("quant_method") {
		m, _ := blk.str("quant_method")
		return nil, qerr("quant_method %q is not supported: use the bf16 hub checkpoint or an MLX affine (4- or 8-bit) one", m)
	}
	q := &model.Quantization{Mode: "affine", Overrides: map[string]model.QuantSpec{}}
	if blk.has("mode") {
		if q.Mode, err = blk.str("mode"); err != nil {
			return nil, err
		}
		if q.Mode != "affine" {
			return nil, qerr("mode %q is not supported: only MLX affine quantization (4- or 8-bit) is", q.Mode)
		}
	}
	def, err := quantSpec(blk.fields, qerr, "")
	if err != nil {
		return nil, err
	}
	q.Bits, q.GroupSize = def.Bits, def.GroupSize
	for key, v := range blk.fields {
		switch key {
		case "bits", "group_size", "mode":
			continue
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("false")) {
			q.Overrides[key] = model.QuantSpec{}
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, qerr("entry %q is %s; expected a module override {bits, group_size} or false", key, clip(v))
		}
		s, err := quantSpec(m, qerr, key+".")
		if err != nil {
			return nil, err
		}
		q.Overrides[key] = s
	}
	return q, nil
}

func quantSpec(m map[string]json.RawMessage, qerr func(string, ...any) error, where string) (model.QuantSpec, error) {
	var s model.QuantSpec
	for _, f := range []struct {
		name string
		dst  *int
	}{{"bits", &s.Bits}, {"group_size", &s.GroupSize}} {
		raw, ok := m[f.name]
		if !ok {
			return s, qerr("%s%s is missing", where, f.name)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return s, qerr("%s%s is %s, not an integer", where, f.name, clip(raw))
		}
	}
	if s.Bits != 4 && s.Bits != 8 {
		return s, qerr("%sbits is %d: only 4- and 8-bit affine quantization is supported", where, s.Bits)
	}
	if s.GroupSize != 32 && s.GroupSize != 64 && s.GroupSize != 128 {
		return s, qerr("%sgroup_size is %d: only 32, 64 and 128 are supported", where, s.GroupSize)
	}
	return s, nil
}

func readGeneration(dir string) (model.Generation, error) {
	path := filepath.Join(dir, "generation_config.json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return model.Generation{}, nil // optional: defaults apply
	}
	if err != nil {
		return model.Generation{}, &Error{Kind: ErrConfig, Path: path, Msg: err.Error(), Err: err}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return model.Generation{}, &Error{Kind: ErrConfig, Path: path, Msg: "not valid JSON: " + err.Error(), Err: err}
	}
	o := object{path: path, fields: top}
	var g model.Generation
	if g.EOSTokenIDs, err = o.ids("eos_token_id"); err != nil {
		return g, err
	}
	g.EOSTokenIDs = dedupe(g.EOSTokenIDs)
	var f float64
	if o.has("temperature") {
		if err := o.decode("temperature", &f); err != nil {
			return g, err
		}
		if f < 0 {
			return g, o.errorf("temperature", "%v must not be negative", f)
		}
		g.Temperature = float32(f)
	}
	if o.has("top_p") {
		if err := o.decode("top_p", &f); err != nil {
			return g, err
		}
		if f < 0 || f > 1 {
			return g, o.errorf("top_p", "%v must be in [0, 1]", f)
		}
		g.TopP = float32(f)
	}
	if o.has("top_k") {
		if err := o.decode("top_k", &g.TopK); err != nil {
			return g, err
		}
		if g.TopK < 0 {
			return g, o.errorf("top_k", "%d must not be negative", g.TopK)
		}
	}
	return g, nil
}

func dedupe(ids []int) []int {
	var out []int
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
