package checkpoint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// skipPrefixes are tensors of a checkpoint the text model does not use: the
// vision tower and the multi-token-prediction block.
var skipPrefixes = []string{
	"model.visual.", "visual.", "vision_tower.", "model.vision_tower.", "language_model.vision_tower.",
	"mtp.", "model.mtp.", "language_model.mtp.", "model.language_model.mtp.", "language_model.model.mtp.",
}

// binder walks the config's expected tensors and records the first error;
// after an error every method is a no-op, which keeps the binding code a
// plain list of what the model needs.
type binder struct {
	dir    string
	set    *safetensors.Set
	cfg    *model.Config
	layout Layout
	prefix string // module path of the text model, e.g. "language_model.model."
	head   string // module path of lm_head
	used   map[string]bool
	nQuant int // matrices bound as Affine
	err    error
}

func bind(dir string, set *safetensors.Set, cfg *model.Config) (*model.Weights, Layout, error) {
	b := &binder{dir: dir, set: set, cfg: cfg, used: map[string]bool{}}
	if err := b.detectLayout(); err != nil {
		return nil, 0, err
	}
	w := &model.Weights{Config: *cfg}
	H, V := cfg.HiddenSize, cfg.VocabSize
	w.Embed = b.matrix(b.prefix+"embed_tokens", V, H)
	w.FinalNorm = b.norm(b.prefix+"norm.weight", H, true)
	if cfg.TieWordEmbeddings {
		w.LMHead = w.Embed
	} else {
		w.LMHead = b.matrix(b.head, V, H)
	}
	w.Layers = make([]model.Layer, cfg.NumLayers)
	for i := range w.Layers {
		b.layer(i, &w.Layers[i])
		if b.err != nil {
			return nil, 0, b.err
		}
	}
	if b.err != nil {
		return nil, 0, b.err
	}
	if err := b.leftovers(); err != nil {
		return nil, 0, err
	}
	if cfg.Quantization != nil && b.nQuant == 0 {
		return nil, 0, &Error{Kind: ErrQuantization, Path: dir,
			Msg: "config.json has a quantization block but no tensor is quantized (no .scales tensors): the config does not belong to these weights"}
	}
	return w, b.layout, nil
}

func (b *binder) detectLayout() error {
	has := func(n string) bool { _, ok := b.set.Tensor(n); return ok }
	switch {
	case has("language_model.model.embed_tokens.weight"):
		b.layout, b.prefix, b.head = MLX, "language_model.model.", "language_model.lm_head"
	case has("model.language_model.embed_tokens.weight"):
		b.layout, b.prefix, b.head = Hub, "model.language_model.", "lm_head"
	case has("model.embed_tokens.weight"):
		// A text-only checkpoint: the expert naming tells the layouts apart.
		b.layout, b.prefix, b.head = Hub, "model.", "lm_head"
		for _, n := range b.set.Names() {
			if strings.Contains(n, ".switch_mlp.") {
				b.layout = MLX
				break
			}
		}
	default:
		return &Error{Kind: ErrWeights, Path: b.dir,
			Msg: "no embedding tensor (language_model.model.embed_tokens.weight, model.language_model.embed_tokens.weight or model.embed_tokens.weight): these weights are not a Qwen3.5/3.6 MoE checkpoint"}
	}
	return nil
}

func (b *binder) fail(kind error, t safetensors.Tensor, format string, args ...any) {
	if b.err == nil {
		b.err = &Error{Kind: kind, Path: fileOf(b.dir, t), Msg: fmt.Sprintf(format, args...)}
	}
}

// tensor fetches a required tensor and marks it consumed.
func (b *binder) tensor(name string) (safetensors.Tensor, bool) {
	if b.err != nil {
		return safetensors.Tensor{}, false
	}
	t, ok := b.set.Tensor(name)
	if !ok {
		b.err = &Error{Kind: ErrWeights, Path: b.dir,
			Msg: fmt.Sprintf("tensor %s is missing from the weights (config.json says %d layers of %s): the download is incomplete or the folder holds another model", name, b.cfg.NumLayers, b.cfg.ModelType)}
		return t, false
	}
	b.used[name] = true
	return t, true
}

func (b *binder) optional(name string) (safetensors.Tensor, bool) {
	if b.err != nil {
		return safetensors.Tensor{}, false
	}
	t, ok := b.set.Tensor(name)
	if ok {
		b.used[name] = true
	}
	return t, ok
}

func (b *binder) checkShape(t safetensors.Tensor, want ...int) bool {
	if b.err != nil {
		return false
	}
	if !slices.Equal(t.Shape, want) {
		b.fail(ErrWeights, t, "tensor %s has shape %s, config says %s: is this the right model folder?", t.Name, shapeString(t.Shape), shapeString(want))
		return false
	}
	return true
}

func (b *binder) checkDType(t safetensors.Tensor, kinds string, ok ...safetensors.DType) bool {
	if b.err != nil {
		return false
	}
	if !slices.Contains(ok, t.DType) {
		note := ""
		if !t.DType.Supported() {
			note = " (the engine does not read " + t.DType.String() + " tensors at all)"
		}
		b.fail(ErrWeights, t, "tensor %s has dtype %s, expected %s%s", t.Name, t.DType, kinds, note)
		return false
	}
	return true
}

var floatTypes = []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32}

func modelDType(d safetensors.DType) model.DType {
	switch d {
	case safetensors.F16:
		return model.F16
	case safetensors.F32:
		return model.F32
	}
	return model.BF16
}

// matrix binds the linear weight of a module: quantized when module.scales
// exists, plain otherwise.
func (b *binder) matrix(module string, out, in int) model.Matrix {
	ms := b.stacked(module, 0, out, in)
	if len(ms) == 0 {
		return model.Matrix{}
	}
	return ms[0]
}

// stacked binds a module's weight of shape [n, out, in] (n experts) or
// [out, in] (n == 0) into one Matrix per expert, each a view of its slice.
func (b *binder) stacked(module string, n, out, in int) []model.Matrix {
	if b.err != nil {
		return nil
	}
	lead := []int{}
	count := 1
	if n > 0 {
		lead = []int{n}
		count = n
	}
	dims := func(last ...int) []int { return append(slices.Clone(lead), last...) }
	scales, quantized := b.optional(module + ".scales")
	w, ok := b.tensor(module + ".weight")
	if !ok {
		return nil
	}
	q := b.cfg.Quantization
	spec := model.QuantSpec{}
	if q != nil {
		spec = q.Spec(module)
	}
	ms := make([]model.Matrix, count)
	if !quantized {
		if w.DType == safetensors.U32 {
			b.fail(ErrQuantization, w, "tensor %s holds packed U32 codes but %s.scales is missing: the checkpoint is incomplete", w.Name, module)
			return nil
		}
		if _, explicit := overrideFor(q, module); explicit && spec.Bits != 0 {
			b.fail(ErrQuantization, w, "config.json's quantization block gives %s %d bits, but the checkpoint stores it unquantized (no %s.scales): the config does not belong to these weights", module, spec.Bits, module)
			return nil
		}
		if !b.checkDType(w, "BF16, F16 or F32 (or U32 with scales and biases)", floatTypes...) || !b.checkShape(w, dims(out, in)...) {
			return nil
		}
		stride := len(w.Data) / count
		for e := range ms {
			ms[e] = model.Matrix{Name: expertName(w.Name, n, e), Out: out, In: in, DType: modelDType(w.DType),
				Data: w.Data[e*stride : (e+1)*stride : (e+1)*stride]}
		}
		return b.validate(ms, w)
	}
	biases, ok := b.tensor(module + ".biases")
	if !ok {
		b.err = &Error{Kind: ErrQuantization, Path: fileOf(b.dir, scales),
			Msg: fmt.Sprintf("tensor %s exists but %s.biases is missing: only MLX affine quantization (scales and biases) is supported", scales.Name, module)}
		return nil
	}
	if q == nil {
		b.fail(ErrQuantization, scales, "tensor %s is quantized but config.json has no quantization block: add the checkpoint's original config.json", w.Name)
		return nil
	}
	if spec.Bits == 0 {
		b.fail(ErrQuantization, scales, "config.json's quantization block leaves %s unquantized (false), but the checkpoint stores it quantized: the config does not belong to these weights", module)
		return nil
	}
	if !b.checkDType(w, "U32 (packed affine codes)", safetensors.U32) ||
		!b.checkDType(scales, "BF16", safetensors.BF16) || !b.checkDType(biases, "BF16", safetensors.BF16) {
		return nil
	}
	// Check that the packed width and group count match the config's bits
	// and group size, and say which bits the tensor actually has if not.
	if len(w.Shape) != len(lead)+2 || !slices.Equal(w.Shape[:len(lead)+1], dims(out)) {
		b.checkShape(w, dims(out, in*spec.Bits/32)...)
		return nil
	}
	if in%spec.GroupSize != 0 {
		b.fail(ErrQuantization, w, "config.json's quantization block gives %s group size %d, which does not divide its input width %d: the config does not belong to these weights", module, spec.GroupSize, in)
		return nil
	}
	if got := w.Shape[len(lead)+1]; got*32 != in*spec.Bits {
		actual := "an impossible width"
		if got*32%in == 0 {
			actual = fmt.Sprintf("%d bits", got*32/in)
		}
		b.fail(ErrQuantization, w, "config.json's quantization block gives %s %d bits (packed width %d), but tensor %s has shape %s, i.e. %s: the quantization block disagrees with the tensors", module, spec.Bits, in*spec.Bits/32, w.Name, shapeString(w.Shape), actual)
		return nil
	}
	groups := in / spec.GroupSize
	for _, t := range []safetensors.Tensor{scales, biases} {
		if !slices.Equal(t.Shape, dims(out, groups)) {
			actual := ""
			if len(t.Shape) == len(lead)+2 && t.Shape[len(lead)+1] > 0 && in%t.Shape[len(lead)+1] == 0 {
				actual = fmt.Sprintf(", i.e. group size %d", in/t.Shape[len(lead)+1])
			}
			b.fail(ErrQuantization, t, "config.json's quantization block gives %s group size %d (%d groups per row), but tensor %s has shape %s%s: the quantization block disagrees with the tensors", module, spec.GroupSize, groups, t.Name, shapeString(t.Shape), actual)
			return nil
		}
	}
	wStride, sStride := len(w.Data)/count, len(scales.Data)/count
	for e := range ms {
		ms[e] = model.Matrix{Name: expertName(w.Name, n, e), Out: out, In: in, DType: model.Affine,
			Bits: spec.Bits, GroupSize: spec.GroupSize,
			Data:   w.Data[e*wStride : (e+1)*wStride : (e+1)*wStride],
			Scales: scales.Data[e*sStride : (e+1)*sStride : (e+1)*sStride],
			Biases: biases.Data[e*sStride : (e+1)*sStride : (e+1)*sStride]}
	}
	b.nQuant++
	return b.validate(ms, w)
}

func (b *binder) validate(ms []model.Matrix, t safetensors.Tensor) []model.Matrix {
	for i := range ms {
		if err := ms[i].Validate(); err != nil {
			b.fail(ErrWeights, t, "%v", err)
			return nil
		}
	}
	return ms
}

// overrideFor reports whether the quantization block names module itself.
func overrideFor(q *model.Quantization, module string) (model.QuantSpec, bool) {
	if q == nil {
		return model.QuantSpec{}, false
	}
	s, ok := q.Overrides[module]
	return s, ok
}

func expertName(name string, n, e int) string {
	if n == 0 {
		return name
	}
	return fmt.Sprintf("%s[%d]", name, e)
}

// floats reads a small float tensor of the given shape into f32.
func (b *binder) floats(name string, shape ...int) []float32 {
	t, ok := b.tensor(name)
	if !ok || !b.checkDType(t, "BF16, F16 or F32", floatTypes...) || !b.checkShape(t, shape...) {
		return nil
	}
	v, err := safetensors.ToFloat32(t)
	if err != nil {
		b.fail(ErrWeights, t, "%v", err)
		return nil
	}
	return v
}

// norm reads an RMSNorm weight and returns the multiplier the norm applies.
// zeroCentred norms are stored as w and applied as 1+w in the hub layout; the
// MLX layout stores 1+w already.
func (b *binder) norm(name string, n int, zeroCentred bool) []float32 {
	v := b.floats(name, n)
	if zeroCentred && b.layout == Hub {
		for i := range v {
			v[i]++
		}
	}
	return v
}

func (b *binder) layer(i int, l *model.Layer) {
	c := b.cfg
	H := c.HiddenSize
	p := fmt.Sprintf("%slayers.%d.", b.prefix, i)
	l.InputNorm = b.norm(p+"input_layernorm.weight", H, true)
	l.PostNorm = b.norm(p+"post_attention_layernorm.weight", H, true)
	switch c.LayerTypes[i] {
	case model.LinearAttention:
		l.DeltaNet = b.deltaNet(p + "linear_attn.")
	case model.FullAttention:
		l.Attention = b.attention(p + "self_attn.")
	}
	b.moe(p+"mlp.", &l.MoE)
}

func (b *binder) deltaNet(p string) *model.DeltaNet {
	c := b.cfg
	H, hk, hv, dk, dv := c.HiddenSize, c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	ch := 2*hk*dk + hv*dv
	d := &model.DeltaNet{
		QKV: b.matrix(p+"in_proj_qkv", ch, H),
		Z:   b.matrix(p+"in_proj_z", hv*dv, H),
		B:   b.matrix(p+"in_proj_b", hv, H),
		A:   b.matrix(p+"in_proj_a", hv, H),
		Out: b.matrix(p+"out_proj", H, hv*dv),
	}
	d.Conv = b.conv(p+"conv1d.weight", ch, c.ConvKernel)
	d.ALog = b.floats(p+"A_log", hv)
	d.DtBias = b.floats(p+"dt_bias", hv)
	d.Norm = b.norm(p+"norm.weight", dv, false) // plain w in both layouts
	return d
}

// conv reads the depthwise conv kernel, stored [C,1,K] (hub) or [C,K,1]
// (MLX); both have the same element order, channel-major.
func (b *binder) conv(name string, ch, k int) [][]float32 {
	t, ok := b.tensor(name)
	if !ok || !b.checkDType(t, "BF16, F16 or F32", floatTypes...) {
		return nil
	}
	if !slices.Equal(t.Shape, []int{ch, 1, k}) && !slices.Equal(t.Shape, []int{ch, k, 1}) {
		want := []int{ch, 1, k}
		if b.layout == MLX {
			want = []int{ch, k, 1}
		}
		b.checkShape(t, want...)
		return nil
	}
	flat, err := safetensors.ToFloat32(t)
	if err != nil {
		b.fail(ErrWeights, t, "%v", err)
		return nil
	}
	out := make([][]float32, ch)
	for i := range out {
		out[i] = flat[i*k : (i+1)*k : (i+1)*k]
	}
	return out
}

func (b *binder) attention(p string) *model.Attention {
	c := b.cfg
	H, nh, nkv, hd := c.HiddenSize, c.NumHeads, c.NumKVHeads, c.HeadDim
	return &model.Attention{
		Q:     b.matrix(p+"q_proj", 2*nh*hd, H),
		K:     b.matrix(p+"k_proj", nkv*hd, H),
		V:     b.matrix(p+"v_proj", nkv*hd, H),
		O:     b.matrix(p+"o_proj", H, nh*hd),
		QNorm: b.norm(p+"q_norm.weight", hd, true),
		KNorm: b.norm(p+"k_norm.weight", hd, true),
	}
}

func (b *binder) moe(p string, m *model.MoE) {
	c := b.cfg
	H, E, I, S := c.HiddenSize, c.NumExperts, c.MoEIntermediate, c.SharedIntermediate
	m.Router = b.matrix(p+"gate", E, H)
	m.SharedGate = b.matrix(p+"shared_expert.gate_proj", S, H)
	m.SharedUp = b.matrix(p+"shared_expert.up_proj", S, H)
	m.SharedDown = b.matrix(p+"shared_expert.down_proj", H, S)
	m.SharedExpert = b.matrix(p+"shared_expert_gate", 1, H)
	if b.err != nil {
		return
	}
	if _, ok := b.set.Tensor(p + "switch_mlp.gate_proj.weight"); ok {
		m.Gate = b.stacked(p+"switch_mlp.gate_proj", E, I, H)
		m.Up = b.stacked(p+"switch_mlp.up_proj", E, I, H)
		m.Down = b.stacked(p+"switch_mlp.down_proj", E, H, I)
		return
	}
	if _, ok := b.set.Tensor(p + "experts.0.gate_proj.weight"); ok {
		// Per-expert tensors, as transformers' save_pretrained may write.
		m.Gate, m.Up, m.Down = make(model.Experts, E), make(model.Experts, E), make(model.Experts, E)
		for e := 0; e < E; e++ {
			q := fmt.Sprintf("%sexperts.%d.", p, e)
			m.Gate[e] = b.matrix(q+"gate_proj", I, H)
			m.Up[e] = b.matrix(q+"up_proj", I, H)
			m.Down[e] = b.matrix(q+"down_proj", H, I)
		}
		return
	}
	m.Gate, m.Up, m.Down = b.fusedExperts(p)
}

// fusedExperts binds the hub's fused gate_up_proj [E,2I,H] (gate rows first)
// and down_proj [E,H,I]: each expert's gate and up are views of one slice.
func (b *binder) fusedExperts(p string) (gate, up, down model.Experts) {
	c := b.cfg
	H, E, I := c.HiddenSize, c.NumExperts, c.MoEIntermediate
	gu, ok := b.tensor(p + "experts.gate_up_proj")
	if !ok {
		// Name the layouts we looked for, not only the fused one.
		b.err.(*Error).Msg += fmt.Sprintf(" (nor %sswitch_mlp.gate_proj.weight or %sexperts.0.gate_proj.weight)", p, p)
		return
	}
	dn, ok := b.tensor(p + "experts.down_proj")
	if !ok {
		return
	}
	if !b.checkDType(gu, "BF16, F16 or F32", floatTypes...) || !b.checkShape(gu, E, 2*I, H) ||
		!b.checkDType(dn, "BF16, F16 or F32", floatTypes...) || !b.checkShape(dn, E, H, I) {
		return
	}
	gate, up, down = make(model.Experts, E), make(model.Experts, E), make(model.Experts, E)
	es := len(gu.Data) / E
	half := es / 2
	ds := len(dn.Data) / E
	for e := 0; e < E; e++ {
		base := e * es
		gate[e] = model.Matrix{Name: expertName(gu.Name, E, e) + ".gate", Out: I, In: H, DType: modelDType(gu.DType),
			Data: gu.Data[base : base+half : base+half]}
		up[e] = model.Matrix{Name: expertName(gu.Name, E, e) + ".up", Out: I, In: H, DType: modelDType(gu.DType),
			Data: gu.Data[base+half : base+es : base+es]}
		down[e] = model.Matrix{Name: expertName(dn.Name, E, e), Out: H, In: I, DType: modelDType(dn.DType),
			Data: dn.Data[e*ds : (e+1)*ds : (e+1)*ds]}
	}
	if b.validate(gate, gu) == nil || b.validate(up, gu) == nil || b.validate(down, dn) == nil {
		return nil, nil, nil
	}
	return gate, up, down
}

// leftovers fails on any tensor neither bound nor known to be skippable: a
// tensor the engine silently ignored could mean it computes another model.
func (b *binder) leftovers() error {
	var left []string
	for _, n := range b.set.Names() {
		if b.used[n] || skippable(n) {
			continue
		}
		left = append(left, n)
	}
	if len(left) == 0 {
		return nil
	}
	t, _ := b.set.Tensor(left[0])
	more := ""
	if len(left) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(left)-1)
	}
	return &Error{Kind: ErrWeights, Path: fileOf(b.dir, t),
		Msg: fmt.Sprintf("tensor %s%s is not part of the %d-layer %s model described by config.json: the config and weights do not match", left[0], more, b.cfg.NumLayers, b.cfg.ModelType)}
}

func skippable(name string) bool {
	for _, p := range skipPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
