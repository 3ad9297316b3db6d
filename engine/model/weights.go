package model

// DType is the element type of a stored weight.
type DType int

const (
	BF16 DType = iota
	F16
	F32
	// Affine is MLX affine quantization: packed U32 codes plus BF16 scales
	// and biases per group of GroupSize input columns (w = scale·q + bias).
	Affine
)

func (d DType) String() string {
	switch d {
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case F32:
		return "f32"
	case Affine:
		return "affine"
	}
	return "unknown"
}

// Matrix is one linear weight of shape [Out, In] (y = x·Wᵀ), read in place
// from the mapped checkpoint: Data, Scales and Biases are views into the
// mapped file and are never copied.
//
// For BF16/F16/F32, Data holds Out·In elements, row-major.
// For Affine, Data holds Out rows of In·Bits/32 little-endian uint32 words;
// element j of a row is bits [Bits·(j%per), Bits·(j%per)+Bits) of word j/per
// with per = 32/Bits, low bits first. Scales and Biases are BF16 [Out, In/GroupSize].
type Matrix struct {
	Name      string // tensor name in the checkpoint, for error messages
	Out, In   int
	DType     DType
	Bits      int // Affine only: 4 or 8 (2, 3, 6 are rejected at load)
	GroupSize int // Affine only
	Data      []byte
	Scales    []byte // Affine only
	Biases    []byte // Affine only
}

// Experts is a stack of NumExperts matrices of one shape. Each element is a
// view (into a fused [E, out, in] tensor, or a per-expert tensor).
type Experts []Matrix

// Attention holds one gated full-attention layer.
type Attention struct {
	Q     Matrix    // [Heads·HeadDim·2, Hidden]: per head [query ‖ gate]
	K     Matrix    // [KVHeads·HeadDim, Hidden]
	V     Matrix    // [KVHeads·HeadDim, Hidden]
	O     Matrix    // [Hidden, Heads·HeadDim]
	QNorm []float32 // [HeadDim], effective multiplier (1+w), f32
	KNorm []float32 // [HeadDim], effective multiplier (1+w), f32
}

// DeltaNet holds one Gated DeltaNet (linear attention) layer.
type DeltaNet struct {
	QKV    Matrix      // [2·Hk·Dk + Hv·Dv, Hidden]
	Z      Matrix      // [Hv·Dv, Hidden]
	B      Matrix      // [Hv, Hidden]
	A      Matrix      // [Hv, Hidden]
	Out    Matrix      // [Hidden, Hv·Dv]
	Conv   [][]float32 // [channels][kernel], channels = 2·Hk·Dk + Hv·Dv
	ALog   []float32   // [Hv]
	DtBias []float32   // [Hv]
	Norm   []float32   // [Dv], plain multiplier w (not 1+w)
}

// MoE holds the sparse mixture of experts with its shared expert.
type MoE struct {
	Router       Matrix  // [NumExperts, Hidden]
	Gate         Experts // NumExperts × [MoEIntermediate, Hidden]
	Up           Experts // NumExperts × [MoEIntermediate, Hidden]
	Down         Experts // NumExperts × [Hidden, MoEIntermediate]
	SharedGate   Matrix  // [SharedIntermediate, Hidden]
	SharedUp     Matrix  // [SharedIntermediate, Hidden]
	SharedDown   Matrix  // [Hidden, SharedIntermediate]
	SharedExpert Matrix  // [1, Hidden]: sigmoid gate of the shared expert
}

// Layer is one decoder layer: exactly one of DeltaNet and Attention is set.
type Layer struct {
	InputNorm []float32 // [Hidden], effective multiplier (1+w)
	PostNorm  []float32 // [Hidden], effective multiplier (1+w)
	DeltaNet  *DeltaNet
	Attention *Attention
	MoE       MoE
}

// Weights is the whole text model bound from a checkpoint. Norm vectors are
// stored as the multiplier the RMSNorm applies, whatever the layout stored,
// so backends never need to know the checkpoint's convention.
type Weights struct {
	Config    Config
	Embed     Matrix // [VocabSize, Hidden]
	Layers    []Layer
	FinalNorm []float32 // [Hidden], effective multiplier (1+w)
	LMHead    Matrix    // [VocabSize, Hidden]
	// Mappings are the mapped files the matrices are views into, one slice
	// per file, when known (checkpoint.Load sets them). A GPU backend that
	// wraps this memory in device buffers keeps each buffer inside one of
	// them: shards mapped next to each other are still separate regions.
	Mappings [][]byte
}
