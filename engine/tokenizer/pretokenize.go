package tokenizer

import (
	"fmt"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// splitter cuts normalised text into pre-tokens, appending the end offset
// of each piece to ends; the pieces cover the text without gaps.
type splitter interface {
	split(s string, ends []int) []int
}

// gpt2Pattern is the split ByteLevel applies when its use_regex is set.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// newSplitter picks the hand-written scanner for the Qwen patterns and a
// backtracking regex for anything else.
func newSplitter(pattern string) (splitter, error) {
	switch pattern {
	case qwen2Pattern:
		return newQwenScanner(false), nil
	case qwen35Pattern:
		return newQwenScanner(true), nil
	}
	return newRegexSplitter(pattern)
}

// regexSplitter implements the Split pre-tokenizer with the "Isolated"
// behaviour: matches and the text between them both become pieces.
type regexSplitter struct {
	re *regexp2.Regexp
}

func newRegexSplitter(pattern string) (*regexSplitter, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("split pattern %q: %w", pattern, err)
	}
	return &regexSplitter{re: re}, nil
}

func (x *regexSplitter) split(s string, ends []int) []int {
	// regexp2 reports positions in runes; keep a rune→byte offset table.
	runes := []rune(s)
	byteAt := make([]int, len(runes)+1)
	off := 0
	for i, r := range runes {
		byteAt[i] = off
		off += utf8.RuneLen(r)
	}
	byteAt[len(runes)] = off

	last := 0
	m, err := x.re.FindRunesMatch(runes)
	for err == nil && m != nil {
		if m.Index > last {
			ends = append(ends, byteAt[m.Index])
		}
		if m.Length > 0 {
			ends = append(ends, byteAt[m.Index+m.Length])
		}
		last = m.Index + m.Length
		m, err = x.re.FindNextMatch(m)
	}
	// regexp2 only fails on a match timeout, which is not set: the rest of
	// the text becomes one piece either way.
	if last < len(runes) {
		ends = append(ends, off)
	}
	return ends
}
