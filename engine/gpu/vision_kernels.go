package gpu

import (
	"fmt"
	"math"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// The vision tower's own kernels (vision.metal), as encoder steps.

// layerNormBias records y = LayerNorm(x)·w + b per row.
func (e *encoder) layerNormBias(x *act, w, b loc, eps float32, y *act) {
	e.dispatch("layernorm_bias_f32", device.Size3{X: x.rows}, device.Size3{X: simdWidth},
		x.bytes()+int64(8*x.width), y.bytes(),
		bytesArg(0, pack(&visionRowParams{Width: u32(x.width), XStride: u32(x.stride), YStride: u32(y.stride), Eps: eps})),
		x.arg(1), w.arg(2), b.arg(3), y.arg(4))
}

// Activations of biasAct.
const (
	actNone     = "add_bias_f32"
	actGELUTanh = "bias_gelu_tanh_f32"
	actGELUErf  = "bias_gelu_erf_f32"
)

// biasAct records x = act(x + b) per row, in place (act one of actNone,
// actGELUTanh, actGELUErf).
func (e *encoder) biasAct(kernel string, x *act, b loc) {
	e.dispatch(kernel, device.Size3{X: x.rows}, device.Size3{X: simdWidth},
		x.bytes()+int64(4*x.width), x.bytes(),
		bytesArg(0, pack(&visionRowParams{Width: u32(x.width), XStride: u32(x.stride), YStride: u32(x.stride)})),
		x.arg(1), b.arg(2))
}

// ropeShape is the layout ropeTable rotates: heads head vectors of headDim
// floats at the start of each of rows rows, stride floats apart.
type ropeShape struct {
	rows, heads, headDim, stride int
}

// ropeTable records the rotation of the head vectors s lays out in x, in
// place, by the cos and sin tables [rows, headDim/2].
func (e *encoder) ropeTable(x loc, s ropeShape, cos, sin loc) {
	rows, heads, headDim, stride := s.rows, s.heads, s.headDim, s.stride
	if headDim%2 != 0 {
		e.fail(fmt.Errorf("rope_table: head width %d is odd", headDim))
		return
	}
	n := int64(4 * rows * heads * headDim)
	e.dispatch("rope_table_f32", device.Size3{X: rows, Y: heads}, device.Size3{X: simdWidth},
		n+int64(4*rows*headDim), n,
		bytesArg(0, pack(&ropeTableParams{Heads: u32(heads), HeadDim: u32(headDim), Stride: u32(stride), HalfDim: u32(headDim / 2)})),
		x.arg(1), cos.arg(2), sin.arg(3))
}

// Tiling of vision_attention_f32 (vision.metal): query rows per
// threadgroup and SIMD groups per threadgroup.
const (
	visionQueries = 64
	visionSIMDs   = 16
)

// visionAttention records bidirectional attention within each segment of
// rows over qkv [rows, 3·heads·headDim] (q, k, v), into out [rows,
// heads·headDim]. Each threadgroup reads its segment's keys and values
// once for visionQueries queries: the plan reads them
// ceil(segment/visionQueries) times per segment and head.
func (e *encoder) visionAttention(qkv loc, rows, heads, headDim, segment int, out loc) {
	if headDim > 128 || headDim <= 0 || segment <= 0 || rows%segment != 0 {
		e.fail(fmt.Errorf("vision_attention: head width %d (at most 128), %d rows in segments of %d", headDim, rows, segment))
		return
	}
	W := heads * headDim
	blocks := (segment + visionQueries - 1) / visionQueries
	kv := int64(4*2*W) * int64(segment) * int64(blocks) * int64(rows/segment)
	e.dispatch("vision_attention_f32", device.Size3{X: blocks, Y: heads, Z: rows / segment}, device.Size3{X: simdWidth * visionSIMDs},
		int64(4*rows*W)+kv, int64(4*rows*W),
		bytesArg(0, pack(&visionAttnParams{Heads: u32(heads), HeadDim: u32(headDim), Width: u32(W), Stride: u32(3 * W),
			Segment: u32(segment), OutStride: u32(W), Scale: float32(1 / math.Sqrt(float64(headDim)))})),
		qkv.arg(1), out.arg(2))
}

// addRows records x += d per row (x and d of one shape).
func (e *encoder) addRows(x, d *act) {
	e.dispatch("add_rows_f32", device.Size3{X: x.rows}, device.Size3{X: simdWidth},
		x.bytes()+d.bytes(), x.bytes(),
		bytesArg(0, pack(&visionRowParams{Width: u32(x.width), XStride: u32(x.stride), YStride: u32(d.stride)})),
		x.arg(1), d.arg(2))
}
