// Package model describes Qwen3.6-35B-A3B (qwen3_5_moe) once: its config,
// its weights as bound from a checkpoint, and the forward pass as a sequence
// of blocks that every backend implements. MODEL.md, beside this file, is the math.
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
// StartBatch and Wait split RunBatch (Run is RunBatch of one segment) so
// that a GPU backend can have step N+1 submitted before the host waits on
// step N. Input.Logits returns full logits rows
// (tests, `suzuran logits`); Input.Hidden returns the residual stream after
// every layer so a test can name the first layer that drifts.
//
// # Images
//
// A checkpoint with a vision tower (Config.Vision, VisionWeights) turns an
// Image (the processor's patch rows and grid) into one embedding per
// <|image_pad|> token through a VisionEncoder backend. A pass then takes
// them in Input.Embeds at the pad rows and every row's M-RoPE position in
// Input.Positions (RopePositions, as transformers' get_rope_index); the
// sequence continues later passes at the last position plus one, the rope
// delta. Only an ImageInputs backend takes such inputs.
//
// # Batched passes
//
// A batched pass runs several sequences in one pass, so that each weight is
// read once for all of them — decode is bound by memory bandwidth, and four
// sequences cost little more than one. It is made of Segments, each a
// sequence with its own Input; its rows are the segments' rows concatenated:
//
//	batch, _ := model.StartBatch(backend, w, []model.Segment{
//		{Seq: a, In: model.Input{Sample: &samplingA}},           // a decode step
//		{Seq: b, In: model.Input{IDs: chunk}},                   // a prefill chunk
//		{Seq: c, In: model.Input{IDs: last, Sample: &samplingC}}, // a prompt's end
//	})
//	results, _ := batch.Wait() // results[i] is segment i's, as Run returns it
//
// Embed, the norms, MoE (experts grouped across all rows, so an expert chosen
// by two sequences is read once) and Head run on all rows; DeltaNet and
// Attention run each segment's rows on its own sequence's state; LastRow
// keeps the last row of each segment that wants logits or a sample, and
// Sample samples each with its own Sampling. Every backend's Begin takes
// segments, and Forward drives the pass it returns.
// Exactness is the contract: a sequence's logits and tokens are the same
// whatever else is in its batch (bit for bit on the CPU backend, whose
// kernels compute every row with the same arithmetic whatever the number of
// rows). A pass over one sequence is the batch of one segment.
//
// Sequence.Snapshot and Restore save and restore the whole state at a
// position: DeltaNet state cannot be rolled back, so the prefix cache keeps
// snapshots and resumes from the longest one that matches a new request.
package model
