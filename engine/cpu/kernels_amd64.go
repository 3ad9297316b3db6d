package cpu

// On amd64 with AVX2 and FMA (every x86 Mac and PC of the last decade) the
// hot loops run in assembly (see the package documentation); elsewhere the
// Go loops in matmul.go and deltanet.go run. A backend takes its table from
// its ISA option (kernels.go) and hands it to every helper.

//go:noescape
func q4RowAVX2(words *uint32, xd *float32, scales, biases *uint16, xsum *float32, groups int) float32

//go:noescape
func dot4AVX2(w0, w1, w2, w3, x *float32, n int, out *[4]float32)

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func q4DequantAVX2(words *uint32, scales, biases *uint16, groups int, dst *float32)

//go:noescape
func dot4x2AVX2(w0, w1, w2, w3, x0, x1 *float32, n int, out *[8]float32)

//go:noescape
func deltaStepAVX2(s, k, q, v, o *float32, dk, dv int, decay, beta float32)

//go:noescape
func axpyAVX2(y, x *float32, n int, a float32)

//go:noescape
func gemm6x16AVX2(w *float32, ldw int, xp *float32, k int, out *[96]float32)

//go:noescape
func dotBF16AVX2(w *uint16, x *float32, n int) float32
