// Package engine serves generation requests on one loaded model.
//
// An Engine owns the model, its backend and its sequences, and runs them on
// a single goroutine: no other goroutine touches the backend, so backends
// need no locks and a GPU sees one stream of work. Callers Submit a Request
// (a context, the prompt's token ids, sampling parameters, stop rules) and
// receive a channel of Events: one per generated token with its text delta
// (several tokens merged into one event while the reader is behind),
// then a final event with the statistics and why generation ended. Requests
// wait in a bounded queue, the chat window's first (Request.Priority); past
// its bound Submit fails at once with ErrBusy, which the HTTP API turns into
// 429 and the window into "busy".
//
// Up to Options.Parallel requests run at once (scheduler.go): each step is
// one batched pass (model.StartBatch) with a segment per request past its
// prompt, so the weights are read once for all of them; a new request joins
// between steps, its prompt read in chunks between them. Each request has
// its own sequence (KV cache and DeltaNet state, from a memory budget),
// sampling rule, seed, stop strings, constraint and context, and its tokens
// are those it would get alone: a backend computes each sequence's rows as
// in a pass of its own.
//
// One request runs as: prefix-cache lookup → restore → prefill of the rest
// (in chunks, snapshotting on the way) → decode steps. Each decode step
// samples inside the pass (model.Input.Sample, with engine/sample's rule), so
// a GPU backend keeps the token on the device and, with Options.Pipelined,
// runs step N+1 while the host reads token N; the host reads each token back
// to stream it and to apply the stop rules: the model's EOS ids, stop
// strings (matched across token boundaries, never emitted), the token
// budget, and the request's context, which is checked before every step (and
// inside a prefill pass: between its layers, and on the CPU backend between
// runs of work whose size does not depend on the prompt's length) so a
// cancelled request ends within one token, or within a few milliseconds of
// CPU time of its prefill on the demo model. Each stream has its own
// goroutine between the engine and the reader, so a slow reader holds up
// nobody: the tokens waiting for it merge into one event; Close cancels
// every request through the engine's context.
//
// A request with a Constraint (constrained decoding: JSON output, forced
// tool calls) samples on the host instead: each pass returns its logits
// row, the constraint sets the tokens it rules out to −Inf, the host sampler
// applies the same rule to the rest, and the chosen token is fed to the next
// pass. Such steps are not pipelined; the constraint's Done ends the request.
//
// A chat turn (turn.go, StartTurn) is the one way the HTTP API, the chat
// window and the terminal chat answer a conversation: it renders the
// conversation, draws the seed when the sampling rule needs one, submits
// it, and streams typed events (the queue position, prefill progress, the
// reasoning, content and tool-call deltas of chat.Parser, each step's
// tokens and log-probabilities) ending in a TurnResult: the statistics
// with the stop string that matched (Stats.StopSequence), the reasoning
// token count and the output. An option out of range is an *OptionError
// that names it, as the APIs spell it.
//
// The prefix cache (prefixcache.go) exists because Gated DeltaNet state
// cannot be rolled back: to continue a conversation the engine restores a
// snapshot taken earlier at a point the new prompt shares, rather than
// rewinding. Under it, Options.Store (engine/prefixstore, store.go) keeps
// the snapshots at checkpoints of DefaultStoreMinTokens or more on disk,
// written off the answering path and read back by a later process, keyed
// by the model's identity, StateFormatVersion, the backend's state format
// (model.StateCodec) and the tokens. Besides the conversation's own
// checkpoints, every prompt is snapshotted at the end of its system turn
// and of each documents block (chat.SharedCheckpoints), so that a new
// conversation that starts the same way (an agent's system prompt and
// tools, a question about a document read before) reads only what differs.
package engine
