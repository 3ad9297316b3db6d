package model

// The block interface: what a backend implements so that Forward can run the
// model on it. See the package documentation for how the pieces fit.

// Activation is a backend's opaque handle to a [Rows, Width] block of f32
// activations (the CPU backend holds a []float32, a GPU backend a buffer
// region). The model code passes handles between blocks and never reads them.
// A handle stays valid until the pass that made it finishes.
type Activation interface {
	Rows() int
	Width() int
}

// Backend runs the model's blocks. One backend serves one Weights; the
// blocks receive pointers into that same Weights, so a backend may look up by
// pointer whatever it prepared for them at creation (device buffers, packed
// layouts).
type Backend interface {
	// Name says which backend this is ("cpu: 2 threads").
	Name() string
	// NewSequence makes the per-sequence state (KV cache, conv and recurrent
	// state) for up to maxTokens tokens.
	NewSequence(maxTokens int) (Sequence, error)
	// Begin starts one pass over the segments, at least one; a pass over
	// one sequence is the pass of one segment. The caller then calls the
	// pass's blocks in order (Forward does), Submit and Wait. Each sequence
	// appears at most once. A backend may refuse what it cannot batch
	// (LogitsAll or Hidden beside other segments) with an error.
	Begin(segs []Segment) (Pass, error)
	// Close releases the backend's resources.
	Close() error
}

// SequenceSizer is a Backend that says how much memory a sequence holding
// tokens tokens takes (KV cache and DeltaNet state), so that a scheduler can
// budget the sequences it runs at once.
type SequenceSizer interface {
	SequenceBytes(tokens int) int64
}

// Sequence is one sequence's state on a backend: the tokens it has consumed,
// the KV cache of the full-attention layers, and the conv and recurrent
// state of the DeltaNet layers. One goroutine uses a sequence at a time;
// a backend may serve several sequences.
type Sequence interface {
	// Pos is the number of tokens the sequence has consumed: the position of
	// the next token.
	Pos() int
	// MaxTokens is the capacity asked for at creation.
	MaxTokens() int
	// Snapshot copies the state at Pos for the prefix cache. DeltaNet state
	// cannot be rolled back, so snapshots are the only way to go back.
	Snapshot() (Snapshot, error)
	// Restore puts the sequence back into a snapshot's state; the snapshot
	// must come from a sequence of the same backend and stays usable.
	Restore(Snapshot) error
	// Close releases the sequence's memory.
	Close() error
}

// Snapshot is a saved sequence state.
type Snapshot interface {
	// Pos is the sequence position the snapshot was taken at.
	Pos() int
	// Tokens are the ids the sequence had consumed, so a prefix cache can
	// compare a new request with it.
	Tokens() []int
	// Bytes is the memory the snapshot holds, for bounding the cache.
	Bytes() int64
}

// LogitsRows says which rows of a pass's logits come back to the host.
type LogitsRows int

const (
	LogitsNone LogitsRows = iota // no logits (a prefill chunk before the last)
	LogitsLast                   // the last row only (generation)
	LogitsAll                    // every row (reference checks, `suzuran logits`)
)

// Input is what a pass consumes and what it returns.
type Input struct {
	// IDs are the pass's tokens, from the host. When empty, the pass consumes
	// one token: the one the sequence's previous pass sampled, which a GPU
	// backend keeps in device memory so that a decode step needs no
	// readback before the next one is submitted.
	IDs []int
	// Logits says which logits rows to return in Result.Logits.
	Logits LogitsRows
	// Sample, when set, makes the pass end by choosing the next token from
	// the last row's logits (Result.Token).
	Sample *Sampling
	// Hidden asks for the residual stream after the embedding and after each
	// layer in Result.Hidden (tests compare them with the reference; a GPU
	// backend may implement this with a slow debug readback).
	Hidden bool
	// Embeds, when set, holds one entry per row of IDs: a non-nil entry
	// (HiddenSize floats) is that row's input embedding in place of the
	// token's (an image embedding at an <|image_pad|> position).
	Embeds [][]float32
	// Positions, when set, are the rows' M-RoPE positions (temporal,
	// height, width), one per row (RopePositions computes them). Without
	// them a row's three positions are the sequence's next text position,
	// which starts at 0, counts up one per row, and after a pass with
	// Positions continues from that pass's largest position plus one (the
	// rope delta of transformers).
	Positions [][3]int
}

// HasImages reports whether the input carries embeddings or positions of
// its own, which only a backend with ImageInputs takes.
func (in Input) HasImages() bool { return in.Embeds != nil || in.Positions != nil }

// Tokens is the number of tokens (rows) the input feeds the pass.
func (in Input) Tokens() int {
	if len(in.IDs) == 0 {
		return 1
	}
	return len(in.IDs)
}

// Sampling holds the parameters of the sample block. Temperature ≤ 0 is
// greedy. A draw must be a function of (Seed, position of the sampled token)
// only, so that generation is reproducible and a GPU backend can use a
// counter-based generator without host state.
type Sampling struct {
	Temperature float32
	TopK        int     // 0: off
	TopP        float32 // 0 or 1: off
	MinP        float32 // 0: off
	// Penalties. Repetition counts every token of the sequence; presence and
	// frequency count the tokens from GeneratedFrom on (the generated ones).
	RepetitionPenalty float32 // 0 or 1: off
	PresencePenalty   float32
	FrequencyPenalty  float32
	GeneratedFrom     int
	Seed              uint64
}

// Greedy reports whether the parameters reduce to taking the arg-max.
func (s *Sampling) Greedy() bool {
	return s.Temperature <= 0 && (s.RepetitionPenalty == 0 || s.RepetitionPenalty == 1) &&
		s.PresencePenalty == 0 && s.FrequencyPenalty == 0
}

// Sampler chooses a token from one row of logits on the host; history is
// every token the sequence holds so far, prompt and generated, whose length
// is the position of the token being chosen. Host backends call it from
// their sample block; GPU backends run the same rule on the device.
type Sampler interface {
	Sample(logits []float32, s *Sampling, history []int) int
}

// Result is what a pass returns to the host.
type Result struct {
	// Logits is [rows, VocabSize] row-major, rows as Input.Logits asked
	// (T, 1 or 0).
	Logits []float32
	// Token is the sampled id, or -1 when the pass did not sample.
	Token int
	// Hidden, when asked, holds NumLayers+1 entries of [T, HiddenSize]: the
	// embedding output, then the residual stream after each layer.
	Hidden [][]float32
}

// Blocks are the model's blocks as a pass runs them, called in the order
// Forward calls them. A backend may run each block at once
// (CPU) or record it into a command buffer that Submit commits (GPU). Blocks
// do not return errors: a backend remembers the first failure and Wait
// returns it.
//
// In a batched pass (see Segment) the activations hold the rows of every
// segment, concatenated in segment order. Embed, the norms, MoE and Head work
// row by row on all of them (so each weight is read once for the whole
// batch: the decode matrix-vector products become small matrix products, and
// an expert routed to by rows of two sequences is read once); DeltaNet and
// Attention run each segment's rows on that segment's sequence state.
type Blocks interface {
	// Embed gathers the embedding rows of the pass's tokens.
	Embed(table *Matrix) Activation
	// RMSNorm returns x·rsqrt(mean(x²)+eps)·weight per row; weight is the
	// effective multiplier (1+w for the hub's zero-centred norms).
	RMSNorm(x Activation, weight []float32) Activation
	// AddRMSNorm adds delta into the residual stream in place
	// (residual += delta) and returns RMSNorm(residual, weight).
	AddRMSNorm(residual, delta Activation, weight []float32) Activation
	// DeltaNet is the Gated DeltaNet mixer of layer `layer`; it reads and
	// advances that layer's conv and recurrent state (of each segment's
	// sequence).
	DeltaNet(layer int, w *DeltaNet, x Activation) Activation
	// Attention is the gated attention mixer of layer `layer`; it appends
	// the pass's keys and values to that layer's cache and attends causally
	// (each segment within its own sequence).
	Attention(layer int, w *Attention, x Activation) Activation
	// MoE is the sparse mixture of experts with its shared expert.
	MoE(layer int, w *MoE, x Activation) Activation
	// LastRow is the pass's last row, [1, Width]. In a batched pass it is
	// the last row of each segment that wants an output (Segment.Output), in
	// segment order: [number of such segments, Width].
	LastRow(x Activation) Activation
	// Head is the language-model head x·lmHeadᵀ on already-normed rows.
	Head(x Activation, lmHead *Matrix) Activation
	// Hidden hands the residual stream after layer `index` (0: after the
	// embedding) to the result, when the input asked for it (in a batch,
	// each segment that asked gets its own rows).
	Hidden(index int, residual Activation)
	// Logits hands logits rows to the result (in a batch, each segment that
	// asked for logits gets its own rows).
	Logits(logits Activation)
	// Submit ends recording and starts the work; the sequences have then
	// advanced by the pass's tokens. A GPU backend commits the command
	// buffer here; a host backend has already done the work.
	Submit()
}

// Pass is one forward pass over one or more sequences (Segment); its rows
// are the segments' rows concatenated in segment order. A sequence's rows
// are computed exactly as in a pass of its own: its logits and tokens do
// not depend on what else is in the pass (bit for bit on the CPU backend).
type Pass interface {
	Blocks
	// Sample chooses the next token of each segment that asked for a
	// sample, from that segment's row of logits (the output of Head on
	// LastRow, or the last row when a lone segment asked for LogitsAll),
	// with that segment's own Sampling.
	Sample(logits Activation)
	// Wait blocks until the pass has finished and returns each segment's
	// result, in segment order. An error fails every segment: a backend
	// runs the pass as one unit, so a failed pass leaves each of its
	// sequences to be restored from a snapshot.
	Wait() ([]Result, error)
}

// Segment is one sequence's part of a pass: the sequence and what the pass
// feeds it and returns for it. Input.IDs empty feeds the token that
// sequence's previous pass sampled.
type Segment struct {
	Seq Sequence
	In  Input
}

// Output reports whether the segment wants a row of the head: logits or a
// sample. A prefill chunk before the last wants none, which spares it the
// head.
func (s *Segment) Output() bool { return s.In.Logits != LogitsNone || s.In.Sample != nil }

// ArgMax is the greedy choice: the index of the largest logit, the lowest
// such index on ties (as torch.argmax).
func ArgMax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}
