package grammar

import (
	"encoding/binary"
	"slices"
	"sync"
)

// dfa determinizes an NFA lazily (subset construction one transition at a
// time) and keeps, per DFA state, the mask of tokens that may follow it.
// Both tables only grow, and a grammar's requests share them: after the
// first request has visited a state, a step costs a table lookup per byte
// of the chosen token and a pass over the mask's words.
type dfa struct {
	mu     sync.Mutex
	nfa    *nfa
	start  int32
	accept int32 // the NFA's accepting state
	vocab  *Vocabulary

	ids    map[string]int32
	states []*dfaState
	// dist is the fewest bytes that complete the text from each state,
	// nil until a request's budget needs it (distancesLocked); closeByte
	// is the first byte of such a completion, and tokDist 1 + the tokens
	// it takes (closingTokens; 0 until asked for).
	dist      []int32
	closeByte []byte
	tokDist   []int32

	// Scratch for closures.
	mark  []uint32
	epoch uint32
	stack []int32
}

// dead is the DFA state with no NFA states: every byte leads back to it.
const dead = 0

type dfaState struct {
	// set holds the NFA states that have byte edges, sorted: two subsets
	// with the same such states behave alike, so they are one DFA state.
	set    []int32
	accept bool
	// next[c] is the state after byte c; unknown until computed.
	next [256]int32
	// mask has a bit per token id that may follow (EOS ids where the text
	// may end); nil until first asked for. done: the text is complete and
	// no token but EOS may follow.
	mask []uint64
	done bool
	// worst is 1 + the longest completion after any one token allowed
	// here (worstNext); 0 until asked for.
	worst int32
}

const unknown = -1

// maxDFAStates bounds a grammar's DFA (a state is about 1 KB). Subset
// construction can blow up on a schema written to make it (anyOf branches
// that overlap in many ways); past the bound every new transition leads to
// the dead state, which only makes the constraint stricter: the text it
// lets through is still valid. Ordinary schemas use a few thousand.
const maxDFAStates = 1 << 16

func newDFA(n *nfa, start, accept int32, v *Vocabulary) *dfa {
	d := &dfa{nfa: n, start: start, accept: accept, vocab: v, ids: map[string]int32{}, mark: make([]uint32, len(n.states))}
	d.intern(nil) // dead
	d.start = d.intern(d.closure([]int32{start}))
	return d
}

// closure returns the sorted byte-edge states reachable from seeds by
// epsilon edges, the accepting state included when reachable.
func (d *dfa) closure(seeds []int32) []int32 {
	d.epoch++
	if d.epoch == 0 {
		clear(d.mark)
		d.epoch = 1
	}
	var set []int32
	d.stack = append(d.stack[:0], seeds...)
	for len(d.stack) > 0 {
		s := d.stack[len(d.stack)-1]
		d.stack = d.stack[:len(d.stack)-1]
		if d.mark[s] == d.epoch {
			continue
		}
		d.mark[s] = d.epoch
		st := &d.nfa.states[s]
		if len(st.edges) > 0 || s == d.accept {
			set = append(set, s)
		}
		d.stack = append(d.stack, st.eps...)
	}
	slices.Sort(set)
	return set
}

func (d *dfa) intern(set []int32) int32 {
	key := make([]byte, 4*len(set))
	for i, s := range set {
		binary.LittleEndian.PutUint32(key[4*i:], uint32(s))
	}
	if id, ok := d.ids[string(key)]; ok {
		return id
	}
	st := &dfaState{set: set}
	for i := range st.next {
		st.next[i] = unknown
	}
	if len(set) == 0 {
		for i := range st.next {
			st.next[i] = dead
		}
	}
	_, st.accept = slices.BinarySearch(set, d.accept)
	id := int32(len(d.states))
	d.states = append(d.states, st)
	d.ids[string(key)] = id
	return id
}

// step returns the state after byte c. The caller holds mu.
func (d *dfa) step(s int32, c byte) int32 {
	st := d.states[s]
	if t := st.next[c]; t != unknown {
		return t
	}
	var seeds []int32
	for _, ns := range st.set {
		for _, e := range d.nfa.states[ns].edges {
			if e.lo <= c && c <= e.hi {
				seeds = append(seeds, e.to)
			}
		}
	}
	t := int32(dead)
	if len(seeds) > 0 && len(d.states) < maxDFAStates {
		t = d.intern(d.closure(seeds))
	}
	// intern may have grown d.states; st still points at the same state.
	st.next[c] = t
	return t
}

// accepting reports whether the text may end in state s.
func (d *dfa) accepting(s int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.states[s].accept
}

// walk returns the state after the bytes b (dead if they do not fit).
func (d *dfa) walk(s int32, b []byte) int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range b {
		if s = d.step(s, c); s == dead {
			return dead
		}
	}
	return s
}

// maskOf returns state s's token mask and whether s is complete, computing
// them on first use: every token whose bytes lead from s to a live state,
// found by walking the vocabulary's trie, so that a shared prefix is
// walked once and a dead prefix rules out every token that starts with it
// in one jump.
func (d *dfa) maskOf(s int32) ([]uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.states[s]
	if st.mask != nil {
		return st.mask, st.done
	}
	v := d.vocab
	mask := make([]uint64, (v.width+63)/64)
	// path[k] is the state after the first k bytes of the current node's
	// prefix; a node at depth k steps from path[k-1].
	path := make([]int32, v.maxLen+1)
	path[0] = s
	any := false
	for i := 0; i < len(v.nodes); {
		node := &v.nodes[i]
		next := d.step(path[node.depth-1], node.b)
		if next == dead {
			i = int(node.end) // no piece through this byte fits
			continue
		}
		path[node.depth] = next
		for _, id := range v.order[node.tokens:node.tokensEnd] {
			mask[id/64] |= 1 << (id % 64)
			any = true
		}
		i++
	}
	if st.accept {
		for _, id := range v.eos {
			if id >= 0 && id < v.width {
				mask[id/64] |= 1 << (id % 64)
			}
		}
	}
	st.mask, st.done = mask, st.accept && !any
	return mask, st.done
}
