package grammar

import "math"

// Closing within a budget: a Constraint given the number of tokens the
// request may still generate (WithBudget) lets through only the tokens
// after which the text can still be completed in what is left. What is
// counted is a state's closing text, the bytes of its shortest completion,
// cut into the longest tokens the vocabulary has (closingTokens): a
// completion the model can always write in that many tokens. So when the
// budget runs out the text is complete: the value closed by its shortest
// valid completion (for a schema: the required members with their
// shortest valid values), which parses and validates, and the request ends
// at max_tokens all the same. An answer that fits is left alone: a token
// is ruled out only when what would follow it could not fit.
//
// The shortest completions are the automaton's distances to an accepting
// state, found once per Grammar by exploring every state it can reach
// (shared by its requests, as its masks are); a request needs them only
// once its budget comes within closeHorizon tokens, so that long budgets
// cost nothing. A state's worst token (the longest closing after any one
// token it allows) is kept too: while the budget is above it, the state's
// usual mask serves unchanged.

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
	type edge struct {
		from int32
		c    byte
	}
	reverse := map[int32][]edge{}
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
			reverse[next] = append(reverse[next], edge{s, byte(c)})
			if mark(next) {
				queue = append(queue, next)
			}
		}
	}
	dist := make([]int32, len(d.states))
	d.closeByte = make([]byte, len(d.states))
	d.tokDist = make([]int32, len(d.states))
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
		for _, e := range reverse[s] {
			if dist[e.from] == unreachable {
				dist[e.from] = dist[s] + 1
				d.closeByte[e.from] = e.c
				queue = append(queue, e.from)
			}
		}
	}
	d.dist = dist
}

// closingTokens is the number of tokens of s's closing text (the bytes of
// its shortest completion, each state's first byte of it kept by
// distancesLocked) cut into the longest tokens the vocabulary has, one
// after the other. Following that cut from s, each token leads to a state
// whose closing text is the rest of s's, so the count drops by one a
// token: a completion in that many tokens always exists. A byte no token
// starts counts one. The caller holds mu and has called distancesLocked.
func (d *dfa) closingTokens(s int32) int32 {
	if int(s) >= len(d.dist) || d.dist[s] == unreachable {
		return unreachable
	}
	if n := d.tokDist[s]; n > 0 {
		return n - 1
	}
	var text []byte
	for x := s; d.dist[x] > 0; x = d.states[x].next[d.closeByte[x]] {
		text = append(text, d.closeByte[x])
	}
	n := int32(0)
	for i := 0; i < len(text); n++ {
		i += max(1, d.vocab.longestPrefix(text[i:]))
	}
	d.tokDist[s] = n + 1
	return n
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
		worst = max(worst, d.closingTokens(next))
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
	room := int32(c.budget - 1) // tokens the text may take after this token
	if d.worstNext(c.state) <= room {
		return
	}
	// The model's first choice among what the grammar allows: when the
	// budget rules it out, the budget shaped the answer (closing).
	first, firstLogit := -1, negInf
	for id, l := range logits {
		if l > firstLogit {
			first, firstLogit = id, l
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// The tokens that keep the text completable; failing any (a byte with
	// no token of its own), those that bring it closest.
	best := int32(unreachable)
	d.walkTokens(c.state, func(next int32, _ []int32) { best = min(best, d.closingTokens(next)) })
	limit := max(room, best)
	if c.keep == nil {
		c.keep = make([]bool, len(logits))
	}
	clear(c.keep)
	d.walkTokens(c.state, func(next int32, ids []int32) {
		if d.closingTokens(next) <= limit {
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
	if first >= 0 && logits[first] == negInf {
		c.closing = true
	}
}

// ClosedByBudget reports that the budget decided some of the text: at
// some step it ruled out the token the model liked best, so that the text
// could be complete when the budget ran out (the answer was cut, as by
// max_tokens).
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
	if int(d.closingTokens(d.start)) <= tokens {
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
