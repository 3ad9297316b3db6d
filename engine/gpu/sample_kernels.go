package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
)

// argmax records the greedy choice over one row of vocab logits into out
// (one int32), through per-chunk partials in scratch (4·chunks bytes each).
func (e *encoder) argmax(logits loc, vocab int, partVal, partID, out loc) {
	e.argmaxSteps([]loc{logits}, vocab, partVal, partID, []loc{out})
}

// argmaxSteps records the greedy choice of each of len(rows) rows of vocab
// logits — rows[z] wherever it lies — into outs[z] (one int32 each, a
// sequence's ring slot), stepMaxSeqs rows per pair of dispatches, through
// per-chunk partials in scratch (4·chunks bytes per row each, for
// min(len(rows), stepMaxSeqs) rows). A row's choice is the one argmax gives
// it alone.
func (e *encoder) argmaxSteps(rows []loc, vocab int, partVal, partID loc, outs []loc) {
	if len(rows) != len(outs) || len(rows) == 0 {
		e.fail(fmt.Errorf("argmax: %d rows for %d outputs", len(rows), len(outs)))
		return
	}
	chunks := ceilDiv(vocab, argmaxChunk)
	for z0 := 0; z0 < len(rows); z0 += stepMaxSeqs {
		n := min(stepMaxSeqs, len(rows)-z0)
		p := pack(&argmaxParams{Vocab: u32(vocab), Chunk: argmaxChunk, Chunks: u32(chunks), Rows: u32(n)})
		e.dispatch("argmax_partial_seqs_f32", device.Size3{X: chunks, Y: n}, device.Size3{X: simdWidth},
			int64(4*n*vocab), int64(8*n*chunks),
			append([]device.Arg{bytesArg(0, p), partVal.arg(1), partID.arg(2)}, seqArgs(3, rows[z0:z0+n])...)...)
		e.dispatch("argmax_final_seqs_i32", device.Size3{X: n}, device.Size3{X: simdWidth},
			int64(8*n*chunks), int64(4*n),
			append([]device.Arg{bytesArg(0, p), partVal.arg(1), partID.arg(2)}, seqArgs(3, outs[z0:z0+n])...)...)
	}
}

// Device sampling (sample.metal).
const (
	topkThreads   = 256
	topkPerThread = 16
	topkChunk     = topkThreads * topkPerThread
	// topkMax is the largest top-k the device draws; larger (or off) is
	// sampled on the host.
	topkMax = 256
)

// penalties records the repetition, presence and frequency penalties of s
// over history[:count] into logits (a private copy of the row).
func (e *encoder) penalties(s *model.Sampling, history loc, count int, counts, flags, logits loc) {
	const threads = 256
	p := pack(&penaltyParams{Count: u32(count), From: u32(max(0, min(s.GeneratedFrom, count))),
		Repetition: s.RepetitionPenalty, Presence: s.PresencePenalty, Frequency: s.FrequencyPenalty})
	g := device.Size3{X: ceilDiv(count, threads)}
	th := device.Size3{X: threads}
	e.dispatch("sample_penalty_clear_u32", g, th, int64(4*count), int64(8*count),
		bytesArg(0, p), history.arg(1), counts.arg(2), flags.arg(3))
	e.dispatch("sample_penalty_count_u32", g, th, int64(4*count), int64(8*count),
		bytesArg(0, p), history.arg(1), counts.arg(2), flags.arg(3))
	e.dispatch("sample_penalty_apply_f32", g, th, int64(16*count), int64(8*count),
		bytesArg(0, p), history.arg(1), counts.arg(2), flags.arg(3), logits.arg(4))
}

// topKBufs are the top-k draw's operands: one row of logits, the
// per-chunk candidates' values and ids (4·chunks·TopK bytes each) and the
// chosen id (one int32).
type topKBufs struct {
	logits, candVal, candID, out loc
}

// topK records the top-k draw over one row of vocab logits into out, for
// the token at position.
func (e *encoder) topK(s *model.Sampling, b topKBufs, vocab, position int) {
	logits, candVal, candID, out := b.logits, b.candVal, b.candID, b.out
	chunks := ceilDiv(vocab, topkChunk)
	p := pack(&topKParams{Vocab: u32(vocab), Chunks: u32(chunks), K: u32(s.TopK), Temperature: s.Temperature,
		TopP: s.TopP, MinP: s.MinP, SeedLo: uint32(s.Seed), SeedHi: uint32(s.Seed >> 32), Position: u32(position)})
	e.dispatch("sample_topk_partial_f32", device.Size3{X: chunks}, device.Size3{X: topkThreads},
		int64(4*vocab), int64(8*chunks*s.TopK), bytesArg(0, p), logits.arg(1), candVal.arg(2), candID.arg(3))
	e.dispatch("sample_topk_final_f32", device.Size3{X: 1}, device.Size3{X: topkThreads},
		int64(8*chunks*s.TopK), int64(4*chunks*s.TopK+4), bytesArg(0, p), candVal.arg(1), candID.arg(2), out.arg(3))
}
