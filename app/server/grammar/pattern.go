package grammar

import (
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// A string's "pattern": the regular expression, parsed by Go's
// regexp/syntax (RE2: what the common JSON Schema patterns use, without
// backreferences or look-around), becomes an automaton over the JSON text
// of the string's contents. JSON Schema patterns are not anchored: an
// expression without ^ may be preceded by anything, one without $ followed
// by anything.

// pattern compiles expr into a fragment matching the contents (between the
// quotes) of the JSON strings it matches.
func (c *compiler) pattern(expr, path string) (frag, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return frag{}, &SchemaError{Path: path, Keyword: "pattern", Reason: fmt.Sprintf("%v (RE2 syntax: no backreferences or look-around)", err)}
	}
	return c.unanchored(re.Simplify(), path)
}

// unanchored compiles a whole pattern: the anchors at the ends of its
// top-level sequence (of each branch, for an alternation) decide whether
// any characters may come before and after.
func (c *compiler) unanchored(re *syntax.Regexp, path string) (frag, error) {
	n := c.n
	if re.Op == syntax.OpAlternate {
		var branches []frag
		for _, sub := range re.Sub {
			f, err := c.unanchored(sub, path)
			if err != nil {
				return frag{}, err
			}
			branches = append(branches, f)
		}
		return n.alt(branches...), nil
	}
	startAnchored, endAnchored := false, false
	parts := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		parts = re.Sub
	}
	if len(parts) > 0 && parts[0].Op == syntax.OpBeginText {
		startAnchored, parts = true, parts[1:]
	}
	if len(parts) > 0 && parts[len(parts)-1].Op == syntax.OpEndText {
		endAnchored, parts = true, parts[:len(parts)-1]
	}
	var frags []frag
	if !startAnchored {
		frags = append(frags, n.star(n.stringChar()))
	}
	for _, p := range parts {
		f, err := c.regexp(p, path)
		if err != nil {
			return frag{}, err
		}
		frags = append(frags, f)
	}
	if !endAnchored {
		frags = append(frags, n.star(n.stringChar()))
	}
	return n.seq(frags...), nil
}

func (c *compiler) regexp(re *syntax.Regexp, path string) (frag, error) {
	n := c.n
	if n.tooBig {
		return frag{}, errTooBig
	}
	sub := func(i int) func() (frag, error) { return func() (frag, error) { return c.regexp(re.Sub[i], path) } }
	switch re.Op {
	case syntax.OpEmptyMatch:
		return n.empty(), nil
	case syntax.OpLiteral:
		var parts []frag
		for _, r := range re.Rune {
			ranges := []rune{r, r}
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					ranges = append(ranges, f, f)
				}
			}
			parts = append(parts, n.jsonRunes(ranges))
		}
		return n.seq(parts...), nil
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return frag{}, c.errorf(path+"/pattern", "a character class that matches nothing")
		}
		return n.jsonRunes(re.Rune), nil
	case syntax.OpAnyCharNotNL:
		return n.jsonRunes([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}), nil
	case syntax.OpAnyChar:
		return n.jsonRunes([]rune{0, unicode.MaxRune}), nil
	case syntax.OpCapture:
		return sub(0)()
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		f, err := sub(0)()
		if err != nil {
			return frag{}, err
		}
		switch re.Op {
		case syntax.OpStar:
			return n.star(f), nil
		case syntax.OpQuest:
			return n.opt(f), nil
		}
		g, err := sub(0)()
		return n.seq(f, n.star(g)), err
	case syntax.OpRepeat:
		if re.Min > maxRepetition || re.Max > maxRepetition {
			return frag{}, &SchemaError{Path: path, Keyword: "pattern", Reason: fmt.Sprintf("repetitions past %d are not supported", maxRepetition)}
		}
		var ferr error
		f := n.repeat(re.Min, re.Max, func() frag {
			f, err := sub(0)()
			if err != nil {
				ferr = err
			}
			return f
		})
		return f, ferr
	case syntax.OpConcat, syntax.OpAlternate:
		var parts []frag
		for i := range re.Sub {
			f, err := sub(i)()
			if err != nil {
				return frag{}, err
			}
			parts = append(parts, f)
		}
		if re.Op == syntax.OpConcat {
			return n.seq(parts...), nil
		}
		return n.alt(parts...), nil
	}
	return frag{}, &SchemaError{Path: path, Keyword: "pattern", Reason: fmt.Sprintf("%q: anchors inside the expression, word boundaries and the like are not supported", re.String())}
}

// jsonRunes matches one character in the rune ranges (pairs lo, hi) as a
// JSON string writes it: the quote, the backslash and control characters
// escaped, everything else as UTF-8.
func (n *nfa) jsonRunes(ranges []rune) frag {
	var parts []frag
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], min(ranges[i+1], unicode.MaxRune)
		// Characters JSON escapes, one by one.
		for r := lo; r <= min(hi, 0x1f); r++ {
			parts = append(parts, n.lit(fmt.Sprintf(`\u%04x`, r)))
		}
		lo = max(lo, 0x20)
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= hi {
				parts = append(parts, n.lit(`\`+string(special)))
				for _, seq := range utf8Sequences(lo, special-1) {
					parts = append(parts, n.byteSequence(seq))
				}
				lo = special + 1
			}
		}
		for _, seq := range utf8Sequences(lo, hi) {
			parts = append(parts, n.byteSequence(seq))
		}
	}
	return n.alt(parts...)
}

func (n *nfa) byteSequence(seq []byteRange) frag {
	parts := make([]frag, len(seq))
	for i, r := range seq {
		parts[i] = n.class(r)
	}
	return n.seq(parts...)
}

// utf8Sequences splits the runes [lo, hi] (surrogates left out) into
// sequences of byte ranges, each matching exactly the UTF-8 encodings of a
// sub-range: split at the encoding lengths, then wherever a continuation
// byte's range would not cover all of 0x80–0xBF.
func utf8Sequences(lo, hi rune) [][]byteRange {
	lo, hi = max(lo, 0), min(hi, unicode.MaxRune)
	if lo > hi {
		return nil
	}
	if lo <= 0xdfff && hi >= 0xd800 { // surrogates have no UTF-8 form
		return append(utf8Sequences(lo, 0xd7ff), utf8Sequences(0xe000, hi)...)
	}
	for _, edge := range []rune{0x7f, 0x7ff, 0xffff} {
		if lo <= edge && edge < hi {
			return append(utf8Sequences(lo, edge), utf8Sequences(edge+1, hi)...)
		}
	}
	if hi < 0x80 {
		return [][]byteRange{{{byte(lo), byte(hi)}}}
	}
	for i := 1; i < utf8.RuneLen(lo); i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				return append(utf8Sequences(lo, lo|m), utf8Sequences((lo|m)+1, hi)...)
			}
			if hi&m != m {
				return append(utf8Sequences(lo, hi&^m-1), utf8Sequences(hi&^m, hi)...)
			}
		}
	}
	a, b := make([]byte, 4), make([]byte, 4)
	k := utf8.EncodeRune(a, lo)
	utf8.EncodeRune(b, hi)
	seq := make([]byteRange, k)
	for i := range k {
		seq[i] = byteRange{a[i], b[i]}
	}
	return [][]byteRange{seq}
}
