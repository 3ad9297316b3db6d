package cpu

import "golang.org/x/sys/cpu"

// The attention kernels in assembly where the machine has AVX2 and FMA, as
// for the other kernels (kernels_amd64.go).
func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		attentionSIMD = attentionKernels{scores4: attentionScores4AVX2, values4: attentionValues4AVX2}
	}
}

//go:noescape
func attentionScores4AVX2(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)

//go:noescape
func attentionValues4AVX2(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)
