package cpu

// The attention kernels in assembly, in the AVX2 levels' f32 tables
// (q8_amd64.go).

//go:noescape
func attentionScores4AVX2(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)

//go:noescape
func attentionValues4AVX2(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)

// fmaPeakAVX2 runs iters rounds of twelve independent 8-lane fused
// multiply-adds (192 floating-point operations a round).
//
//go:noescape
func fmaPeakAVX2(iters int)

// fmaPeak is the machine's peak loop for attention's products, nil where
// there is none; a round is fmaPeakFlops operations.
var fmaPeak = fmaPeakAVX2

const fmaPeakFlops = 192
