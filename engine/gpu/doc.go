// Package gpu is the GPU backend: it implements the model's blocks
// (model.Backend, model.Pass) over a device.Device, so the same code drives
// Apple GPUs through engine/gpu/metal and the host emulator through
// engine/gpu/emu. Everything that decides how the model runs on a GPU lives
// here, once: which kernel each block uses (metalkernels/*.metal), grid and
// threadgroup sizes, buffer layouts, and what each dispatch must read and
// write.
//
// # Pipeline rules
//
// Each is counted per pass (Stats, printed by `suzuran logits --stats`):
//
//   - One command buffer per decode step: a decode step records embed →
//     layers → head → sample into one buffer, and so does a batched step of
//     several sequences' decode steps (model.Segment). Any other pass (a
//     prefill chunk, alone or batched with decode steps) is held on the host
//     while it is recorded and, when submitted, split into command buffers
//     of at most about Options.CommandBufferBytes of planned work each
//     (DefaultCommandBufferBytes, 4 GiB: macOS stops a command buffer that
//     holds the GPU for seconds), cut at barriers and committed one after
//     another with no host wait or readback between them.
//   - A cancelled pass: the engine's stop function (model.StartBatchUntil)
//     is asked before each layer's blocks while the pass is recorded, which
//     takes host time only; once it says yes the command buffer is
//     discarded and nothing of the pass runs. A committed pass runs to its
//     end, so a request cancelled while its prefill chunk runs on the
//     device ends when that chunk ends: at most one chunk
//     (engine.Options.PrefillChunk, 512 tokens by default) of device time
//     after the cancel. Committing a chunk in several command buffers as it
//     is recorded would shorten that, at the cost of Abandon's promise that
//     an abandoned pass leaves its sequences untouched; it is not done.
//   - A batched step reads each weight once for all its decode rows: the
//     GEMV takes up to 8 token rows per weight load, the expert kernels
//     group the rows by expert (an expert chosen by two sequences is read
//     once; Counters.SharedExpertBytes counts it), and the attention and
//     DeltaNet step kernels serve up to 8 sequences per dispatch, each on
//     its own cache and state; so do the embedding gather and the greedy
//     argmax, each sequence's token, history, logits and ring slot bound as
//     its own argument, so a step of four sequences records the dispatches
//     of a step of one. Each row's sums are formed as for that row
//     alone, so a sequence's logits are the same bits whatever else is in
//     its batch.
//   - The sampled token id stays in device memory (a ring of slots in the
//     sequence) and the next step's embedding gather reads it there, so step
//     N+1 can be submitted before the host has read token N. The gather also
//     appends every consumed id to a device-side history, which the
//     sampler's penalties read.
//   - Sampling runs on the device — greedy, or temperature / top-k (up to
//     256) / top-p / min-p with engine/sample's counter-based draw and its
//     repetition, presence and frequency penalties. Top-k off walks the
//     whole vocabulary in id order; that case is sampled on the host after
//     the pass (counted as host samples), and the next step waits for it.
//   - MoE routing never leaves the device: decode reads each chosen
//     expert's rows by id; a prefill chunk histograms the expert ids, scans
//     them into row offsets and a block map sized to a bound known when the
//     pass is recorded, scatters the rows into expert order and runs grouped
//     GEMMs over the map. The shared expert rides along as one more expert.
//   - Weights are wrapped in place (device.WrapBytes over the mapped
//     checkpoint, page-aligned, one file per buffer, split to respect the
//     maximum buffer length) and dequantized inside the kernels, in
//     registers (GEMV) or in threadgroup tiles (GEMM); no dequantized matrix
//     is written anywhere. The one copy: a stack of per-expert tensors that
//     a sharded checkpoint splits between two files is gathered into a
//     buffer of its own, since the expert kernels read a stack from one
//     buffer and no buffer can wrap two files.
//
// # Numerics
//
// Activations, accumulators, norms, the DeltaNet state and softmax are f32.
// The KV cache is bf16 by default (half the memory) or f32
// (Options.KVCacheF32). The prefill GEMMs stage their tiles as half by
// default (Options.GEMMOperands): weights one half each, activations a
// hi + lo pair of halves (22 bits), f32 accumulators; the router's
// projection stays f32 because its logits choose experts. With f32 operands
// and the f32 cache the whole path is f32: on the reference fixtures the
// logits then land within about 1e-5 of transformers' float64 run; half
// operands move them by up to about 1e-3 on the 4-bit layouts (the weights'
// rounding to half) and the bf16 cache by about 5e-4.
//
// # Files
//
// weights.go binds the checkpoint's tensors to device buffers; params.go
// holds the kernels' parameter structs (checked against the MSL ones by a
// test); kernels.go holds the encoder that records dispatches, and each
// *_kernels.go (attention, conv, deltanet, embed, gemm, gemv, moe, norm,
// sample, vision) encodes the kernels of the .metal file of its name with
// their parameters and declared traffic; pass.go begins, submits and waits
// on a pass, and deltanet.go, attention.go, moe.go and head.go implement the
// blocks, choosing between decode kernels (GEMV, split attention, grouped
// expert decode) and prefill kernels (GEMM, tiled attention, grouped
// experts) by the number of rows of each segment of a pass;
// sequence.go holds per-sequence
// state and snapshots; stats.go the counters and the minimum traffic a
// decode step must move.
package gpu
