// Package model describes Qwen3.6-35B-A3B (qwen3_5_moe) once: its config,
// its weights as bound from a checkpoint, and the forward pass as a sequence
// of blocks that every backend implements. See shared MODEL.md for the math.
package model
