package model

// Config is the text model's configuration, read from config.json (the
// multimodal wrapper's text_config, or a bare text config) and validated.
type Config struct {
	HiddenSize         int
	NumLayers          int
	LayerTypes         []LayerType // len NumLayers
	NumHeads           int         // full-attention query heads
	NumKVHeads         int
	HeadDim            int
	LinearKeyHeads     int // Hk
	LinearValueHeads   int // Hv
	LinearKeyHeadDim   int // Dk
	LinearValueHeadDim int // Dv
	ConvKernel         int
	NumExperts         int
	ExpertsPerToken    int
	MoEIntermediate    int
	SharedIntermediate int
	VocabSize          int
	RMSNormEps         float32
	RopeTheta          float64
	RotaryDim          int // HeadDim · partial_rotary_factor
	// MRoPESection splits the RotaryDim/2 rotary frequencies among the
	// temporal, height and width positions (interleaved, see RopeAxis):
	// mrope_section from rope_parameters, [11, 11, 10] for Qwen3.6. A zero
	// section turns every frequency by the temporal position.
	MRoPESection [3]int
	MaxPositions int
	EOSTokenIDs  []int // from config.json and generation_config.json, deduplicated

	// DeltaNetNormEps is the epsilon of the DeltaNet output norm (the gated
	// RMSNorm per value head). The loader sets it from rms_norm_eps, as
	// transformers does; it is a field of its own so that a test can change
	// this one constant and show that the fixture comparison notices.
	DeltaNetNormEps float32
	// DeltaNetL2Eps is the epsilon of the L2 normalisation of DeltaNet's q
	// and k, x·rsqrt(Σx²+eps). config.json does not carry it: the loader
	// sets transformers' fixed 1e-6, and a test may change it.
	DeltaNetL2Eps float64

	// ModelType is the text config's model_type (qwen3_5_moe_text), kept
	// for messages and reports.
	ModelType string
	// PartialRotaryFactor is the fraction of HeadDim that RoPE rotates
	// (RotaryDim = HeadDim·PartialRotaryFactor).
	PartialRotaryFactor float64
	// TieWordEmbeddings: the checkpoint has no lm_head and the head reuses
	// the embedding matrix (false for Qwen3.6-35B-A3B).
	TieWordEmbeddings bool

	// Quantization, when the checkpoint is MLX affine; nil for hub layouts.
	Quantization *Quantization

	// Vision is the vision tower's configuration, nil when the checkpoint
	// has none (config.json without vision_config) or one the engine does
	// not run (VisionErr says why).
	Vision    *VisionConfig
	VisionErr error
}

// LayerType says which mixer a layer uses.
type LayerType int

const (
	LinearAttention LayerType = iota // Gated DeltaNet
	FullAttention                    // gated softmax attention
)

// Quantization is the config's quantization block.
type Quantization struct {
	Mode      string // "affine", the only mode read
	Bits      int
	GroupSize int
	// Overrides maps a module path (as written in config.json, for example
	// "language_model.model.layers.0.mlp.gate") to its own bits/group size.
	Overrides map[string]QuantSpec
}

// Spec returns the bits and group size config.json gives the module at path
// (for example "language_model.model.layers.0.mlp.gate"): its override when
// there is one, else the default.
func (q *Quantization) Spec(path string) QuantSpec {
	if s, ok := q.Overrides[path]; ok {
		return s
	}
	return QuantSpec{Bits: q.Bits, GroupSize: q.GroupSize}
}

// QuantSpec is the bits and group size of one module. Bits 0 means the
// config leaves the module unquantized (written as false in config.json).
type QuantSpec struct {
	Bits      int
	GroupSize int
}

// Generation holds generation_config.json defaults (zero when absent).
type Generation struct {
	Temperature float32
	TopK        int
	TopP        float32
	EOSTokenIDs []int
}
