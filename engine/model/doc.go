// Package model describes Qwen3.6-35B-A3B (qwen3_5_moe) once: its config,
// its weights as bound from a checkpoint, and the forward pass as a sequence
// of blocks that every backend implements. See shared MODEL.md for the math.
//
// # Blocks and passes
//
// A Backend (engine/cpu, engine/gpu) implements the blocks: Embed, RMSNorm,
// AddRMSNorm (residual add fused with the next norm), DeltaNet, Attention,
// MoE, LastRow, Head and Sample, plus two read hooks, Hidden and Logits.
// Forward is the model: it calls those blocks in order and knows nothing
// of the backend. Activations are opaque handles; only the backend sees
// their contents.
//
// Work happens in passes over a Sequence, which holds one sequence's state
// (KV cache, DeltaNet conv and recurrent state). A pass consumes either
// host token ids (prefill, the first decode step) or, with empty
// Input.IDs, the token its sequence's previous pass sampled — on a GPU that
// id never leaves device memory, so a whole decode step (embed → layers →
// head → sample) is one command buffer and the host reads the id after.
//
//	seq, _ := backend.NewSequence(4096)
//	res, _ := model.Prefill(backend, w, seq, promptIDs, 512,
//		model.Input{Sample: &sampling})            // res.Token: first new token
//	for {
//		res, _ = model.Run(backend, w, seq, model.Input{Sample: &sampling})
//		...                                       // res.Token: the next one
//	}
//
// Start and Wait split Run so that a GPU backend can have step N+1 submitted
// before the host waits on step N. Input.Logits returns full logits rows
// (tests, `suzuran logits`); Input.Hidden returns the residual stream after
// every layer so a test can name the first layer that drifts.
//
// Sequence.Snapshot and Restore save and restore the whole state at a
// position: DeltaNet state cannot be rolled back, so the prefix cache keeps
// snapshots and resumes from the longest one that matches a new request.
package model
