// Package cpu is the pure-Go backend: it implements model.Backend with f32
// activations on all cores, reading the checkpoint's packed weights (affine
// 4/8-bit, BF16, F16, F32) in place. It is the reference the fixtures verify
// and the backend Linux users run.
//
// Every block runs at once when the model calls it; Submit and Wait only
// hand back the result. Work inside a block is split over a small pool of
// goroutines: output rows for the matrix products (matmul.go), heads for
// attention and the DeltaNet scan, experts for the MoE.
//
// Quantized weights are never dequantized as a whole: the matrix-vector
// product folds each group's scale and bias in registers
// (Σ(s·q+b)·x = s·Σq·x + b·Σx), and the matrix-matrix product dequantizes
// 48 weight rows at a time into a per-goroutine buffer that stays in L2
// and multiplies them with every token row of the chunk (packed sixteen
// tokens at a time for an outer-product kernel), so each weight is read
// once per chunk.
//
// A pass serves one sequence or a batch of them (model.Batcher): the rows
// of every sequence decoding a token go through the matrix-vector loop
// together, each weight block read once for all of them, and a prefill
// chunk through its own matrix product, so every sequence's rows are
// computed exactly as in a pass of its own (pass.go says why that matters).
//
// On amd64 with AVX2 and FMA the hot loops are assembly (kernels_amd64.s):
// the 4-bit row product, row dequantization, the 6×16 prefill kernel, dot
// products, axpy and the DeltaNet scan step. Everywhere else the Go loops
// run; tests check both against float64 references, and the fixture tests
// run the whole model on both.
package cpu
