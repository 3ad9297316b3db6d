// Package cpu is the pure-Go backend: it implements model.Backend with f32
// activations on all cores, reading the checkpoint's packed weights (affine
// 4/8-bit, BF16, F16, F32) in place. It is the reference the fixtures verify
// and the backend Linux users run.
//
// Every block runs at once when the model calls it; Submit and Wait only
// hand back the result. The blocks (attention.go, deltanet.go, moe.go) are
// written as engine/model/MODEL.md's steps, plain functions over flat slices, and say
// only how their work divides; pool.go runs the pieces on the calling
// goroutine and helpers that live as long as the process. The pieces:
// output rows for the matrix products (matmul.go), blocks of query rows per
// kv head for attention (flash-style: about 64 rows of a kv head's group
// share each 32 KiB tile of its cache, with an online softmax, so a long
// prompt reads the cache once per block, not once per token), value heads
// for the DeltaNet scan, token rows for the row-wise steps, experts for the
// MoE of a prefill chunk.
//
// Two precisions for the products with affine (MLX 4- and 8-bit) weights,
// chosen by Options.Precision:
//
//   - fast (the default, q8.go): each token row is quantized to int16 per
//     weight group and multiplied with the weights' codes in integer dot
//     products (vpdpwssd with AVX-512 VNNI, vpmaddwd with AVX2, smlal on
//     arm64, the Go loops elsewhere), scaled once per group; the affine bias goes through
//     the group's sum of rounded activations. Within 5e-3 of the reference
//     logits on the fixtures, like the GPU's half path. Every token row is
//     computed with the same arithmetic whatever the number of rows in the
//     call, so a row's result does not depend on the batch it is in.
//   - int8: the same with int8 activations (vpdpbusd, vpmaddubsw, sdot on
//     arm64), as llama.cpp's Q8 products: the least accurate, and slower
//     than fast; PrecisionInt8 says who it is for.
//   - exact: f32 activations against the dequantized weights, below: the
//     reference the fixture tests verify.
//
// Options.ISA forces a lower instruction set (avx2, generic) than the best
// the machine runs, so that each fallback is tested on one machine. The
// chosen level's kernels reach every helper (matrix products, attention,
// the DeltaNet scan) through the backend: there is no package-wide table.
//
// On the exact path quantized weights are never dequantized as a whole:
// the matrix-vector product folds each group's scale and bias in registers
// (Σ(s·q+b)·x = s·Σq·x + b·Σx), and the matrix-matrix product dequantizes
// 48 weight rows at a time into a per-goroutine buffer that stays in L2
// and multiplies them with every token row of the chunk (packed sixteen
// tokens at a time for an outer-product kernel), so each weight is read
// once per chunk.
//
// A pass serves one sequence or a batch of them (model.Segment): the rows
// of every sequence decoding a token go through the matrix-vector loop
// together, each weight block read once for all of them, and a prefill
// chunk through its own matrix product, so every sequence's rows are
// computed exactly as in a pass of its own (pass.go says why that matters).
//
// On amd64 with AVX2 and FMA the hot loops are assembly (kernels_amd64.s,
// q8_amd64.s, attention_amd64.s): the 4-bit row product, row
// dequantization, the 6×16 prefill kernel, dot products, axpy, the DeltaNet
// scan step, attention's four-row score and value loops and the integer
// kernels; on arm64 the integer kernels (q8_arm64.s: int16 activations on
// any arm64 CPU, int8 ones with the dot-product extension) and the f32
// kernels of attention and the DeltaNet scan (kernels_arm64.s,
// attention_arm64.s), which give amd64's bits. Everywhere else the Go loops
// run; tests check each level against float64 references, and the fixture
// tests run the whole model on each.
//
// The activations around the products (silu, the SwiGLUs, attention's
// softmax and gate, the router's softmax) take their exponentials from
// float64 math.Exp on the exact path and from expf (exp.go, within 2 ulp)
// on the fast ones, in AVX2 (exp_amd64.s) or NEON (exp_arm64.s) with the Go
// loop's bits; rowops_amd64.s holds the conv's row and the MoE's combine,
// which also give the Go loops' bits. A block's working buffers come from
// pools (buffers.go) and go back when the block returns.
//
// The vision tower (vision.go) runs on the same products and pool: an
// image's patches through the blocks at once, attention per frame and
// head; a pass's M-RoPE positions (Input.Positions) turn each rotary
// frequency by its axis (attention.go's newRotary), and the sequence keeps
// the next text position for the passes after.
package cpu
