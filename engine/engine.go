package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
	"github.com/suzuran-app/suzuran/engine/sample"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// ErrBusy is returned by Submit when the queue is full. Clients should retry
// later (the HTTP API answers 429).
var ErrBusy = errors.New("the engine is busy: too many requests are waiting")

// ErrClosed is returned by Submit after Close, and ends requests that were
// still queued when the engine closed.
var ErrClosed = errors.New("the engine is closed")

// ErrPromptTooLong is wrapped by the error Submit returns when a prompt does
// not fit in the context (a client error: the HTTP API answers 400).
var ErrPromptTooLong = errors.New("prompt too long")

// Options configure an Engine.
type Options struct {
	// Backend runs Weights; the Engine takes ownership and closes it.
	Backend model.Backend
	Weights *model.Weights
	// Tokenizer decodes generated tokens into streamed text.
	Tokenizer *tokenizer.Tokenizer
	// Template renders conversations for SubmitChat; optional.
	Template *chat.Template
	// EOS are the ids that end generation; nil means the config's
	// EOSTokenIDs (config.json and generation_config.json together).
	EOS []int
	// ContextTokens is the most tokens one request may hold, prompt and
	// answer together; 0 means min(the model's max_position_embeddings,
	// 32768).
	ContextTokens int
	// QueueSize is how many requests may wait behind the running ones
	// before Submit answers ErrBusy; 0 means 8.
	QueueSize int
	// Parallel is how many requests decode together, one batched pass per
	// step (continuous batching: a request joins between steps, its prompt
	// read in chunks between the others' steps). 0 means 4 on a backend
	// whose passes run asynchronously (Pipelined: a GPU) and 2 otherwise.
	// An interactive request (PriorityInteractive) may run in one slot
	// beyond it, so that it starts at once.
	Parallel int
	// SequenceBytes is the memory budget of the running requests'
	// sequences (KV cache and DeltaNet state, for the prompt and the
	// answer's bound); a request waits until its sequence fits, and one
	// that could never fit is refused. 0 means room for Parallel+1
	// sequences of ContextTokens.
	SequenceBytes int64
	// ReaderTimeout cancels a request whose reader took no event for that
	// long while one was waiting (a client that vanished without closing
	// its context). 0 means 30 s.
	ReaderTimeout time.Duration
	// CacheBytes bounds the prefix cache's snapshots; 0 means 1 GiB, a
	// negative value turns the cache off.
	CacheBytes int64
	// PrefillChunk is the most prompt tokens one pass consumes; the running
	// requests take a decode step between chunks, and a cancelled request
	// stops before its pass's next layer. Further into a long prompt, where
	// attention's work per token grows with the position, chunks take fewer
	// tokens, so that none plans more than twice the work of a first full
	// chunk. 0 means 512.
	PrefillChunk int
	// Pipelined starts each decode step before the host reads the token
	// of the step before, which the backend then feeds from its own memory:
	// a GPU is never idle while the host reads, streams and encodes. The
	// cost is one step computed after the last token and thrown away, so
	// it is for backends whose passes run asynchronously (Load turns it on
	// when backends.Backend.Async says so).
	Pipelined bool
	// Vision gives the model's vision tower, bound on its first call
	// (checkpoint.Model.Vision, so that a model's tower is read only once
	// an image arrives); nil when the model reads no images.
	Vision func() (*model.VisionWeights, error)
	// Fallback, when set, is where the engine moves after a pass fails on
	// its backend (a GPU command buffer error mid-answer): the requests
	// running then end with an error wrapping ErrBackendFailed, the
	// backend is closed, and the waiting requests and every later one run
	// on the backend Fallback returns, unpipelined. It is called once, on
	// the engine goroutine; when it fails the engine keeps the backend it
	// had.
	Fallback func(cause error) (model.Backend, error)
	// OnFallback, when set, is told on a goroutine of its own once the
	// engine has moved to the Fallback backend.
	OnFallback func(cause error)
	// Store, when set with ModelIdentity, keeps snapshots on disk too:
	// those at a request's checkpoints (Request.Checkpoints and the
	// shared prefixes, chat.SharedCheckpoints) of StoreMinTokens or more,
	// written off the answering path, and read back when a prompt starts
	// with one that the memory cache does not hold (after a restart). The
	// backend must be a model.StateCodec. The caller owns the store.
	Store *prefixstore.Store
	// ModelIdentity names the weights in the store's keys
	// (prefixstore.ModelIdentity; Load sets it).
	ModelIdentity string
	// StoreMinTokens is the shortest checkpoint written to the store; 0
	// means DefaultStoreMinTokens.
	StoreMinTokens int
}

// DefaultStoreMinTokens is the shortest prefix kept on disk: 1,024 tokens
// take about 90 s to compute on a 2-core CPU at the real model's shapes and
// 0.7 s on a fast Mac, against a tenth of a second to read their 107 MB
// snapshot (BENCHMARKS.md); reading wins from a few tokens on, so the
// bound only spares the disk a file for every short prompt.
const DefaultStoreMinTokens = 1024

// StateFormatVersion is the version of what the engine keeps in a stored
// snapshot besides the backend's bytes (which tokens it holds, where it
// is taken); a change to either needs a new one.
const StateFormatVersion = 1

// ErrBackendFailed is wrapped by the error of the requests that were
// running when the engine moved to its Options.Fallback backend.
var ErrBackendFailed = errors.New("the backend failed")

// Request is one generation.
type Request struct {
	// Prompt is the rendered prompt's token ids; at least one.
	Prompt []int
	// Images are the prompt's images in prompt order: the k-th fills the
	// k-th run of <|image_pad|> tokens, which must hold as many tokens as
	// the image has merged patches. The prefix cache knows an image by its
	// Hash, so a follow-up question about it encodes nothing again.
	Images []model.Image
	// Sampling is the sampling rule; the engine sets GeneratedFrom. Callers
	// choose the seed (a random one when the user gave none).
	Sampling model.Sampling
	// MaxTokens bounds the generated tokens, the EOS token included; 0
	// means as many as the context holds.
	MaxTokens int
	// Stop strings end generation when the text produces one; the stop
	// string itself and anything after it are not emitted.
	Stop []string
	// Checkpoints are prompt positions (token counts) where the engine
	// snapshots the state for later requests, typically the start of the
	// last assistant turn (chat.PromptCheckpoints: where the next turn of
	// the conversation diverges). The engine adds the ends of the system
	// turn and of each documents block (chat.SharedCheckpoints), where
	// another conversation may start the same way. The engine also snapshots at the end of
	// every prompt, at len(Prompt)-1 (one token is left for the pass that
	// samples the first new token), to serve the same prompt again.
	Checkpoints []int
	// SnapshotAnswer asks for a snapshot after the answer too, for a next
	// prompt that repeats this one and the whole answer: a conversation
	// whose next turn carries tool results (SubmitChat sets it when tools
	// are offered). A plain next user turn diverges at the checkpoint
	// instead, as the template drops the answer's thinking block.
	SnapshotAnswer bool
	// Progress, when set, is told how far the prompt has been read: once
	// after the prefix cache lookup and after every prefill chunk, so that
	// a long prompt shows progress instead of minutes of nothing. It runs
	// on the stream's goroutine (Stream), before the events that follow;
	// while it runs, newer progress replaces older, so it is told the
	// latest.
	Progress func(PrefillProgress)
	// Constraint, when set, restricts the generated tokens to a grammar
	// (see Constraint); the request then samples on the host. A constraint
	// serves one request: it keeps the state of the text so far.
	Constraint Constraint
	// Logprobs asks for each generated token's log-probability under the
	// model (the log-softmax of its raw logits, before sampling rules and
	// constraints), with the TopLogprobs most likely tokens at that step
	// (at most MaxTopLogprobs). Such a request samples on the host, as a
	// constrained one does: the same tokens, without pipelining.
	Logprobs    bool
	TopLogprobs int
	// Priority orders the waiting requests: the chat window's
	// (PriorityInteractive) start before queued API requests, within one
	// step.
	Priority Priority
	// Owner names the conversation the request belongs to ("" none): the
	// prefix store records who used each snapshot, so that deleting a
	// conversation deletes the snapshots only it used
	// (prefixstore.Store.DeleteOwner).
	Owner string
	// QueuePosition, when set, is told the request's place while it waits
	// (1: next to start) each time it changes, and 0 when it starts. It
	// runs on the stream's goroutine, as Progress does, and is told the
	// latest place.
	QueuePosition func(position int)
}

// Priority is a request's place in the queue: higher first.
type Priority int

const (
	PriorityAPI         Priority = 0 // API clients, agents: the default
	PriorityInteractive Priority = 1 // the user waiting in the chat window
)

// ErrTooLarge is wrapped by the error Submit returns when a request's
// sequence could never fit in Options.SequenceBytes (a client error).
var ErrTooLarge = errors.New("request too large for the sequence memory")

// MaxTopLogprobs bounds Request.TopLogprobs.
const MaxTopLogprobs = 20

// TokenLogprob is a generated token's log-probability and the most likely
// tokens at its step, most likely first.
type TokenLogprob struct {
	Logprob float64
	Top     []TopLogprob
}

// TopLogprob is one of the most likely tokens at a step.
type TopLogprob struct {
	Token   int
	Logprob float64
}

// PrefillProgress is how far a request's prompt has been read.
type PrefillProgress struct {
	Cached int // prompt tokens restored from the prefix cache
	Done   int // prompt tokens in the sequence so far, Cached included
	Total  int // prompt tokens
}

// Event is one step of a request's stream: one or more generated tokens,
// or the final event (Token −1, Stats set). A reader that keeps up gets an
// event per token; while a reader is behind, the tokens waiting for it
// merge into one event (Stream), so it gets fewer events with the same
// tokens, text and log-probabilities, in order.
type Event struct {
	// Token is the event's last generated id, or −1 on the final event.
	Token int
	// IDs are the event's generated ids in order (Token is the last);
	// empty on the final event.
	IDs []int
	// Text is the text that became final with this event: it may be empty
	// (a character still incomplete, or text held back because it might be
	// the start of a stop string) and is empty for EOS tokens.
	Text string
	// Logprobs are set on token events of a request that asked for them,
	// one per id of IDs.
	Logprobs []*TokenLogprob
	// Stats is set on the final event.
	Stats *Stats
	// Err is set on the final event when generation failed.
	Err error
}

// Finish reasons.
const (
	FinishStop      = "stop"      // an EOS token or a stop string
	FinishLength    = "length"    // MaxTokens or the context is full
	FinishCancelled = "cancelled" // the request's context ended
	FinishError     = "error"     // a backend failure; Event.Err says which
)

// Stats describe a finished request.
type Stats struct {
	PromptTokens int // tokens in the prompt
	// CachedTokens were restored from the prefix cache;
	// PrefilledTokens = PromptTokens − CachedTokens were computed.
	CachedTokens    int
	PrefilledTokens int
	// GeneratedTokens counts sampled tokens, the EOS token included.
	GeneratedTokens int
	// QueueWait is the time between Submit and the start of work.
	QueueWait time.Duration
	// PrefillDuration runs from the start of work to the first sampled
	// token (cache restore, prefill and the first sample); DecodeDuration
	// from the first token to the last.
	PrefillDuration time.Duration
	DecodeDuration  time.Duration
	FinishReason    string
	// StopSequence is the stop string (Request.Stop) that ended the
	// output, "" when none did.
	StopSequence string
	// ImagesEncoded counts the images the vision tower ran on (those the
	// prefix cache did not cover).
	ImagesEncoded int
}

// PrefillTokensPerSecond is the prefill speed over the tokens computed.
func (s *Stats) PrefillTokensPerSecond() float64 {
	if s.PrefillDuration <= 0 {
		return 0
	}
	return float64(s.PrefilledTokens) / s.PrefillDuration.Seconds()
}

// DecodeTokensPerSecond is the decode speed: the tokens after the first over
// the time they took.
func (s *Stats) DecodeTokensPerSecond() float64 {
	if s.DecodeDuration <= 0 || s.GeneratedTokens < 2 {
		return 0
	}
	return float64(s.GeneratedTokens-1) / s.DecodeDuration.Seconds()
}

// Engine serves requests on one model from one goroutine.
type Engine struct {
	opts    Options
	backend model.Backend
	weights *model.Weights
	tok     *tokenizer.Tokenizer
	eos     map[int]bool
	vocab   int
	// dir is the model folder when the engine was made by Load; onClose
	// runs after the engine goroutine ends (unmapping the weights).
	dir     string
	onClose []func() error
	// tmpl is the chat template (Load reads it from the model folder);
	// tmplErr says why there is none.
	tmpl    *chat.Template
	tmplErr error

	// ctx ends when the engine closes; every request's context derives
	// from it, so Close cancels them all at once.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// encodes counts the goroutines running the vision tower
	// (encodeImages), which end before the backend closes.
	encodes sync.WaitGroup
	mu      sync.Mutex // guards closed, pending, waiting
	// pending are the submitted requests not yet started, in the order they
	// start: priority, then arrival. waiting counts those still wanted (a
	// request whose context ends gives its place back at once, before the
	// engine goroutine drops it), at most QueueSize.
	pending []*job
	waiting int
	closed  bool
	// wake tells the engine goroutine that pending changed (capacity 1).
	wake chan struct{}
	// done closes when the engine goroutine exits.
	done chan struct{}

	// Owned by the engine goroutine.
	active []*generation    // requests holding a sequence
	free   []model.Sequence // sequences no request holds
	empty  model.Snapshot   // a sequence at position 0
	cache  *prefixCache
	// embeds keeps the latest images' embeddings by hash (images.go).
	embeds embedCache
	used   int64 // SequenceBytes reserved by active
	// peakBatch is the most sequences one decode step has served (read by
	// tests once the engine has closed).
	peakBatch int
	// broken is the first pass failure on the backend since the last
	// move to Options.Fallback (nil: none).
	broken error
	// cost is the model's prefill work, which sizes the prompt chunks.
	cost chunkCost
}

// job is a submitted request with its stream.
type job struct {
	ctx    context.Context // the stream's: ends with the caller's, the engine's, or the reader's timeout
	req    Request
	stream *Stream
	// stopWatch ends the watch on the caller's context; left (guarded by
	// Engine.mu) is set once the queue place was given back.
	stopWatch func() bool
	left      bool
	submitted time.Time
	bytes     int64 // the sequence memory it reserves while it runs
	position  int   // the queue position last reported
}

// New starts an engine. Once New succeeds the Engine owns opts.Backend and
// closes it in Close; when New fails the caller still owns it.
func New(opts Options) (*Engine, error) {
	if opts.Backend == nil || opts.Weights == nil || opts.Tokenizer == nil {
		return nil, errors.New("engine: Backend, Weights and Tokenizer are all required")
	}
	cfg := &opts.Weights.Config
	if opts.ContextTokens <= 0 {
		opts.ContextTokens = 32768
		if cfg.MaxPositions > 0 {
			opts.ContextTokens = min(opts.ContextTokens, cfg.MaxPositions)
		}
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 8
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 1 << 30
	}
	if opts.PrefillChunk <= 0 {
		opts.PrefillChunk = 512
	}
	if opts.StoreMinTokens <= 0 {
		opts.StoreMinTokens = DefaultStoreMinTokens
	}
	eosIDs := opts.EOS
	if eosIDs == nil {
		eosIDs = cfg.EOSTokenIDs
	}
	if len(eosIDs) == 0 {
		return nil, errors.New("engine: the model has no EOS token ids (eos_token_id in config.json or generation_config.json)")
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 2
		if opts.Pipelined {
			opts.Parallel = 4
		}
	}
	if opts.ReaderTimeout <= 0 {
		opts.ReaderTimeout = 30 * time.Second
	}
	e := &Engine{
		opts:    opts,
		backend: opts.Backend,
		weights: opts.Weights,
		tok:     opts.Tokenizer,
		eos:     make(map[int]bool),
		vocab:   opts.Weights.Embed.Out,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		cache:   newPrefixCache(max(opts.CacheBytes, 0)),
		tmpl:    opts.Template,
		cost:    prefillCost(cfg),
	}
	if e.opts.SequenceBytes <= 0 {
		e.opts.SequenceBytes = int64(opts.Parallel+1) * e.sequenceBytes(opts.ContextTokens)
	}
	for _, id := range eosIDs {
		e.eos[id] = true
	}
	seq, err := opts.Backend.NewSequence(opts.ContextTokens)
	if err != nil {
		return nil, fmt.Errorf("engine: making a sequence of %d tokens: %w", opts.ContextTokens, err)
	}
	empty, err := seq.Snapshot()
	if err != nil {
		seq.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.free, e.empty = []model.Sequence{seq}, empty
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
	go e.run()
	return e, nil
}

// sequenceBytes is the memory of a sequence holding tokens tokens: the
// backend's own figure, or the config's (bf16 KV, f32 DeltaNet state).
func (e *Engine) sequenceBytes(tokens int) int64 {
	if s, ok := e.currentBackend().(model.SequenceSizer); ok {
		return s.SequenceBytes(tokens)
	}
	c := &e.weights.Config
	var perToken, state int64
	for i := range e.weights.Layers {
		if e.weights.Layers[i].DeltaNet != nil {
			channels := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
			state += 4 * int64((c.ConvKernel-1)*channels+c.LinearValueHeads*c.LinearKeyHeadDim*c.LinearValueHeadDim)
		} else {
			perToken += 2 * 2 * int64(c.NumKVHeads*c.HeadDim)
		}
	}
	return state + perToken*int64(tokens)
}

// requestTokens is the most tokens a request's sequence will hold.
func (e *Engine) requestTokens(req *Request) int {
	n := e.opts.ContextTokens
	if req.MaxTokens > 0 {
		n = min(n, len(req.Prompt)+req.MaxTokens)
	}
	return n
}

// Tokenizer returns the engine's tokenizer (safe to use from any goroutine:
// it is read-only).
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Config returns the model's config.
func (e *Engine) Config() *model.Config { return &e.weights.Config }

// EOS returns the ids that end generation, in ascending order (a
// Constraint allows them where its text may end).
func (e *Engine) EOS() []int {
	ids := make([]int, 0, len(e.eos))
	for id := range e.eos {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// VocabSize is the width of a logits row: the ids the model can generate.
func (e *Engine) VocabSize() int { return e.vocab }

// ContextTokens is the most tokens a request may hold.
func (e *Engine) ContextTokens() int { return e.opts.ContextTokens }

// BackendName names the backend ("cpu: 2 threads"); after a move to
// Options.Fallback, the fallback's.
func (e *Engine) BackendName() string { return e.currentBackend().Name() }

// currentBackend is e.backend for any goroutine: the engine goroutine
// changes it under e.mu when it moves to Options.Fallback.
func (e *Engine) currentBackend() model.Backend {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.backend
}

// Submit validates req and queues it. Validation errors (an empty or too
// long prompt, a token outside the vocabulary, bad sampling parameters) are
// returned at once, as are ErrBusy and ErrClosed.
func (e *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	if err := e.validate(&req); err != nil {
		return nil, err
	}
	bytes := e.sequenceBytes(e.requestTokens(&req))
	if bytes > e.opts.SequenceBytes {
		return nil, fmt.Errorf("%w: its %d tokens of prompt and answer need %d MiB of sequence memory, the engine has %d MiB: ask for fewer max_tokens or a shorter prompt",
			ErrTooLarge, e.requestTokens(&req), bytes>>20, e.opts.SequenceBytes>>20)
	}
	// The engine reads the request later, on its own goroutine: copy what
	// the caller might reuse.
	req.Prompt = slices.Clone(req.Prompt)
	req.Stop = slices.Clone(req.Stop)
	req.Checkpoints = slices.Clone(req.Checkpoints)
	req.Checkpoints = append(req.Checkpoints, chat.SharedCheckpoints(e.tok, req.Prompt)...)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if e.waiting >= e.opts.QueueSize {
		return nil, ErrBusy
	}
	jctx, cancel := context.WithCancelCause(e.ctx)
	j := &job{ctx: jctx, req: req, submitted: time.Now(), bytes: bytes}
	j.stream = newStream(jctx, ctx, cancel, e.opts.ReaderTimeout, req.QueuePosition, req.Progress)
	// The watch is set before the job is visible to the engine goroutine;
	// it takes e.mu, so it cannot give the place back before it is taken.
	j.stopWatch = context.AfterFunc(ctx, func() {
		cancel(context.Cause(ctx))
		e.leave(j)
	})
	at := len(e.pending)
	for at > 0 && e.pending[at-1].req.Priority < req.Priority {
		at--
	}
	e.pending = slices.Insert(e.pending, at, j)
	e.waiting++
	e.signal()
	return j.stream, nil
}

// signal wakes the engine goroutine.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// leave gives j's queue place back when its context ends while it waits;
// the engine goroutine then ends it.
func (e *Engine) leave(j *job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !j.left {
		j.left = true
		e.waiting--
	}
	e.signal()
}

func (e *Engine) validate(req *Request) error {
	n := len(req.Prompt)
	if n == 0 {
		return errors.New("the prompt is empty")
	}
	if n >= e.opts.ContextTokens {
		return fmt.Errorf("%w: %d tokens, the context holds %d including the answer", ErrPromptTooLong, n, e.opts.ContextTokens)
	}
	for i, id := range req.Prompt {
		if id < 0 || id >= e.vocab {
			return fmt.Errorf("prompt token %d (at %d) is outside the vocabulary [0, %d)", id, i, e.vocab)
		}
	}
	if req.MaxTokens < 0 {
		return &OptionError{Option: "max_tokens", Value: req.MaxTokens, Rule: "must be positive (or 0 for as many as fit)"}
	}
	if err := e.validateImages(req); err != nil {
		return err
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs {
		return &OptionError{Option: "top_logprobs", Value: req.TopLogprobs, Rule: fmt.Sprintf("must be between 0 and %d", MaxTopLogprobs)}
	}
	return sample.Validate(&req.Sampling)
}

// Close stops accepting requests and cancels every request, queued or
// running, through the engine's context; it returns once the engine
// goroutine has stopped (soon after, inside the pass it was running: see
// the scheduler) and
// the backend is released. Queued requests end with ErrClosed, running
// ones as cancelled.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel(ErrClosed)
	e.signal()
	<-e.done
	var first error
	for _, f := range e.onClose {
		if err := f(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Dir is the model folder the engine was loaded from ("" when made by New).
func (e *Engine) Dir() string { return e.dir }
