package cpu

// The attention kernels in assembly, in the AVX2 levels' f32 tables
// (q8_amd64.go).

//go:noescape
func attentionScores4AVX2(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)

//go:noescape
func attentionValues4AVX2(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)
