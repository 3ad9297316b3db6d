package tokenizer

import (
	"container/heap"
	"sync"
)

// bpeModel merges a pre-token's bytes into vocabulary ids. Each merge of
// tokenizer.json is a pair of ids with a rank (its line number) and the id
// it produces; the lowest-ranked pair present is merged first, and among
// equal ranks the leftmost, exactly as Hugging Face's BPE does.
type bpeModel struct {
	// merges maps left<<32|right to rank<<32|merged.
	merges map[uint64]uint64
	// byteIDs is the id of each single byte's token.
	byteIDs [256]int32

	// cache remembers the ids of pre-tokens already seen; natural text
	// repeats its words so often that most lookups hit. It is cleared when
	// full rather than evicting entry by entry, which keeps it cheap.
	cacheMu sync.Mutex
	cache   map[string][]int32
}

const (
	bpeCacheLimit = 1 << 17
	// Words up to this many bytes merge with a linear scan over a rank
	// array; longer ones (long runs without a break) use a heap so that the
	// cost stays O(n log n).
	bpeLinearLimit = 96
	noRank         = int32(1<<31 - 1)
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (m *bpeModel) lookup(a, b int32) (rank, merged int32, ok bool) {
	v, ok := m.merges[pairKey(a, b)]
	if !ok {
		return noRank, 0, false
	}
	return int32(v >> 32), int32(uint32(v)), true
}

// encodeWord appends the ids of word (raw bytes) to out.
func (m *bpeModel) encodeWord(word string, out []int) []int {
	if len(word) == 1 {
		return append(out, int(m.byteIDs[word[0]]))
	}
	if len(word) > bpeLinearLimit {
		// Long pieces (runs without a break) rarely repeat; caching them
		// would only hold on to their memory.
		for _, id := range m.mergeHeap(word) {
			out = append(out, int(id))
		}
		return out
	}
	m.cacheMu.Lock()
	ids, hit := m.cache[word]
	m.cacheMu.Unlock()
	if !hit {
		ids = m.mergeLinear(word)
		m.cacheMu.Lock()
		if len(m.cache) >= bpeCacheLimit {
			clear(m.cache)
		}
		m.cache[word] = ids
		m.cacheMu.Unlock()
	}
	for _, id := range ids {
		out = append(out, int(id))
	}
	return out
}

// mergeLinear keeps the rank of every adjacent pair in an array, merges at
// the first minimum and refreshes only the two neighbouring ranks, so each
// step costs a scan of small integers and at most two map lookups.
func (m *bpeModel) mergeLinear(word string) []int32 {
	n := len(word)
	var idBuf, rankBuf, mergedBuf [bpeLinearLimit]int32
	ids, ranks, merged := idBuf[:n], rankBuf[:n-1], mergedBuf[:n-1]
	for i := 0; i < n; i++ {
		ids[i] = m.byteIDs[word[i]]
	}
	for i := 0; i < n-1; i++ {
		ranks[i], merged[i], _ = m.lookup(ids[i], ids[i+1])
	}
	for len(ranks) > 0 {
		best := 0
		for i := 1; i < len(ranks); i++ {
			if ranks[i] < ranks[best] {
				best = i
			}
		}
		if ranks[best] == noRank {
			break
		}
		ids[best] = merged[best]
		copy(ids[best+1:], ids[best+2:])
		ids = ids[:len(ids)-1]
		copy(ranks[best:], ranks[best+1:])
		copy(merged[best:], merged[best+1:])
		ranks, merged = ranks[:len(ranks)-1], merged[:len(merged)-1]
		if best > 0 {
			ranks[best-1], merged[best-1], _ = m.lookup(ids[best-1], ids[best])
		}
		if best < len(ranks) {
			ranks[best], merged[best], _ = m.lookup(ids[best], ids[best+1])
		}
	}
	return append([]int32(nil), ids...)
}

// mergeCandidate is a pair that may be merged: the symbol at pos with its
// right neighbour, expected to hold left and right.
type mergeCandidate struct {
	rank, pos, left, right, merged int32
}

type mergeQueue []mergeCandidate

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(mergeCandidate)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// mergeHeap is the O(n log n) form: symbols in a linked list, candidate
// pairs in a priority queue, stale candidates skipped when popped. A
// candidate is stale when either symbol has merged since; ids only ever
// grow into longer tokens, so comparing ids detects that exactly.
func (m *bpeModel) mergeHeap(word string) []int32 {
	n := len(word)
	ids := make([]int32, n)
	next := make([]int32, n)
	prev := make([]int32, n)
	for i := 0; i < n; i++ {
		ids[i] = m.byteIDs[word[i]]
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
	}
	next[n-1] = -1
	q := make(mergeQueue, 0, n)
	push := func(pos int32) {
		r := next[pos]
		if r < 0 {
			return
		}
		if rank, merged, ok := m.lookup(ids[pos], ids[r]); ok {
			heap.Push(&q, mergeCandidate{rank: rank, pos: pos, left: ids[pos], right: ids[r], merged: merged})
		}
	}
	for i := 0; i < n-1; i++ {
		if rank, merged, ok := m.lookup(ids[i], ids[i+1]); ok {
			q = append(q, mergeCandidate{rank: rank, pos: int32(i), left: ids[i], right: ids[i+1], merged: merged})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		c := heap.Pop(&q).(mergeCandidate)
		r := next[c.pos]
		if ids[c.pos] != c.left || r < 0 || ids[r] != c.right {
			continue
		}
		ids[c.pos] = c.merged
		ids[r] = -1
		next[c.pos] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			push(p)
		}
		push(c.pos)
	}
	out := make([]int32, 0, n)
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}
