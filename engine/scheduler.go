package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The scheduler: continuous batching on the engine goroutine.
//
// Each turn of the loop
//  1. starts waiting requests while there is a free slot (Options.Parallel,
//     one more for an interactive request) and sequence memory
//     (Options.SequenceBytes), in priority then arrival order, and tells
//     the others their queue position;
//  2. runs one decode step: a batched pass with a segment for every running
//     request past its prompt (the pass over a prompt's last token, which
//     samples its first new token, rides along), each sampling with its own
//     rule; pipelined, the next step starts before this one's tokens are
//     read, for the requests that sample on the device;
//  3. streams the tokens, ends requests that stop, are cut, or were
//     cancelled;
//  4. runs one prefill chunk of one request still reading its prompt (the
//     highest priority, then the oldest), in a pass of its own, so that the
//     running requests' streams keep flowing between chunks; chunks shrink
//     as attention's work per token grows with the position, so that each
//     plans no more work than twice a first full chunk (chunks.go). The pass asks
//     the request's context before each layer's blocks and, on the CPU
//     backend, between bounded runs of work inside them (engine/cpu's
//     pass.go): a cancelled request stops within a few milliseconds of CPU
//     time on the demo model whatever the prompt's length. A GPU pass is
//     recorded whole and then runs on the device (see engine/gpu). A
//     request whose images need the vision tower first starts it on a
//     goroutine of its own (images.go) and takes no chunk until it ends,
//     the others' steps and chunks going on meanwhile.
//
// A request's tokens do not depend on what else runs: every backend
// computes a sequence's rows as in a pass of its own.

// run is the engine goroutine.
func (e *Engine) run() {
	defer close(e.done)
	// The backend at the end, which after a fallback is not the first.
	defer func() { e.backend.Close() }()
	var ahead *decodeStep // a pipelined step already started
	for {
		if e.ctx.Err() != nil {
			if ahead != nil {
				ahead.wait()
			}
			e.shutdown()
			return
		}
		e.admit()
		if len(e.active) == 0 {
			select {
			case <-e.wake:
			case <-e.ctx.Done():
			}
			continue
		}
		cur := ahead
		ahead = nil
		if cur == nil {
			cur = e.startDecode()
		}
		if e.opts.Pipelined && cur != nil {
			ahead = e.startDecode()
		}
		if cur != nil {
			cur.finish()
		}
		g := e.nextPrefill()
		if g != nil {
			// A device holds two passes in flight at most: the step started
			// ahead finishes before the chunk's pass begins.
			if ahead != nil {
				ahead.finish()
				ahead = nil
			}
			// The chunk's size follows from the position alone (chunks.go),
			// never shortened while others stream: a chunk's size decides
			// which kernels its rows take, and a request's answer must not
			// depend on what else runs.
			if err := g.prefillChunk(e.cost.chunkAt(g.pos, e.opts.PrefillChunk)); err != nil {
				if !errors.Is(err, errCancelled) {
					e.passFailed(err)
				}
				g.fail(err)
			}
		}
		if e.broken != nil && e.opts.Fallback != nil {
			if ahead != nil {
				ahead.finish()
				ahead = nil
			}
			e.fallBack()
		}
		e.release()
		if cur == nil && g == nil && ahead == nil && e.encodingImages() {
			// Only a tower is running: wait for it (it signals when it
			// ends) or for a new request, instead of spinning.
			select {
			case <-e.wake:
			case <-e.ctx.Done():
			}
		}
	}
}

// encodingImages reports whether a request waits for its images' encode.
func (e *Engine) encodingImages() bool {
	for _, g := range e.active {
		if g.encoding != nil {
			return true
		}
	}
	return false
}

// awaitEncodes waits for every encode goroutine to end and drops their
// results, before the backend they run on is closed.
func (e *Engine) awaitEncodes() {
	e.encodes.Wait()
	for _, g := range e.active {
		g.encoding = nil
	}
}

// passFailed notes a pass that failed on the backend, for fallBack.
func (e *Engine) passFailed(err error) {
	if e.broken == nil {
		e.broken = err
	}
}

// fallBack moves the engine to Options.Fallback's backend after a pass
// failed on its own: the running requests end with ErrBackendFailed (the
// waiting ones stay queued), every sequence and cached snapshot of the old
// backend goes with it, and nothing is pipelined any more. No pass is in
// flight when it runs.
func (e *Engine) fallBack() {
	e.awaitEncodes()
	cause := e.broken
	e.broken = nil
	next, err := e.opts.Fallback(cause)
	if err != nil {
		// Nowhere to go: the engine keeps its backend, and each request
		// that fails on it says why.
		e.opts.Fallback = nil
		return
	}
	failed := fmt.Errorf("%w while answering (%v), so this answer stopped; ask again: the engine now runs on %s", ErrBackendFailed, cause, next.Name())
	for _, g := range e.active {
		g.inflight = 0
		if !g.finished || g.stats.FinishReason == FinishError {
			g.finished = true
			g.stats.FinishReason = FinishError
			g.err = failed
		}
		e.used -= g.job.bytes
		if g.seq != nil {
			g.seq.Close()
			g.seq = nil
		}
	}
	for _, s := range e.free {
		s.Close()
	}
	e.free = nil
	e.cache = newPrefixCache(e.cache.budget)
	old := e.backend
	e.mu.Lock()
	e.backend = next
	e.mu.Unlock()
	old.Close()
	e.opts.Pipelined = false
	e.opts.Fallback = nil
	e.empty = nil
	if seq, err := next.NewSequence(e.opts.ContextTokens); err == nil {
		if snap, err := seq.Snapshot(); err == nil {
			e.empty = snap
			e.free = append(e.free, seq)
		} else {
			seq.Close()
		}
	}
	// The answers end once the engine runs on its new backend, so that a
	// caller who asks again at once is served there.
	for _, g := range e.active {
		g.end()
	}
	clear(e.active)
	e.active = e.active[:0]
	if e.opts.OnFallback != nil {
		go e.opts.OnFallback(cause)
	}
}

// admit starts waiting requests that fit, drops those cancelled while they
// waited, and reports queue positions.
func (e *Engine) admit() {
	e.mu.Lock()
	var start, gone []*job
	var kept []*job
	blocked := false
	for _, j := range e.pending {
		switch {
		case j.ctx.Err() != nil:
			gone = append(gone, j)
		case !blocked && e.fits(j, len(start)):
			start = append(start, j)
			e.used += j.bytes
			if !j.left {
				j.left = true
				e.waiting--
			}
		default:
			// Nobody overtakes a request that does not fit yet: it would
			// wait for ever behind smaller ones.
			blocked = true
			kept = append(kept, j)
		}
	}
	// Clipped: Submit inserts into e.pending once the lock is given back,
	// and must not shift the elements of kept, which is read below.
	e.pending = slices.Clip(kept)
	e.mu.Unlock()

	for _, j := range gone {
		j.stopWatch()
		j.stream.finish(Stats{PromptTokens: len(j.req.Prompt), FinishReason: FinishCancelled}, nil, "")
	}
	for _, j := range start {
		if j.position != 0 {
			j.stream.tellPositionLater(0)
		}
		g := &generation{e: e, job: j, seq: e.sequence()}
		if g.seq == nil {
			g.stats = Stats{PromptTokens: len(j.req.Prompt)}
			g.fail(fmt.Errorf("making a sequence of %d tokens failed", e.opts.ContextTokens))
		} else if err := g.begin(); err != nil {
			g.fail(err)
		}
		e.active = append(e.active, g)
	}
	for i, j := range kept {
		if j.position != i+1 {
			j.position = i + 1
			j.stream.tellPositionLater(i + 1)
		}
	}
}

// fits reports whether j can start now, with starting more requests
// already chosen this turn.
func (e *Engine) fits(j *job, starting int) bool {
	running := len(e.active) + starting
	slots := e.opts.Parallel
	if j.req.Priority >= PriorityInteractive {
		slots++
	}
	return running < slots && e.used+j.bytes <= e.opts.SequenceBytes
}

// sequence takes a free sequence or makes one; nil when the backend cannot.
func (e *Engine) sequence() model.Sequence {
	if n := len(e.free); n > 0 {
		s := e.free[n-1]
		e.free = e.free[:n-1]
		return s
	}
	s, err := e.backend.NewSequence(e.opts.ContextTokens)
	if err != nil {
		return nil
	}
	return s
}

// nextPrefill is the request whose prompt is read next.
func (e *Engine) nextPrefill() *generation {
	var best *generation
	for _, g := range e.active {
		if g.encoding != nil {
			done, err := g.collectEncode()
			if !done {
				continue // the tower is still running on its own goroutine
			}
			if err != nil && !g.finished {
				if !errors.Is(err, errCancelled) {
					e.passFailed(err)
				}
				g.fail(err)
			}
		}
		if g.finished || !g.prefilling() || g.inflight > 0 {
			continue
		}
		if g.cancelled() {
			g.cancel()
			continue
		}
		if best == nil || g.job.req.Priority > best.job.req.Priority {
			best = g
		}
	}
	return best
}

// decodeStep is a started batched pass and the requests it serves.
type decodeStep struct {
	e     *Engine
	batch model.Pass
	gens  []*generation
}

// startDecode starts a pass with one segment for every request that can
// take a step now: past its prompt, not ended, with no pass in flight —
// or, pipelined, one pass in flight that samples on the device and room in
// its budget for the token after it. nil when no request can.
func (e *Engine) startDecode() *decodeStep {
	var segs []model.Segment
	var gens []*generation
	for _, g := range e.active {
		if g.finished || g.prefilling() {
			continue
		}
		if g.cancelled() {
			if g.inflight == 0 {
				g.cancel()
			}
			continue
		}
		if g.inflight > 0 {
			ahead := e.opts.Pipelined && g.inflight == 1 && g.host == nil &&
				g.pos == len(g.job.req.Prompt) && g.stats.GeneratedTokens+2 <= g.budget
			if !ahead {
				continue
			}
		}
		segs = append(segs, model.Segment{Seq: g.seq, In: g.decodeInput()})
		gens = append(gens, g)
	}
	if len(segs) == 0 {
		return nil
	}
	e.peakBatch = max(e.peakBatch, len(segs))
	// Only the engine's end stops a decode step halfway: a request
	// cancelled meanwhile just drops its row.
	stop := func() bool { return e.ctx.Err() != nil }
	b, err := model.StartBatchUntil(e.backend, e.weights, segs, stop)
	if err != nil {
		if e.ctx.Err() == nil {
			e.passFailed(err)
		}
		for _, g := range gens {
			if e.ctx.Err() != nil {
				g.cancel()
			} else {
				g.fail(fmt.Errorf("decode step %d: %w", g.stats.GeneratedTokens+1, err))
			}
		}
		return nil
	}
	for _, g := range gens {
		g.inflight++
	}
	return &decodeStep{e: e, batch: b, gens: gens}
}

// finish waits for the step and hands each request its token.
func (d *decodeStep) finish() {
	results, err := d.wait()
	for i, g := range d.gens {
		if g.finished {
			continue // a step started ahead of a token that ended it
		}
		if errors.Is(err, model.ErrStopped) {
			g.cancel() // the engine closed while the step ran
			continue
		}
		if err != nil {
			d.e.passFailed(err)
			g.fail(fmt.Errorf("decode step %d: %w", g.stats.GeneratedTokens+1, err))
			continue
		}
		g.handle(results[i])
	}
}

// wait waits for the pass and counts it done for its requests.
func (d *decodeStep) wait() ([]model.Result, error) {
	results, err := d.batch.Wait()
	for _, g := range d.gens {
		g.inflight--
	}
	if err == nil && len(results) != len(d.gens) {
		err = fmt.Errorf("the backend returned %d results for %d sequences", len(results), len(d.gens))
	}
	return results, err
}

// release ends the requests that finished and have no pass in flight: the
// final event, the sequence back to the free list, its memory back to the
// budget.
func (e *Engine) release() {
	kept := e.active[:0]
	for _, g := range e.active {
		if !g.finished || g.inflight > 0 || g.encoding != nil {
			kept = append(kept, g)
			continue
		}
		g.end()
		e.used -= g.job.bytes
		if g.seq != nil {
			// Back to position 0, which also gives a host backend's KV
			// cache back: a free sequence holds only its fixed state.
			if err := g.seq.Restore(e.empty); err != nil {
				g.seq.Close()
			} else {
				e.free = append(e.free, g.seq)
			}
		}
	}
	clear(e.active[len(kept):])
	e.active = kept
}

// shutdown ends every request when the engine closes.
func (e *Engine) shutdown() {
	e.awaitEncodes()
	e.mu.Lock()
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	for _, j := range pending {
		j.stopWatch()
		j.stream.finish(Stats{PromptTokens: len(j.req.Prompt), FinishReason: FinishError}, ErrClosed, "")
	}
	for _, g := range e.active {
		g.inflight = 0
		g.cancel()
	}
	e.release()
	for _, s := range e.free {
		s.Close()
	}
	e.free = nil
}
