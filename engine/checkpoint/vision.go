package checkpoint

import (
	"fmt"
	"slices"
	"sync"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// readMRoPE reads rope_parameters' mrope_section (interleaved M-RoPE: the
// sections must cover the rotary frequencies, RotaryDim/2).
func readMRoPE(rp object, c *model.Config) error {
	if !rp.has("mrope_section") {
		return nil
	}
	var sec []int
	if err := rp.decode("mrope_section", &sec); err != nil {
		return err
	}
	if len(sec) != 3 || sec[0] < 0 || sec[1] < 0 || sec[2] < 0 || sec[0]+sec[1]+sec[2] != c.RotaryDim/2 {
		return rp.errorf("mrope_section", "%v must be three sizes summing to the %d rotary frequencies (RotaryDim/2)", sec, c.RotaryDim/2)
	}
	if rp.has("mrope_interleaved") {
		var inter bool
		if err := rp.decode("mrope_interleaved", &inter); err != nil {
			return err
		}
		if !inter {
			return rp.errorf("mrope_interleaved", "is false: only interleaved M-RoPE (Qwen3.5/3.6) is supported")
		}
	}
	c.MRoPESection = [3]int{sec[0], sec[1], sec[2]}
	return nil
}

// readVision reads vision_config and the image token ids of the wrapper
// config; nil when there is no vision_config.
func readVision(root object, c *model.Config) (*model.VisionConfig, error) {
	vo, ok, err := root.sub("vision_config")
	if err != nil || !ok {
		return nil, err
	}
	v := &model.VisionConfig{LayerNormEps: 1e-6, RopeTheta: 10000}
	for _, f := range []struct {
		o     object
		field string
		dst   *int
	}{
		{vo, "depth", &v.Depth}, {vo, "hidden_size", &v.HiddenSize}, {vo, "num_heads", &v.NumHeads},
		{vo, "intermediate_size", &v.Intermediate}, {vo, "in_channels", &v.InChannels},
		{vo, "patch_size", &v.PatchSize}, {vo, "temporal_patch_size", &v.TemporalPatchSize},
		{vo, "spatial_merge_size", &v.SpatialMerge}, {vo, "out_hidden_size", &v.OutHiddenSize},
		{vo, "num_position_embeddings", &v.NumPositions},
		{root, "image_token_id", &v.ImageTokenID}, {root, "vision_start_token_id", &v.VisionStartTokenID},
		{root, "vision_end_token_id", &v.VisionEndTokenID},
	} {
		n, err := f.o.positive(f.field)
		if err != nil {
			return nil, err
		}
		*f.dst = n
	}
	if act, err := vo.str("hidden_act"); err != nil {
		return nil, err
	} else if act != "" && act != "gelu_pytorch_tanh" {
		return nil, vo.errorf("hidden_act", "%q is not supported (gelu_pytorch_tanh)", act)
	}
	if rp, ok, err := vo.sub("rope_parameters"); err != nil {
		return nil, err
	} else if ok && rp.has("rope_theta") {
		if err := rp.decode("rope_theta", &v.RopeTheta); err != nil {
			return nil, err
		}
	}
	if v.HiddenSize%v.NumHeads != 0 || (v.HiddenSize/v.NumHeads)%4 != 0 {
		return nil, vo.errorf("num_heads", "%d heads of hidden_size %d: the head width must divide by 4 (2-D rotary)", v.NumHeads, v.HiddenSize)
	}
	if g := v.GridSide(); g*g != v.NumPositions {
		return nil, vo.errorf("num_position_embeddings", "%d is not a square grid", v.NumPositions)
	}
	if v.OutHiddenSize != c.HiddenSize {
		return nil, vo.errorf("out_hidden_size", "%d is not the text model's hidden_size %d", v.OutHiddenSize, c.HiddenSize)
	}
	for _, id := range []int{v.ImageTokenID, v.VisionStartTokenID, v.VisionEndTokenID} {
		if id >= c.VocabSize {
			return nil, root.errorf("image_token_id", "token %d is outside the vocabulary [0,%d)", id, c.VocabSize)
		}
	}
	return v, nil
}

// visionPrefixes are the module paths of the tower in the two layouts.
var visionPrefixes = []string{"model.visual.", "vision_tower.", "visual.", "model.vision_tower."}

// vision binds the tower once, on first use.
type vision struct {
	once sync.Once
	w    *model.VisionWeights
	err  error
}

// Vision binds the checkpoint's vision tower, on the first call only (the
// tower is not read until an image needs it); later calls return the same
// weights. Vision Linears are read quantized when the checkpoint stores
// them so (.scales beside .weight, bits from the quantization block). A
// checkpoint without vision_config has no tower: an error says so.
func (m *Model) Vision() (*model.VisionWeights, error) {
	vc := m.Weights.Config.Vision
	if err := m.Weights.Config.VisionErr; err != nil {
		return nil, err
	}
	if vc == nil {
		return nil, &Error{Kind: ErrConfig, Path: m.Dir, Msg: "config.json has no vision_config: this model does not read images"}
	}
	if m.set == nil {
		return nil, &Error{Kind: ErrWeights, Path: m.Dir, Msg: "the checkpoint is closed"}
	}
	m.vision.once.Do(func() { m.vision.w, m.vision.err = bindVision(m.Dir, m.set, &m.Weights.Config) })
	return m.vision.w, m.vision.err
}

func bindVision(dir string, set *safetensors.Set, cfg *model.Config) (*model.VisionWeights, error) {
	vc := cfg.Vision
	b := &binder{dir: dir, set: set, cfg: cfg, used: map[string]bool{}}
	p := ""
	for _, pre := range visionPrefixes {
		if _, ok := set.Tensor(pre + "patch_embed.proj.weight"); ok {
			p = pre
			break
		}
	}
	if p == "" {
		return nil, &Error{Kind: ErrWeights, Path: dir,
			Msg: "config.json has a vision_config but the weights hold no vision tower (model.visual.patch_embed.proj.weight or vision_tower.patch_embed.proj.weight): the download lacks it"}
	}
	b.layout = Hub
	if p == "vision_tower." {
		b.layout = MLX
	}
	H, I := vc.HiddenSize, vc.Intermediate
	w := &model.VisionWeights{Config: *vc}
	w.PatchEmbed = b.patchEmbed(p+"patch_embed.proj.weight", vc)
	w.PatchEmbedBias = b.floats(p+"patch_embed.proj.bias", H)
	w.PosEmbed = b.floats(p+"pos_embed.weight", vc.NumPositions, H)
	w.Blocks = make([]model.VisionBlock, vc.Depth)
	for i := range w.Blocks {
		q := fmt.Sprintf("%sblocks.%d.", p, i)
		k := &w.Blocks[i]
		k.Norm1, k.Norm1Bias = b.floats(q+"norm1.weight", H), b.floats(q+"norm1.bias", H)
		k.QKV, k.QKVBias = b.matrix(q+"attn.qkv", 3*H, H), b.floats(q+"attn.qkv.bias", 3*H)
		k.Proj, k.ProjBias = b.matrix(q+"attn.proj", H, H), b.floats(q+"attn.proj.bias", H)
		k.Norm2, k.Norm2Bias = b.floats(q+"norm2.weight", H), b.floats(q+"norm2.bias", H)
		k.FC1, k.FC1Bias = b.matrix(q+"mlp.linear_fc1", I, H), b.floats(q+"mlp.linear_fc1.bias", I)
		k.FC2, k.FC2Bias = b.matrix(q+"mlp.linear_fc2", H, I), b.floats(q+"mlp.linear_fc2.bias", H)
	}
	M := H * vc.SpatialMerge * vc.SpatialMerge
	mg := &w.Merger
	mg.Norm, mg.NormBias = b.floats(p+"merger.norm.weight", H), b.floats(p+"merger.norm.bias", H)
	mg.FC1, mg.FC1Bias = b.matrix(p+"merger.linear_fc1", M, M), b.floats(p+"merger.linear_fc1.bias", M)
	mg.FC2, mg.FC2Bias = b.matrix(p+"merger.linear_fc2", vc.OutHiddenSize, M), b.floats(p+"merger.linear_fc2.bias", vc.OutHiddenSize)
	if b.err != nil {
		return nil, b.err
	}
	for _, n := range set.Names() {
		if len(n) > len(p) && n[:len(p)] == p && !b.used[n] {
			t, _ := set.Tensor(n)
			return nil, &Error{Kind: ErrWeights, Path: fileOf(dir, t),
				Msg: fmt.Sprintf("tensor %s is not part of the %d-block vision tower described by config.json: the config and weights do not match", n, vc.Depth)}
		}
	}
	return w, nil
}

// patchEmbed reads the patch projection, a Conv3d kernel stored
// [out, in, t, h, w] (hub) or channels-last [out, t, h, w, in] (MLX), as a
// matrix whose columns follow the pixel row's (in, t, h, w) order. The MLX
// kernel is permuted into a copy (one per process, a few MB).
func (b *binder) patchEmbed(name string, vc *model.VisionConfig) model.Matrix {
	t, ok := b.tensor(name)
	if !ok || !b.checkDType(t, "BF16, F16 or F32", floatTypes...) {
		return model.Matrix{}
	}
	H, C, T, P := vc.HiddenSize, vc.InChannels, vc.TemporalPatchSize, vc.PatchSize
	hub, mlx := []int{H, C, T, P, P}, []int{H, T, P, P, C}
	m := model.Matrix{Name: name, Out: H, In: vc.PatchWidth(), DType: modelDType(t.DType), Data: t.Data}
	switch {
	case slices.Equal(t.Shape, hub):
	case slices.Equal(t.Shape, mlx):
		es := len(t.Data) / (H * m.In)
		data := make([]byte, len(t.Data))
		for o := range H {
			for c := range C {
				for f := range T {
					for y := range P {
						for x := range P {
							src := ((((o*T+f)*P+y)*P+x)*C + c) * es
							dst := ((((o*C+c)*T+f)*P+y)*P + x) * es
							copy(data[dst:dst+es], t.Data[src:src+es])
						}
					}
				}
			}
		}
		m.Data = data
	default:
		want := hub
		if b.layout == MLX {
			want = mlx
		}
		b.checkShape(t, want...)
		return model.Matrix{}
	}
	if err := m.Validate(); err != nil {
		b.fail(ErrWeights, t, "%v", err)
	}
	return m
}
