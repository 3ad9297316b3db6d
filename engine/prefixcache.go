package engine

import (
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// prefixCache holds sequence snapshots keyed by the tokens each one had
// consumed, bounded in bytes, the least recently used evicted first.
//
// A snapshot is only useful to a prompt that starts with all of its tokens:
// the DeltaNet state summarises the whole prefix and cannot be cut back, so
// lookup returns the longest snapshot whose tokens are a prefix of the new
// prompt, and the engine prefills the rest.
//
// Where snapshots are taken (see Request.Checkpoints and SnapshotAnswer):
//   - at the start of the prompt's last assistant turn, where the next turn
//     of the same conversation diverges (the template renders an earlier
//     answer without the generation prompt's thinking block);
//   - one token before the end of the prompt, which serves the same prompt
//     again (one token is left for the pass that samples the first new
//     token to consume); it may evict only entries older than the request;
//   - after the answer, when the next prompt will repeat it whole (tool
//     calls).
type prefixCache struct {
	budget int64
	used   int64
	clock  uint64
	// entries is unordered; lastUse orders them for eviction. A cache holds
	// few entries (each is a whole sequence state), so linear scans are
	// cheaper than any index.
	entries []*cacheEntry
}

type cacheEntry struct {
	snap    model.Snapshot
	tokens  []int
	bytes   int64
	lastUse uint64
}

func newPrefixCache(budget int64) *prefixCache { return &prefixCache{budget: budget} }

func (c *prefixCache) touch(e *cacheEntry) {
	c.clock++
	e.lastUse = c.clock
}

// lookup returns the entry with the most tokens that are a prefix of prompt,
// among those with at most limit tokens, or nil.
func (c *prefixCache) lookup(prompt []int, limit int) *cacheEntry {
	var best *cacheEntry
	for _, e := range c.entries {
		n := len(e.tokens)
		if n > limit || n > len(prompt) || (best != nil && n <= len(best.tokens)) {
			continue
		}
		if slices.Equal(e.tokens, prompt[:n]) {
			best = e
		}
	}
	if best != nil {
		c.touch(best)
	}
	return best
}

// has reports whether a snapshot of exactly tokens is cached, and marks it
// used.
func (c *prefixCache) has(tokens []int) bool { return c.get(tokens) != nil }

// get returns the entry of exactly tokens, marked used, or nil.
func (c *prefixCache) get(tokens []int) *cacheEntry {
	for _, e := range c.entries {
		if slices.Equal(e.tokens, tokens) {
			c.touch(e)
			return e
		}
	}
	return nil
}

// add stores snap, the state after consuming tokens, evicting the least
// recently used entries until it fits; entries used at or after the clock
// value protect are never evicted for it (0 protects nothing), and when it
// cannot fit without them it is not stored. The engine passes the tokens it
// fed rather than trusting Snapshot.Tokens: a GPU backend may not have read
// back every id it sampled on the device. add reports whether snap is
// cached.
func (c *prefixCache) add(snap model.Snapshot, tokens []int, protect uint64) bool {
	size := snap.Bytes()
	if size > c.budget || len(tokens) != snap.Pos() {
		return false
	}
	if c.has(tokens) {
		return true
	}
	for c.used+size > c.budget {
		if !c.evictOldest(protect) {
			return false
		}
	}
	e := &cacheEntry{snap: snap, tokens: slices.Clone(tokens), bytes: size}
	c.touch(e)
	c.entries = append(c.entries, e)
	c.used += size
	return true
}

// now is the value the next touch stamps: a request records it at its start
// and passes it to add, so that what the request restored and the snapshots
// it took at its checkpoints are not evicted for its less useful ones.
func (c *prefixCache) now() uint64 { return c.clock + 1 }

// evictOldest drops the least recently used entry among those last used
// before protect (any entry when protect is 0); it reports whether there
// was one.
func (c *prefixCache) evictOldest(protect uint64) bool {
	oldest := -1
	for i, e := range c.entries {
		if protect != 0 && e.lastUse >= protect {
			continue
		}
		if oldest < 0 || e.lastUse < c.entries[oldest].lastUse {
			oldest = i
		}
	}
	if oldest < 0 {
		return false
	}
	c.used -= c.entries[oldest].bytes
	c.entries = slices.Delete(c.entries, oldest, oldest+1)
	return true
}
