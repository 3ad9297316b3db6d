package engine

import "github.com/suzuran-app/suzuran/engine/model"

// Prefill chunks bounded in work.
//
// A chunk's cost is its tokens' projections, MoE and DeltaNet scan, the
// same for every token, plus attention, whose work per token grows with
// the positions the token sees: on the demo model a token at 32,768
// positions costs about 17 times one at the start, so a fixed chunk of
// 512 tokens there would hold the engine goroutine (the other streams'
// decode steps, and a cancel on a GPU backend, which runs a recorded pass
// to its end) 17 times as long. So the chunk shrinks with the position:
// the planned work of each chunk stays within chunkBudget, twice the work
// of a first full chunk (Options.PrefillChunk tokens from position 0).
// Whole chunks start up to about 2,700 positions on the demo model and
// 30,000 on the real one (where attention's work per token nears the
// rest's); at 32,768 positions a chunk takes 72 tokens on the demo model
// and 488 on the real one (TestChunksBoundedAtEveryLength logs them). The plan depends on the prompt and its start only, never on
// what else runs.

// chunkCost is a model's prefill work, in floating-point operations: perToken
// for every token, perKey for every (token, key) pair of the attention
// layers.
type chunkCost struct {
	perToken float64
	perKey   float64
}

// prefillCost counts the multiply-adds of one prompt token through cfg's
// layers (the matrix products a token takes, the routed experts it picks,
// the DeltaNet scan's state update and read) and of each key its attention
// layers see (q·k and p·v over every query head). The head is left out: a
// chunk that does not end the prompt computes no logits.
func prefillCost(cfg *model.Config) chunkCost {
	h := float64(cfg.HiddenSize)
	var token, key float64
	for _, t := range cfg.LayerTypes {
		switch t {
		case model.FullAttention:
			q := float64(cfg.NumHeads * cfg.HeadDim)
			kv := float64(cfg.NumKVHeads * cfg.HeadDim)
			token += h*(2*q+2*kv) + q*h
			key += 2 * q
		default:
			k := float64(cfg.LinearKeyHeads * cfg.LinearKeyHeadDim)
			v := float64(cfg.LinearValueHeads * cfg.LinearValueHeadDim)
			token += h*(2*k+2*v+2*float64(cfg.LinearValueHeads)) + v*h
			token += 3 * float64(cfg.LinearValueHeads*cfg.LinearKeyHeadDim*cfg.LinearValueHeadDim)
		}
		token += h * float64(cfg.NumExperts+1)
		token += 3 * h * float64(cfg.ExpertsPerToken*cfg.MoEIntermediate+cfg.SharedIntermediate)
	}
	return chunkCost{perToken: 2 * token, perKey: 2 * key}
}

// work is the planned work of n tokens from position pos: token t (at
// position pos+t) sees pos+t+1 keys.
func (c chunkCost) work(pos, n int) float64 {
	p, m := float64(pos), float64(n)
	return m*c.perToken + c.perKey*(m*p+m*(m+1)/2)
}

// chunkBudget is the most work one chunk plans: twice a full first chunk.
func (c chunkCost) budget(chunk int) float64 { return 2 * c.work(0, chunk) }

// chunkAt is how many prompt tokens the chunk from position pos takes: the
// most, up to chunk, whose work fits the budget, rounded down to a multiple
// of 8 (the GPU's tiled prefill attention takes blocks of 8 queries) when
// 8 or more fit; at least one.
func (c chunkCost) chunkAt(pos, chunk int) int {
	b := c.budget(chunk)
	if c.work(pos, chunk) <= b {
		return chunk
	}
	lo, hi := 1, chunk // work(pos, lo) may exceed b only when lo is 1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if c.work(pos, mid) <= b {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo >= 8 {
		lo -= lo % 8
	}
	return lo
}
