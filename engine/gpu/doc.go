// Package gpu is the GPU backend: it implements the model's blocks
// (model.Backend, model.Pass) over a device.Device, so the same code drives
// Apple GPUs through engine/gpu/metal and the host emulator through
// engine/gpu/emu. Everything that decides how the model runs on a GPU lives
// here, once: which kernel each block uses (metalkernels/*.metal), grid and
// threadgroup sizes, buffer layouts, and what each dispatch must read and
// write.
//
// The pipeline rules it keeps, each counted per pass (Stats):
//
//   - one command buffer per pass: a decode step records embed → layers →
//     head → sample into one buffer, a prefill chunk likewise;
//   - the sampled token id stays in device memory (a ring of slots in the
//     sequence) and the next step's embedding gather reads it there, so a
//     step can be submitted before the host has read the previous token;
//   - MoE routing (router, top-k, expert ids) never leaves the device; the
//     expert kernels find their weights through offset tables;
//   - weights are wrapped in place (device.WrapBytes over the mapped
//     checkpoint, page-aligned, split to respect the maximum buffer length)
//     and dequantized inside the kernels; no dequantized matrix is written.
//
// Files: weights.go binds the checkpoint's tensors to device buffers;
// kernels.go encodes each kernel with its parameters and declared traffic;
// pass.go implements the blocks; sequence.go holds per-sequence state;
// stats.go the counters and the minimum traffic a decode step must move.
package gpu
