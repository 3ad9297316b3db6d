// Package checkpoint opens a Qwen3.6-35B-A3B (qwen3_5_moe) model folder and
// binds its weights to model.Weights.
//
// Load reads config.json (the multimodal wrapper's text_config or a bare text
// config) and generation_config.json, validates every field the model needs,
// maps the safetensors weights (single file or sharded) and binds each tensor
// to its place in model.Weights for either on-disk layout described in
// engine/model/MODEL.md:
//
//   - hub: model.language_model.* names, bf16 (or f16/f32) matrices, fused
//     experts gate_up_proj [E,2I,H] and down_proj [E,H,I] or per-expert
//     tensors, norms stored zero-centred (w, applied as 1+w);
//   - MLX: language_model.model.* names, affine-quantized matrices (packed
//     U32 codes with BF16 scales and biases), stacked switch_mlp experts,
//     norms stored as 1+w.
//
// Matrices stay in the mapping: Matrix.Data, Scales and Biases are views, and
// only small vectors (norms, conv kernels, A_log, dt_bias) are converted to
// f32 on the heap. Every tensor is either consumed or known to be skippable
// (vision tower, multi-token-prediction head); anything else, and any missing
// tensor or wrong shape or dtype, is an error that names the tensor, the file
// and what the config expected.
package checkpoint
