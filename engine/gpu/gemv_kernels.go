package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// gemv records y[t] = W·x[t] for every row of x, reading W once per
// gemvTokens rows.
func (e *encoder) gemv(w *devMatrix, x, y *act) {
	m := w.m
	if x.width != m.In || y.width != m.Out || x.rows != y.rows {
		e.fail(fmt.Errorf("gemv %s: x [%d,%d] → y [%d,%d] does not fit [%d,%d]", m.Name, x.rows, x.width, y.rows, y.width, m.Out, m.In))
		return
	}
	perGroup := gemvRows * gemvSimdgroups
	// Each threadgroup row reads the weights once for gemvTokens token rows.
	tokenGroups := ceilDiv(x.rows, gemvTokens)
	e.dispatch("gemv_"+w.format+"_f32",
		device.Size3{X: ceilDiv(m.Out, perGroup), Y: tokenGroups}, device.Size3{X: simdWidth * gemvSimdgroups},
		int64(tokenGroups)*w.bytes+x.bytes(), y.bytes(),
		bytesArg(0, pack(&gemvParams{In: u32(m.In), Out: u32(m.Out), XStride: u32(x.stride), YStride: u32(y.stride),
			GroupSize: u32(m.GroupSize), Flags: u32(loadFlags(w.aligned, x.off, x.stride)), Rows: u32(x.rows)})),
		w.data.arg(1), w.scales.arg(2), w.biases.arg(3), x.arg(4), y.arg(5))
}
