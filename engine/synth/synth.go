package synth

import (
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// Layout selects the on-disk layout to write.
type Layout = checkpoint.Layout

// Options controls Write. The zero value of every field but Config is a
// sensible default.
type Options struct {
	// Config is the raw config.json to imitate: the multimodal wrapper with
	// text_config (as the fixtures have) or a bare text config. Its
	// quantization block, when present, gives bits and group sizes for the
	// MLX layout; without one the MLX layout uses 4 bits, group 64, with
	// the router and shared-expert gate at 8 bits, like mlx-community.
	Config []byte
	// Layers keeps only the first Layers layers (0 keeps all). When the
	// kept prefix has no full-attention layer, the last kept layer becomes
	// one, so that 2 layers give one of each mixer.
	Layers int
	// Layout is checkpoint.MLX (the default, as the Mac app runs it) or
	// checkpoint.Hub (bf16).
	Layout Layout
	// Seed makes the weights reproducible.
	Seed uint64
	// TokenizerDir, when set, is a model folder whose tokenizer.json,
	// tokenizer_config.json, chat_template.jinja and generation_config.json
	// are copied (for example the demo model, assets/models/suzuran-tiny). Its ids must be
	// below the config's vocabulary size.
	TokenizerDir string
	// ShardBytes caps the size of one safetensors file; larger models are
	// split into shards with an index, as real checkpoints are. 0 means
	// 4 GiB.
	ShardBytes int64
}

// The real model's configs, embedded so that a benchmark binary needs no
// checkout beside it (configs/README.md says where they come from).
//
//go:embed configs/qwen3.6-35b-a3b.json configs/qwen3.6-35b-a3b.mlx-4bit.json
var configs embed.FS

// FullSizeConfig returns the config.json of
// mlx-community/Qwen3.6-35B-A3B-4bit (with its quantization block): the
// default shape a benchmark checkpoint imitates.
func FullSizeConfig() []byte { return embedded("configs/qwen3.6-35b-a3b.mlx-4bit.json") }

// FullSizeHubConfig returns the config.json of Qwen/Qwen3.6-35B-A3B (the hub
// layout, bf16).
func FullSizeHubConfig() []byte { return embedded("configs/qwen3.6-35b-a3b.json") }

func embedded(name string) []byte {
	b, err := configs.ReadFile(name)
	if err != nil {
		panic(err) // the go:embed line above names the file
	}
	return b
}

// Result describes a written folder.
type Result struct {
	Dir      string
	Bytes    int64 // total size of the safetensors files
	Tensors  int
	Shards   int
	Layers   int
	Duration time.Duration
}

// FormatVersion changes whenever Write's output changes for the same
// options, so that caches keyed by CacheKey are rebuilt.
const FormatVersion = 1

// CacheKey identifies the folder Write would produce for opt: a benchmark
// can keep a built checkpoint under this name and reuse it.
func CacheKey(opt Options) string {
	h := sha256.New()
	fmt.Fprintf(h, "v%d layers=%d layout=%d seed=%d shard=%d tok=%s\n", FormatVersion, opt.Layers, opt.Layout, opt.Seed, opt.ShardBytes, opt.TokenizerDir)
	h.Write(opt.Config)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Write builds the synthetic checkpoint in dir, which must not exist yet.
func Write(dir string, opt Options) (*Result, error) {
	start := time.Now()
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("synth: %s already exists; remove it or choose another folder", dir)
	}
	cfgJSON, cfg, err := prepareConfig(opt)
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), cfgJSON, 0o644); err != nil {
		return nil, err
	}
	if opt.TokenizerDir != "" {
		for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"} {
			if err := copyFile(filepath.Join(opt.TokenizerDir, name), filepath.Join(tmp, name)); err != nil {
				return nil, fmt.Errorf("synth: copying the tokenizer: %w", err)
			}
		}
	}
	plan := planTensors(cfg, opt.Layout)
	res := &Result{Dir: dir, Tensors: len(plan), Layers: cfg.NumLayers}
	shardBytes := opt.ShardBytes
	if shardBytes <= 0 {
		shardBytes = 4 << 30
	}
	shards := splitShards(plan, shardBytes)
	res.Shards = len(shards)
	weightMap := map[string]string{}
	format := "mlx"
	if opt.Layout == checkpoint.Hub {
		format = "pt"
	}
	meta := map[string]string{"format": format, "synthetic": fmt.Sprintf("suzuran synth v%d seed %d", FormatVersion, opt.Seed)}
	for i, sh := range shards {
		name := safetensors.SingleFileName
		if len(shards) > 1 {
			name = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		}
		n, err := writeShard(filepath.Join(tmp, name), sh, opt.Seed, meta)
		if err != nil {
			return nil, err
		}
		res.Bytes += n
		for _, t := range sh {
			weightMap[t.spec.Name] = name
		}
	}
	if len(shards) > 1 {
		idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": res.Bytes}, "weight_map": weightMap}, "", "  ")
		if err := os.WriteFile(filepath.Join(tmp, safetensors.IndexFileName), idx, 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	ok = true
	res.Duration = time.Since(start)
	return res, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// prepareConfig cuts the config to the requested layers and layout, and
// returns it with its parsed form.
func prepareConfig(opt Options) ([]byte, *model.Config, error) {
	if len(opt.Config) == 0 {
		return nil, nil, errors.New("synth: Options.Config is empty: pass a config.json such as FullSizeConfig()")
	}
	var root map[string]any
	if err := json.Unmarshal(opt.Config, &root); err != nil {
		return nil, nil, fmt.Errorf("synth: config: %w", err)
	}
	text := root
	if tc, ok := root["text_config"].(map[string]any); ok {
		text = tc
	}
	orig, err := checkpoint.ParseConfig(opt.Config, "config.json")
	if err != nil {
		return nil, nil, fmt.Errorf("synth: %w", err)
	}
	n := orig.NumLayers
	if opt.Layers > 0 && opt.Layers < n {
		n = opt.Layers
	}
	types := slices.Clone(orig.LayerTypes[:n])
	if n >= 2 && !slices.Contains(types, model.FullAttention) {
		types[n-1] = model.FullAttention
	}
	names := make([]string, n)
	for i, t := range types {
		names[i] = "linear_attention"
		if t == model.FullAttention {
			names[i] = "full_attention"
		}
	}
	text["num_hidden_layers"] = n
	text["layer_types"] = names

	delete(root, "quantization_config")
	if opt.Layout == checkpoint.Hub {
		delete(root, "quantization")
	} else {
		q := map[string]any{"group_size": 64, "bits": 4, "mode": "affine"}
		if orig.Quantization != nil {
			q["group_size"], q["bits"] = orig.Quantization.GroupSize, orig.Quantization.Bits
		}
		for i := 0; i < n; i++ {
			for _, m := range []string{"mlp.gate", "mlp.shared_expert_gate"} {
				path := fmt.Sprintf("language_model.model.layers.%d.%s", i, m)
				spec := model.QuantSpec{Bits: 8, GroupSize: 64}
				if orig.Quantization != nil {
					spec = orig.Quantization.Spec(path)
				}
				if spec.Bits == 0 {
					q[path] = false
				} else {
					q[path] = map[string]any{"group_size": spec.GroupSize, "bits": spec.Bits}
				}
			}
		}
		root["quantization"] = q
		root["quantization_config"] = q
	}
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := checkpoint.ParseConfig(out, "config.json")
	if err != nil {
		return nil, nil, fmt.Errorf("synth: reduced config: %w", err)
	}
	return out, cfg, nil
}

// fill says how a tensor's values are drawn.
type fill int

const (
	fillLinear  fill = iota // N(0, 0.02²), or packed codes of that scale
	fillNormMLX             // 1 + N(0, 0.05²): MLX stores 1+w
	fillNormHub             // N(0, 0.05²): hub stores w
	fillNormOne             // 1 + N(0, 0.05²) in both layouts (DeltaNet norm)
	fillConv                // N(0, 0.3²)
	fillALog                // log(U[1, 16])
	fillDtBias              // N(0, 1)
	fillCodes               // uniform random packed codes
	fillScales              // per-group scale of a 0.02-std matrix
	fillBiases              // per-group bias matching fillScales
)

type planned struct {
	spec safetensors.TensorSpec
	fill fill
	bits int // for scales/biases: the bits of the codes
}

func (p planned) bytes() int64 {
	n := int64(p.spec.DType.Size())
	for _, d := range p.spec.Shape {
		n *= int64(d)
	}
	return n
}

// planTensors lists every tensor of the checkpoint in file order.
func planTensors(c *model.Config, layout Layout) []planned {
	var out []planned
	add := func(name string, dt safetensors.DType, f fill, shape ...int) {
		out = append(out, planned{spec: safetensors.TensorSpec{Name: name, DType: dt, Shape: shape}, fill: f})
	}
	mlx := layout != checkpoint.Hub
	prefix, head := "model.language_model.", "lm_head"
	normFill := fillNormHub
	if mlx {
		prefix, head = "language_model.model.", "language_model.lm_head"
		normFill = fillNormMLX
	}
	// linear adds module.weight ([lead…, out, in]), quantized in the MLX
	// layout when the group size divides the input width.
	linear := func(module string, lead []int, o, in int) {
		shape := append(slices.Clone(lead), o, in)
		spec := model.QuantSpec{}
		if mlx {
			spec = c.Quantization.Spec(module)
		}
		if spec.Bits == 0 || in%spec.GroupSize != 0 {
			add(module+".weight", safetensors.BF16, fillLinear, shape...)
			return
		}
		packed := append(slices.Clone(lead), o, in*spec.Bits/32)
		groups := append(slices.Clone(lead), o, in/spec.GroupSize)
		add(module+".weight", safetensors.U32, fillCodes, packed...)
		out = append(out,
			planned{spec: safetensors.TensorSpec{Name: module + ".scales", DType: safetensors.BF16, Shape: groups}, fill: fillScales, bits: spec.Bits},
			planned{spec: safetensors.TensorSpec{Name: module + ".biases", DType: safetensors.BF16, Shape: slices.Clone(groups)}, fill: fillBiases, bits: spec.Bits})
	}
	H, V := c.HiddenSize, c.VocabSize
	if mlx {
		linear(prefix+"embed_tokens", nil, V, H)
	} else {
		add(prefix+"embed_tokens.weight", safetensors.BF16, fillLinear, V, H)
	}
	for i := 0; i < c.NumLayers; i++ {
		p := fmt.Sprintf("%slayers.%d.", prefix, i)
		add(p+"input_layernorm.weight", safetensors.BF16, normFill, H)
		add(p+"post_attention_layernorm.weight", safetensors.BF16, normFill, H)
		if c.LayerTypes[i] == model.LinearAttention {
			a := p + "linear_attn."
			hk, hv, dk, dv := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
			ch := 2*hk*dk + hv*dv
			linear(a+"in_proj_qkv", nil, ch, H)
			linear(a+"in_proj_z", nil, hv*dv, H)
			linear(a+"in_proj_b", nil, hv, H)
			linear(a+"in_proj_a", nil, hv, H)
			linear(a+"out_proj", nil, H, hv*dv)
			if mlx {
				add(a+"conv1d.weight", safetensors.BF16, fillConv, ch, c.ConvKernel, 1)
			} else {
				add(a+"conv1d.weight", safetensors.BF16, fillConv, ch, 1, c.ConvKernel)
			}
			add(a+"A_log", safetensors.F32, fillALog, hv)
			add(a+"dt_bias", safetensors.BF16, fillDtBias, hv)
			add(a+"norm.weight", safetensors.BF16, fillNormOne, dv)
		} else {
			a := p + "self_attn."
			nh, nkv, hd := c.NumHeads, c.NumKVHeads, c.HeadDim
			linear(a+"q_proj", nil, 2*nh*hd, H)
			linear(a+"k_proj", nil, nkv*hd, H)
			linear(a+"v_proj", nil, nkv*hd, H)
			linear(a+"o_proj", nil, H, nh*hd)
			add(a+"q_norm.weight", safetensors.BF16, normFill, hd)
			add(a+"k_norm.weight", safetensors.BF16, normFill, hd)
		}
		m := p + "mlp."
		E, I, S := c.NumExperts, c.MoEIntermediate, c.SharedIntermediate
		linear(m+"gate", nil, E, H)
		if mlx {
			linear(m+"switch_mlp.gate_proj", []int{E}, I, H)
			linear(m+"switch_mlp.up_proj", []int{E}, I, H)
			linear(m+"switch_mlp.down_proj", []int{E}, H, I)
		} else {
			add(m+"experts.gate_up_proj", safetensors.BF16, fillLinear, E, 2*I, H)
			add(m+"experts.down_proj", safetensors.BF16, fillLinear, E, H, I)
		}
		linear(m+"shared_expert.gate_proj", nil, S, H)
		linear(m+"shared_expert.up_proj", nil, S, H)
		linear(m+"shared_expert.down_proj", nil, H, S)
		linear(m+"shared_expert_gate", nil, 1, H)
	}
	add(prefix+"norm.weight", safetensors.BF16, normFill, H)
	if !c.TieWordEmbeddings {
		if mlx {
			linear(head, nil, V, H)
		} else {
			add(head+".weight", safetensors.BF16, fillLinear, V, H)
		}
	}
	return out
}

// splitShards groups tensors in order into files of at most max bytes (a
// tensor larger than max gets a file of its own).
func splitShards(plan []planned, max int64) [][]planned {
	var shards [][]planned
	var cur []planned
	var size int64
	for _, p := range plan {
		if len(cur) > 0 && size+p.bytes() > max {
			shards = append(shards, cur)
			cur, size = nil, 0
		}
		cur = append(cur, p)
		size += p.bytes()
	}
	if len(cur) > 0 {
		shards = append(shards, cur)
	}
	return shards
}

func writeShard(path string, plan []planned, seed uint64, meta map[string]string) (int64, error) {
	// Widest element types first, as the reference implementation orders
	// them: every tensor then starts aligned to its element size, so
	// kernels may read U32 codes and F32 vectors as aligned words.
	plan = slices.Clone(plan)
	slices.SortStableFunc(plan, func(a, b planned) int { return b.spec.DType.Size() - a.spec.DType.Size() })
	specs := make([]safetensors.TensorSpec, len(plan))
	for i, p := range plan {
		specs[i] = p.spec
	}
	w, err := safetensors.Create(path, specs, meta)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	for _, p := range plan {
		if err := generate(w, p, seed, buf); err != nil {
			w.Abort()
			return 0, fmt.Errorf("synth: %s: %w", p.spec.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// tensorRNG seeds a generator from the seed and the tensor's name, so that a
// tensor's values do not depend on the order or sharding of the others.
func tensorRNG(seed uint64, name string) *rand.ChaCha8 {
	var s [32]byte
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, seed)
	io.WriteString(h, name)
	copy(s[:], h.Sum(nil))
	return rand.NewChaCha8(s)
}

// Linear weights are drawn with this standard deviation (the usual
// initializer range of the Qwen configs, and the order of magnitude of the
// trained model's projection weights).
const linearStd = 0.02

// linearTable maps 16 random bits to a bf16 sample of N(0, linearStd²) by
// inverse-CDF lookup at the 65,536 quantile midpoints: the exact
// distribution at a table lookup per element, far faster than
// rand.NormFloat64 for the gigabytes a full-size hub checkpoint needs.
var linearTable = func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	for i := range t {
		z := math.Sqrt2 * math.Erfinv(2*(float64(i)+0.5)/(1<<16)-1)
		t[i] = safetensors.Float32ToBF16(float32(z * linearStd))
	}
	return &t
}()

// codeStdFactor is the standard deviation of uniform codes 0..2^bits-1 in
// units of the scale: sqrt((L²-1)/12) for L levels.
func codeStdFactor(bits int) float64 {
	l := float64(int(1) << bits)
	return math.Sqrt((l*l - 1) / 12)
}

func generate(w io.Writer, p planned, seed uint64, buf []byte) error {
	rng := tensorRNG(seed, p.spec.Name)
	// Scales and biases of one matrix share a stream so that each group's
	// bias centres its codes: bias = -scale·(L-1)/2.
	if p.fill == fillBiases {
		rng = tensorRNG(seed, p.spec.Name[:len(p.spec.Name)-len(".biases")]+".scales")
	}
	r := rand.New(rng)
	total := p.bytes()
	for done := int64(0); done < total; {
		chunk := buf[:min(int64(len(buf)), total-done)]
		switch p.fill {
		case fillCodes:
			rng.Read(chunk)
		case fillLinear:
			rng.Read(chunk)
			for i := 0; i+1 < len(chunk); i += 2 {
				u := binary.LittleEndian.Uint16(chunk[i:])
				binary.LittleEndian.PutUint16(chunk[i:], linearTable[u])
			}
		case fillScales, fillBiases:
			base := linearStd / codeStdFactor(p.bits)
			levels := float64(int(1)<<p.bits - 1)
			for i := 0; i+1 < len(chunk); i += 2 {
				// Groups vary in range, as real ones do: ±20 %.
				s := base * (0.8 + 0.4*r.Float64())
				v := s
				if p.fill == fillBiases {
					v = -s * levels / 2
				}
				binary.LittleEndian.PutUint16(chunk[i:], safetensors.Float32ToBF16(float32(v)))
			}
		default:
			if err := fillSmall(chunk, p, r); err != nil {
				return err
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		done += int64(len(chunk))
	}
	return nil
}

// fillSmall fills vectors (norms, conv, A_log, dt_bias); they are small
// enough to fit one chunk.
func fillSmall(chunk []byte, p planned, r *rand.Rand) error {
	n := len(chunk) / p.spec.DType.Size()
	v := make([]float32, n)
	for i := range v {
		switch p.fill {
		case fillNormMLX, fillNormOne:
			v[i] = float32(1 + 0.05*r.NormFloat64())
		case fillNormHub:
			v[i] = float32(0.05 * r.NormFloat64())
		case fillConv:
			v[i] = float32(0.3 * r.NormFloat64())
		case fillALog:
			v[i] = float32(math.Log(1 + 15*r.Float64()))
		case fillDtBias:
			v[i] = float32(r.NormFloat64())
		}
	}
	return safetensors.EncodeFloat32(chunk, p.spec.DType, v)
}
