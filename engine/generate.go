package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// generation is one request being served on the engine goroutine.
type generation struct {
	e     *Engine
	job   *job
	stats Stats
	start time.Time
	// protect is the prefix cache's clock at the start of the request
	// (see prefixCache.add).
	protect uint64
	// tail is the text released at the end (a held-back stop-string prefix
	// or an unfinished character), sent with the final event.
	tail string
	// host samples a constrained request's tokens; nil otherwise.
	host *hostSampling
}

// errCancelled marks a request whose context ended; it is not reported as
// an error event.
var errCancelled = errors.New("cancelled")

func (g *generation) run() error {
	e, req, ctx := g.e, &g.job.req, g.job.ctx
	g.start = time.Now()
	if ctx.Err() != nil {
		g.stats.FinishReason = FinishCancelled
		return errCancelled
	}

	sampling := req.Sampling
	sampling.GeneratedFrom = len(req.Prompt)
	if req.Constraint != nil || req.Logprobs {
		g.host = newHostSampling(req.Constraint, req.Prompt)
		if req.Logprobs {
			g.host.logprobs, g.host.top = true, req.TopLogprobs
		}
	}
	cur, err := g.prefill(&sampling)
	if errors.Is(err, errCancelled) {
		g.stats.FinishReason = FinishCancelled
		return err
	}
	if err != nil {
		return err
	}
	var decodeStart time.Time
	defer func() {
		if !decodeStart.IsZero() {
			g.stats.DecodeDuration = time.Since(decodeStart)
		}
	}()

	budget := e.opts.ContextTokens - len(req.Prompt) + 1 // the last token is never consumed
	if req.MaxTokens > 0 {
		budget = min(budget, req.MaxTokens)
	}
	step := func() (model.Pass, error) {
		in := model.Input{Sample: &sampling}
		if g.host != nil {
			in = g.host.input()
		}
		p, err := model.Start(e.backend, e.weights, e.seq, in)
		if err != nil {
			return nil, fmt.Errorf("decode step %d: %w", g.stats.GeneratedTokens+1, err)
		}
		return p, nil
	}
	dec := e.tok.NewStreamDecoder()
	stops := newStopMatcher(req.Stop)
	var generated []int
	for {
		// cur samples token GeneratedTokens+1. Pipelined, the step after it
		// starts before the host reads that token: the device feeds it from
		// its own memory, so it never waits for the host.
		var next model.Pass
		if e.opts.Pipelined && g.host == nil && g.stats.GeneratedTokens+2 <= budget && ctx.Err() == nil {
			if next, err = step(); err != nil {
				g.drain(cur)
				return err
			}
		}
		res, err := cur.Wait()
		if err != nil {
			g.drain(next)
			return fmt.Errorf("decode step %d: %w", g.stats.GeneratedTokens+1, err)
		}
		tok := res.Token
		if g.host != nil {
			if tok, err = g.host.choose(res.Logits, &sampling); err != nil {
				return fmt.Errorf("constrained decode step %d: %w", g.stats.GeneratedTokens+1, err)
			}
		}
		if decodeStart.IsZero() {
			g.stats.PrefillDuration = time.Since(g.start)
			decodeStart = time.Now()
		}
		g.stats.GeneratedTokens++
		generated = append(generated, tok)
		isEOS := e.eos[tok]
		// A constraint whose text is complete ends the request like EOS.
		complete := g.host != nil && g.host.constraint != nil && g.host.constraint.Done()
		// Not pipelined, the next step starts as soon as the token is known
		// to need one, before the token is streamed. Not after EOS, at the
		// budget, or once cancelled: the step would be thrown away.
		if (!e.opts.Pipelined || g.host != nil) && !isEOS && !complete && g.stats.GeneratedTokens < budget && ctx.Err() == nil {
			if next, err = step(); err != nil {
				return err
			}
		}
		text, stopped := "", false
		if !isEOS {
			text, stopped = stops.add(dec.Add(tok))
		}
		ev := Event{Token: tok, Text: text}
		if g.host != nil && g.host.logprobs {
			ev.Logprob = g.host.lastLogprob()
		}
		if !g.send(ev) {
			g.drain(next)
			g.stats.FinishReason = FinishCancelled
			return errCancelled
		}
		switch {
		case isEOS || stopped || complete:
			g.stats.FinishReason = FinishStop
		case g.stats.GeneratedTokens >= budget:
			g.stats.FinishReason = FinishLength
		case ctx.Err() != nil || next == nil:
			g.stats.FinishReason = FinishCancelled
		}
		if g.stats.FinishReason != "" {
			g.drain(next)
			if g.stats.FinishReason != FinishCancelled && req.SnapshotAnswer {
				g.snapshotEnd(generated)
			}
			if !stopped {
				// The stream ends without a stop string: whatever was held
				// back is text after all.
				last, _ := stops.add(dec.Flush())
				g.tail = last + stops.flush()
			}
			return nil
		}
		cur = next
	}
}

// snapshotEnd caches the state after the answer: the prompt and the
// generated tokens the sequence consumed (all but the last, unless a step
// was drained after a stop string). A conversation that continues with tool
// results keeps the whole answer in its next prompt, so that prompt
// prefills only the results.
func (g *generation) snapshotEnd(generated []int) {
	e := g.e
	if e.opts.CacheBytes <= 0 {
		return
	}
	consumed := e.seq.Pos() - len(g.job.req.Prompt)
	if consumed < 0 || consumed > len(generated) {
		return
	}
	tokens := slices.Concat(g.job.req.Prompt, generated[:consumed])
	if e.cache.has(tokens) {
		return
	}
	if snap, err := e.seq.Snapshot(); err == nil {
		e.cache.add(snap, tokens, g.protect)
	}
}

// drain waits for a started pass whose token is not wanted.
func (g *generation) drain(p model.Pass) {
	if p != nil {
		p.Wait()
	}
}

// send delivers an event unless the request's context ends first.
func (g *generation) send(ev Event) bool {
	select {
	case g.job.stream.events <- ev:
		return true
	case <-g.job.ctx.Done():
		return false
	}
}

// prefill brings the sequence to the whole prompt, restoring the longest
// cached prefix and snapshotting at the checkpoints on the way, and returns
// the started pass over the last prompt token, which samples the first new
// token.
func (g *generation) prefill(sampling *model.Sampling) (model.Pass, error) {
	e, req, ctx := g.e, &g.job.req, g.job.ctx
	prompt := req.Prompt
	n := len(prompt)

	// Restore: the longest cached prefix that leaves at least the last
	// prompt token to compute (its pass samples the first new token).
	g.protect = e.cache.now()
	pos := 0
	if hit := e.cache.lookup(prompt, n-1); hit != nil {
		if err := e.seq.Restore(hit.snap); err != nil {
			return nil, fmt.Errorf("restoring a cached prefix of %d tokens: %w", len(hit.tokens), err)
		}
		pos = len(hit.tokens)
	} else if err := e.seq.Restore(e.empty); err != nil {
		return nil, fmt.Errorf("resetting the sequence: %w", err)
	}
	g.stats.CachedTokens = pos
	g.stats.PrefilledTokens = n - pos
	progress := func(done int) {
		if req.Progress != nil {
			req.Progress(PrefillProgress{Cached: g.stats.CachedTokens, Done: done, Total: n})
		}
	}
	progress(pos)

	// Feed the prompt up to each checkpoint, snapshotting there, then the
	// rest with the sample block.
	marks := append(slices.Clone(req.Checkpoints), n-1)
	slices.Sort(marks)
	for _, mark := range slices.Compact(marks) {
		if mark <= pos || mark > n-1 {
			continue
		}
		for pos < mark {
			if ctx.Err() != nil {
				return nil, errCancelled
			}
			end := min(pos+e.opts.PrefillChunk, mark)
			if _, err := model.Run(e.backend, e.weights, e.seq, model.Input{IDs: prompt[pos:end]}); err != nil {
				return nil, fmt.Errorf("prefill of tokens %d..%d: %w", pos, end, err)
			}
			pos = end
			progress(pos)
		}
		if e.opts.CacheBytes > 0 && !e.cache.has(prompt[:pos]) {
			snap, err := e.seq.Snapshot()
			if err != nil {
				return nil, fmt.Errorf("snapshot at %d tokens: %w", pos, err)
			}
			// A checkpoint (where the next turn diverges) may evict
			// anything; the end-of-prompt snapshot, useful only to
			// regenerate, must not evict what this request relies on.
			protect := uint64(0)
			if mark == n-1 {
				protect = g.protect
			}
			e.cache.add(snap, prompt[:pos], protect)
		}
	}
	// The rest, the last chunk with the sample block.
	for {
		if ctx.Err() != nil {
			return nil, errCancelled
		}
		if n-pos <= e.opts.PrefillChunk {
			break
		}
		end := pos + e.opts.PrefillChunk
		if _, err := model.Run(e.backend, e.weights, e.seq, model.Input{IDs: prompt[pos:end]}); err != nil {
			return nil, fmt.Errorf("prefill of tokens %d..%d: %w", pos, end, err)
		}
		pos = end
		progress(pos)
	}
	last := model.Input{IDs: prompt[pos:], Sample: sampling}
	if g.host != nil {
		last = model.Input{IDs: prompt[pos:], Logits: model.LogitsLast}
	}
	p, err := model.Start(e.backend, e.weights, e.seq, last)
	if err != nil {
		return nil, fmt.Errorf("prefill of tokens %d..%d: %w", pos, n, err)
	}
	return p, nil
}
