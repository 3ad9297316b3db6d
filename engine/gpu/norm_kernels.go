package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

func packNorm(width, xStride, yStride int, eps float32) []byte {
	return pack(&normParams{Width: u32(width), XStride: u32(xStride), YStride: u32(yStride), Eps: eps})
}

// rmsnorm records y = RMSNorm(x)·w per row.
func (e *encoder) rmsnorm(x *act, w loc, eps float32, y *act) {
	e.dispatch("rmsnorm_f32", device.Size3{X: x.rows}, device.Size3{X: simdWidth},
		x.bytes()+int64(4*x.width), y.bytes(),
		bytesArg(0, packNorm(x.width, x.stride, y.stride, eps)), x.arg(1), w.arg(2), y.arg(3))
}

// addRMSNorm records residual += delta; y = RMSNorm(residual)·w.
func (e *encoder) addRMSNorm(residual, delta *act, w loc, eps float32, y *act) {
	if residual.stride != delta.stride {
		e.fail(fmt.Errorf("add_rmsnorm: residual and delta strides differ (%d, %d)", residual.stride, delta.stride))
		return
	}
	e.dispatch("add_rmsnorm_f32", device.Size3{X: residual.rows}, device.Size3{X: simdWidth},
		residual.bytes()+delta.bytes()+int64(4*residual.width), residual.bytes()+y.bytes(),
		bytesArg(0, packNorm(residual.width, residual.stride, y.stride, eps)),
		residual.arg(1), delta.arg(2), w.arg(3), y.arg(4))
}

// gatedNormBufs are the gated norm's operands: the rows o and the gate z
// (contiguous), the norm weight w and the output y.
type gatedNormBufs struct {
	o, z, w, y loc
}

// gatedNorm records y = RMSNorm(o)·w·silu(z) over rows of width.
func (e *encoder) gatedNorm(b gatedNormBufs, rows, width int, eps float32) {
	o, z, w, y := b.o, b.z, b.w, b.y
	n := int64(4 * rows * width)
	e.dispatch("gated_rmsnorm_silu_f32", device.Size3{X: rows}, device.Size3{X: simdWidth},
		2*n+int64(4*width), n,
		bytesArg(0, packNorm(width, width, width, eps)), o.arg(1), z.arg(2), w.arg(3), y.arg(4))
}
