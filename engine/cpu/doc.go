// Package cpu is the pure-Go backend: it implements model.Backend with f32
// activations on all cores, reading the checkpoint's packed weights (affine
// 4/8-bit, BF16, F16, F32) in place. It is the reference the fixtures verify
// and the backend Linux users run.
//
// Every block runs at once when the model calls it; Submit and Wait only
// hand back the result. The blocks (attention.go, deltanet.go, moe.go) are
// written as MODEL.md's steps, plain functions over flat slices, and say
// only how their work divides; pool.go runs the pieces on the calling
// goroutine and helpers that live as long as the process. The pieces:
// output rows for the matrix products (matmul.go), blocks of query rows per
// kv head for attention, value heads for the DeltaNet scan, token rows for
// the row-wise steps, experts for the MoE of a prefill chunk.
//
// Quantized weights are never dequantized as a whole: the matrix-vector
// product folds each group's scale and bias in registers
// (Σ(s·q+b)·x = s·Σq·x + b·Σx), and the matrix-matrix product dequantizes
// 48 weight rows at a time into a per-goroutine buffer that stays in L2
// and multiplies them with every token row of the chunk (packed sixteen
// tokens at a time for an outer-product kernel), so each weight is read
// once per chunk.
//
// On amd64 with AVX2 and FMA the hot loops are assembly (kernels_amd64.s):
// the 4-bit row product, row dequantization, the 6×16 prefill kernel, dot
// products, axpy and the DeltaNet scan step; attention's four-row score and
// value loops (attention_amd64.s). Everywhere else the Go loops
// run; tests check both against float64 references, and the fixture tests
// run the whole model on both.
package cpu
