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
// shares: each token's bytes, and the tokens sorted by their bytes with the
// length of the prefix each shares with the one before, which lets a mask
// be computed by walking the vocabulary like a trie. Build it once per
// loaded model; it is read-only and safe for concurrent use.
type Vocabulary struct {
	// width is the logits row's length (the model's vocabulary, which may
	// exceed the tokenizer's).
	width  int
	pieces [][]byte // by id; nil for ids a grammar never produces
	order  []int32  // ids with a piece, sorted by piece
	lcp    []uint16 // lcp[i]: common prefix of order[i] and order[i-1]
	// sorted holds the pieces of order back to back, piece i at
	// sorted[offset[i]:offset[i+1]]: the mask walk reads memory in order
	// instead of chasing a slice per token (a third of its time on a
	// 248k vocabulary).
	sorted []byte
	offset []uint32
	maxLen int
	eos    []int
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
	v.offset = make([]uint32, 0, len(v.order)+1)
	for _, id := range v.order {
		v.offset = append(v.offset, uint32(len(v.sorted)))
		v.sorted = append(v.sorted, v.pieces[id]...)
	}
	v.offset = append(v.offset, uint32(len(v.sorted)))
	v.lcp = make([]uint16, len(v.order))
	for i := 1; i < len(v.order); i++ {
		a, b := v.pieces[v.order[i-1]], v.pieces[v.order[i]]
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		v.lcp[i] = uint16(k)
	}
	return v, nil
}

// isEOS reports whether id ends generation.
func (v *Vocabulary) isEOS(id int) bool { return slices.Contains(v.eos, id) }
