package grammar

import "math"

// Closing within a budget: a Constraint given the number of tokens the
// request may still generate (WithBudget) lets through only the tokens
// after which the text can still be completed in what is left, counting
// one token a byte (a byte-level vocabulary has a token for every byte, so
// the shortest completion in bytes is one the model can always write). So
// when the budget runs out the text is complete: the value closed by its
// shortest valid completion (for a schema: the required members with their
// shortest valid values), which parses and validates, and the request ends
// at max_tokens all the same.
//
// The shortest completions are the automaton's distances to an accepting
// state, found once per Grammar by exploring every state it can reach
// (shared by its requests, as its masks are); a request needs them only
// once its budget comes within closeHorizon tokens, so that long budgets
// cost nothing. A state's worst token (the longest completion after any
// one token it allows) is kept too: while the budget is above it, the
// state's usual mask serves unchanged.

// closeHorizon is the budget from which a request starts to watch its
// completion: larger than the shortest completion of any schema written by
// hand (a text whose shortest completion is longer is closed as well as it
// can be: towards completion by the shortest way).
const closeHorizon = 4096

// unreachable is the distance of a state that cannot complete the text.
const unreachable = math.MaxInt32

// distancesLocked computes dist for every state reachable from the start.
// The caller holds mu.
func (d *dfa) distancesLocked() {
	if d.dist != nil {
		return
	}
	seen := make([]bool, len(d.states))
	mark := func(s int32) bool {
		for int(s) >= len(seen) {
			seen = append(seen, false)
		}
		if seen[s] {
			return false
		}
		seen[s] = true
		return true
	}
	reverse := map[int32][]int32{}
	queue := []int32{d.start}
	mark(d.start)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		var prev int32 = -1
		for c := 0; c < 256; c++ {
			next := d.step(s, byte(c))
			if next == dead || next == prev {
				continue
			}
			prev = next
			reverse[next] = append(reverse[next], s)
			if mark(next) {
				queue = append(queue, next)
			}
		}
	}
	dist := make([]int32, len(d.states))
	for s := range dist {
		dist[s] = unreachable
		if d.states[s].accept {
			dist[s] = 0
			queue = append(queue, int32(s))
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, p := range reverse[s] {
			if dist[p] == unreachable {
				dist[p] = dist[s] + 1
				queue = append(queue, p)
			}
		}
	}
	d.dist = dist
}

// distOf is the fewest bytes that complete the text from s. The caller
// holds mu and has called distancesLocked.
func (d *dfa) distOf(s int32) int32 {
	if int(s) < len(d.dist) {
		return d.dist[s]
	}
	return unreachable
}

// worstNext is the longest completion after any one token s allows,
// computed by one walk of the vocabulary's trie and kept.
func (d *dfa) worstNext(s int32) int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.distancesLocked()
	st := d.states[s]
	if st.worst > 0 {
		return st.worst - 1
	}
	worst := int32(0)
	d.walkTokens(s, func(next int32, ids []int32) {
		worst = max(worst, d.distOf(next))
	})
	st.worst = worst + 1
	return worst
}

// walkTokens calls f with the state after each run of tokens (ids, of the
// same piece prefix's end) whose bytes lead from s to a live state. The
// caller holds mu.
func (d *dfa) walkTokens(s int32, f func(next int32, ids []int32)) {
	v := d.vocab
	path := make([]int32, v.maxLen+1)
	path[0] = s
	for i := 0; i < len(v.nodes); {
		node := &v.nodes[i]
		next := d.step(path[node.depth-1], node.b)
		if next == dead {
			i = int(node.end)
			continue
		}
		path[node.depth] = next
		if node.tokensEnd > node.tokens {
			f(next, v.order[node.tokens:node.tokensEnd])
		}
		i++
	}
}

// WithBudget sets the number of tokens the request may generate (its
// max_tokens, or what the context leaves), the EOS token included, so that
// the text is complete when they run out; 0 or less sets none.
func (c *Constraint) WithBudget(tokens int) *Constraint {
	c.budget = tokens
	return c
}

// maskBudget rules out, when the budget is close, the tokens after which
// the text could not be completed in the tokens left. The mask of the
// state has been applied.
func (c *Constraint) maskBudget(logits []float32) {
	if c.budget <= 0 || c.budget > closeHorizon {
		return
	}
	d := c.g.dfa
	room := int32(c.budget - 1) // bytes the text may take after this token
	if d.worstNext(c.state) <= room {
		return
	}
	c.closing = true
	d.mu.Lock()
	defer d.mu.Unlock()
	// The tokens that keep the text completable; failing any (a byte with
	// no token of its own), those that bring it closest.
	best := int32(unreachable)
	d.walkTokens(c.state, func(next int32, _ []int32) { best = min(best, d.distOf(next)) })
	limit := max(room, best)
	if c.keep == nil {
		c.keep = make([]bool, len(logits))
	}
	clear(c.keep)
	d.walkTokens(c.state, func(next int32, ids []int32) {
		if d.distOf(next) <= limit {
			for _, id := range ids {
				if int(id) < len(c.keep) {
					c.keep[id] = true
				}
			}
		}
	})
	for id := range logits {
		if !c.keep[id] && !(d.states[c.state].accept && d.vocab.isEOS(id)) {
			logits[id] = negInf
		}
	}
}

// ClosedByBudget reports that the budget decided some of the text: the
// model was kept from writing on so that the text could be complete when
// the budget ran out (the answer was cut, as by max_tokens).
func (c *Constraint) ClosedByBudget() bool { return c.closing }

// FitsIn reports whether the text can be written whole in tokens tokens
// (always, for a budget past closeHorizon, which is not watched):
// at once when its shortest completion from the start is no longer in
// bytes, else by a search over the vocabulary's tokens, as deep as
// tokens.
func (g *Grammar) FitsIn(tokens int) bool {
	if tokens > closeHorizon {
		return true // no budget that large is watched
	}
	d := g.dfa
	d.mu.Lock()
	defer d.mu.Unlock()
	d.distancesLocked()
	if int(d.distOf(d.start)) <= tokens {
		return true
	}
	frontier := []int32{d.start}
	seen := map[int32]bool{d.start: true}
	for range tokens {
		var next []int32
		found := false
		for _, s := range frontier {
			d.walkTokens(s, func(n int32, _ []int32) {
				if d.states[n].accept {
					found = true
				}
				if !seen[n] {
					seen[n] = true
					next = append(next, n)
				}
			})
			if found {
				return true
			}
		}
		frontier = next
	}
	return false
}

// ShortestBytes is the length in bytes of the shortest text g accepts.
func (g *Grammar) ShortestBytes() int {
	d := g.dfa
	d.mu.Lock()
	defer d.mu.Unlock()
	d.distancesLocked()
	return int(d.distOf(d.start))
}
