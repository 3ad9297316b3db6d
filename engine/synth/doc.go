// Package synth writes synthetic Qwen3.6-35B-A3B checkpoints: model folders
// with the real architecture's tensor names, shapes and formats but random
// weights, for benchmarks at full size without a 20 GB download.
//
// Write takes a config.json (FullSizeConfig: the full-size mlx-community
// config, embedded from configs/), optionally keeps fewer layers, and writes
// the MLX affine layout (or the hub bf16 layout) tensor by tensor: each
// tensor is generated in small chunks straight into a streaming safetensors
// writer, so memory use stays flat whatever the model's size. The values are
// deterministic from the seed and of realistic scale (linear weights with
// standard deviation about 0.02, norms near 1, A_log and dt_bias in the
// ranges trained models show), so kernels see representative data. The
// folder is built under a temporary name and renamed into place only when
// complete.
package synth
