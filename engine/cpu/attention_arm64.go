package cpu

// The attention kernels in assembly, in the neon level's f32 table
// (q8_arm64.go).

//go:noescape
func attentionScores4NEON(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)

//go:noescape
func attentionValues4NEON(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)

// fmaPeakNEON runs iters rounds of twelve independent 4-lane fused
// multiply-adds (96 floating-point operations a round).
//
//go:noescape
func fmaPeakNEON(iters int)

// fmaPeak is the machine's peak loop for attention's products, nil where
// there is none; a round is fmaPeakFlops operations.
var fmaPeak = fmaPeakNEON

const fmaPeakFlops = 96
