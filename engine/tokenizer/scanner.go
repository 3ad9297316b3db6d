package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The split regexes of the Qwen tokenizers, as written in tokenizer.json.
// Qwen2/Qwen3 treat combining marks as punctuation; Qwen3.5/3.6 add \p{M}
// to the letter runs so that a base letter keeps its marks.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// Character classes the Qwen regexes test, as bits.
const (
	classLetter = 1 << iota // \p{L}
	classMark               // \p{M}
	classNumber             // \p{N}
	classSpace              // \s: the Unicode White_Space property, as in Oniguruma and regexp2
)

// bmpClasses caches the classes of the Basic Multilingual Plane, where
// nearly all text lives; a table lookup is several times faster than the
// unicode package's range searches.
var (
	bmpClassesOnce sync.Once
	bmpClasses     []uint8
)

func buildBMPClasses() {
	bmpClasses = make([]uint8, 0x10000)
	for r := rune(0); r < 0x10000; r++ {
		bmpClasses[r] = slowClass(r)
	}
}

func slowClass(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= classLetter
	}
	if unicode.Is(unicode.M, r) {
		c |= classMark
	}
	if unicode.IsNumber(r) {
		c |= classNumber
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= classSpace
	}
	return c
}

func classOf(r rune) uint8 {
	if r < 0x10000 {
		return bmpClasses[r]
	}
	return slowClass(r)
}

// qwenScanner splits text exactly as the Qwen split regex does, alternative
// by alternative, including the backtracking of `\s*[\r\n]+` and the
// look-ahead of `\s+(?!\S)`. Written by hand because it is several times
// faster than a backtracking regex engine; scanner_test.go checks it against
// regexp2 running the original pattern.
type qwenScanner struct {
	// letterRun is the class of the letter runs: \p{L}, plus \p{M} for
	// Qwen3.5/3.6.
	letterRun uint8
	// notPunct are the classes excluded from punctuation runs
	// ([^\s\p{L}\p{N}] or [^\s\p{L}\p{M}\p{N}]).
	notPunct uint8
}

func newQwenScanner(withMarks bool) *qwenScanner {
	bmpClassesOnce.Do(buildBMPClasses)
	s := &qwenScanner{letterRun: classLetter, notPunct: classSpace | classLetter | classNumber}
	if withMarks {
		s.letterRun |= classMark
		s.notPunct |= classMark
	}
	return s
}

// decodeAt returns the rune at s[i] and its width. The text has been made
// valid UTF-8 before it gets here.
func decodeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// split appends the end offsets of the pieces of s to ends.
func (q *qwenScanner) split(s string, ends []int) []int {
	for i := 0; i < len(s); {
		i = q.next(s, i)
		ends = append(ends, i)
	}
	return ends
}

// next returns the end of the match that starts at i.
func (q *qwenScanner) next(s string, i int) int {
	r0, w0 := decodeAt(s, i)
	c0 := classOf(r0)

	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r0 == '\'' {
		if n := contractionLen(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}

	// [^\r\n\p{L}\p{N}]?[\p{L}(\p{M})]+ : the optional prefix is taken
	// greedily and given back if no letter follows it.
	if r0 != '\r' && r0 != '\n' && c0&(classLetter|classNumber) == 0 && i+w0 < len(s) {
		r1, w1 := decodeAt(s, i+w0)
		if classOf(r1)&q.letterRun != 0 {
			return q.run(s, i+w0+w1, q.letterRun, 0)
		}
	}
	if c0&q.letterRun != 0 {
		return q.run(s, i+w0, q.letterRun, 0)
	}

	// \p{N}
	if c0&classNumber != 0 {
		return i + w0
	}

	// ' ?[^\s\p{L}(\p{M})\p{N}]+[\r\n]*'
	if r0 == ' ' && i+1 < len(s) {
		r1, w1 := decodeAt(s, i+1)
		if classOf(r1)&q.notPunct == 0 {
			return newlineRun(s, q.run(s, i+1+w1, 0, q.notPunct))
		}
	}
	if c0&q.notPunct == 0 {
		return newlineRun(s, q.run(s, i+w0, 0, q.notPunct))
	}

	// Only white space is left. Measure its run, noting the last line
	// break and where the last character of the run starts.
	end, lastBreak, lastStart := i, -1, i
	for end < len(s) {
		r, w := decodeAt(s, end)
		if classOf(r)&classSpace == 0 {
			break
		}
		if r == '\r' || r == '\n' {
			lastBreak = end
		}
		lastStart = end
		end += w
	}
	// \s*[\r\n]+ : \s* backtracks to the last line break in the run, and
	// [\r\n]+ takes just that one (the run's next character, if any, is not
	// a line break, or it would have been the last).
	if lastBreak >= 0 {
		return lastBreak + 1
	}
	// \s+(?!\S) : the whole run at the end of the text; otherwise all but
	// the last character, which stays to prefix the following word.
	if end == len(s) {
		return end
	}
	if lastStart > i {
		return lastStart
	}
	// \s+
	return end
}

// run extends a match from i over characters whose class intersects
// include (when include is non-zero) or avoids exclude (when it is zero).
func (q *qwenScanner) run(s string, i int, include, exclude uint8) int {
	for i < len(s) {
		r, w := decodeAt(s, i)
		c := classOf(r)
		if include != 0 {
			if c&include == 0 {
				break
			}
		} else if c&exclude != 0 {
			break
		}
		i += w
	}
	return i
}

// newlineRun extends i over [\r\n]*.
func newlineRun(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// contractionLen matches s|t|re|ve|m|ll|d (ASCII case-insensitive) at the
// start of s and returns its length, or 0.
func contractionLen(s string) int {
	if len(s) == 0 {
		return 0
	}
	lower := func(c byte) byte { return c | 0x20 }
	switch lower(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && lower(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && lower(s[1]) == 'l' {
			return 2
		}
	}
	return 0
}
