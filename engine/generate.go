package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// generation is one running request: its sequence, where its prompt is,
// and its sampling and stop state. The scheduler (scheduler.go) moves it
// along one pass at a time on the engine goroutine: prefill chunks, then
// the pass over the last prompt token that samples the first new token,
// then decode steps, each a segment of a batched pass.
type generation struct {
	e     *Engine
	job   *job
	seq   model.Sequence
	stats Stats
	start time.Time
	// protect is the prefix cache's clock at the start of the request
	// (see prefixCache.add).
	protect uint64
	// sampling is the request's rule with GeneratedFrom set.
	sampling model.Sampling
	// pos is how many prompt tokens the sequence holds (len(Prompt) once
	// the pass that samples the first token has started); marks are the
	// positions still ahead where the prefix cache takes a snapshot,
	// ascending, the last len(Prompt)-1.
	pos   int
	marks []int
	// budget is the most tokens the request may generate.
	budget int
	// host samples a constrained request's tokens; nil otherwise.
	host      *hostSampling
	dec       *tokenizer.StreamDecoder
	stops     *stopMatcher
	generated []int
	// decodeStart is when the first token was sampled.
	decodeStart time.Time
	// inflight counts passes started over the sequence whose results are
	// not handled yet (two when pipelined).
	inflight int
	// finished is set once the request has its FinishReason; it leaves the
	// batch when no pass of it is in flight.
	finished bool
	err      error
	// stopped: a stop string ended the request (the text after it is
	// dropped). tail is the text released with the final event.
	stopped bool
	tail    string

	// key is the prompt as the prefix cache knows it (images by their
	// hash, see images.go); positions, embeds and runs the prompt's image
	// inputs, nil without images; encoded once the tower has run;
	// encoding, while it runs, where its result arrives (encodeImages).
	key       []int
	positions [][3]int
	embeds    [][]float32
	runs      []imageRun
	encoded   bool
	encoding  chan encodeResult
}

// begin sets the request up on seq: the longest cached prefix restored, the
// snapshot marks and the stream state.
func (g *generation) begin() error {
	e, req := g.e, &g.job.req
	g.start = time.Now()
	g.stats = Stats{PromptTokens: len(req.Prompt), QueueWait: g.start.Sub(g.job.submitted)}
	g.sampling = req.Sampling
	g.sampling.GeneratedFrom = len(req.Prompt)
	if req.Constraint != nil || req.Logprobs {
		g.host = newHostSampling(req.Constraint, req.Prompt)
		if req.Logprobs {
			g.host.logprobs, g.host.top = true, req.TopLogprobs
		}
	}
	g.budget = e.opts.ContextTokens - len(req.Prompt) + 1 // the last token is never consumed
	if req.MaxTokens > 0 {
		g.budget = min(g.budget, req.MaxTokens)
	}
	g.dec = e.tok.NewStreamDecoder()
	g.stops = newStopMatcher(req.Stop)
	if err := g.prepareImages(); err != nil {
		return err
	}

	// Restore the longest cached prefix that leaves at least the last
	// prompt token to compute (its pass samples the first new token).
	prompt := req.Prompt
	n := len(prompt)
	g.protect = e.cache.now()
	hit := e.cache.lookup(g.key, n-1)
	cached := 0
	if hit != nil {
		cached = len(hit.tokens)
	}
	// A longer prefix on disk (kept by an earlier run) is read instead,
	// and kept in memory from then on.
	if snap := e.loadStored(g.key, cached, n-1, req.Owner); snap != nil {
		tokens := g.key[:snap.Pos()]
		if e.opts.CacheBytes > 0 {
			e.cache.add(snap, tokens, 0)
		}
		hit = &cacheEntry{snap: snap, tokens: tokens}
	}
	if hit != nil {
		e.ownStored(hit.tokens, req.Owner)
		if err := g.seq.Restore(hit.snap); err != nil {
			return fmt.Errorf("restoring a cached prefix of %d tokens: %w", len(hit.tokens), err)
		}
		g.pos = len(hit.tokens)
	} else if e.empty == nil {
		return errors.New("the backend could not make an empty sequence")
	} else if err := g.seq.Restore(e.empty); err != nil {
		return fmt.Errorf("resetting the sequence: %w", err)
	}
	g.stats.CachedTokens = g.pos
	g.stats.PrefilledTokens = n - g.pos
	g.progress()
	marks := append(slices.Clone(req.Checkpoints), n-1)
	slices.Sort(marks)
	for _, m := range slices.Compact(marks) {
		if m > g.pos && m <= n-1 {
			g.marks = append(g.marks, m)
		}
	}
	return nil
}

func (g *generation) progress() {
	g.job.stream.tellProgressLater(PrefillProgress{Cached: g.stats.CachedTokens, Done: g.pos, Total: len(g.job.req.Prompt)})
}

// prefilling reports whether prompt tokens before the last remain.
func (g *generation) prefilling() bool { return g.pos < len(g.job.req.Prompt)-1 }

// cancelled reports whether the request's context ended.
func (g *generation) cancelled() bool { return g.job.ctx.Err() != nil }

// prefillChunk runs the next chunk of the prompt, up to the next mark and
// at most chunk tokens, in a pass of its own that stops soon after the
// request is cancelled (see the scheduler); at a mark it snapshots the sequence
// for the prefix cache.
func (g *generation) prefillChunk(chunk int) error {
	e, prompt := g.e, g.job.req.Prompt
	if wait, err := g.encodeImages(); err != nil || wait {
		return err
	}
	mark := g.marks[0]
	end := min(g.pos+chunk, mark)
	stop := func() bool { return g.cancelled() }
	b, err := model.StartBatchUntil(e.backend, e.weights, []model.Segment{{Seq: g.seq, In: g.input(g.pos, end)}}, stop)
	if err == nil {
		_, err = b.Wait()
	}
	if errors.Is(err, model.ErrStopped) {
		return errCancelled
	}
	if err != nil {
		return fmt.Errorf("prefill of tokens %d..%d: %w", g.pos, end, err)
	}
	g.pos = end
	g.progress()
	if g.pos < mark {
		return nil
	}
	g.marks = g.marks[1:]
	// A checkpoint (where the next turn diverges, or another conversation
	// may) goes to the disk store too; the end-of-prompt snapshot, useful
	// only to regenerate, stays in memory.
	checkpoint := slices.Contains(g.job.req.Checkpoints, g.pos)
	var snap model.Snapshot
	if ent := e.cache.get(g.key[:g.pos]); ent != nil {
		snap = ent.snap
	} else if e.opts.CacheBytes > 0 || checkpoint && e.opts.Store != nil {
		var err error
		if snap, err = g.seq.Snapshot(); err != nil {
			return fmt.Errorf("snapshot at %d tokens: %w", g.pos, err)
		}
		if e.opts.CacheBytes > 0 {
			// A checkpoint may evict anything; the end-of-prompt
			// snapshot must not evict what this request relies on.
			protect := uint64(0)
			if g.pos == len(prompt)-1 {
				protect = g.protect
			}
			e.cache.add(snap, g.key[:g.pos], protect)
		}
	}
	if checkpoint && snap != nil {
		e.saveStored(snap, g.key[:g.pos], g.job.req.Owner)
	}
	return nil
}

// decodeInput is the request's next segment input: the last prompt token,
// whose pass samples the first new token, then decode steps fed the token
// sampled before (from the backend's memory, or from the host when the
// host samples).
func (g *generation) decodeInput() model.Input {
	prompt := g.job.req.Prompt
	if g.pos < len(prompt) {
		g.pos = len(prompt)
		in := g.input(len(prompt)-1, len(prompt))
		if g.host != nil {
			in.Logits = model.LogitsLast
			return in
		}
		in.Sample = &g.sampling
		return in
	}
	if g.host != nil {
		return g.host.input()
	}
	return model.Input{Sample: &g.sampling}
}

// errCancelled marks a request whose context ended; it is not reported as
// an error event.
var errCancelled = errors.New("cancelled")

// handle takes a sampled token (or the logits the host samples from):
// streams it and decides whether the request ends.
func (g *generation) handle(res model.Result) {
	e := g.e
	tok := res.Token
	if g.host != nil {
		var err error
		if tok, err = g.host.choose(res.Logits, &g.sampling); err != nil {
			g.fail(fmt.Errorf("constrained decode step %d: %w", g.stats.GeneratedTokens+1, err))
			return
		}
	}
	if g.decodeStart.IsZero() {
		g.stats.PrefillDuration = time.Since(g.start)
		g.decodeStart = time.Now()
	}
	g.stats.GeneratedTokens++
	g.generated = append(g.generated, tok)
	isEOS := e.eos[tok]
	// A constraint whose text is complete ends the request like EOS.
	complete := g.host != nil && g.host.constraint != nil && g.host.constraint.Done()
	text, stopped := "", false
	if !isEOS {
		text, stopped = g.stops.add(g.dec.Add(tok))
	}
	ev := Event{Token: tok, IDs: []int{tok}, Text: text}
	if g.host != nil && g.host.logprobs {
		ev.Logprobs = []*TokenLogprob{g.host.lastLogprob()}
	}
	g.job.stream.push(ev)
	switch {
	case isEOS || stopped || complete:
		g.stats.FinishReason = FinishStop
	case g.stats.GeneratedTokens >= g.budget:
		g.stats.FinishReason = FinishLength
	case g.cancelled():
		g.stats.FinishReason = FinishCancelled
	default:
		return
	}
	g.finished = true
	g.stopped = stopped
	if stopped {
		g.stats.StopSequence = g.stops.matched
	}
	if !stopped {
		// The stream ends without a stop string: whatever was held back is
		// text after all.
		last, _ := g.stops.add(g.dec.Flush())
		g.tail = last + g.stops.flush()
	}
}

// fail ends the request with err.
func (g *generation) fail(err error) {
	if g.finished {
		return
	}
	g.finished = true
	if errors.Is(err, errCancelled) {
		g.stats.FinishReason = FinishCancelled
		return
	}
	g.stats.FinishReason = FinishError
	g.err = err
}

// cancel ends the request as cancelled.
func (g *generation) cancel() { g.fail(errCancelled) }

// end sends the final event; the request's passes have all finished.
func (g *generation) end() {
	if !g.decodeStart.IsZero() {
		g.stats.DecodeDuration = time.Since(g.decodeStart)
	}
	if g.stats.FinishReason == FinishStop || g.stats.FinishReason == FinishLength {
		if g.job.req.SnapshotAnswer {
			g.snapshotEnd()
		}
	}
	err := g.err
	if g.stats.FinishReason == FinishCancelled && errors.Is(context.Cause(g.job.ctx), ErrClosed) {
		err = ErrClosed
	}
	g.job.stream.finish(g.stats, err, g.tail)
	g.job.stopWatch()
}

// snapshotEnd caches the state after the answer: the prompt and the
// generated tokens the sequence consumed (all but the last, unless a step
// was drained after a stop string). A conversation that continues with tool
// results keeps the whole answer in its next prompt, so that prompt
// prefills only the results.
func (g *generation) snapshotEnd() {
	e := g.e
	if e.opts.CacheBytes <= 0 {
		return
	}
	consumed := g.seq.Pos() - len(g.job.req.Prompt)
	if consumed < 0 || consumed > len(g.generated) {
		return
	}
	tokens := slices.Concat(g.key, g.generated[:consumed])
	if e.cache.has(tokens) {
		return
	}
	if snap, err := g.seq.Snapshot(); err == nil {
		e.cache.add(snap, tokens, g.protect)
	}
}
