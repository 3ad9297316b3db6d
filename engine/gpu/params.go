package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The kernels' constant parameter structs, one Go struct for each MSL
// struct of the same name (lower-cased first letter here) in
// metalkernels/*.metal, field for field: an MSL uint is a uint32, a float a
// float32, and the names are the MSL names in CamelCase. TestParamsMatchMSL
// parses the .metal sources and checks names, order, types, offsets and
// sizes, so a field added on one side only fails the tests, not the
// numbers.

// gemvParams is GemvParams (gemv.metal).
type gemvParams struct {
	In, Out, XStride, YStride, GroupSize, Flags, Rows uint32
}

// gemmParams is GemmParams (gemm.metal).
type gemmParams struct {
	In, Out, Rows, XStride, YStride, GroupSize uint32
}

// embedParams is EmbedParams (embed.metal).
type embedParams struct {
	Hidden, Vocab, GroupSize, Pos0 uint32
}

// embedSeqsParams is EmbedSeqsParams (embed.metal).
type embedSeqsParams struct {
	Hidden, Vocab, GroupSize, Rows uint32
}

// copyParams is CopyParams (embed.metal).
type copyParams struct {
	Count uint32
}

// normParams is NormParams (norm.metal).
type normParams struct {
	Width, XStride, YStride uint32
	Eps                     float32
}

// visionRowParams is VisionRowParams (vision.metal).
type visionRowParams struct {
	Width, XStride, YStride uint32
	Eps                     float32
}

// ropeTableParams is RopeTableParams (vision.metal).
type ropeTableParams struct {
	Heads, HeadDim, Stride, HalfDim uint32
}

// visionAttnParams is VisionAttnParams (vision.metal).
type visionAttnParams struct {
	Heads, HeadDim, Width, Stride, Segment, OutStride uint32
	Scale                                             float32
}

// convParams is ConvParams (conv.metal).
type convParams struct {
	Channels, Taps, Rows uint32
}

// deltaNetParams is DeltaNetParams (deltanet.metal).
type deltaNetParams struct {
	Rows, KeyHeads, ValueHeads, KeyDim, ValueDim uint32
}

// attnParams is AttnParams (attention.metal).
type attnParams struct {
	HeadDim, RotaryDim, QHeads, KvHeads, Pos0, MaxSeq, SplitLen, Splits uint32
	Eps, Scale                                                          float32
	Rows                                                                uint32
}

// routerParams is RouterParams (moe.metal).
type routerParams struct {
	Experts, TopK, LogitsStride uint32
}

// expertParams is ExpertParams (moe.metal).
type expertParams struct {
	Hidden, Inter, SharedInter, Experts, Slots, HStride, GroupSize, SharedGroupSize uint32
	Flags, SharedFlags, Rows                                                        uint32
}

// planParams is PlanParams (moe_grouped.metal).
type planParams struct {
	Assignments, Groups, Bound uint32
}

// scatterParams is ScatterParams (moe_grouped.metal).
type scatterParams struct {
	Assignments, Slots uint32
}

// groupedParams is GroupedParams (moe_grouped.metal).
type groupedParams struct {
	Hidden, Inter, SharedInter, Experts, HStride, GroupSize, SharedGroupSize, XStride uint32
}

// combineParams is CombineParams (moe_grouped.metal).
type combineParams struct {
	Hidden, Slots uint32
}

// argmaxParams is ArgmaxParams (sample.metal).
type argmaxParams struct {
	Vocab, Chunk, Chunks, Rows uint32
}

// penaltyParams is PenaltyParams (sample.metal).
type penaltyParams struct {
	Count, From                     uint32
	Repetition, Presence, Frequency float32
}

// topKParams is TopKParams (sample.metal).
type topKParams struct {
	Vocab, Chunks, K         uint32
	Temperature, TopP, MinP  float32
	SeedLo, SeedHi, Position uint32
}

// pack lays out a parameter struct as the kernel reads it: little-endian,
// fields in order, no padding (every field is 4 bytes).
func pack(p any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, p)
	if err != nil {
		panic(fmt.Sprintf("kernel parameters %T: %v", p, err))
	}
	return b
}

// u32 converts a size or index for a parameter struct; shapes are checked
// when the weights load, so a value outside a uint is a bug here.
func u32(v int) uint32 {
	if v < 0 || v > math.MaxUint32 {
		panic(fmt.Sprintf("kernel parameter %d does not fit a uint", v))
	}
	return uint32(v)
}
