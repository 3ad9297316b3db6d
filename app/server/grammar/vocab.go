package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Tokenizer is what a Vocabulary reads from the model's tokenizer
// (*tokenizer.Tokenizer has these methods).
type Tokenizer interface {
	// VocabSize is one more than the largest token id.
	VocabSize() int
	// TokenBytes is the raw text a token stands for (possibly part of a
	// UTF-8 character).
	TokenBytes(id int) []byte
	// IsSpecial reports control tokens (<|im_end|>, …), which a grammar
	// never produces as text.
	IsSpecial(id int) bool
}

// Vocabulary is the per-tokenizer precomputation every grammar of one model
// shares: each token's bytes, and a trie of them in depth-first order,
// which a mask walk follows. Build it once per loaded model; it is
// read-only and safe for concurrent use.
type Vocabulary struct {
	// width is the logits row's length (the model's vocabulary, which may
	// exceed the tokenizer's).
	width  int
	pieces [][]byte // by id; nil for ids a grammar never produces
	order  []int32  // ids with a piece, sorted by piece
	// nodes is the trie of the sorted pieces in depth-first order (the
	// root left out): a mask walk steps the automaton once per node it
	// enters and jumps over the whole subtree of a byte that leads nowhere,
	// so a state that allows few tokens costs little more than those.
	nodes  []trieNode
	maxLen int
	eos    []int
}

// trieNode is one byte of the trie: the pieces through it are the prefix
// its ancestors and it spell.
type trieNode struct {
	b     byte
	depth uint16 // 1 for a child of the root
	// end is the index just past the node's subtree.
	end int32
	// order[tokens:tokensEnd] are the ids whose piece ends here.
	tokens, tokensEnd int32
}

// NewVocabulary prepares tok for grammars: eos are the ids that end
// generation (engine.Engine.EOS), allowed wherever a grammar's text may
// end; width is the length of a logits row (engine.Engine.VocabSize).
// Special tokens other than EOS are never allowed.
func NewVocabulary(tok Tokenizer, eos []int, width int) (*Vocabulary, error) {
	n := tok.VocabSize()
	if width < n {
		return nil, fmt.Errorf("grammar: logits rows of %d entries cannot cover the tokenizer's %d ids: is this the model's tokenizer?", width, n)
	}
	if len(eos) == 0 {
		return nil, fmt.Errorf("grammar: no EOS ids: a grammar could never end generation")
	}
	v := &Vocabulary{width: width, pieces: make([][]byte, width), eos: slices.Clone(eos)}
	for id := range n {
		if tok.IsSpecial(id) {
			continue
		}
		b := tok.TokenBytes(id)
		if len(b) == 0 || len(b) > 0xffff {
			continue
		}
		v.pieces[id] = b
		v.order = append(v.order, int32(id))
		v.maxLen = max(v.maxLen, len(b))
	}
	slices.SortFunc(v.order, func(a, b int32) int {
		if c := bytes.Compare(v.pieces[a], v.pieces[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.buildTrie()
	return v, nil
}

// isEOS reports whether id ends generation.
func (v *Vocabulary) isEOS(id int) bool { return slices.Contains(v.eos, id) }

// buildTrie lays the sorted pieces out as a depth-first trie: each piece
// adds a node for every byte past the prefix it shares with the piece
// before it.
func (v *Vocabulary) buildTrie() {
	var open []int32 // the path of nodes to the previous piece
	var prev []byte
	for i, id := range v.order {
		p := v.pieces[id]
		shared := 0
		for shared < len(p) && shared < len(prev) && p[shared] == prev[shared] {
			shared++
		}
		// Close the previous path's nodes past the shared prefix.
		for len(open) > shared {
			v.nodes[open[len(open)-1]].end = int32(len(v.nodes))
			open = open[:len(open)-1]
		}
		for k := shared; k < len(p); k++ {
			open = append(open, int32(len(v.nodes)))
			v.nodes = append(v.nodes, trieNode{b: p[k], depth: uint16(k + 1), tokens: int32(i), tokensEnd: int32(i)})
		}
		// p ends at the last open node (a piece equal to the previous one
		// adds no node and joins its tokens).
		v.nodes[open[len(open)-1]].tokensEnd = int32(i + 1)
		prev = p
	}
	for _, n := range open {
		v.nodes[n].end = int32(len(v.nodes))
	}
}

// longestPrefix is the length of the longest piece that text starts with
// (0 for none), found by following text down the trie.
func (v *Vocabulary) longestPrefix(text []byte) int {
	best := 0
	i, depth := 0, 1
	for i < len(v.nodes) && depth <= len(text) {
		node := &v.nodes[i]
		if int(node.depth) < depth {
			break // the subtree of text's prefix is over
		}
		if node.b != text[depth-1] {
			i = int(node.end)
			continue
		}
		if node.tokensEnd > node.tokens {
			best = depth
		}
		i++
		depth++
	}
	return best
}
