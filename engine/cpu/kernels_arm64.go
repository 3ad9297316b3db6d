package cpu

// The f32 kernels of kernels_arm64.s, in the neon level's table
// (q8_arm64.go): the dot products, axpy and the DeltaNet step, which
// attention (through dot4 and axpy) and the DeltaNet scan use.

//go:noescape
func dotNEON(a, b *float32, n int) float32

//go:noescape
func dot4NEON(w0, w1, w2, w3, x *float32, n int, out *[4]float32)

//go:noescape
func deltaStepNEON(s, k, q, v, o *float32, dk, dv int, decay, beta float32)

//go:noescape
func axpyNEON(y, x *float32, n int, a float32)
